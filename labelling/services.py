"""Machine labellers in the workbench: registering them, and running them over a study's items.

A labeller is a machine ``Annotator`` whose ``config`` holds its ``kind`` (vlm, clip, blip_vqa,
captioner, colour, faces, ocr, or a dotted path) and settings. Its version is, unless given, a
digest of kind and config, so a change of prompt, model or settings is a new version and old
answers keep pointing at the labeller that gave them.

A labelling job asks the labeller every question of the protocol that applies to each item (options
resolved for the item, prompts filled in), validates every answer exactly as a human answer is
validated (``protocols.answers.clean_answer``), stores valid ones as annotations
(source ``labeller``), and stores everything else as a ``LabelAttempt`` with the raw output and the
reason, re-asking failed questions with backoff up to ``max_attempts``. Nothing is coerced or
dropped silently. Items this labeller has already fully answered are skipped, and VLM answers are
cached by (image hashes, prompt, model, settings), so a re-run costs nothing for what is answered.
Within an item only the questions this labeller has not answered are asked, so a job resumed after
its worker died (``common.jobs``: a stale job is taken over) stores no answer twice.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F
from django.db.models.fields.json import KeyTransform
from django.utils import timezone
from PIL import Image

from annotations.models import Annotation, Annotator, Item, ItemFeature, Study, User
from annotations.selectors.features import embeddings_by_item
from annotations.services.annotation_writes import AnswerToSave, annotations_save
from annotations.services.stored_files import item_file_open
from common.chat_client import api_key_env_check
from common.checked_input import InputRefused, MalformedJSON, json_value_check, text_check, yaml_loads
from common.errors import ValidationFailed
from common.jobs import (
    Heartbeat,
    JobStopped,
    job_enqueue,
    job_finish,
    job_heartbeat,
    job_run,
    jobs_resume_stale,
)
from common.outbound import outbound_url_check
from common.redaction import MASK, unredact
from labelling.cache import CachedAnswer
from labelling.labellers.base import LabelItem, Labeller, LabellerError, LabelOutcome
from labelling.labellers.registry import LABELLER_CLASSES, get_labeller_class
from labelling.models import LabelAttempt, LabelCacheEntry, LabellingJob
from protocols.answers import AnswerError, ItemContext, clean_answer
from protocols.schema import Question

Progress = Callable[[LabellingJob], None]
DEFAULT_BATCH = 8
LOCAL_MODEL_KINDS = ("clip", "blip_vqa", "captioner")
LABELLING_TASK = "labelling.tasks.label_items_task"
METADATA_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class DbLabelCache:
    """The label cache in the database (``LabelCacheEntry``), shared by every worker.

    Labellers call it from their own threads; new entries are kept in memory and written by the
    job's thread (:meth:`flush`, after each batch), so threads never hold database writes."""

    def __init__(self) -> None:
        self._pending: dict[str, CachedAnswer] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> CachedAnswer | None:
        with self._lock:
            if key in self._pending:
                return self._pending[key]
        entry = LabelCacheEntry.objects.filter(key=key).first()
        return None if entry is None else CachedAnswer(raw=entry.raw, usage=entry.usage, model=entry.model)

    def set(self, key: str, answer: CachedAnswer) -> None:
        with self._lock:
            self._pending[key] = answer

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for key, answer in pending.items():
            LabelCacheEntry.objects.update_or_create(
                key=key, defaults={"raw": answer.raw, "usage": dict(answer.usage), "model": answer.model}
            )


def config_version(kind: str, config: dict[str, Any]) -> str:
    payload = json.dumps({"kind": kind, "config": config}, sort_keys=True, default=str)
    return "c" + hashlib.sha256(payload.encode()).hexdigest()[:10]


@transaction.atomic
def labeller_register(
    *, name: str, kind: str, config: dict[str, Any], version: str | None = None
) -> Annotator:
    """Register (or find) the machine annotator ``name`` at ``version`` (default: a config digest).
    The same name and version with a different configuration is refused: that is a new version."""
    name = text_check(name.strip(), "name")
    if not name or len(name) > 150:
        raise ValidationFailed("a labeller needs a name of 1 to 150 characters")
    if not isinstance(config, dict):
        raise ValidationFailed("the labeller configuration must be a JSON object")
    if version is not None:
        text_check(version, "version")
    try:  # null characters, lone surrogates, NaN: what PostgreSQL's jsonb refuses (a 500 before)
        json_value_check(config, where="config")
    except InputRefused as exc:
        raise ValidationFailed(exc.message, {"config": "invalid"}) from exc
    try:
        get_labeller_class(kind)
    except LabellerError as exc:
        raise ValidationFailed(str(exc)) from exc
    labeller_config_check(config)
    stored = {**config, "kind": kind}
    version = version or config_version(kind, config)
    annotator, created = Annotator.objects.get_or_create(
        kind=Annotator.Kind.MACHINE,
        study=None,
        name=name,
        version=version,
        defaults={"config": stored},
    )
    if not created and annotator.config != stored:
        raise ValidationFailed(
            f"labeller {name} {version} exists with another configuration; give a new version"
        )
    return annotator


def labeller_config_check(config: dict[str, Any]) -> None:
    """Where a labeller may send requests and which key it may read (docs/security.md): its
    ``base_url`` passes the outbound policy (``common.outbound``) and its ``api_key_env`` names a
    variable of the allowed prefix. Checked on every save; the chat client checks both again before
    it sends anything."""
    base_url = config.get("base_url")
    if base_url is not None:
        if not isinstance(base_url, str):
            raise ValidationFailed("base_url must be a URL", {"config": "base_url"})
        try:
            outbound_url_check(base_url)
        except ValidationFailed as exc:
            raise ValidationFailed(f"base_url: {exc.message}", {"config": "base_url"}) from exc
    if config.get("api_key_env") is not None:
        api_key_env_check(config["api_key_env"])


def labeller_config_edited(*, original: Annotator, kind: str, edited: dict[str, Any]) -> dict[str, Any]:
    """A new configuration edited from ``original``'s masked one: values left masked get their
    stored secret back (``common.redaction.unredact``), unless the edit changes where requests go
    (``base_url``) or the labeller's kind: a secret is never re-attached to another target, so each
    one still masked is refused by name and must be typed again (docs/security.md)."""
    before = {key: value for key, value in original.config.items() if key != "kind"}
    restored = unredact(edited, before)
    retargeted = kind != original.config.get("kind") or restored.get("base_url") != before.get("base_url")
    if retargeted:
        kept = _restored_paths(edited, restored, "")
        if kept:
            raise ValidationFailed(
                "the kind or base_url changed, so stored secrets are not kept: type again "
                f"{', '.join(kept)} (or remove them)",
                {"config": "secret"},
            )
    if MASK in json.dumps(restored, ensure_ascii=False, default=str):
        raise ValidationFailed(
            f"a value still holds the mask {MASK} (e.g. a password in base_url for a new host): "
            "type it again",
            {"config": "secret"},
        )
    return dict(restored)


def _restored_paths(edited: Any, restored: Any, where: str) -> list[str]:
    """The places where ``unredact`` gave a masked value its stored secret back."""
    if edited is restored or edited == restored:
        return []
    if isinstance(edited, dict) and isinstance(restored, dict):
        return [
            path
            for key in edited
            for path in _restored_paths(
                edited[key], restored.get(key), f"{where}.{key}" if where else str(key)
            )
        ]
    if isinstance(edited, list) and isinstance(restored, list) and len(edited) == len(restored):
        return [
            path
            for number, (e, r) in enumerate(zip(edited, restored, strict=True))
            for path in _restored_paths(e, r, f"{where}[{number}]")
        ]
    return [where or "the configuration"]


def labeller_config_from_text(text: str) -> dict[str, Any]:
    """A labeller's settings written as YAML or JSON (what ``register_labeller --config`` reads):
    a mapping of settings, or nothing."""
    if not text.strip():
        return {}
    try:
        loaded = yaml_loads(text)  # nesting and integers bounded, values a database can store
    except MalformedJSON as exc:
        raise ValidationFailed(
            f"the configuration is not YAML or JSON: {exc.message}", {"config": "invalid"}
        ) from exc
    except InputRefused as exc:
        raise ValidationFailed(f"the configuration: {exc.message}", {"config": "invalid"}) from exc
    if not isinstance(loaded, dict):
        raise ValidationFailed("the configuration must hold a mapping of settings", {"config": "invalid"})
    return loaded


def labeller_set_disabled(*, annotator: Annotator, disabled: bool) -> Annotator:
    """Disable a machine labeller (offered for no new job; its answers and running jobs stay) or
    enable it again."""
    if annotator.kind != Annotator.Kind.MACHINE:
        raise ValidationFailed(f"{annotator} is not a machine labeller")
    annotator.disabled = disabled
    annotator.save(update_fields=["disabled"])
    return annotator


def labeller_build(annotator: Annotator) -> Labeller:
    """The labeller object for a registered machine annotator (VLMs get the database cache)."""
    config = dict(annotator.config)
    kind = config.pop("kind", None)
    if not kind:
        raise ValidationFailed(f"{annotator} has no labeller kind in its configuration")
    for key in ("max_attempts", "retry_backoff_s", "job_batch_size", "store_features"):
        config.pop(key, None)
    try:
        labeller_config_check(
            config
        )  # again on the worker: a row saved before the rules, or the settings changed
    except ValidationFailed as exc:
        raise ValidationFailed(f"cannot run labeller {annotator}: {exc.message}") from exc
    try:
        cls = get_labeller_class(kind)
        if kind == "vlm" or LABELLER_CLASSES.get("vlm") == kind:
            return cls(name=annotator.name, version=annotator.version, config=config, cache=DbLabelCache())  # type: ignore[call-arg]
        return cls(name=annotator.name, version=annotator.version, config=config)
    except (LabellerError, OSError, ValueError) as exc:
        raise ValidationFailed(f"cannot build labeller {annotator}: {exc}") from exc


def question_for_labeller(question: Question, item: Item) -> dict[str, Any]:
    """The question as labellers take it: options resolved and the prompt filled for this item."""
    return {
        "key": question.key,
        "kind": question.kind,
        "prompt": question.render_prompt(text=item.text or None, metadata=item.metadata),
        "options": [asdict(option) for option in question.options_for(item.metadata)],
        "unsure": asdict(question.unsure) if question.unsure else None,
        "none_option": asdict(question.none_option) if question.none_option else None,
        "reason": question.reason,
        "normaliser": question.normaliser,
        "linked_question": question.linked_question,
    }


@transaction.atomic
def labelling_job_create(
    *,
    study: Study,
    annotator: Annotator,
    user: User | None,
    sample_size: int | None = None,
    seed: int = 0,
    metadata_filter: dict[str, str] | None = None,
    enqueue: bool = True,
) -> LabellingJob:
    """Queue a labeller over every item of ``study`` or a seeded random sample of ``sample_size``;
    ``metadata_filter`` narrows to the items whose metadata holds those values (e.g. the items one
    prompt set made: ``{"prompt_set": NAME}``); each key is one literal metadata key, never a lookup
    (``long__regex`` is the key named so: docs/security.md)."""
    if annotator.kind != Annotator.Kind.MACHINE:
        raise ValidationFailed(f"{annotator} is not a machine labeller")
    if annotator.disabled:
        raise ValidationFailed(f"{annotator} is disabled; an admin enables it on the labellers page")
    if sample_size is not None and sample_size < 1:
        raise ValidationFailed("the sample size must be at least 1")
    metadata_filter = dict(metadata_filter or {})
    for key, value in metadata_filter.items():
        if not METADATA_KEY_RE.match(str(key)) or not isinstance(value, str) or len(value) > 500:
            raise ValidationFailed(
                "a metadata filter maps metadata keys (letters, digits, _) to text values",
                {"metadata_filter": "invalid"},
            )
    job = LabellingJob.objects.create(
        study=study,
        annotator=annotator,
        created_by=user,
        sample_size=sample_size,
        seed=seed,
        metadata_filter=metadata_filter,
    )
    if enqueue:
        job_enqueue(task_name=LABELLING_TASK, job_id=job.pk, queue=labelling_queue(job))
    return job


def labelling_queue(job: LabellingJob) -> str:
    """Local models want a GPU worker; API labellers and rules run anywhere."""
    return "gpu" if job.annotator.config.get("kind") in LOCAL_MODEL_KINDS else "celery"


def labelling_jobs_resume_stale() -> list[int]:
    """Queue again every labelling job whose worker was lost (``common.jobs.jobs_resume_stale``);
    the run asks only the questions still unanswered."""
    return jobs_resume_stale(LabellingJob, task_name=LABELLING_TASK, queue_for=labelling_queue)


def labelling_job_cancel(*, job: LabellingJob) -> LabellingJob:
    LabellingJob.objects.filter(pk=job.pk).update(cancel_requested=True)
    LabellingJob.objects.filter(pk=job.pk, status=LabellingJob.Status.PENDING).update(
        status=LabellingJob.Status.CANCELLED, finished_at=timezone.now()
    )
    job.refresh_from_db()
    return job


def job_items(job: LabellingJob) -> list[int]:
    """The job's item ids: all (or those its metadata filter keeps), or a sample drawn with
    ``random.Random(seed)`` from the sorted ids."""
    items = Item.objects.filter(study=job.study)
    for number, (key, value) in enumerate(sorted((job.metadata_filter or {}).items())):
        # The key is one literal JSON key (``KeyTransform``), never split on ``__`` into lookups:
        # ``{"long__regex": ...}`` matches items whose metadata has a key named "long__regex".
        alias = f"metadata_filter_{number}"
        items = items.alias(**{alias: KeyTransform(str(key), "metadata")}).filter(**{alias: value})
    ids = list(items.order_by("id").values_list("id", flat=True))
    if job.sample_size is not None and job.sample_size < len(ids):
        ids = sorted(random.Random(job.seed).sample(ids, job.sample_size))
    return ids


def _label_item(item: Item) -> tuple[LabelItem | None, str | None]:
    images: list[Image.Image] = []
    hashes: list[str] = []
    for image in item.images.all():
        if not image.file:
            continue
        with item_file_open(image) as handle:
            images.append(Image.open(handle).convert("RGB"))
        hashes.append(image.sha256)
    if item.kind != Item.Kind.TEXT and not images:
        return None, "the item has no image file (a reference item): nothing to look at"
    return LabelItem(
        item_id=item.pk,
        images=images,
        text=item.text or None,
        metadata=dict(item.metadata),
        image_sha256=hashes,
    ), None


def labelling_job_run(
    *, job_id: int, progress: Progress | None = None, sleep: Callable[[float], None] = time.sleep
) -> LabellingJob:
    """Run a pending labelling job, or take over a stale one (claimed compare-and-set); see the
    module docstring. While the run lasts a thread stamps the heartbeat (``job_keepalive``: a local
    model that loads, or a slow API, never looks like a lost worker); the stamps before every
    batch and between retries also ask whether to stop (cancelled, or taken over)."""
    return job_run(
        LabellingJob,
        job_id,
        lambda job, token: _labelling_job_run_claimed(job, token, progress=progress, sleep=sleep),
        related=("study", "annotator"),
    )


def _labelling_job_run_claimed(
    job: LabellingJob, token: str, *, progress: Progress | None, sleep: Callable[[float], None]
) -> LabellingJob:
    """The run of a claimed job (see ``labelling_job_run``)."""
    try:
        labeller = labeller_build(job.annotator)
    except ValidationFailed as exc:
        return job_finish(
            LabellingJob, job.pk, status=LabellingJob.Status.FAILED, error=exc.message, token=token
        )
    config = job.annotator.config
    max_attempts = int(config.get("max_attempts", 3 if config.get("kind") == "vlm" else 1))
    backoff = float(config.get("retry_backoff_s", 2.0))
    batch_size = int(config.get("job_batch_size", DEFAULT_BATCH))
    protocol = job.study.protocol_obj
    ids = job_items(job)
    # Progress counts this run's walk over the items (a resumed run walks them all again, skipping
    # what is answered); answers, failures, cache hits and cost add up over every run of the job.
    LabellingJob.objects.filter(pk=job.pk).update(total_items=len(ids), done_items=0, skipped=0)
    answered_before = set(
        Annotation.objects.filter(annotator=job.annotator, item_id__in=ids).values_list(
            "item_id", "question_key"
        )
    )
    beat = Heartbeat(LabellingJob, job.pk, token)
    try:
        for start in range(0, len(ids), batch_size):
            if job_heartbeat(LabellingJob, job.pk, token):  # stamps; True: cancelled or taken over
                return job_finish(LabellingJob, job.pk, status=LabellingJob.Status.CANCELLED, token=token)
            items = list(
                Item.objects.filter(pk__in=ids[start : start + batch_size])
                .prefetch_related("images")
                .order_by("id")
            )
            _label_batch(job, labeller, protocol, items, answered_before, max_attempts, backoff, sleep, beat)
            cache = getattr(labeller, "cache", None)
            if isinstance(cache, DbLabelCache):
                cache.flush()
            if progress is not None:
                progress(LabellingJob.objects.get(pk=job.pk))
    except JobStopped:
        return job_finish(LabellingJob, job.pk, status=LabellingJob.Status.CANCELLED, token=token)
    finally:
        close = getattr(labeller, "close", None)
        if callable(close):
            close()
    return job_finish(LabellingJob, job.pk, status=LabellingJob.Status.DONE, token=token)


def _label_batch(
    job: LabellingJob,
    labeller: Labeller,
    protocol: Any,
    items: Sequence[Item],
    answered_before: set[tuple[int, str]],
    max_attempts: int,
    backoff: float,
    sleep: Callable[[float], None],
    beat: Callable[[], None] = lambda: None,
) -> None:
    # Items that need the same resolved questions go to the labeller together (batched models).
    groups: dict[str, tuple[list[Item], list[dict[str, Any]]]] = {}
    for item in items:
        questions = [
            q
            for q in protocol.questions_for(item.metadata)
            if labeller.supports(question_for_labeller(q, item))
        ]
        unanswered = [q for q in questions if (item.pk, q.key) not in answered_before]
        if questions and not unanswered:
            LabellingJob.objects.filter(pk=job.pk).update(
                skipped=F("skipped") + 1, done_items=F("done_items") + 1
            )
            continue
        resolved = [question_for_labeller(q, item) for q in unanswered]
        key = json.dumps(resolved, sort_keys=True)
        groups.setdefault(key, ([], resolved))[0].append(item)
    for group_items, resolved in groups.values():
        beat()
        label_items: list[LabelItem] = []
        by_id: dict[int, Item] = {}
        for item in group_items:
            label_item, problem = _label_item(item)
            if problem is not None:
                for question in resolved:
                    LabelAttempt.objects.create(
                        job=job, item=item, question_key=question["key"], error=problem
                    )
                LabellingJob.objects.filter(pk=job.pk).update(
                    failed=F("failed") + len(resolved), done_items=F("done_items") + 1
                )
                continue
            assert label_item is not None  # _label_item gives an item or a problem
            label_items.append(label_item)
            by_id[item.pk] = item
        if not label_items:
            continue
        retry: dict[int, list[dict[str, Any]]] = {}
        for item_id, item_outcomes in _by_item(labeller.label(label_items, resolved)).items():
            failed_keys = _store(job, by_id[item_id], protocol, item_outcomes, 1, final=max_attempts == 1)
            retry[item_id] = [q for q in resolved if q["key"] in failed_keys]
        for attempt in range(2, max_attempts + 1):
            retry = {item_id: questions for item_id, questions in retry.items() if questions}
            if not retry:
                break
            sleep(min(backoff * 2 ** (attempt - 2), 60.0))
            beat()
            for label_item in label_items:
                retry_questions = retry.get(label_item.item_id)
                if not retry_questions:
                    continue
                failed_keys = _store(
                    job,
                    by_id[label_item.item_id],
                    protocol,
                    labeller.label([label_item], retry_questions),
                    attempt,
                    final=attempt == max_attempts,
                )
                retry[label_item.item_id] = [q for q in retry_questions if q["key"] in failed_keys]
        _store_features(job, labeller, label_items)
        LabellingJob.objects.filter(pk=job.pk).update(done_items=F("done_items") + len(label_items))


def _by_item(outcomes: Sequence[LabelOutcome]) -> dict[Any, list[LabelOutcome]]:
    grouped: dict[Any, list[LabelOutcome]] = {}
    for outcome in outcomes:
        grouped.setdefault(outcome.item_id, []).append(outcome)
    return grouped


def _stored_value(item: Item, annotator: Annotator, question_key: str) -> Any:
    """The labeller's stored answer to ``question_key`` on ``item``, or None."""
    stored = Annotation.objects.filter(item=item, annotator=annotator, question_key=question_key).first()
    return None if stored is None else stored.value


def _store(
    job: LabellingJob,
    item: Item,
    protocol: Any,
    outcomes: Sequence[LabelOutcome],
    attempt: int,
    *,
    final: bool,
) -> set[str]:
    """Validate and store one item's outcomes; returns the keys that failed (to re-ask)."""
    context = ItemContext(
        metadata=item.metadata,
        image_sizes=[
            (image.width, image.height) if image.width and image.height else None
            for image in item.images.all()
        ],
    )
    values = {outcome.question_key: outcome.value for outcome in outcomes if outcome.ok}
    failed: set[str] = set()
    answered = cached = 0
    cost = 0.0
    # Boxes after the multi questions they are linked to.
    for outcome in sorted(
        outcomes,
        key=lambda o: (
            protocol.has_question(o.question_key) and protocol.question(o.question_key).kind == "boxes"
        ),
    ):
        cost += outcome.cost_usd or 0.0
        question = (
            protocol.question(outcome.question_key) if protocol.has_question(outcome.question_key) else None
        )
        error = outcome.error
        answer = None
        if error is None and question is None:
            error = f"'{outcome.question_key}' is not a question of this protocol"
        if error is None and question is not None:
            if question.show_if is not None:
                parent = values.get(question.show_if["question"])
                if parent is None:  # answered in an earlier run (a resumed job asks only the rest)
                    parent = _stored_value(item, job.annotator, question.show_if["question"])
                if parent is None or str(parent) not in question.show_if["in"]:
                    LabelAttempt.objects.create(
                        job=job,
                        item=item,
                        question_key=outcome.question_key,
                        attempt=attempt,
                        raw=outcome.raw,
                        error=f"not asked: '{question.show_if['question']}' is not one of "
                        f"{', '.join(question.show_if['in'])}",
                        latency_s=outcome.latency_s,
                    )
                    continue
            selected = None
            if question.kind == "boxes" and question.linked_question:
                selected = values.get(question.linked_question)
                if selected is None:
                    selected = _stored_value(item, job.annotator, question.linked_question)
                    selected = [] if selected is None else selected
            try:
                answer = clean_answer(
                    question,
                    outcome.value,
                    context=context,
                    protocol=protocol,
                    reason=outcome.reason or "",
                    selected=selected,
                )
            except AnswerError as exc:
                error = f"invalid answer: {exc.message}"
        if error is not None or answer is None:
            LabelAttempt.objects.create(
                job=job,
                item=item,
                question_key=outcome.question_key,
                attempt=attempt,
                raw=outcome.raw[:20000],
                error=error or "no answer",
                latency_s=outcome.latency_s,
            )
            failed.add(outcome.question_key)
            values.pop(outcome.question_key, None)
            continue
        annotations_save(
            study_id=item.study_id,
            answers=[
                AnswerToSave(
                    item_id=item.pk,
                    annotator=job.annotator,
                    answer=answer,
                    time_spent_ms=int(outcome.latency_s * 1000),
                )
            ],
            source=Annotation.Source.LABELLER,
        )
        answered += 1
        cached += int(outcome.cached)
    LabellingJob.objects.filter(pk=job.pk).update(
        answered=F("answered") + answered,
        cached=F("cached") + cached,
        cost_usd=F("cost_usd") + cost,
        failed=F("failed") + (len(failed) if final else 0),
    )
    return failed


def _store_features(job: LabellingJob, labeller: Labeller, items: Sequence[LabelItem]) -> None:
    """CLIP embeddings (stereotypical pull) and captions (salience), when the labeller makes them."""
    if job.annotator.config.get("store_features") is False:
        return
    with_images = [item for item in items if item.images]
    if not with_images:
        return
    embed = getattr(labeller, "embed_images", None)
    if callable(embed):
        for item in with_images:
            vectors = np.asarray(embed(item.images), dtype="<f4")
            ItemFeature.objects.update_or_create(
                item_id=item.item_id,
                annotator=job.annotator,
                kind=ItemFeature.Kind.EMBEDDING,
                defaults={"vector": vectors.tobytes(), "data": {"shape": list(vectors.shape)}},
            )
    caption = getattr(labeller, "caption_images", None)
    if callable(caption):
        for item in with_images:
            ItemFeature.objects.update_or_create(
                item_id=item.item_id,
                annotator=job.annotator,
                kind=ItemFeature.Kind.CAPTIONS,
                defaults={"data": {"captions": caption(item.images)}},
            )


def item_embeddings(*, study: Study, annotator: Annotator) -> dict[int, np.ndarray]:
    """Stored embeddings by item id (rows: the item's images), read by ``annotations.selectors.features``."""
    return embeddings_by_item(study, annotator.pk)
