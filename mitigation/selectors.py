"""Reading InterMit (BiasConnect section 4, Algorithm 1): the plan for a choice of axes and weights, and
a loop's report.

Labels are read through ``annotations``' selectors (``axis_images``: the same labels, person filter and
derived disability axis the findings use) and the numbers come from ``metrics.biasconnect``:

- a *stage* is a set of images: the initial prompt group (the study's items of one occupation that are
  not part of a mitigation set), then the images of each step's mitigation set. Its base images give
  w_bar of every axis and tau = <w_bar(B*), p>; its counterfactual images give the IS matrix S.
- the plan: while tau > epsilon, the next axis is the row of S (not yet mitigated) whose entries on B*
  have the largest gamma = <S[row, B*], p>.
- the report: MitAmt (the final tau), MitSteps (axes mitigated / |B*|), tau before and after each step,
  negative-IS warnings, and the validation of paper section 5.3 / A.9: Pearson r between the IS row
  predicted before a step (S[x][y] of the stage it started from) and the IS measured after it
  (w_bar_y before - w_bar_y of the step's base images), over every cell defined on both sides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from annotations import access
from annotations.models import Annotator, Study, User
from annotations.selectors.coverage import coverage_of, item_judges
from annotations.selectors.labels import CONSENSUS, ItemInfo, LabelSource, items_info, source_parse
from common.errors import NotFoundError, ValidationFailed
from findings.papers.biasconnect import axis_images, bias_axes, group_of
from findings.report import study_metric_kind
from findings.tables import jsonable
from generation.prompts.biasconnect import biasconnect_axes
from metrics import biasconnect
from mitigation.models import MitigationLoop, MitigationStep

DEFAULT_EPSILON = 0.35


def mitigation_loop_get_for_user(*, user: User, id: int, write: bool = False) -> MitigationLoop:
    """A loop of a study whose data ``user`` may see (``write``: may change).

    A loop of a study the user may not see, and a loop that does not exist, are the same NotFoundError
    with the same message, on pages and in the API (docs/security.md, "InterMit loop ids")."""
    loop = None
    if user.is_authenticated and user.is_researcher:
        loop = (
            MitigationLoop.objects.select_related("study", "annotator", "created_by")
            .filter(pk=id, study__in=access.studies_for_user(user))
            .first()
        )
    if loop is None:
        raise NotFoundError(f"loop {id} does not exist or is not yours")
    if write:
        access.study_get_for_user(user=user, id=loop.study_id, researcher=True, write=True)
    return loop


@dataclass(frozen=True)
class InterMitParams:
    """A researcher's choice: the prompt group, B* (in order), p (normalised to sum 1), epsilon, and the
    target distribution D* of the axes that do not aim at uniform (paper A.10: user-given), each a share
    per option in the axis's option order, summing to 1."""

    group: str
    axes: list[str]
    weights: dict[str, float]
    epsilon: float
    targets: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Stage:
    """The numbers of one set of images: w_bar of every axis over its base images (``n_axis`` images
    behind each), tau on B*, and its IS matrix (None without counterfactual images)."""

    name: str
    n_items: int
    n_base: int
    w_bar: dict[str, float | None]
    n_axis: dict[str, int]
    tau: float | None
    matrix: biasconnect.SensitivityMatrix | None
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    # How many of the set's images are settled, partial and unjudged (only settled ones are counted).
    coverage: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        matrix = self.matrix
        return {
            "name": self.name,
            "coverage": self.coverage,
            "n_items": self.n_items,
            "n_base_images": self.n_base,
            "w_bar": self.w_bar,
            "n_images_per_axis": self.n_axis,
            "tau": self.tau,
            "is_matrix": None
            if matrix is None
            else {"rows": matrix.rows, "columns": matrix.columns, "values": matrix.values},
            "reason": self.reason,
        }


def mitigable_axes(study: Study) -> list[str]:
    """The study's bias axes that the mitigation prompt set can write (``biasconnect.yaml``)."""
    phrases = biasconnect_axes()
    return [axis for axis in bias_axes(study) if axis in phrases]


def _initial_items(items: dict[int, ItemInfo], group: str) -> dict[int, ItemInfo]:
    return {
        i: info for i, info in items.items() if "mitigation" not in info.metadata and group_of(info) == group
    }


def prompt_groups(study: Study, items: dict[int, ItemInfo] | None = None) -> list[str]:
    """The prompt groups (occupations) of the study's initial images, sorted."""
    items = items_info(study) if items is None else items
    return sorted({group_of(info) for info in items.values() if "mitigation" not in info.metadata})


MAX_WEIGHT = 1e6  # weights are relative priorities; bounded so that their sum stays finite


def _number(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValidationFailed(
            f"{what} must be a number, not {str(value)[:40]!r}", {what: "not a number"}
        ) from None
    if not math.isfinite(number):
        raise ValidationFailed(f"{what} must be a finite number", {what: "not finite"})
    return number


def _split(value: str | Sequence[Any] | None) -> list[str]:
    if value is None:
        return []
    parts = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return [p.strip() for p in parts if p.strip()]


def intermit_params_parse(
    study: Study,
    *,
    axes: str | Sequence[str] | None,
    weights: str | Sequence[Any] | None = None,
    epsilon: Any = None,
    group: str | None = None,
    targets: str | Mapping[str, Any] | None = None,
) -> InterMitParams:
    """Validate a choice of B*, p, epsilon and prompt group for ``study``; ValidationFailed says what is
    wrong (a bias-axes study only; axes it labels and the mitigation prompts can write; one weight per
    axis, non-negative with a positive sum (default equal); 0 <= epsilon <= 1 (default 0.35); a group
    of its initial images, needed when it has several)."""
    if study_metric_kind(study) != "bias-axes":
        raise ValidationFailed(
            "InterMit applies to BiasConnect studies (the bias-axes protocol)", {"study": "not bias-axes"}
        )
    known = mitigable_axes(study)
    chosen = _split(axes)
    if not chosen:
        raise ValidationFailed(
            f"choose the axes to debias (B*) among {', '.join(known)}", {"axes": "required"}
        )
    unknown = [a for a in chosen if a not in known]
    if unknown:
        raise ValidationFailed(
            f"unknown axis {unknown[0]!r}; this study's axes are {', '.join(known)}", {"axes": "unknown axis"}
        )
    if len(set(chosen)) != len(chosen):
        raise ValidationFailed("an axis is named twice", {"axes": "repeated"})
    raw = _split(weights)
    values = [_number(w, "weights") for w in raw] if raw else [1.0] * len(chosen)
    if len(values) != len(chosen):
        raise ValidationFailed(
            f"give one weight per axis: {len(chosen)} axes, {len(values)} weights", {"weights": "count"}
        )
    if any(v < 0 for v in values) or sum(values) <= 0:
        raise ValidationFailed("weights must be non-negative with a positive sum", {"weights": "invalid"})
    if any(v > MAX_WEIGHT for v in values):
        # [1e308, 1e308] summed to infinity and was stored as [0, 0]: the loop then failed on every read.
        raise ValidationFailed(f"each weight must be at most {MAX_WEIGHT:g}", {"weights": "too large"})
    total = sum(values)
    eps = DEFAULT_EPSILON if epsilon in (None, "") else _number(epsilon, "epsilon")
    if not 0 <= eps <= 1:
        raise ValidationFailed(
            "epsilon must be between 0 and 1 (tau is a weighted mean of w_bar in [0, 1])",
            {"epsilon": "range"},
        )
    groups = prompt_groups(study)
    if not group:
        if len(groups) != 1:
            raise ValidationFailed(
                f"choose the prompt group to mitigate among {', '.join(groups) or 'none (no images yet)'}",
                {"group": "required"},
            )
        group = groups[0]
    if group not in groups:
        raise ValidationFailed(
            f"no prompt group {group!r} in this study; its groups: {', '.join(groups) or 'none'}",
            {"group": "unknown"},
        )
    return InterMitParams(
        group,
        chosen,
        {a: v / total for a, v in zip(chosen, values, strict=True)},
        eps,
        targets_parse(study, targets),
    )


def targets_parse(study: Study, given: str | Mapping[str, Any] | None) -> dict[str, list[float]]:
    """D* per axis from ``AXIS=SHARE,SHARE,...;AXIS=...`` (or a mapping axis -> shares): one share per
    option of the axis, in the axis's option order (``bias_axes``), non-negative with a positive sum
    (normalised to 1). An axis left out aims at uniform. ValidationFailed says what is wrong."""
    if not given:
        return {}
    if isinstance(given, str):
        pairs: list[tuple[str, Any]] = []
        for part in (p.strip() for p in given.split(";")):
            if not part:
                continue
            axis, sep, shares = part.partition("=")
            if not sep:
                raise ValidationFailed(
                    f"write each target as AXIS=SHARE,SHARE,... (got {part[:40]!r})", {"targets": "format"}
                )
            pairs.append((axis.strip(), shares))
    elif isinstance(given, Mapping):
        pairs = list(given.items())
    else:
        raise ValidationFailed("targets must be AXIS=SHARE,... text or an object", {"targets": "format"})
    options = bias_axes(study)
    parsed: dict[str, list[float]] = {}
    for axis, shares in pairs:
        if axis not in options:
            raise ValidationFailed(
                f"no axis {axis!r} for a target; this study's axes are {', '.join(options)}",
                {"targets": "unknown axis"},
            )
        values = [_number(v, "targets") for v in _split(shares)]
        if len(values) != len(options[axis]):
            raise ValidationFailed(
                f"the target of {axis} needs one share per option ({len(options[axis])}: "
                f"{', '.join(options[axis])}), not {len(values)}",
                {"targets": "count"},
            )
        if any(v < 0 for v in values) or sum(values) <= 0:
            raise ValidationFailed(
                f"the target of {axis} must be non-negative with a positive sum", {"targets": "invalid"}
            )
        parsed[axis] = [v / sum(values) for v in values]
    return parsed


@dataclass(frozen=True)
class _Judged:
    """Judgements per item for a loop's label source, and how many an item needs to count."""

    judges: dict[int, int]
    needed: int
    basis: str


def _judged(study: Study, source: LabelSource) -> _Judged:
    if source.is_machine:
        return _Judged(item_judges(study, source.annotator_ids), 1, f"answers of {source.name}")
    return _Judged(item_judges(study), study.overlap, f"human judgements (overlap {study.overlap})")


def _settled(
    study: Study, name: str, subset: dict[int, ItemInfo], judged: _Judged, axes: Sequence[str]
) -> tuple[frozenset[int], dict[str, Any], str | None]:
    """The settled items of one stage, its coverage and, when none is settled, why tau is insufficient."""
    coverage, counted, _partial = coverage_of(
        study=study,
        item_ids=subset,
        judges=judged.judges,
        needed=judged.needed,
        basis=judged.basis,
        include_partial=False,
    )
    reason = None
    if subset and not counted and coverage.partial:
        reason = (
            f"insufficient data: none of the {coverage.n_items} images of the {name} set has its "
            f"{judged.needed} {'judgement' if judged.needed == 1 else 'judgements'} yet ({coverage.partial} "
            "partial, their labels pending): tau waits for them"
        )
    elif subset and not counted:
        reason = f"the {name} set has no labelled base image with a person for {', '.join(axes)}"
    return counted, coverage.as_dict(), reason


def _stage(
    name: str, images: Sequence[biasconnect.AxisImage], axes: dict[str, list[str]], params: InterMitParams
) -> Stage:
    base = [i for i in images if i.person and i.condition == biasconnect.BASE_CONDITION]
    n_axis = {a: biasconnect.distribution((i.labels.get(a) for i in base), axes[a]).n for a in axes}
    try:
        matrix = biasconnect.intersectional_sensitivity(images, axes, targets=params.targets)
    except ValueError as exc:
        return Stage(name, len(images), len(base), {}, n_axis, None, None, str(exc))
    w_bar = dict(matrix.w_initial)
    tau = biasconnect.intermit_tau({a: w_bar.get(a) for a in params.axes}, params.weights)
    reason = None
    if not images:
        reason = f"the {name} set has no images yet"
    elif tau is None:
        missing = [a for a in params.axes if w_bar.get(a) is None]
        reason = f"the {name} set has no labelled base image with a person for {', '.join(missing)}"
    warnings = [
        f"{name}: IS[{x}][{y}] = {value:.3f} < 0: mitigating {x} moves {y} away from its target"
        for x, row in zip(matrix.rows, matrix.values, strict=True)
        for y, value in zip(matrix.columns, row, strict=True)
        if value is not None and value < 0
    ]
    return Stage(
        name, len(images), len(base), w_bar, n_axis, tau, matrix if matrix.rows else None, reason, warnings
    )


def _next(stage: Stage, params: InterMitParams, mitigated: Sequence[str]) -> dict[str, Any]:
    """The plan from a stage: done (tau <= epsilon), or the next axis with its gamma and every gamma."""
    if stage.tau is None:
        return {
            "tau": None,
            "done": False,
            "next_axis": None,
            "gamma": None,
            "gammas": {},
            "reason": stage.reason,
        }
    empty = biasconnect.SensitivityMatrix([], list(stage.w_bar), [], stage.w_bar, {}, {})
    step = biasconnect.intermit_next_axis(
        {a: stage.w_bar.get(a) for a in params.axes},
        stage.matrix or empty,
        params.weights,
        params.epsilon,
        mitigated,
    )
    reason = step.reason
    if not step.done and step.next_axis is None and stage.matrix is None:
        reason = f"the {stage.name} set has no counterfactual images: no IS row to choose an axis from"
    return {
        "tau": step.tau,
        "done": step.done,
        "next_axis": step.next_axis,
        "gamma": step.gammas.get(step.next_axis) if step.next_axis else None,
        "gammas": step.gammas,
        "reason": reason,
    }


def _parse_source(study: Study, source: str) -> tuple[LabelSource | None, str | None]:
    try:
        return source_parse(study, source), None
    except ValidationFailed as exc:
        if source == CONSENSUS:
            raise
        return None, f"no labels from {source} in this study yet ({exc.message})"


def intermit_plan(study: Study, params: InterMitParams, source: str = CONSENSUS) -> dict[str, Any]:
    """tau of the initial images of ``params.group`` from ``source``, and while tau > epsilon the axis
    to mitigate first with its gamma (every candidate's gamma too) and the negative-IS warnings."""
    parsed = source_parse(study, source)
    items = _initial_items(items_info(study), params.group)
    counted, coverage, insufficient = _settled(study, "initial", items, _judged(study, parsed), params.axes)
    images = axis_images(study, parsed, {i: info for i, info in items.items() if i in counted})
    stage = _stage("initial", list(images.values()), bias_axes(study), params)
    stage.coverage, stage.n_items = coverage, len(items)
    if insufficient and stage.tau is None:
        stage.reason = insufficient
    result: dict[str, Any] = jsonable(
        {
            "study": study.pk,
            "group": params.group,
            "axes": params.axes,
            "weights": params.weights,
            "epsilon": params.epsilon,
            "targets": targets_shown(study, params),
            "source": parsed.name,
            "stage": stage.as_dict(),
            "plan": _next(stage, params, ()),
            "warnings": stage.warnings,
        }
    )
    return result


def targets_shown(study: Study, params: InterMitParams) -> dict[str, dict[str, Any]]:
    """D* of each axis: its options, their target shares, and whether it is the uniform default."""
    shown = {}
    for axis, options in bias_axes(study).items():
        shares = params.targets.get(axis) or biasconnect.uniform_target(len(options))
        shown[axis] = {
            "options": options,
            "shares": shares,
            "pairs": [[option, share] for option, share in zip(options, shares, strict=True)],
            "uniform": axis not in params.targets,
        }
    return shown


def labeller_by_name(value: str | None) -> Annotator | None:
    """A machine labeller by ``name`` (its latest version) or ``name@version``; None for no value."""
    if not value:
        return None
    name, _, version = value.strip().partition("@")
    machines = Annotator.objects.filter(kind=Annotator.Kind.MACHINE, study__isnull=True, name=name)
    if version:
        machines = machines.filter(version=version)
    annotator = machines.order_by("-created_at", "-id").first()
    if annotator is None:
        raise ValidationFailed(
            f"no machine labeller {value!r} (manage.py register_labeller)", {"labeller": "unknown"}
        )
    return annotator


def loop_params(loop: MitigationLoop) -> InterMitParams:
    return InterMitParams(
        loop.group,
        list(loop.axes),
        dict(loop.weights),
        loop.epsilon,
        {a: list(v) for a, v in loop.targets.items()},
    )


def loop_source(loop: MitigationLoop) -> str:
    """The label source of a loop: its labeller (``name@version``), or people's consensus."""
    annotator = loop.annotator
    if annotator is None:
        return CONSENSUS
    return f"{annotator.name}@{annotator.version}" if annotator.version else annotator.name


@dataclass
class LoopState:
    """What the services need from a loop: its stages (initial, then one per step) and the plan."""

    loop: MitigationLoop
    steps: list[MitigationStep]
    stages: list[Stage]
    current: Stage
    plan: dict[str, Any]
    source_problem: str | None


def loop_state(loop: MitigationLoop) -> LoopState:
    """Every stage's live numbers from the loop's label source, and the plan from the current stage (the
    last finished step's set, else the initial images)."""
    study = loop.study
    params = loop_params(loop)
    steps = list(
        loop.steps.select_related("generation_job", "labelling_job", "created_by", "closed_by").order_by(
            "index"
        )
    )
    items = items_info(study)
    sets: list[tuple[str, dict[int, ItemInfo]]] = [("initial", _initial_items(items, loop.group))]
    for step in steps:
        sets.append(
            (
                f"step {step.index}",
                {i: info for i, info in items.items() if info.metadata.get("prompt_set") == step.prompt_set},
            )
        )
    parsed, problem = _parse_source(study, loop_source(loop))
    axes = bias_axes(study)
    everything = {i: info for _name, subset in sets for i, info in subset.items()}
    judged = _judged(study, parsed) if parsed is not None else None
    settled: dict[str, tuple[frozenset[int], dict[str, Any], str | None]] = {}
    if judged is not None:
        settled = {name: _settled(study, name, subset, judged, params.axes) for name, subset in sets}
    counted = frozenset().union(*(entry[0] for entry in settled.values()))
    images = (
        axis_images(study, parsed, {i: info for i, info in everything.items() if i in counted})
        if parsed is not None
        else {}
    )
    stages = []
    for name, subset in sets:
        stage = _stage(name, [images[i] for i in subset if i in images], axes, params)
        if parsed is None:
            stage.reason = problem
        elif name in settled:
            stage.coverage, stage.n_items = settled[name][1], len(subset)
            if stage.tau is None and settled[name][2]:
                stage.reason = settled[name][2]
        stages.append(stage)
    done = [i for i, step in enumerate(steps) if step.status == MitigationStep.Status.DONE]
    current = stages[done[-1] + 1] if done else stages[0]
    plan = _next(current, params, [s.axis for s in steps])
    return LoopState(loop, steps, stages, current, plan, problem)


def _step_dict(step: MitigationStep) -> dict[str, Any]:
    def job(j: Any) -> dict[str, Any] | None:
        return None if j is None else {"id": j.pk, "status": j.status, "error": j.error}

    return {
        "index": step.index,
        "axis": step.axis,
        "mitigated_axes": step.mitigated_axes,
        "status": step.status,
        "gamma": step.gamma,
        "gammas": step.gammas,
        "tau_before": step.tau_before,
        "tau_after": step.tau_after,
        "n_before": step.n_before,
        "n_after": step.n_after,
        "w_before": step.w_before,
        "w_after": step.w_after,
        "predicted_is": step.predicted_is,
        "measured_is": step.measured_is,
        "prompt_set": step.prompt_set,
        "items_made": step.items_made,
        "generation_job": job(step.generation_job),
        "labelling_job": job(step.labelling_job),
        "created_by": step.created_by.username if step.created_by else None,
        "closed_by": step.closed_by.username if step.closed_by else None,
        "created_at": step.created_at.isoformat(),
        "finished_at": step.finished_at.isoformat() if step.finished_at else None,
    }


def validation_pairs(
    steps: Sequence[MitigationStep],
) -> list[tuple[int, str, str, float | None, float | None]]:
    """(step, x, y, IS predicted before the step, IS measured after it) for every finished step and axis y."""
    pairs = []
    for step in steps:
        if step.status != MitigationStep.Status.DONE:
            continue
        for y, predicted in step.predicted_is.items():
            pairs.append((step.index, step.axis, y, predicted, step.measured_is.get(y)))
    return pairs


def loop_status(state: LoopState) -> str:
    """running (a step is open), needs_labels (tau undefined), done (tau <= epsilon), exhausted (no axis
    left to mitigate), or ready (the next step can start)."""
    if any(s.status != MitigationStep.Status.DONE for s in state.steps):
        return "running"
    if state.plan["tau"] is None:
        return "needs_labels"
    if state.plan["done"]:
        return "done"
    return "ready" if state.plan["next_axis"] else "exhausted"


def mitigation_loop_report(loop: MitigationLoop) -> dict[str, Any]:
    """The loop as the page, the API and the command show it: its choices, status, the plan from the
    current stage, every stage's live numbers, the recorded steps, the report (MitAmt, MitSteps, tau
    history), negative-IS warnings and the section 5.3 validation."""
    state = loop_state(loop)
    params = loop_params(loop)
    finished = [s for s in state.steps if s.status == MitigationStep.Status.DONE]
    history = (
        [state.steps[0].tau_before]
        if state.steps
        else ([state.stages[0].tau] if state.stages[0].tau is not None else [])
    )
    history += [s.tau_after for s in finished if s.tau_after is not None]
    summary = biasconnect.mitigation_report(
        history, [s.axis for s in finished], params.weights, params.epsilon
    )
    pairs = validation_pairs(state.steps)
    correlation = biasconnect.is_correlation([p[3] for p in pairs], [p[4] for p in pairs])
    warnings = [w for stage in state.stages for w in stage.warnings]
    for step in finished:
        warnings += [
            f"step {step.index}: mitigating {step.axis} moved {y} away from its target "
            f"(measured IS = {v:.3f})"
            for y, v in step.measured_is.items()
            if v is not None and v < 0
        ]
    result: dict[str, Any] = jsonable(
        {
            "loop": loop.pk,
            "study": loop.study_id,
            "group": loop.group,
            "axes": params.axes,
            "weights": params.weights,
            "epsilon": params.epsilon,
            "source": loop_source(loop),
            "labeller": str(loop.annotator) if loop.annotator else None,
            "model": loop.model_spec,
            "images_per_step": loop.images_per_step,
            "created_by": loop.created_by.username if loop.created_by else None,
            "created_at": loop.created_at.isoformat(),
            "status": loop_status(state),
            "source_problem": state.source_problem,
            "initial_labelling_job": None
            if loop.initial_labelling_job is None
            else {"id": loop.initial_labelling_job.pk, "status": loop.initial_labelling_job.status},
            "plan": state.plan,
            "current_stage": state.current.name,
            "stages": [stage.as_dict() for stage in state.stages],
            "steps": [_step_dict(step) for step in state.steps],
            "report": {
                "mit_amt": summary.mit_amt,
                "mit_steps": summary.mit_steps,
                "steps": summary.steps,
                "n_axes": len(params.axes),
                "mitigated_axes": summary.mitigated_axes,
                "tau_history": summary.tau_history,
                "reached_epsilon": summary.reached_epsilon,
            },
            "warnings": warnings,
            "validation": {
                "r": correlation.r,
                "p_value": correlation.p_value,
                "n": correlation.n,
                "reason": correlation.reason,
                "pairs": [list(p) for p in pairs],
            },
        }
    )
    return result
