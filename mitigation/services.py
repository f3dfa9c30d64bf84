"""InterMit loops: create one, label its initial images, start a step, advance a step (every write).

A step is ordinary jobs, so it inherits their lifecycle (claim, heartbeat, cancel, re-run, and the
resumption of a job whose worker died): ``mitigation_step_start`` makes the mitigation prompt set of
the axes mitigated so far plus the recommended one (``biasconnect_mitigation_set``, paper A.7, with
the counterfactuals of the other axes the study labels, so the next IS matrix can be measured) and
queues it as a generation job. ``mitigation_step_advance`` moves the step on from what its jobs have
done, and can be called any number of times (it is idempotent, under a row lock): once the images
exist it queues the loop's labeller over exactly those items (a labelling job narrowed to the step's
prompt set) or, without a labeller, waits for people's labels; once they are labelled it measures tau
and w_bar of the new images and records the step. ``mitigation.tasks`` calls it when a step's
generation or labelling task finishes; pages, the API and the command call it on request.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotations.models import Annotator, Study, User
from common.checked_input import MAX_ID, MIN_BIG_INT
from common.errors import Conflict, ValidationFailed
from common.jobs import job_enqueue
from generation.models import GenerationJob
from generation.pipelines import ModelSpec
from generation.prompts.biasconnect import biasconnect_mitigation_set
from generation.services import generation_job_create, model_label_for, model_spec_from_dict
from labelling.models import LabellingJob
from labelling.services import labelling_job_create
from mitigation.models import MitigationLoop, MitigationStep
from mitigation.selectors import InterMitParams, loop_state, mitigable_axes

ADVANCE_TASK = "mitigation.tasks.advance_step_task"
# Step i generates with base_seed + i, a 64-bit seed: room for far more steps than a loop has axes.
MIN_BASE_SEED = MIN_BIG_INT
MAX_BASE_SEED = MAX_ID - 10_000
_SLUG = re.compile(r"[^A-Za-z0-9_.\-]+")


@transaction.atomic
def mitigation_loop_create(
    *,
    study: Study,
    params: InterMitParams,
    spec: ModelSpec,
    user: User | None,
    annotator: Annotator | None = None,
    images_per_step: int = 48,
    base_seed: int = 0,
    model_label: str | None = None,
) -> MitigationLoop:
    """Record a researcher's InterMit choice (``params``, validated by ``intermit_params_parse``), the
    model each step generates with and who labels the steps (a machine labeller, or people)."""
    if study.protocol_obj.unit != "image":
        raise ValidationFailed("InterMit generates images: the study must judge single images")
    if annotator is not None and annotator.kind != Annotator.Kind.MACHINE:
        raise ValidationFailed(f"{annotator} is not a machine labeller", {"labeller": "not a machine"})
    if not 1 <= images_per_step <= 10_000:
        raise ValidationFailed("images per step must be between 1 and 10000", {"images_per_step": "range"})
    if not MIN_BASE_SEED <= base_seed <= MAX_BASE_SEED:
        raise ValidationFailed(
            f"base_seed must be a whole number from {MIN_BASE_SEED} to {MAX_BASE_SEED} (64-bit, with room "
            "for one more per step)",
            {"base_seed": "range"},
        )
    return MitigationLoop.objects.create(
        study=study,
        group=params.group,
        axes=params.axes,
        weights=params.weights,
        epsilon=params.epsilon,
        targets=params.targets,
        annotator=annotator,
        model_spec=model_spec_to_dict(spec),
        model_label=(model_label or model_label_for(spec))[:120],
        images_per_step=images_per_step,
        base_seed=base_seed,
        created_by=user,
    )


def model_spec_to_dict(spec: ModelSpec) -> dict[str, Any]:
    return asdict(spec)


def _initial_filter(loop: MitigationLoop) -> dict[str, str]:
    """The metadata filter that selects the loop's initial images (by occupation or prompt group)."""
    items = loop.study.items.filter(control_kind="")
    if items.filter(metadata__occupation=loop.group).exists():
        return {"occupation": loop.group}
    if items.filter(metadata__prompt_group=loop.group).exists():
        return {"prompt_group": loop.group}
    return {}


@transaction.atomic
def mitigation_loop_label_initial(
    *, loop: MitigationLoop, user: User | None, enqueue: bool = True
) -> LabellingJob:
    """Queue the loop's labeller over the initial images of its group (the first tau needs their labels)."""
    loop = MitigationLoop.objects.select_for_update(of=("self",)).get(pk=loop.pk)
    if loop.annotator is None:
        raise ValidationFailed("this loop is labelled by people: assign the study's items to annotators")
    current = loop.initial_labelling_job
    if current is not None and current.is_active:
        raise Conflict(f"labelling job {current.pk} is already labelling the initial images")
    job = labelling_job_create(
        study=loop.study,
        annotator=loop.annotator,
        user=user,
        metadata_filter=_initial_filter(loop),
        enqueue=enqueue,
    )
    loop.initial_labelling_job = job
    loop.save(update_fields=["initial_labelling_job"])
    return job


def _set_name(loop: MitigationLoop, index: int, axes: list[str]) -> str:
    return f"intermit{loop.pk}-step{index}-{_SLUG.sub('_', loop.group)[:60]}-{'+'.join(axes)}"[:200]


@transaction.atomic
def mitigation_step_start(*, loop: MitigationLoop, user: User | None, enqueue: bool = True) -> MitigationStep:
    """Start the next step: refuse while one is open, when tau is undefined or already <= epsilon, or
    when no axis is left; else queue the generation of the mitigation set and record tau before, the
    axis, its gamma and the IS row it predicts."""
    loop = (
        MitigationLoop.objects.select_for_update(of=("self",))
        .select_related("study", "annotator")
        .get(pk=loop.pk)
    )
    state = loop_state(loop)
    open_steps = [s for s in state.steps if s.status != MitigationStep.Status.DONE]
    if open_steps:
        raise Conflict(f"step {open_steps[0].index} is still {open_steps[0].get_status_display().lower()}")
    plan = state.plan
    if plan["tau"] is None:
        raise ValidationFailed(f"tau cannot be computed yet: {plan['reason']}", {"tau": "undefined"})
    if plan["done"]:
        raise ValidationFailed(
            f"tau = {plan['tau']:.3f} <= epsilon = {loop.epsilon}: nothing left to mitigate", {"tau": "done"}
        )
    axis = plan["next_axis"]
    if axis is None:
        raise ValidationFailed(f"no axis left to mitigate: {plan['reason']}", {"axis": "none left"})
    index = len(state.steps) + 1
    mitigated = [s.axis for s in state.steps] + [axis]
    previous = state.steps[-1].prompt_set if state.steps else None
    try:
        prompt_set = biasconnect_mitigation_set(
            loop.group,
            mitigated,
            total_images=loop.images_per_step,
            with_counterfactuals=True,
            counterfactual_axes=mitigable_axes(loop.study),
            name=_set_name(loop, index, mitigated),
            parent=previous,
        )
    except ValueError as exc:
        raise ValidationFailed(str(exc)) from exc
    job = generation_job_create(
        study=loop.study,
        prompt_set=prompt_set,
        spec=model_spec_from_dict(loop.model_spec),
        user=user,
        # A new draw per step: a one-axis mitigation set repeats that axis's counterfactual prompts (A.7),
        # and the same text and seed would remake the same images (one image per hash in a study).
        base_seed=loop.base_seed + index,
        model_label=loop.model_label or None,
        enqueue=enqueue,
    )
    matrix = state.current.matrix
    predicted: dict[str, float | None] = {}
    if matrix is not None and axis in matrix.rows:
        predicted = dict(zip(matrix.columns, matrix.values[matrix.rows.index(axis)], strict=True))
    return MitigationStep.objects.create(
        loop=loop,
        index=index,
        axis=axis,
        mitigated_axes=mitigated,
        gamma=plan["gamma"],
        gammas=plan["gammas"],
        tau_before=plan["tau"],
        w_before=state.current.w_bar,
        n_before=state.current.n_base,
        predicted_is=predicted,
        prompt_set=job.name,
        generation_job=job,
        created_by=user,
    )


def mitigation_step_advance(
    *, step: MitigationStep, user: User | None = None, close: bool = False, enqueue: bool = True
) -> MitigationStep:
    """Move an open step on from what its jobs have done; harmless to call again (or concurrently).

    - generating: once the generation job is done, count the items made and queue the labeller over
      them (a labelling job narrowed to the step's prompt set), or wait for people's labels;
    - labelling: once the labelling job is done, measure and record; ``close`` re-queues a labelling
      job that failed or was cancelled;
    - waiting for people: ``close`` measures and records with the labels given so far.

    Measuring records tau and w_bar of the step's base images, and the measured IS row
    w_bar_y(before) - w_bar_y(after); when no base image is labelled yet, a requested ``close`` is
    refused with the reason and an automatic one leaves the step waiting for labels.
    """
    with transaction.atomic():
        step = (
            MitigationStep.objects.select_for_update(of=("self",))
            .select_related("loop__study", "loop__annotator", "generation_job", "labelling_job")
            .get(pk=step.pk)
        )
        loop = step.loop
        if step.status == MitigationStep.Status.GENERATING:
            generation = step.generation_job
            if generation is None:
                raise ValidationFailed("the step's generation job was deleted")
            if generation.status != GenerationJob.Status.DONE:
                if close:
                    raise ValidationFailed(
                        f"generation job {generation.pk} is {generation.status}"
                        + (f" ({generation.error})" if generation.error else "")
                        + ": re-run it from its page, then advance the step"
                    )
                return step
            step.items_made = loop.study.items.filter(metadata__prompt_set=step.prompt_set).count()
            if loop.annotator is not None:
                step.labelling_job = labelling_job_create(
                    study=loop.study,
                    annotator=loop.annotator,
                    user=user or step.created_by,
                    metadata_filter={"prompt_set": step.prompt_set},
                    enqueue=enqueue,
                )
                step.status = MitigationStep.Status.LABELLING
            else:
                step.status = MitigationStep.Status.AWAITING_LABELS
            step.save(update_fields=["items_made", "labelling_job", "status"])
            return step
        if step.status == MitigationStep.Status.LABELLING:
            labelling = step.labelling_job
            if labelling is None or labelling.status in (
                LabellingJob.Status.FAILED,
                LabellingJob.Status.CANCELLED,
            ):
                if close:
                    step.labelling_job = labelling_job_create(
                        study=loop.study,
                        annotator=loop.annotator,  # type: ignore[arg-type]
                        user=user,
                        metadata_filter={"prompt_set": step.prompt_set},
                        enqueue=enqueue,
                    )
                    step.save(update_fields=["labelling_job"])
                return step
            if labelling.status != LabellingJob.Status.DONE:
                return step
            return _measure(step, user, required=close)
        if step.status == MitigationStep.Status.AWAITING_LABELS and close:
            return _measure(step, user, required=True)
        return step


def _measure(step: MitigationStep, user: User | None, *, required: bool) -> MitigationStep:
    state = loop_state(step.loop)
    stage = state.stages[[s.pk for s in state.steps].index(step.pk) + 1]
    if stage.tau is None:
        if required:
            raise ValidationFailed(
                f"tau after the step cannot be computed yet: {stage.reason}", {"tau": "undefined"}
            )
        step.status = MitigationStep.Status.AWAITING_LABELS
        step.save(update_fields=["status"])
        return step
    step.tau_after = stage.tau
    step.w_after = stage.w_bar
    step.n_after = stage.n_base
    step.measured_is = {
        y: None if before is None or stage.w_bar.get(y) is None else before - stage.w_bar[y]
        for y, before in step.w_before.items()
    }
    step.status = MitigationStep.Status.DONE
    step.closed_by = user
    step.finished_at = timezone.now()
    step.save(
        update_fields=["tau_after", "w_after", "n_after", "measured_is", "status", "closed_by", "finished_at"]
    )
    return step


def mitigation_steps_after_job(
    *, generation_job_id: int | None = None, labelling_job_id: int | None = None
) -> int:
    """Queue ``advance`` for the open steps whose generation or labelling job just finished (called by
    the task hook); returns how many were queued."""
    steps = MitigationStep.objects.exclude(status=MitigationStep.Status.DONE)
    if generation_job_id is not None:
        steps = steps.filter(generation_job_id=generation_job_id)
    elif labelling_job_id is not None:
        steps = steps.filter(labelling_job_id=labelling_job_id)
    else:
        return 0
    ids = list(steps.values_list("pk", flat=True))
    for step_id in ids:
        job_enqueue(task_name=ADVANCE_TASK, job_id=step_id)
    return len(ids)
