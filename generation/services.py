"""Generation jobs: create, run (the worker's side), cancel, re-run.

A job turns every (prompt, image index) into an item of the study with external id
``<set>/<model>/s<base seed>/p<prompt index>/i<image index>``. Running a job makes only the images
whose items are missing, so a second run, a resumed run or a run after cancelling never makes an
image twice; each missing image is computed in the same batch it has in a full run (its batch
companions are computed again and thrown away), so it comes out bit-identical to the one a full
run makes. Each image's seed is ``derive_seed(base_seed, prompt, index)``.
"""

from __future__ import annotations

import io
import re
from collections import defaultdict
from collections.abc import Callable, Container
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotations.interchange.item_import import items_add_files
from annotations.models import Item, ItemImage, Study, User
from annotations.selectors.stereotypes import stereotype_table_rows
from common.errors import ImportRefused, ValidationFailed, WorkbenchError
from common.files import CheckedImage, image_check
from common.jobs import job_enqueue, job_finish, job_heartbeat, job_requeue_stale, job_run, jobs_resume_stale
from common.planner_statistics import statistics_refresh
from generation.model_source import model_source_resolve
from generation.models import GenerationFailure, GenerationJob
from generation.pipelines import (
    ImageRequest,
    ModelSpec,
    derive_seed,
    generate_images,
    load_pipeline,
    model_provenance,
)
from generation.prompts.base import PromptSet
from generation.prompts.sets import PromptSetError, prompt_set_to_json, visage_pull_from_table

Progress = Callable[[GenerationJob], None]
GENERATION_TASK = "generation.tasks.generate_images_task"
_LABEL_RE = re.compile(r"[^A-Za-z0-9_.\-]+")


def model_spec_from_dict(data: dict[str, Any]) -> ModelSpec:
    """A validated ``ModelSpec``; unknown fields and bad values are refused with the reason."""
    known = set(ModelSpec.__dataclass_fields__)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValidationFailed(f"unknown model setting '{unknown[0]}'; allowed: {', '.join(sorted(known))}")
    try:
        return ModelSpec(**data)
    except (TypeError, ValueError) as exc:
        raise ValidationFailed(f"model settings: {exc}") from exc


def model_source_check(source: str) -> None:
    """Refuse, before a job is queued, a model name the worker would refuse: the one rule of
    ``generation/model_source.py`` as far as it can be judged on this machine (which may hold no
    models): the name's form, and a folder outside ``WORKBENCH_MODEL_DIRS``. The worker applies the
    same rule again before it loads anything (``generation_job_run``)."""
    model_source_resolve(source)


def model_label_for(spec: ModelSpec) -> str:
    base = Path(spec.source.rstrip("/")).name if "/" in spec.source else spec.source
    return (_LABEL_RE.sub("-", base).strip("-") or "model")[:120]


@transaction.atomic
def generation_job_create(
    *,
    study: Study,
    prompt_set: PromptSet,
    spec: ModelSpec,
    user: User | None,
    base_seed: int = 0,
    model_label: str | None = None,
    enqueue: bool = True,
) -> GenerationJob:
    """Create a job for ``prompt_set`` x ``spec`` and (``enqueue``) queue it on the gpu queue after commit.
    A queued job's model name must pass the workers' rule (``model_source_check``)."""
    if enqueue:
        model_source_check(spec.source)
    if study.protocol_obj.unit == "text":
        raise ValidationFailed("this study judges text items; generate images into an image study")
    if not prompt_set.prompts:
        raise ValidationFailed("the prompt set has no prompts")
    job = GenerationJob.objects.create(
        study=study,
        created_by=user,
        name=prompt_set.name[:200],
        paper=prompt_set.paper,
        parent_name=(prompt_set.parent or "")[:200],
        prompts=prompt_set_to_json(prompt_set),
        model_spec=asdict(spec),
        model_label=(model_label or model_label_for(spec))[:120],
        base_seed=base_seed,
        total_images=prompt_set.total_images,
    )
    if enqueue:
        job_enqueue(task_name=GENERATION_TASK, job_id=job.pk)  # CELERY_TASK_ROUTES: the gpu queue
    return job


def visage_pull_job_create(
    *,
    study: Study,
    spec: ModelSpec,
    user: User | None,
    seed: int = 0,
    images_per_prompt: int | None = None,
    limit: int | None = None,
) -> GenerationJob:
    """Queue the visage stereotypical-pull prompt set (default / stereotypical / non-stereotypical, made
    from the study's stereotype table, non-stereotypes drawn with ``seed``) as a generation job into
    the study: the findings page's button. The sets are built as ``manage.py generate STUDY --prompt-set
    visage-pull --prompts SEEGULL.csv`` builds them, but from the stored table: attributes marked not
    visual are left out and rows come sorted by identity and attribute, so the same seed may draw other
    non-stereotypes than from the file."""
    try:
        prompt_set = visage_pull_from_table(
            stereotype_table_rows(study), seed=seed, images_per_prompt=images_per_prompt, limit=limit
        )
    except PromptSetError as exc:
        raise ValidationFailed(str(exc), {"prompt_set": "invalid"}) from exc
    return generation_job_create(study=study, prompt_set=prompt_set, spec=spec, user=user, base_seed=seed)


def generation_job_cancel(*, job: GenerationJob) -> GenerationJob:
    """Ask a job to stop after its current batch (a pending job stops at once)."""
    GenerationJob.objects.filter(pk=job.pk).update(cancel_requested=True)
    GenerationJob.objects.filter(pk=job.pk, status=GenerationJob.Status.PENDING).update(
        status=GenerationJob.Status.CANCELLED, finished_at=timezone.now()
    )
    job.refresh_from_db()
    return job


@transaction.atomic
def generation_job_rerun(*, job: GenerationJob, enqueue: bool = True) -> GenerationJob:
    """Queue a finished, failed or cancelled job again; it fills in only what is missing. A stale
    running job (its worker lost: no heartbeat for ``WORKBENCH_JOB_STALE_SECONDS``) is taken over
    the same way and counted as resumed; a job that is queued, or running with a live worker, is
    refused."""
    reset = {"cancel_requested": False, "error": "", "finished_at": None}
    updated = (
        GenerationJob.objects.filter(pk=job.pk)
        .exclude(status__in=[GenerationJob.Status.PENDING, GenerationJob.Status.RUNNING])
        .update(status=GenerationJob.Status.PENDING, **reset)
    )
    if not updated and not job_requeue_stale(GenerationJob, job.pk, **reset):
        raise ValidationFailed("the job is already queued or running")
    if enqueue:
        job_enqueue(task_name=GENERATION_TASK, job_id=job.pk)
    job.refresh_from_db()
    return job


@dataclass(frozen=True)
class PlannedImage:
    external_id: str
    item_id: str  # the item it belongs to: itself, or its prompt's image set
    prompt_index: int
    image_index: int
    prompt: dict[str, Any]
    seed: int


def job_plan(job: GenerationJob, *, image_sets: bool = False) -> list[PlannedImage]:
    """Every image the job stands for, in prompt order. With ``image_sets`` (studies whose unit is
    an image set, e.g. ssi's 4 images per query) a prompt's images make one item."""
    plan = []
    for prompt_index, prompt in enumerate(job.prompts):
        prefix = f"{job.name}/{job.model_label}/s{job.base_seed}/p{prompt_index:04d}"
        for image_index in range(int(prompt.get("images_per_prompt", 1))):
            external_id = f"{prefix}/i{image_index:02d}"
            plan.append(
                PlannedImage(
                    external_id=external_id,
                    item_id=prefix if image_sets else external_id,
                    prompt_index=prompt_index,
                    image_index=image_index,
                    prompt=prompt,
                    seed=derive_seed(job.base_seed, prompt["text"], image_index),
                )
            )
    return plan


ENCODER_THREADS = 2  # PNG encoders running beside a GPU pipeline (see generation_job_run)


@dataclass(frozen=True)
class EncodedImage:
    data: bytes
    checked: CheckedImage


def encode_png(image: Any, name: str) -> EncodedImage:
    """A generated image as PNG bytes, put through the import's image check (in a worker thread)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    data = buffer.getvalue()
    return EncodedImage(data=data, checked=image_check(data, name=name))


class _InlineExecutor(Executor):
    """Runs each call at once, in the caller's thread (for a pipeline that computes on the CPU)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - handed to whoever reads the future, as a pool would
            future.set_exception(exc)
        return future


def _encoder_for(pipe: Any, threads: int | None) -> Executor:
    """``threads`` PNG encoders (``None``: two beside a pipeline that computes on a GPU, none beside
    one on the CPU, whose threads already use every core: there, extra threads only stall torch's
    parallel loops, measured 13% slower at batch 4 on 2 cores; docs/benchmarks.md)."""
    if threads is None:
        threads = 0 if getattr(getattr(pipe, "device", None), "type", "cpu") == "cpu" else ENCODER_THREADS
    if threads <= 0:
        return _InlineExecutor()
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="png-encoder")


def _file_name(item_id: str, index: int) -> str:
    return f"{item_id.replace('/', '_')}_{index:02d}.png"


def batch_requests(plan: list[PlannedImage], missing: Container[str]) -> list[ImageRequest]:
    """The job's whole plan as image requests, in plan order; those whose external id is not in
    ``missing`` are batch companions (``wanted=False``).

    ``generate_images`` cuts the list in fixed chunks of the batch size, so batch ``k`` of a job
    always holds plan entries ``k*B .. k*B+B-1``: a re-run that fills in a missing image computes it
    in the batch it had in the first run (and throws its companions' images away), so the image is
    bit-identical to the one first made, on any CPU (docs/generation.md, "Seeds")."""
    return [
        ImageRequest(prompt=p.prompt["text"], seed=p.seed, key=p.external_id, wanted=p.external_id in missing)
        for p in plan
    ]


# An item whose images are all made: its PNGs (encoding, or done) and the request of its last image.
ReadyItem = tuple[PlannedImage, dict[int, Future[EncodedImage]], ImageRequest]
EncodedItem = tuple[PlannedImage, dict[int, EncodedImage], ImageRequest]


class GenerationRun:
    """One run of a claimed job over its missing images, once its pipeline is loaded: the state
    the pipeline's callbacks share, and one method per callback (see ``generate_images``).

    On a GPU, PNG encoding and the image check run in worker threads (Pillow releases the GIL while
    it compresses), so a batch's images are encoded while the pipeline makes the next one: a
    512 x 512 PNG costs ~45 ms of CPU, as much as generating the image on a fast GPU. Complete items
    wait in ``ready`` and are stored in order, a batch's worth in one transaction."""

    def __init__(
        self,
        *,
        job: GenerationJob,
        spec: ModelSpec,
        pipe: Any,
        plan: list[PlannedImage],
        missing: list[PlannedImage],
        image_sets: bool,
        provenance: dict[str, Any],
        failed_before: set[str],
        encoder: Executor,
        token: str | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.job = job
        self.token = token  # the claim's: heartbeats and the finish count only while it holds the job
        self.spec = spec
        self.pipe = pipe
        self.plan = plan
        self.missing = missing
        self.image_sets = image_sets
        self.provenance = provenance
        self.failed_before = failed_before  # external ids that failed in an earlier run
        self.encoder = encoder
        self.progress = progress
        self.by_key = {p.external_id: p for p in missing}
        self.seeds_of: dict[str, dict[int, int]] = defaultdict(dict)  # item id -> image index -> seed
        for p in missing:
            self.seeds_of[p.item_id][p.image_index] = p.seed
        self.made: dict[str, dict[int, Future[EncodedImage]]] = {}  # item id -> index -> PNG, until complete
        self.ready: list[ReadyItem] = []  # complete, not stored

    def run(self) -> GenerationJob:
        """Generate, store and count; finish the job DONE, or CANCELLED when asked to stop."""
        requests = batch_requests(self.plan, self.by_key)
        try:
            report = generate_images(
                self.pipe,
                self.spec,
                requests,
                on_image=self.on_image,
                on_failure=self.on_failure,
                should_cancel=self.should_cancel,
                on_batch_end=self.on_batch_end,
            )
        finally:  # finished images are stored even when the run stops early
            try:
                self.store_ready(wait=True)
            finally:
                self.encoder.shutdown(wait=True, cancel_futures=True)
        status = GenerationJob.Status.CANCELLED if report.cancelled else GenerationJob.Status.DONE
        statistics_refresh(Item, ItemImage, rows=report.generated)  # items arrive a batch at a time
        job = job_finish(GenerationJob, self.job.pk, status=status, token=self.token)
        if self.progress is not None:
            self.progress(job)
        return job

    def on_image(self, request: ImageRequest, image: Any) -> None:
        """An image is made: encode it (in the background) and queue its item once complete."""
        planned = self.by_key[str(request.key)]
        name = _file_name(planned.item_id, planned.image_index)
        made = self.made.setdefault(planned.item_id, {})
        made[planned.image_index] = self.encoder.submit(encode_png, image, name)
        if planned.external_id in self.failed_before:  # a retry that worked: the old failure is gone
            GenerationFailure.objects.filter(job=self.job, external_id=planned.external_id).delete()
        if len(made) == len(self.seeds_of[planned.item_id]):
            self.ready.append((planned, self.made.pop(planned.item_id), request))

    def store_ready(self, *, wait: bool) -> None:
        """Store the complete items in order: all of them (``wait``), or those whose PNGs are done."""
        count = len(self.ready)
        if not wait:
            count = next(
                (
                    n
                    for n, (_p, futures, _r) in enumerate(self.ready)
                    if not all(future.done() for future in futures.values())
                ),
                len(self.ready),
            )
        if not count:
            return
        items = self.ready[:count]
        del self.ready[:count]
        encoded: list[EncodedItem] = []
        for planned, futures, request in items:
            try:
                encoded.append(
                    (planned, {index: future.result() for index, future in futures.items()}, request)
                )
            except Exception as exc:  # noqa: BLE001 - any encoding error is this image's failure
                self.on_failure(request, f"could not store the image: {getattr(exc, 'message', exc)}")
        if encoded:
            self.store(encoded)

    def on_batch_end(self, images: int) -> None:
        """After each pipeline call: the complete items encoded by now (mostly the previous batch's)
        in one transaction, the counter once."""
        self.store_ready(wait=False)
        if images:
            GenerationJob.objects.filter(pk=self.job.pk).update(generated=F("generated") + images)
        if self.progress is not None:
            self.progress(GenerationJob.objects.get(pk=self.job.pk))

    def record_for(
        self, planned: PlannedImage, images: dict[int, EncodedImage]
    ) -> tuple[dict[str, Any], dict[str, EncodedImage]]:
        """The import record of a complete item, and its files by name."""
        job = self.job
        names = {index: _file_name(planned.item_id, index) for index in sorted(images)}
        seeds = self.seeds_of[planned.item_id]
        record = {
            "external_id": planned.item_id,
            "files": list(names.values()),
            "prompt": planned.prompt["text"],
            "model": job.model_label,
            "condition": planned.prompt.get("condition", "base"),
            "seed": seeds[min(seeds)],
            "settings": {
                **self.provenance,
                "job": job.pk,
                "prompt_set": job.name,
                "paper": job.paper,
                "base_seed": job.base_seed,
                "prompt_index": planned.prompt_index,
                "image_index": planned.image_index if not self.image_sets else None,
                "seeds": [seeds[index] for index in sorted(seeds)],
            },
            "metadata": {**planned.prompt.get("metadata", {}), "prompt_set": job.name},
        }
        return record, {names[index]: data for index, data in images.items()}

    def store(self, items: list[EncodedItem]) -> None:
        """Import complete items in one go; when the import refuses, one by one, so only the item
        it refuses fails."""
        records = [self.record_for(planned, images) for planned, images, _request in items]
        files = {name: image for _record, item_files in records for name, image in item_files.items()}
        if len(files) < sum(len(item_files) for _record, item_files in records):  # two items, one file name
            for item in items:
                self.store([item])
            return
        try:
            items_add_files(
                study=self.job.study,
                records=[record for record, _files in records],
                files={name: image.data for name, image in files.items()},
                checked={name: image.checked for name, image in files.items()},
            )
        except ImportRefused as exc:
            if len(items) > 1:  # find the one the import refuses; store the others
                for item in items:
                    self.store([item])
                return
            self.on_failure(items[0][2], f"could not store the image: {exc.message}")

    def on_failure(self, request: ImageRequest, reason: str) -> None:
        """Record (or update) the image's failure and count it."""
        planned = self.by_key[str(request.key)]
        GenerationFailure.objects.update_or_create(
            job=self.job,
            external_id=planned.external_id,
            defaults={
                "prompt": planned.prompt["text"],
                "condition": planned.prompt.get("condition", "base"),
                "seed": planned.seed,
                "reason": reason[:4000],
            },
        )
        GenerationJob.objects.filter(pk=self.job.pk).update(failed=F("failed") + 1)

    def should_cancel(self) -> bool:
        """Before every batch: stamp the heartbeat and stop if cancellation was requested or the job
        was taken over by another run (one query)."""
        return job_heartbeat(GenerationJob, self.job.pk, self.token)


def generation_job_run(
    *,
    job_id: int,
    progress: Progress | None = None,
    device: str | None = None,
    encoder_threads: int | None = None,
    any_folder: bool = False,
) -> GenerationJob:
    """Run a pending job, or take over a stale one (the worker's side). The model name is resolved
    first by the one rule (``generation/model_source.py``): a folder outside ``WORKBENCH_MODEL_DIRS``
    (unless ``any_folder``: the command line's own run) or one that is no diffusers pipeline fails
    the job with the reason before anything loads. Claims it with a
    compare-and-set, so two workers never run one job; makes only the missing images (so a job
    resumed after its worker died goes on where it stopped); records each failure; stops between
    batches when cancelled or taken over. Terminal problems (bad settings, a model that cannot
    load) mark the job FAILED with the reason. While the run lasts a thread stamps the heartbeat
    (``job_keepalive``: a model that loads for minutes, or a slow batch on a CPU, never looks like a
    lost worker); the stamp before every batch also asks whether to stop. ``encoder_threads``: PNG
    encoder threads beside the pipeline (default: two on a GPU, none on the CPU; see
    ``_encoder_for``)."""
    return job_run(
        GenerationJob,
        job_id,
        lambda job, token: _generation_job_run_claimed(
            job,
            token,
            progress=progress,
            device=device,
            encoder_threads=encoder_threads,
            any_folder=any_folder,
        ),
    )


def _generation_job_run_claimed(
    job: GenerationJob,
    token: str,
    *,
    progress: Progress | None,
    device: str | None,
    encoder_threads: int | None,
    any_folder: bool,
) -> GenerationJob:
    """The run of a claimed job (see ``generation_job_run``)."""
    try:
        spec = model_spec_from_dict(job.model_spec)
        model_source_resolve(spec.source, any_folder=any_folder, on_worker=True)
    except WorkbenchError as exc:
        return job_finish(
            GenerationJob, job.pk, status=GenerationJob.Status.FAILED, error=exc.message, token=token
        )
    image_sets = job.study.protocol_obj.unit == "image_set"
    plan = job_plan(job, image_sets=image_sets)
    existing = set(
        Item.objects.filter(study=job.study, external_id__in={p.item_id for p in plan}).values_list(
            "external_id", flat=True
        )
    )
    missing = [p for p in plan if p.item_id not in existing]
    GenerationJob.objects.filter(pk=job.pk).update(
        total_images=len(plan), skipped=len(plan) - len(missing), generated=0, failed=0
    )
    job.refresh_from_db()
    if progress is not None:
        progress(job)
    if not missing:
        return job_finish(GenerationJob, job.pk, status=GenerationJob.Status.DONE, token=token)
    try:
        pipe = load_pipeline(spec, device)
    except (OSError, ValueError, RuntimeError, ImportError) as exc:
        return job_finish(
            GenerationJob,
            job.pk,
            status=GenerationJob.Status.FAILED,
            error=f"cannot load the model {spec.source!r}: {exc}",
            token=token,
        )
    provenance = model_provenance(spec, pipe)
    GenerationJob.objects.filter(pk=job.pk).update(provenance=provenance)
    failed_before = set(GenerationFailure.objects.filter(job=job).values_list("external_id", flat=True))
    return GenerationRun(
        job=job,
        spec=spec,
        pipe=pipe,
        plan=plan,
        missing=missing,
        image_sets=image_sets,
        provenance=provenance,
        failed_before=failed_before,
        encoder=_encoder_for(pipe, encoder_threads),
        token=token,
        progress=progress,
    ).run()


def generation_jobs_resume_stale() -> list[int]:
    """Queue again every generation job whose worker was lost (see ``common.jobs.jobs_resume_stale``);
    the run makes only the images still missing."""
    return jobs_resume_stale(GenerationJob, task_name=GENERATION_TASK)
