"""Generation jobs end to end on a tiny, randomly initialised Stable Diffusion pipeline saved to a
folder and loaded through the same path as a user's model: provenance, determinism, idempotent
re-runs, cancellation, per-prompt failures; the command; a real Celery worker on the gpu queue."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from django.core.management import call_command
from django.core.management.base import CommandError
from PIL import Image

from annotations.models import Item, ItemImage
from generation import pipelines
from generation.models import GenerationFailure, GenerationJob
from generation.pipelines import ModelSpec, derive_seed
from generation.prompts.base import PromptSet, PromptSpec
from generation.services import (
    generation_job_cancel,
    generation_job_create,
    generation_job_rerun,
    generation_job_run,
)
from protocols.schema import load_preset
from tests.factories import StudyFactory
from tests.fixtures.tiny_sd import save_tiny_sd
from tests.s3_server import FileStore

PROMPTS = PromptSet(
    name="cups",
    paper="soda",
    prompts=(
        PromptSpec(
            text="cup, one product only, no people",
            condition="base",
            metadata={"object": "cup"},
            images_per_prompt=2,
        ),
        PromptSpec(
            text="cup for women, one product only, no people",
            condition="gender:women",
            metadata={"object": "cup"},
            images_per_prompt=2,
        ),
    ),
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_sd(tmp_path_factory.mktemp("models") / "tiny-sd")


@pytest.fixture(autouse=True)
def _fresh_pipelines() -> Any:
    pipelines.clear_pipeline_cache()
    yield
    pipelines.clear_pipeline_cache()


def spec_for(folder: Path, **changes: Any) -> ModelSpec:
    return ModelSpec(
        **{
            "source": str(folder),
            "steps": 2,
            "width": 64,
            "height": 64,
            "batch_size": 2,
            "guidance": 1.0,
            **changes,
        }
    )


@pytest.fixture
def image_study(owner):
    return StudyFactory.create(owner=owner, protocol=load_preset("object-attributes").to_dict())


def pixels(item: Item) -> bytes:
    with item.images.get().file.open("rb") as handle:
        return handle.read()


@pytest.mark.slow
@pytest.mark.django_db
def test_a_job_makes_items_with_full_provenance(
    file_store: FileStore, image_study, owner, tiny_model
) -> None:
    job = generation_job_create(
        study=image_study,
        prompt_set=PROMPTS,
        spec=spec_for(tiny_model),
        user=owner,
        base_seed=11,
        enqueue=False,
    )
    job = generation_job_run(job_id=job.pk, device="cpu")
    assert (job.status, job.generated, job.failed, job.total_images) == ("done", 4, 0, 4)
    item = Item.objects.get(study=image_study, external_id="cups/tiny-sd/s11/p0001/i01")
    assert item.prompt == "cup for women, one product only, no people" and item.condition == "gender:women"
    assert item.seed == derive_seed(11, item.prompt, 1) and item.model_name == "tiny-sd"
    assert item.metadata == {"object": "cup", "prompt_set": "cups"}
    provenance = item.generation_settings
    assert provenance["kind"] == "local" and len(provenance["folder_sha256"]) == 64
    assert provenance["settings"]["steps"] == 2 and provenance["versions"]["diffusers"]
    assert provenance["pipeline_class"] == "StableDiffusionPipeline" and provenance["job"] == job.pk
    assert (item.images.get().width, item.images.get().height) == (64, 64)
    # The worker stored the PNGs through the item import, in the media folder or the bucket.
    names = sorted(ItemImage.objects.filter(item__study=image_study).values_list("file", flat=True))
    assert len(names) == 4 and file_store.names() == names
    assert file_store.read(item.images.get().file.name) == pixels(item)


class RecordsBatches:
    """The real tiny pipeline, recording the seeds of each call (a batch's composition)."""

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe
        self.calls: list[list[int]] = []

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append([generator.initial_seed() for generator in kwargs["generator"]])
        return self.pipe(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipe, name)


@pytest.mark.slow
@pytest.mark.django_db
def test_same_seed_same_pixels_and_a_rerun_only_fills_what_is_missing(image_study, owner, tiny_model) -> None:
    """A re-run re-makes a missing image in the batch it was first made in (its companion is
    computed again, not stored), so it is bit-identical on any CPU: kernels pick their blocking by
    batch size, and on AVX-512 a batch of 1 rounds differently from a batch of 2. Both comparisons
    are in this process, on this CPU."""
    spec = spec_for(tiny_model)
    recorder = RecordsBatches(pipelines.load_pipeline(spec, "cpu"))
    pipelines._PIPELINES[(spec.load_key(), "cpu")] = recorder
    first = generation_job_run(
        job_id=generation_job_create(
            study=image_study, prompt_set=PROMPTS, spec=spec, user=owner, base_seed=3, enqueue=False
        ).pk,
        device="cpu",
    )
    originals = {item.external_id: pixels(item) for item in Item.objects.filter(study=image_study)}
    first_batches, recorder.calls = recorder.calls, []
    seeds = {(p, i): derive_seed(3, PROMPTS.prompts[p].text, i) for p in range(2) for i in range(2)}
    assert first_batches == [[seeds[0, 0], seeds[0, 1]], [seeds[1, 0], seeds[1, 1]]]
    # One image is lost. Made alone (a batch of 1), it differs from the original on this CPU (AVX-512);
    # made in its first batch of 2, with its companion, it is the same to the bit.
    Item.objects.get(external_id="cups/tiny-sd/s3/p0000/i00").delete()
    rerun = generation_job_run(job_id=generation_job_rerun(job=first, enqueue=False).pk, device="cpu")
    assert (rerun.generated, rerun.skipped) == (1, 3)
    assert recorder.calls == first_batches[:1]  # the missing image made in its first run's batch
    again = {item.external_id: pixels(item) for item in Item.objects.filter(study=image_study)}
    assert again == originals  # the re-made image is bit-identical; its companion is not stored twice
    assert (
        Item.objects.filter(study=image_study).count()
        == ItemImage.objects.filter(item__study=image_study).count()
        == 4
    )
    recorder.calls = []
    untouched = generation_job_run(job_id=generation_job_rerun(job=rerun, enqueue=False).pk, device="cpu")
    assert (untouched.generated, untouched.skipped, recorder.calls) == (0, 4, [])  # nothing missing, no call
    pipelines._PIPELINES[(spec.load_key(), "cpu")] = recorder.pipe
    same = StudyFactory.create(owner=owner, protocol=image_study.protocol)
    generation_job_run(
        job_id=generation_job_create(
            study=same, prompt_set=PROMPTS, spec=spec_for(tiny_model), user=owner, base_seed=3, enqueue=False
        ).pk,
        device="cpu",
    )
    assert {i.external_id: pixels(i) for i in Item.objects.filter(study=same)} == originals
    # Another batch size draws the same noise; CPU kernels may round a batch of 1 differently from a
    # batch of 2 by at most one grey level (generation/pipelines.py explains why).
    singles = StudyFactory.create(owner=owner, protocol=image_study.protocol)
    generation_job_run(
        job_id=generation_job_create(
            study=singles,
            prompt_set=PROMPTS,
            spec=spec_for(tiny_model, batch_size=1),
            user=owner,
            base_seed=3,
            enqueue=False,
        ).pk,
        device="cpu",
    )
    for item in Item.objects.filter(study=singles):
        a = np.asarray(Image.open(io.BytesIO(pixels(item))), dtype=int)
        b = np.asarray(Image.open(io.BytesIO(originals[item.external_id])), dtype=int)
        assert np.abs(a - b).max() <= 1


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize("threads", [0, 2])
def test_cancelling_stops_between_batches_and_keeps_finished_images(
    image_study, owner, tiny_model, threads: int
) -> None:
    job = generation_job_create(
        study=image_study,
        prompt_set=PROMPTS,
        spec=spec_for(tiny_model, batch_size=1),
        user=owner,
        enqueue=False,
    )

    def cancel_after_first(current: GenerationJob) -> None:
        if current.generated == 1:
            generation_job_cancel(job=current)

    job = generation_job_run(
        job_id=job.pk, progress=cancel_after_first, device="cpu", encoder_threads=threads
    )
    assert job.status == "cancelled" and job.generated == 1
    assert Item.objects.filter(study=image_study).count() == 1
    pending = generation_job_create(
        study=image_study, prompt_set=PROMPTS, spec=spec_for(tiny_model), user=owner, enqueue=False
    )
    assert generation_job_cancel(job=pending).status == "cancelled"
    assert generation_job_run(job_id=pending.pk).generated == 0  # a cancelled job is not claimed


@pytest.mark.slow
@pytest.mark.django_db
def test_the_heartbeat_is_stamped_before_every_batch(image_study, owner, tiny_model) -> None:
    job = generation_job_create(
        study=image_study,
        prompt_set=PROMPTS,
        spec=spec_for(tiny_model, batch_size=1),
        user=owner,
        enqueue=False,
    )
    beats = []
    job = generation_job_run(
        job_id=job.pk, progress=lambda current: beats.append(current.heartbeat_at), device="cpu"
    )
    assert job.status == "done" and job.generated == 4
    # the claim's stamp, then one before each of the four batches (each seen after its batch)
    assert len(beats) == 6 and None not in beats
    assert beats[:5] == sorted(set(beats[:5])) and beats[5] == beats[4]


@pytest.mark.django_db
@pytest.mark.parametrize("threads", [0, 2])
def test_items_are_stored_and_counted_batch_by_batch(image_study, owner, tiny_model, threads: int) -> None:
    job = generation_job_create(
        study=image_study,
        prompt_set=PROMPTS,
        spec=spec_for(tiny_model, batch_size=3),
        user=owner,
        enqueue=False,
    )
    seen: list[tuple[int, int]] = []

    def progress(current: GenerationJob) -> None:
        seen.append((current.generated, Item.objects.filter(study=image_study).count()))

    job = generation_job_run(job_id=job.pk, progress=progress, device="cpu", encoder_threads=threads)
    # 4 images in batches of 3 and 1: the counter moves once per batch.
    assert [generated for generated, _stored in seen] == [0, 3, 4, 4]
    if threads == 0:  # encoded inline (the CPU default): each batch's items are stored at its end
        assert seen == [(0, 0), (3, 3), (4, 4), (4, 4)]
    else:  # encoder threads (the GPU default): an item is stored once its PNG is ready, at the latest
        # at the next batch's end; the stored count trails the counter and catches up when the job ends
        stored = [count for _generated, count in seen]
        assert stored == sorted(stored) and all(count <= generated for generated, count in seen)
    assert seen[-1] == (4, 4) and job.status == "done" and job.generated == 4
    assert sorted(Item.objects.filter(study=image_study).values_list("external_id", flat=True)) == [
        f"cups/tiny-sd/s0/p{p:04d}/i{i:02d}" for p in range(2) for i in range(2)
    ]


class FailsForOnePrompt:
    """The real tiny pipeline that runs out of memory whenever one given prompt is in the batch."""

    def __init__(self, pipe: Any, bad_prompt: str) -> None:
        self.pipe, self.bad_prompt = pipe, bad_prompt

    def __call__(self, **kwargs: Any) -> Any:
        if self.bad_prompt in kwargs["prompt"]:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return self.pipe(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pipe, name)


@pytest.mark.slow
@pytest.mark.django_db
def test_a_failing_prompt_is_recorded_and_the_rest_survive(image_study, owner, tiny_model) -> None:
    spec = spec_for(tiny_model)
    real = pipelines.load_pipeline(spec, "cpu")
    pipelines._PIPELINES[(spec.load_key(), "cpu")] = FailsForOnePrompt(real, PROMPTS.prompts[0].text)
    job = generation_job_run(
        job_id=generation_job_create(
            study=image_study, prompt_set=PROMPTS, spec=spec, user=owner, enqueue=False
        ).pk,
        device="cpu",
    )
    assert (job.status, job.generated, job.failed) == ("done", 2, 2)
    failures = list(GenerationFailure.objects.filter(job=job).order_by("external_id"))
    assert [f.external_id for f in failures] == ["cups/tiny-sd/s0/p0000/i00", "cups/tiny-sd/s0/p0000/i01"]
    assert all("out of memory at batch size 1" in f.reason for f in failures)
    pipelines._PIPELINES[(spec.load_key(), "cpu")] = real
    job = generation_job_run(job_id=generation_job_rerun(job=job, enqueue=False).pk, device="cpu")
    assert (job.generated, job.skipped, job.failed) == (2, 2, 0) and not GenerationFailure.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db
@pytest.mark.parametrize("threads", [0, 2])
def test_an_image_the_check_refuses_while_encoding_is_that_images_failure(
    image_study, owner, tiny_model, settings, threads: int
) -> None:
    """PNG encoding and the import's image check run inline or in encoder threads; a refusal there
    comes back as the image's recorded failure, like any other, and the job still finishes."""
    settings.WORKBENCH_MAX_IMAGE_PIXELS = 64 * 64 - 1  # the tiny model's 64 x 64 images are one pixel over
    job = generation_job_run(
        job_id=generation_job_create(
            study=image_study,
            prompt_set=PROMPTS,
            spec=spec_for(tiny_model, batch_size=2),
            user=owner,
            enqueue=False,
        ).pk,
        device="cpu",
        encoder_threads=threads,
    )
    assert (job.status, job.generated, job.failed) == ("done", 4, 4)
    assert not Item.objects.filter(study=image_study).exists()
    reasons = list(GenerationFailure.objects.filter(job=job).values_list("reason", flat=True))
    assert len(reasons) == 4 and all("could not store the image" in r and "pixel limit" in r for r in reasons)


@pytest.mark.django_db
def test_bad_settings_and_unloadable_models_fail_the_job_with_the_reason(
    image_study, owner, tmp_path
) -> None:
    (tmp_path / "empty").mkdir()
    job = generation_job_create(
        study=image_study, prompt_set=PROMPTS, spec=spec_for(tmp_path / "empty"), user=owner, enqueue=False
    )
    job = generation_job_run(job_id=job.pk, device="cpu")
    assert job.status == "failed" and "not a diffusers pipeline folder" in job.error
    assert Item.objects.count() == 0 and ItemImage.objects.count() == 0


@pytest.mark.slow
@pytest.mark.django_db
def test_the_generate_command_runs_with_a_progress_bar(image_study, tiny_model, tmp_path) -> None:
    prompts = tmp_path / "prompts.csv"
    prompts.write_text("text,condition,object\ncar for men,gender:men,car\ncar for women,gender:women,car\n")
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "generate",
        str(image_study.pk),
        "--prompt-set",
        "file",
        "--prompts",
        str(prompts),
        "--model",
        str(tiny_model),
        "--steps",
        "2",
        "--width",
        "64",
        "--height",
        "64",
        "--guidance",
        "1",
        "--images-per-prompt",
        "1",
        "--device",
        "cpu",
        stdout=out,
        stderr=err,
    )
    result = json.loads(out.getvalue())
    assert result["status"] == "done" and result["generated"] == 2
    assert "2/2" in err.getvalue()  # the progress bar
    assert set(Item.objects.values_list("condition", flat=True)) == {"gender:men", "gender:women"}
    with pytest.raises(CommandError, match="width must be a multiple of 8"):
        call_command(
            "generate",
            str(image_study.pk),
            "--prompt-set",
            "soda",
            "--model",
            str(tiny_model),
            "--width",
            "65",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    with pytest.raises(CommandError, match="needs a CSV of instruction pairs"):
        call_command(
            "generate",
            str(image_study.pk),
            "--prompt-set",
            "agent",
            "--model",
            str(tiny_model),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )


@pytest.mark.slow
@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)
def test_a_gpu_queue_worker_runs_a_job(owner, tiny_model, settings) -> None:
    from tests.worker import celery_worker, wait_for
    from workbench.celery import app

    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.task_always_eager = False
    app.control.purge()
    study = StudyFactory.create(owner=owner, protocol=load_preset("object-attributes").to_dict())
    job = generation_job_create(study=study, prompt_set=PROMPTS, spec=spec_for(tiny_model), user=owner)
    with celery_worker(queues="gpu", extra_env={"HF_HUB_OFFLINE": "1"}) as worker:
        done = wait_for(lambda: GenerationJob.objects.get(pk=job.pk).status == "done", timeout=180)
        if not done:
            worker.terminate()
            pytest.fail("the job did not finish:\n" + worker.communicate(timeout=20)[0][-3000:])
    assert Item.objects.filter(study=study).count() == 4


@pytest.mark.slow
@pytest.mark.django_db
def test_an_image_set_study_gets_one_item_per_prompt(owner, tiny_model) -> None:
    study = StudyFactory.create(owner=owner, protocol=load_preset("ssi-rubric").to_dict())
    queries = PromptSet(
        name="ssi-initial",
        paper="ssi",
        prompts=(
            PromptSpec(
                text="a photo of a Nigerian person",
                condition="initial",
                metadata={"category": "geocultural", "term": "Nigerian"},
                images_per_prompt=4,
            ),
            PromptSpec(
                text="a photo of a doctor",
                condition="initial",
                metadata={"category": "occupational", "term": "doctor"},
                images_per_prompt=4,
            ),
        ),
    )
    job = generation_job_run(
        job_id=generation_job_create(
            study=study, prompt_set=queries, spec=spec_for(tiny_model), user=owner, base_seed=5, enqueue=False
        ).pk,
        device="cpu",
    )
    assert (job.generated, job.total_images) == (8, 8)
    item = Item.objects.get(study=study, external_id="ssi-initial/tiny-sd/s5/p0001")
    assert item.kind == "image_set" and item.images.count() == 4
    assert item.generation_settings["seeds"] == [derive_seed(5, "a photo of a doctor", i) for i in range(4)]
    assert item.metadata["category"] == "occupational"
    again = generation_job_run(job_id=generation_job_rerun(job=job, enqueue=False).pk, device="cpu")
    assert (again.generated, again.skipped) == (0, 8)
