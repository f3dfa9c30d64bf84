"""The reliability gate of a study's findings (docs/metrics.md, "Reliability gate"): Krippendorff's alpha of
the people on every question the findings read, its verdict (``metrics.reliability``), the questions a
researcher left out, and the warning each table and figure carries when it reads a question that is not
reliable.

Alpha here is the agreement page's: every counted human judgement of the question (no control items, no
excluded annotators), the level of its kind (likert ordinal, the others nominal), a multi question's options
pooled into one 0/1 alpha over (item, option) units; a seeded percentile bootstrap over units gives the
interval.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from annotations.models import Annotator, FindingsExclusion, FindingsReliability, Study
from annotations.selectors.counted import counted_annotations
from annotations.selectors.matrices import LEVELS, reliability_for
from metrics.agreement import AlphaResult, ValueCounts, alpha_with_bootstrap_of_counts
from metrics.reliability import Thresholds, headline, pooled_counts, verdict

BOOTSTRAP_RESAMPLES = 500
BOOTSTRAP_SEED = 0


def reliability_thresholds(study: Study) -> Thresholds:
    """The study's chosen thresholds (``FindingsReliability``), else Krippendorff's."""
    row = FindingsReliability.objects.filter(study=study).first()
    if row is None:
        return Thresholds()
    return Thresholds(row.reliable_at, row.tentative_at, row.min_items)


def findings_exclusions(study: Study) -> list[dict[str, Any]]:
    """The questions left out of the study's findings: question, reason, by whom and when."""
    return [
        {
            "question": question_key,
            "reason": reason,
            "by": username or "",
            "at": created_at.isoformat(),
        }
        for question_key, reason, username, created_at in FindingsExclusion.objects.filter(
            study=study
        ).values_list("question_key", "reason", "excluded_by__username", "created_at")
    ]


def _human_ids(study: Study) -> list[int]:
    return sorted(
        set(
            counted_annotations(study)
            .filter(annotator__kind=Annotator.Kind.HUMAN)
            .values_list("annotator_id", flat=True)
            .distinct()
        )
    )


def _alpha(study: Study, key: str, humans: list[int]) -> tuple[str, AlphaResult, int]:
    """(level, alpha with its bootstrap interval, raters) of the people on question ``key``."""
    question = study.protocol_obj.question(key)
    level = LEVELS.get(question.kind, "nominal")
    parts = reliability_for(study, question, annotator_ids=humans) if humans else []
    counts = (
        pooled_counts([p.counts for p in parts])
        if question.kind == "multi"
        else parts[0].counts
        if parts
        else ValueCounts(counts=np.zeros((0, 0), dtype=np.int64), domain=np.zeros(0))
    )
    raters = len(parts[0].annotator_ids) if parts else 0
    result = alpha_with_bootstrap_of_counts(
        counts, level=level, n_resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED
    )
    return level, result, raters


def reliability_entries(
    study: Study, keys: list[str], thresholds: Thresholds, members: list[int] | None = None
) -> list[dict[str, Any]]:
    """One entry per question of ``keys`` (boxes questions have no alpha here and are left out):
    {question, level, alpha, low, high, n_items, n_raters, verdict, reason}. ``members``: the people
    whose alpha it is (a rater pool's annotator ids); None: every person who answered."""
    humans = _human_ids(study) if members is None else sorted(members)
    protocol = study.protocol_obj
    entries = []
    for key in keys:
        if not protocol.has_question(key) or protocol.question(key).kind == "boxes":
            continue
        level, result, raters = _alpha(study, key, humans)
        gate = verdict(
            result.value,
            n_items=result.n_items,
            n_raters=raters,
            undefined_reason=result.undefined_reason,
            thresholds=thresholds,
        )
        defined = gate.verdict != "undefined"
        entries.append(
            {
                "question": key,
                "level": level,
                "alpha": result.value if defined else None,
                "low": result.ci_low if defined else None,
                "high": result.ci_high if defined else None,
                "n_items": result.n_items,
                "n_raters": raters,
                "verdict": gate.verdict,
                "reason": gate.reason,
            }
        )
    return entries


def reliability_headline(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The study-level line: per-question range and median and the count of reliable questions."""
    return headline([(e["alpha"], e["verdict"]) for e in entries if not e.get("excluded")]).to_dict()
