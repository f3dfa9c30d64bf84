"""The generation page says, before its form, which model folders exist, whether the ``gpu`` workers
see CUDA and that CPU generation is slow; with no model and no way to download one the form is disabled
(Issue 16, point 3). The page never imports torch: the workers record what they see (issue 25, point 9)."""

from __future__ import annotations

import importlib.abc
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from django.test import Client
from django.utils import timezone

from annotations.models import Study, User
from generation.environment import worker_device_record
from generation.models import WorkerDevice
from protocols.schema import load_preset
from tests.factories import StudyFactory
from tests.worker import celery_worker, wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def image_study(owner: User) -> Study:
    return StudyFactory.create(owner=owner, protocol=load_preset("object-attributes").to_dict())


def _page(owner: User, study: Study) -> str:
    client = Client()
    client.force_login(owner)
    response = client.get(f"/studies/{study.pk}/generation/")
    assert response.status_code == 200
    return response.content.decode()


def _form(page: str) -> str:
    return page[page.index('<form method="post" novalidate>') :]


def test_model_folders_and_cuda_are_stated_before_the_form(
    owner: User,
    image_study: Study,
    tmp_path: Path,
    settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    models = tmp_path / "models"
    (models / "sd-tiny").mkdir(parents=True)
    (models / "sd-tiny" / "model_index.json").write_text("{}")
    (models / "org" / "nested").mkdir(parents=True)
    (models / "org" / "nested" / "model_index.json").write_text("{}")
    (models / "notes").mkdir()  # no model_index.json: not a model
    settings.WORKBENCH_MODEL_DIRS = [str(models), str(tmp_path / "missing")]
    page = _page(owner, image_study)
    before = page[: page.index('<form method="post" novalidate>')]
    assert f"<li><code>{models / 'sd-tiny'}</code></li>" in before
    assert f"<li><code>{models / 'org' / 'nested'}</code></li>" in before
    assert str(models / "notes") not in page
    assert f"<code>{tmp_path / 'missing'}</code>: does not exist" in before
    assert "no worker of the <code>gpu</code> queue has reported yet" in before
    worker_device_record("gpu@box")  # what a worker records when it starts (torch imported there)
    before = _page(owner, image_study)
    before = before[: before.index('<form method="post" novalidate>')]
    assert "CUDA on the worker <code>gpu@box</code>" in before
    if torch.cuda.is_available():
        assert f"available ({torch.cuda.get_device_name(0)}; torch {torch.__version__})" in before
    else:
        assert f"<strong>not available</strong> (torch {torch.__version__})" in before and "slow" in before
    assert f'<option value="{models / "sd-tiny"}">' in page  # offered to the Model field
    assert 'list="model-folders"' in _form(page) and "disabled" not in _form(page)


def test_no_model_and_offline_disables_the_form_with_the_reason(
    owner: User,
    image_study: Study,
    tmp_path: Path,
    settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.WORKBENCH_MODEL_DIRS = [str(tmp_path / "empty")]
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    page = _page(owner, image_study)
    assert "No model is available here." in page and "HF_HUB_OFFLINE" in page
    assert "The form is disabled until then." in page
    assert re.search(r'<fieldset class="plain" disabled', _form(page))
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # online: a hub id may still be downloaded
    online = _page(owner, image_study)
    assert "No model is available here." in online and "hub id the workers can download" in online
    assert "disabled" not in _form(online)


class _NoTorch(importlib.abc.MetaPathFinder):
    """Refuses any import of torch while installed (a module already imported is set aside first)."""

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name == "torch" or name.startswith("torch."):
            raise AssertionError(f"the request imported {name}")
        return None


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    finder = _NoTorch()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def test_the_page_never_imports_torch_nor_probes_cuda(
    owner: User, image_study: Study, no_torch: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25 point 9: the page took 3-5 s on its first hit per web process (importing torch to
    probe CUDA). Now torch cannot even be imported during the request, and the probe is not called."""
    import generation.environment

    def probe() -> None:
        raise AssertionError("the page probed CUDA")

    monkeypatch.setattr(generation.environment, "cuda_status", probe)
    WorkerDevice.objects.create(
        hostname="gpu@far",
        cuda_available=True,
        device="NVIDIA H100",
        torch_version="2.5",
        seen_at=timezone.now(),
    )
    started = time.perf_counter()
    page = _page(owner, image_study)
    elapsed = time.perf_counter() - started
    assert "CUDA on the worker <code>gpu@far</code>" in page and "available (NVIDIA H100; torch 2.5)" in page
    print(f"generation page, first hit in this process: {elapsed * 1000:.0f} ms")
    assert elapsed < 1.0  # measured well under 300 ms (docs/benchmarks.md); 1 s leaves room for a busy CI


@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_a_gpu_worker_records_what_it_sees_of_cuda_when_it_starts(owner: User, settings) -> None:
    """A real worker of the ``gpu`` queue writes its ``WorkerDevice`` row on start; one of the default
    queue only does not (it runs no generation)."""
    study = StudyFactory.create(owner=owner, protocol=load_preset("object-attributes").to_dict())
    with celery_worker(queues="celery"):
        time.sleep(3)
    assert not WorkerDevice.objects.exists()
    with celery_worker(queues="celery,gpu"):
        assert wait_for(WorkerDevice.objects.exists, timeout=120), "the worker recorded nothing"
    row = WorkerDevice.objects.get()
    assert row.torch_version == torch.__version__ and row.cuda_available == torch.cuda.is_available()
    assert f"CUDA on the worker <code>{row.hostname}</code>" in _page(owner, study)
