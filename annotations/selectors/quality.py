"""Per-annotator quality in a study, why a claim found nothing, and the exclusion history (docs/crowd.md).

``quality_report`` reads; ``metrics.quality`` computes. Per human annotator:

- gold accuracy: correct / n over the expected answers of gold items they were asked (first
  submitted answers; ``selectors.controls.control_outcomes``);
- attention checks passed and failed (an attention check passes when every expected answer matches);
- agreement with the consensus, leave-one-out: for each real item and question they answered
  (boxes excepted), the plurality answer of the OTHER humans who count (not excluded); ties and
  items nobody else answered are not comparable;
- median seconds per item (the time the task page measured, else lease to submit);
- straight-lining: the longest run of one answer to the same question in submission order, judged
  against that question's own answer shares among the other annotators (``straight_line_judged``);
- flags against the study's thresholds (``selectors.controls.quality_settings``).

Excluding and reinstating (writes) are in ``services/quality.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max, Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from annotations.models import (
    Annotation,
    Annotator,
    AnnotatorExclusion,
    Assignment,
    ControlKind,
    Item,
    Pool,
    Study,
)
from annotations.selectors.controls import (
    Qualification,
    control_outcomes,
    qualification_of,
    qualification_state,
    quality_settings,
)
from annotations.selectors.counted import active_exclusions
from annotations.selectors.pools import pools_in_study
from metrics.quality import (
    Flag,
    OthersShares,
    Score,
    StraightJudgement,
    StraightLine,
    answer_key,
    answer_shares,
    control_score,
    leave_one_out_agreement,
    leave_one_out_coded,
    loo_median,
    median_or_none,
    quality_flags,
    straight_line_judged_among,
)


def _study_humans(study: Study) -> list[Annotator]:
    """Humans with work in the study: handed an item, or with answers (imported raters)."""
    handed = Assignment.objects.filter(study=study).values("annotator_id")
    answered = Annotation.objects.filter(study=study).values("annotator_id")
    return list(
        Annotator.objects.filter(Q(pk__in=handed) | Q(pk__in=answered), kind=Annotator.Kind.HUMAN).order_by(
            "name", "pk"
        )
    )


QUALITY_CACHE_SECONDS = 60


def quality_report_cached(*, study: Study, fresh: bool = False) -> dict[str, Any]:
    """``quality_report`` for pages: kept for up to a minute while annotations arrive, recomputed at
    once when the study's settings or controls change (``Study.updated_at``) or someone is excluded
    or reinstated. The report says when it was computed (``computed_at``); ``fresh`` recomputes.

    Why: the report reads every human answer of the study (seconds at 100,000 items; figures in
    docs/benchmarks.md), and the progress page is opened often during a batch.
    """
    exclusions = AnnotatorExclusion.objects.filter(study=study).aggregate(
        n=Count("id"), excluded=Max("excluded_at"), reinstated=Max("reinstated_at")
    )
    state = "|".join(str(part) for part in (study.pk, study.updated_at.isoformat(), *exclusions.values()))
    key = "quality-report:" + hashlib.sha256(state.encode()).hexdigest()  # memcached-safe
    report = None if fresh else cache.get(key)
    if report is None:
        report = {**quality_report(study=study), "computed_at": timezone.now().isoformat()}
        cache.set(key, report, QUALITY_CACHE_SECONDS)
    return report


class _LooRows:
    """One question's counted answers as integer codes, for ``metrics.quality.leave_one_out_coded``."""

    def __init__(self) -> None:
        self.unit_of: dict[int, int] = {}
        self.code_of: dict[Any, int] = {}
        self.units: list[int] = []
        self.annotators: list[int] = []
        self.codes: list[int] = []
        self.voting: list[bool] = []
        self.plain: list[tuple[int, int, Any]] = []  # (item, annotator, answer), for the plain function

    def add(self, item_id: int, annotator_id: int, answer: Any, votes: bool) -> None:
        self.units.append(self.unit_of.setdefault(item_id, len(self.unit_of)))
        self.codes.append(self.code_of.setdefault(answer, len(self.code_of)))
        self.annotators.append(annotator_id)
        self.voting.append(votes)
        self.plain.append((item_id, annotator_id, answer))


MAX_CODED_VALUES = 256  # above this many distinct answers (free text) a question is counted the plain way


def _loo_scores(per_question: dict[str, _LooRows]) -> dict[int, Score]:
    """Leave-one-out agreement per annotator, summed over questions."""
    n: dict[int, int] = defaultdict(int)
    hits: dict[int, int] = defaultdict(int)
    for rows in per_question.values():
        if len(rows.code_of) <= MAX_CODED_VALUES:
            counted = leave_one_out_coded(rows.units, rows.annotators, rows.codes, rows.voting)
        else:
            voters = {a for a, votes in zip(rows.annotators, rows.voting, strict=True) if votes}
            counted = {
                a: (score.n, score.correct)
                for a, score in leave_one_out_agreement(rows.plain, voters=voters).items()
            }
        for annotator_id, (comparable, agreeing) in counted.items():
            n[annotator_id] += comparable
            hits[annotator_id] += agreeing
    return {a: Score(n[a], hits[a], hits[a] / n[a] if n[a] else None) for a in n}


def quality_report(*, study: Study, now: datetime | None = None) -> dict[str, Any]:
    """Every human annotator's quality figures and flags in ``study`` (see the module docstring).
    Reads only."""
    settings = quality_settings(study)
    thresholds = settings.thresholds
    humans = _study_humans(study)
    exclusions = {row.annotator_id: row for row in active_exclusions(study).select_related("excluded_by")}
    voters = {a.pk for a in humans if a.pk not in exclusions}
    protocol = study.protocol_obj
    boxes = [q.key for q in protocol.questions if q.kind == "boxes"]

    # Values come as JSON text and each distinct text is decoded once (a study of 100,000 items holds
    # millions of answers but few distinct ones); leave-one-out is counted with numpy per question.
    rows = (
        Annotation.objects.filter(study=study, annotator__kind=Annotator.Kind.HUMAN)
        .exclude(question_key__in=boxes)
        .order_by("created_at", "id")
        .values_list(
            "item_id", "question_key", "annotator_id", Cast("value", TextField()), "item__control_kind"
        )
    )
    decoded: dict[str, tuple[Any, Any]] = {}
    in_order: dict[int, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    per_question: dict[str, _LooRows] = defaultdict(_LooRows)
    for item_id, key, annotator_id, text, control in rows.iterator(chunk_size=5000):
        if text not in decoded:
            value = json.loads(text)
            decoded[text] = (value, answer_key(value))
        value, answer = decoded[text]
        in_order[annotator_id][key].append(value)
        if not control:
            per_question[key].add(item_id, annotator_id, answer, annotator_id in voters)
    loo = _loo_scores(per_question)
    # each counted human's answer shares per question: the reference a run is judged against
    shares: dict[str, dict[int, dict[Any, float]]] = defaultdict(dict)
    for annotator_id, answered in in_order.items():
        if annotator_id in voters:
            for key, values in answered.items():
                shares[key][annotator_id] = answer_shares(values)
    # per question, every annotator's others' median shares from one sorted pass (not N x N)
    among = {key: OthersShares(by_annotator) for key, by_annotator in shares.items()}
    median_loo = loo_median([score for a, score in loo.items() if a in voters], min_n=thresholds["loo_min_n"])

    times: dict[int, list[float]] = defaultdict(list)
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])  # real items, controls submitted
    for annotator_id, spent, created, completed, control in Assignment.objects.filter(
        study=study, status=Assignment.Status.SUBMITTED
    ).values_list("annotator_id", "time_spent_ms", "created_at", "completed_at", "item__control_kind"):
        counts[annotator_id][1 if control else 0] += 1
        if spent is not None:
            times[annotator_id].append(spent / 1000)
        elif completed is not None:
            times[annotator_id].append((completed - created).total_seconds())

    outcomes = control_outcomes(study)
    pools = pools_in_study(study.pk)
    people = []
    for annotator in humans:
        mine = outcomes.get(annotator.pk, [])
        gold = control_score(check for o in mine if o.kind == ControlKind.GOLD for check in o.checks)
        attention = [o.passed for o in mine if o.kind == ControlKind.ATTENTION and o.passed is not None]
        failed = sum(1 for passed in attention if not passed)
        agreement = loo.get(annotator.pk, Score(0, 0, None))
        median_seconds = median_or_none(times.get(annotator.pk, []))
        runs = {
            key: straight_line_judged_among(
                values, annotator.pk, among.get(key) or OthersShares({}), thresholds
            )
            for key, values in in_order.get(annotator.pk, {}).items()
        }
        worst_key = max(
            runs,
            key=lambda k: (runs[k][1].flagged, runs[k][0].longest_run, runs[k][0].modal_share or 0, k),
            default=None,
        )
        worst: tuple[StraightLine, StraightJudgement] | None = runs[worst_key] if worst_key else None
        flags = quality_flags(
            gold=gold,
            attention_failed=failed,
            loo=agreement,
            study_loo_median=median_loo,
            median_seconds=median_seconds,
            straight=(worst_key, worst[0], worst[1]) if worst_key and worst else None,
            thresholds=thresholds,
        )
        qualification: Qualification | None = None
        if settings.qualification_items > 0 and annotator.user_id is not None:
            qualification = qualification_of([o for o in mine if o.kind == ControlKind.GOLD], settings)
            if qualification.state == "failed":
                flags.insert(
                    0,
                    Flag(
                        "qualification",
                        f"did not qualify ({qualification.correct} of {qualification.n} gold answers right)",
                    ),
                )
        exclusion = exclusions.get(annotator.pk)
        people.append(
            {
                "annotator_id": annotator.pk,
                "annotator": annotator.name,
                "pool": pools.get(annotator.pk, Pool.CROWD),
                "items": counts[annotator.pk][0],
                "controls": counts[annotator.pk][1],
                "gold": gold.to_dict(),
                "attention": {"passed": len(attention) - failed, "failed": failed},
                "agreement": {"n": agreement.n, "agree": agreement.correct, "rate": agreement.rate},
                "median_seconds": None if median_seconds is None else round(median_seconds, 1),
                "straight_line": None
                if worst is None
                else {"question": worst_key, **worst[0].to_dict(), "judged": worst[1].to_dict()},
                "qualification": qualification.to_dict() if qualification else None,
                "flags": [flag.to_dict() for flag in flags],
                "excluded": exclusion is not None,
                "exclusion": None
                if exclusion is None
                else {
                    "reason": exclusion.reason,
                    "at": exclusion.excluded_at,
                    "by": exclusion.excluded_by.username if exclusion.excluded_by else None,
                },
            }
        )
    controls = dict.fromkeys(ControlKind.values, 0)
    for kind in (
        Item.objects.filter(study=study).exclude(control_kind="").values_list("control_kind", flat=True)
    ):
        controls[kind] += 1
    return {
        "study": study.pk,
        "name": study.name,
        "settings": settings.to_dict(),
        "controls": controls,
        "agreement_median": median_loo,
        "annotators": people,
        "flagged": sum(1 for person in people if person["flags"]),
    }


@dataclass(frozen=True)
class Refusal:
    """Why a claim found nothing: ``final`` when the annotator will never get items again."""

    final: bool
    message: str


def claim_refusal(*, study: Study, annotator: Annotator) -> Refusal | None:
    """Why a claim found nothing, when the reason is the qualification (a message for the annotator)."""
    state = qualification_state(study=study, annotator=annotator)
    if state.state == "failed":
        return Refusal(
            True,
            f"you did not pass this study's qualification items ({state.correct} of {state.n} "
            f"answers right; {state.min_accuracy:.0%} were needed), so no further items will be "
            "given to you. Thank you for your time",
        )
    if state.state == "pending" and state.live == 0:
        return Refusal(
            False, "there are no qualification items left for you at the moment; please come back later"
        )
    return None


def annotator_answer_count(*, study: Study, annotator: Annotator) -> int:
    """How many answers one annotator gave in the study (what excluding them stops counting)."""
    return Annotation.objects.filter(study=study, annotator=annotator).count()


def exclusion_history(study: Study) -> list[AnnotatorExclusion]:
    """Every exclusion of the study, newest first, with who excluded and reinstated."""
    return list(
        AnnotatorExclusion.objects.filter(study=study)
        .select_related("annotator", "excluded_by", "reinstated_by")
        .order_by("-excluded_at", "-id")
    )
