"""A worker killed with SIGKILL in the middle of a job, and a new worker that resumes it.

A real worker process runs a job that takes a while (a tiny diffusion model over many images, the
colour labeller over many items, a zip export of a study with many images); once the job has
written part of its work the test SIGKILLs the worker's process group and starts a new worker with
a short ``WORKBENCH_JOB_STALE_SECONDS``. The job must end DONE with exactly the rows (items,
annotations, one export file) a run without the kill makes: none made twice, none lost; the page
and the API say "worker lost, resumed".

How the new worker gets the job depends on the broker this run uses (CI runs the suite twice):

- the embedded SQLite broker never delivers a task twice (a killed worker's message stays taken),
  so the new worker's sweep (``WORKBENCH_JOB_SWEEP_SECONDS``) finds the stale job and queues it again;
- Redis delivers the unacknowledged task again after the visibility timeout; the sweep is turned off
  there, so the test shows that the redelivered task takes the stale job over by itself.
"""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.test import Client
from PIL import Image

from annotations.interchange.exports import export_job_create, export_job_workdir
from annotations.interchange.item_import import items_add_files
from annotations.models import Annotation, AnnotationRevision, ExportJob, Item, ItemImage, Study, User
from common.jobs import BackgroundJob
from generation.models import GenerationFailure, GenerationJob
from generation.pipelines import ModelSpec
from generation.prompts.base import PromptSet, PromptSpec
from generation.services import generation_job_create
from labelling.models import LabelAttempt, LabellingJob
from labelling.services import labeller_register, labelling_job_create
from protocols.schema import load_preset, load_protocol_text
from tests.factories import StudyFactory
from tests.fixtures.tiny_sd import save_tiny_sd
from tests.s3_server import FileStore
from tests.worker import celery_worker, kill_worker, wait_for
from workbench.celery import app

pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]

STALE_SECONDS = 4


@pytest.fixture(autouse=True)
def _real_broker(settings: Any) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    app.control.purge()


def on_redis() -> bool:
    return settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://"))


def _logs(folder: Path) -> str:
    return "\n".join(f"--- {log.name}\n{log.read_text()[-4000:]}" for log in sorted(folder.glob("*.log")))


def kill_mid_job_and_resume(
    model: type[BackgroundJob],
    job_id: int,
    *,
    enqueued_at: float,
    started: Callable[[], bool],
    logs: Path,
) -> Any:
    """Run the job on a worker until ``started()`` (some of its work is stored), SIGKILL the worker,
    check the job is left RUNNING, start a new worker and wait for the job to finish; the job."""
    with celery_worker(log=logs / "first.log") as first:
        if not wait_for(started, timeout=300, every=0.02):
            pytest.fail(f"the job did not get going:\n{_logs(logs)}")
        kill_worker(first)
    left = model._default_manager.get(pk=job_id)
    assert left.status == BackgroundJob.Status.RUNNING, "the job ended before its worker was killed"
    second_env = {"WORKBENCH_JOB_STALE_SECONDS": str(STALE_SECONDS)}
    if on_redis():
        # Redis gives the task again once it has been out longer than this: by then the job's last
        # heartbeat (before the kill) is more than STALE_SECONDS old, so the redelivered task takes
        # it over. The sweep is off, so nothing else can.
        timeout = int(time.monotonic() - enqueued_at) + STALE_SECONDS + 2
        second_env |= {
            "WORKBENCH_JOB_SWEEP_SECONDS": "0",
            "WORKBENCH_BROKER_VISIBILITY_TIMEOUT": str(timeout),
        }
    else:
        second_env |= {"WORKBENCH_JOB_SWEEP_SECONDS": "1"}
    with celery_worker(extra_env=second_env, log=logs / "second.log"):
        done = wait_for(
            lambda: model._default_manager.get(pk=job_id).status == BackgroundJob.Status.DONE, timeout=300
        )
        if not done:
            pytest.fail(f"the job was not resumed:\n{_logs(logs)}")
    job = model._default_manager.get(pk=job_id)
    assert (job.status, job.resumed_count, job.worker_note) == ("done", 1, "worker lost, resumed")
    return job


def page(user: User, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_a_generation_job_resumes_after_its_worker_is_killed(
    owner: User, tmp_path: Path, default_store: FileStore
) -> None:
    model = save_tiny_sd(tmp_path / "tiny-sd")
    study = StudyFactory.create(owner=owner, protocol=load_preset("object-attributes").to_dict())
    prompts = PromptSet(
        name="cups",
        paper="soda",
        prompts=tuple(
            PromptSpec(text=text, condition=condition, metadata={"object": "cup"}, images_per_prompt=12)
            for text, condition in [("cup", "base"), ("cup for women", "gender:women")]
        ),
    )
    spec = ModelSpec(source=str(model), steps=2, width=64, height=64, batch_size=2, guidance=1.0)
    enqueued_at = time.monotonic()
    job = generation_job_create(study=study, prompt_set=prompts, spec=spec, user=owner)
    kill_mid_job_and_resume(
        GenerationJob,
        job.pk,
        enqueued_at=enqueued_at,
        started=lambda: Item.objects.filter(study=study).count() >= 4,
        logs=tmp_path,
    )
    expected = {f"cups/tiny-sd/s0/p{p:04d}/i{i:02d}" for p in range(2) for i in range(12)}
    assert set(Item.objects.filter(study=study).values_list("external_id", flat=True)) == expected
    assert (
        Item.objects.filter(study=study).count() == ItemImage.objects.filter(item__study=study).count() == 24
    )
    assert not GenerationFailure.objects.filter(job=job).exists()
    stored = {
        Path(name).name for name in ItemImage.objects.filter(item__study=study).values_list("file", flat=True)
    }
    on_disk = {Path(name).name for name in default_store.names(f"items/{study.pk}/")}
    assert stored <= on_disk  # every stored image has its file
    # A SIGKILL inside a batch's transaction may leave that batch's PNGs behind without rows (never
    # shown, never exported): at most one batch of them.
    assert len(on_disk - stored) <= spec.batch_size
    assert "worker lost, resumed" in page(owner, f"/generation/jobs/{job.pk}/")
    assert "worker lost, resumed" in page(owner, f"/api/generation-jobs/{job.pk}/")


LABEL_PROTOCOL = """
name: Cups
unit: image
questions:
  - {key: product_color, kind: text, prompt: 'Main colour of the product?', normaliser: colour}
  - {key: background_color, kind: text, prompt: 'Background colour?', normaliser: colour}
"""


def drawn(index: int) -> bytes:
    """A 32 x 32 cup drawing, each one different (items of a study have distinct files)."""
    image = Image.new("RGB", (32, 32), (250, 250, 250))
    image.paste((200, 20 + index % 200, 20 + index // 200), (8, 8, 24, 24))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_labelling_job_resumes_after_its_worker_is_killed(owner: User, tmp_path: Path) -> None:
    study = StudyFactory.create(owner=owner, protocol=load_protocol_text(LABEL_PROTOCOL).to_dict())
    count = 300
    items_add_files(
        study=study,
        records=[{"external_id": f"cup-{i:03d}", "file": f"cup-{i:03d}.png"} for i in range(count)],
        files={f"cup-{i:03d}.png": drawn(i) for i in range(count)},
    )
    colour = labeller_register(name="colour-rule", kind="colour", config={"job_batch_size": 4})
    enqueued_at = time.monotonic()
    job = labelling_job_create(study=study, annotator=colour, user=owner)
    kill_mid_job_and_resume(
        LabellingJob,
        job.pk,
        enqueued_at=enqueued_at,
        started=lambda: Annotation.objects.filter(study=study).count() >= 40,
        logs=tmp_path,
    )
    answers = Annotation.objects.filter(study=study, annotator=colour)
    assert answers.count() == 2 * count  # two questions per item, each answered once
    assert set(answers.values_list("question_key", flat=True)) == {"product_color", "background_color"}
    assert not AnnotationRevision.objects.filter(annotation__study=study).exists()  # none answered twice
    assert not LabelAttempt.objects.filter(job=job).exists()
    assert "worker lost, resumed" in page(owner, f"/studies/{study.pk}/labelling/")
    assert "worker lost, resumed" in page(owner, f"/api/labelling-jobs/{job.pk}/")


def noise(index: int) -> bytes:
    """A 256 x 256 PNG of random pixels (PNG cannot shrink it, so zipping it takes real time)."""
    pixels = np.random.default_rng(index).integers(0, 256, (256, 256, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def test_a_zip_export_resumes_after_its_worker_is_killed(
    owner: User, tmp_path: Path, default_store: FileStore
) -> None:
    study: Study = StudyFactory.create(owner=owner)
    count = 200
    for start in range(0, count, 50):
        names = [f"noise-{i:03d}.png" for i in range(start, start + 50)]
        items_add_files(
            study=study,
            records=[{"external_id": name.removesuffix(".png"), "file": name} for name in names],
            files={name: noise(int(name[6:9])) for name in names},
        )
    enqueued_at = time.monotonic()
    job = export_job_create(study=study, user=owner, fmt="zip")
    partial = export_job_workdir(job) / f"study-{study.pk}.zip"
    kill_mid_job_and_resume(
        ExportJob,
        job.pk,
        enqueued_at=enqueued_at,
        started=lambda: partial.exists() and partial.stat().st_size > 2_000_000,
        logs=tmp_path,
    )
    job = ExportJob.objects.get(pk=job.pk)
    exports = default_store.names("exports/")
    assert exports == [job.file.name]  # one file: not made twice
    with zipfile.ZipFile(io.BytesIO(default_store.read(exports[0]))) as archive:
        names = archive.namelist()
        assert archive.testzip() is None
        lines = archive.read("study.jsonl").decode().splitlines()
    assert len([name for name in names if name.startswith("files/")]) == count
    assert sum('"type": "item"' in line for line in lines) == count
    assert not export_job_workdir(job).exists()  # the killed run's partial file is gone too
    assert "worker lost, resumed" in page(owner, f"/studies/{study.pk}/")
    assert "worker lost, resumed" in page(owner, f"/api/exports/{job.pk}/")
