"""Generation jobs through the API and the pages: who may start, see and cancel them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotations.services.studies import enrollment_add
from generation.models import GenerationJob
from protocols.schema import load_preset
from tests.factories import StudyFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

MODEL = {"source": "org/some-model", "steps": 2, "width": 64, "height": 64}


@pytest.fixture
def image_study(owner, annotator_user):
    study = StudyFactory.create(owner=owner, protocol=load_preset("object-attributes").to_dict())
    enrollment_add(study=study, user=annotator_user)
    return study


@pytest.fixture
def clients(owner, other_researcher, annotator_user):
    return {
        "owner": client_for(owner),
        "other": client_for(other_researcher),
        "annotator": client_for(annotator_user),
        "anonymous": client_for(None),
    }


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 201), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_create_a_job(
    clients, image_study, role, status, django_capture_on_commit_callbacks, settings
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    from workbench.celery import app

    app.conf.task_always_eager = False  # queue only: no worker runs in this test
    with django_capture_on_commit_callbacks(execute=False):
        response = clients[role].post(
            "/api/generation-jobs/",
            {
                "study": image_study.pk,
                "design": "soda",
                "limit": 2,
                "images_per_prompt": 3,
                "model": MODEL,
                "base_seed": 9,
            },
            format="json",
        )
    assert response.status_code == status
    assert GenerationJob.objects.count() == (1 if status == 201 else 0)
    if status == 201:
        assert response.json()["total_images"] == 6 and response.json()["status"] == "pending"


def test_bad_job_requests_are_refused(clients, image_study, tmp_path, settings) -> None:
    owner = clients["owner"]
    width = owner.post(
        "/api/generation-jobs/",
        {"study": image_study.pk, "design": "soda", "model": {**MODEL, "width": 65}},
        format="json",
    )
    assert width.status_code == 400 and "multiple of 8" in width.json()["detail"]
    unknown = owner.post(
        "/api/generation-jobs/",
        {"study": image_study.pk, "design": "soda", "model": {**MODEL, "colour": "red"}},
        format="json",
    )
    assert unknown.status_code == 400 and "unknown model setting 'colour'" in unknown.json()["detail"]
    settings.WORKBENCH_MODEL_DIRS = [str(tmp_path / "models")]
    outside = owner.post(
        "/api/generation-jobs/",
        {"study": image_study.pk, "design": "soda", "model": {**MODEL, "source": "/etc"}},
        format="json",
    )
    assert outside.status_code == 403 and "local models must be under" in outside.json()["detail"]
    neither = owner.post("/api/generation-jobs/", {"study": image_study.pk, "model": MODEL}, format="json")
    assert neither.status_code == 400
    text_study = StudyFactory.create(owner=image_study.owner, protocol=load_preset("visualness").to_dict())
    text = owner.post(
        "/api/generation-jobs/",
        {"study": text_study.pk, "prompts": [{"text": "a cup"}], "model": MODEL},
        format="json",
    )
    assert text.status_code == 400 and "text items" in text.json()["detail"]
    assert GenerationJob.objects.count() == 0


def test_a_seed_too_large_for_the_database_is_refused_with_a_message(clients, image_study) -> None:
    owner = Client(raise_request_exception=False)
    owner.force_login(image_study.owner)
    for seed in (10**30, -(10**30)):
        job = {"study": image_study.pk, "design": "soda", "limit": 1, "model": MODEL, "base_seed": seed}
        api = clients["owner"].post("/api/generation-jobs/", job, format="json")
        assert api.status_code == 400 and "base_seed" in api.json(), api.content
        form = {"design": "soda", "limit": 1, "source": "org/model", "steps": 2, "guidance": 1}
        form |= {"width": 64, "height": 64, "batch_size": 1, "base_seed": seed}
        page = owner.post(f"/studies/{image_study.pk}/generation/", form)
        assert page.status_code in (200, 400) and "Ensure this value is" in page.content.decode()
    assert GenerationJob.objects.count() == 0


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 200), ("other", 404), ("annotator", 404), ("anonymous", 401)]
)
def test_see_and_cancel_a_job(clients, image_study, owner, role, status) -> None:
    job = GenerationJob.objects.create(
        study=image_study,
        created_by=owner,
        name="x",
        prompts=[{"text": "a"}],
        model_spec=MODEL,
        model_label="m",
        total_images=1,
    )
    assert clients[role].get(f"/api/generation-jobs/{job.pk}/").status_code == status
    assert clients[role].post(f"/api/generation-jobs/{job.pk}/cancel/").status_code == status
    job.refresh_from_db()
    assert job.status == ("cancelled" if status == 200 else "pending")


def test_the_generation_page(owner, image_study, annotator_user, settings) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    from workbench.celery import app

    app.conf.task_always_eager = False
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studies/{image_study.pk}/generation/")
    assert page.status_code == 200 and "New job" in page.content.decode()
    response = client.post(
        f"/studies/{image_study.pk}/generation/",
        {
            "design": "soda",
            "limit": 1,
            "images_per_prompt": 2,
            "source": "org/model",
            "steps": 2,
            "guidance": 1,
            "width": 64,
            "height": 64,
            "batch_size": 1,
            "base_seed": 0,
        },
    )
    job = GenerationJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/generation/jobs/{job.pk}/"
    detail = client.get(f"/generation/jobs/{job.pk}/").content.decode()
    assert "0 of 2" in detail and 'http-equiv="refresh"' in detail
    bad = client.post(
        f"/studies/{image_study.pk}/generation/",
        {
            "design": "soda",
            "source": "org/model",
            "steps": 2,
            "guidance": 1,
            "width": 63,
            "height": 64,
            "batch_size": 1,
            "base_seed": 0,
        },
    )
    assert "multiple of 8" in bad.content.decode()
    outsider = Client()
    outsider.force_login(annotator_user)
    assert outsider.get(f"/generation/jobs/{job.pk}/").status_code == 403
    assert outsider.post(f"/generation/jobs/{job.pk}/cancel/").status_code == 403


def test_a_mitigation_prompt_set_is_built_for_the_named_axes() -> None:
    from generation.prompts.sets import PromptSetError, prompt_set_build

    built = prompt_set_build("biasconnect-mitigation", subject="nurse", mitigate=["environment", "clothing"])
    base = built.by_condition("base")
    # 2 environments x 2 clothing phrases = 4 combinations; ceil(48 / 4) = 12 images each.
    assert [p.text for p in base] == [
        "A photo of a nurse working indoors in formal attire",
        "A photo of a nurse working outdoors in formal attire",
        "A photo of a nurse working indoors in informal attire",
        "A photo of a nurse working outdoors in informal attire",
    ]
    assert {p.images_per_prompt for p in base} == {12}
    assert "gender:female" in built.conditions()
    with pytest.raises(PromptSetError, match="unknown biasconnect axes"):
        prompt_set_build("biasconnect-mitigation", subject="nurse", mitigate=["hair"])
    with pytest.raises(PromptSetError, match="needs a subject"):
        prompt_set_build("biasconnect-mitigation", mitigate=["age"])


def test_a_job_whose_worker_was_lost_can_be_rerun_from_the_page_and_the_api(
    clients, image_study, owner, settings, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    """A RUNNING job with a fresh heartbeat is refused ("already queued or running"); once its
    heartbeat is older than WORKBENCH_JOB_STALE_SECONDS the page says so, offers Re-run, and the job
    is queued again, counted as resumed."""
    from workbench.celery import app

    settings.WORKBENCH_JOB_STALE_SECONDS = 60
    sent: list[int] = []
    task = app.tasks["generation.tasks.generate_images_task"]
    monkeypatch.setattr(task, "apply_async", lambda args, **options: sent.append(args[0]))
    job = GenerationJob.objects.create(
        study=image_study,
        created_by=owner,
        name="x",
        prompts=[{"text": "a"}],
        model_spec=MODEL,
        model_label="m",
        total_images=1,
        status=GenerationJob.Status.RUNNING,
        heartbeat_at=timezone.now() - timedelta(seconds=30),
    )
    refused = clients["owner"].post(f"/api/generation-jobs/{job.pk}/rerun/")
    assert refused.status_code == 400 and "already queued or running" in refused.json()["detail"]
    page = Client()
    page.force_login(owner)
    assert "disabled>Re-run" in page.get(f"/generation/jobs/{job.pk}/").content.decode()
    GenerationJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=90))
    detail = page.get(f"/generation/jobs/{job.pk}/").content.decode()
    assert "worker lost, waiting to resume" in detail and "disabled>Re-run" not in detail
    with django_capture_on_commit_callbacks(execute=True):
        response = page.post(f"/generation/jobs/{job.pk}/rerun/")
    assert response.status_code == 302 and sent == [job.pk]
    data = clients["owner"].get(f"/api/generation-jobs/{job.pk}/").json()
    assert (data["status"], data["resumed_count"], data["worker_note"]) == (
        "pending",
        1,
        "worker lost, resumed",
    )
    assert "worker lost, resumed" in page.get(f"/generation/jobs/{job.pk}/").content.decode()
