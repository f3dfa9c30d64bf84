"""One rule for a model name (issue 28, point 5): the web node (before a job is queued) and the
worker (before it loads anything) resolve a name with the same function, so a name means the same
on both: a folder path under WORKBENCH_MODEL_DIRS, a name of a folder in one of them, or a hub id.
The current directory is never consulted (before: a relative name that existed only on the worker
passed the web check as a hub id and loaded as a local folder, unchecked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from generation.model_source import ModelFolderNotAllowed, ModelSourceRefused, model_source_resolve
from generation.models import GenerationJob
from generation.pipelines import ModelSpec
from generation.prompts.base import PromptSet, PromptSpec
from generation.services import generation_job_create
from generation.tasks import generate_images_task
from protocols.schema import load_preset
from tests.factories import StudyFactory

PROMPTS = PromptSet(
    name="cups", paper="soda", prompts=(PromptSpec(text="a cup", condition="base", images_per_prompt=1),)
)


def pipeline_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
    return path


def test_a_relative_name_is_looked_up_under_the_model_dirs_never_in_the_current_folder(
    tmp_path, monkeypatch
) -> None:
    models = tmp_path / "models"
    pipeline_folder(models / "org" / "tiny")
    monkeypatch.chdir(tmp_path)
    pipeline_folder(tmp_path / "elsewhere")  # exists in the current folder only
    dirs = [str(models)]
    for on_worker in (False, True):
        assert model_source_resolve("elsewhere", model_dirs=dirs, on_worker=on_worker).kind == "hub"
        local = model_source_resolve("org/tiny", model_dirs=dirs, on_worker=on_worker)
        assert (local.kind, local.location) == ("local", str((models / "org" / "tiny").resolve()))
    # A web node without the folder takes the name as a hub id; both answers are allowed models.
    assert model_source_resolve("org/tiny", model_dirs=[str(tmp_path / "none")]).kind == "hub"
    assert model_source_resolve("stabilityai/sd-turbo", model_dirs=dirs).location == "stabilityai/sd-turbo"


def test_folders_outside_the_model_dirs_and_malformed_names_are_refused(tmp_path) -> None:
    models = tmp_path / "models"
    pipeline_folder(models / "ok")
    outside = pipeline_folder(tmp_path / "outside")
    (models / "link").symlink_to(outside)
    dirs = [str(models)]
    assert model_source_resolve(str(models / "ok"), model_dirs=dirs, on_worker=True).kind == "local"
    for name in (str(outside), str(models / ".." / "outside"), "../outside", "~/x", "link"):
        with pytest.raises(ModelFolderNotAllowed, match="local models must be under"):
            model_source_resolve(name, model_dirs=dirs, on_worker=True)
    for name in ("", " org/model", "a/b/c", "org/..", "has space", "org\\model", "-flag"):
        with pytest.raises(ModelSourceRefused):
            model_source_resolve(name, model_dirs=dirs)
    with pytest.raises(ModelSourceRefused, match="not a diffusers pipeline folder"):
        (models / "empty").mkdir()
        model_source_resolve(str(models / "empty"), model_dirs=dirs, on_worker=True)
    # The command line's own run may load any folder.
    assert model_source_resolve(str(outside), model_dirs=dirs, any_folder=True).kind == "local"


@pytest.mark.django_db
def test_the_api_refuses_a_bad_name_before_anything_is_queued(owner, settings, tmp_path) -> None:
    settings.WORKBENCH_MODEL_DIRS = [str(tmp_path / "models")]
    study = StudyFactory.create(owner=owner, protocol=load_preset("object-attributes").to_dict())
    client = APIClient()
    client.force_authenticate(owner)
    model = {"steps": 2, "width": 64, "height": 64}
    for source, status, words in (
        ("a/b/c", 400, "neither a folder path"),
        (str(tmp_path), 403, "local models must be under"),
    ):
        answer = client.post(
            "/api/generation-jobs/",
            {"study": study.pk, "design": "soda", "limit": 1, "model": {**model, "source": source}},
            format="json",
        )
        assert answer.status_code == status and words in answer.json()["detail"], answer.content
    assert GenerationJob.objects.count() == 0


@pytest.mark.django_db
def test_the_worker_applies_the_rule_again_before_loading(owner, settings, tmp_path) -> None:
    """A job row that names a folder outside the worker's WORKBENCH_MODEL_DIRS (queued by an older
    node, or the folders differ between machines) fails with the reason; nothing is loaded."""
    settings.WORKBENCH_MODEL_DIRS = [str(tmp_path / "models")]
    outside = pipeline_folder(tmp_path / "outside")
    study = StudyFactory.create(owner=owner, protocol=load_preset("object-attributes").to_dict())
    spec = ModelSpec(source=str(outside), steps=2, width=64, height=64)
    job = generation_job_create(study=study, prompt_set=PROMPTS, spec=spec, user=owner, enqueue=False)
    assert generate_images_task(job.pk) == "failed"
    job.refresh_from_db()
    assert "local models must be under" in job.error and job.provenance in (None, {})
    with pytest.raises(ModelFolderNotAllowed):  # and a queued job is refused before it is made
        generation_job_create(study=study, prompt_set=PROMPTS, spec=spec, user=owner)
