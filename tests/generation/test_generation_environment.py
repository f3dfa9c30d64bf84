"""The generation page says, before its form, which model folders exist, whether this server sees
CUDA and that CPU generation is slow; with no model and no way to download one the form is disabled
(Issue 16, point 3)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from django.test import Client

from annotations.models import Study, User
from annotations.protocols.schema import load_preset
from tests.factories import StudyFactory

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
    if torch.cuda.is_available():
        assert "CUDA: available to this server process" in before
    else:
        assert "<strong>not available</strong> to this server process" in before and "slow" in before
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
