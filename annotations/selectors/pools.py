"""An annotator's pool and demographic answers *in one study*: the only place they are read.

An account's pool (crowd or expert) and the answers it gave a study's demographic form live on its
``Enrollment`` in that study; an imported annotator (no account) belongs to one study and keeps
them on its own row (``Annotator.study_pool``, ``study_attributes``). Machine labellers and people
not enrolled are crowd with no answers. Nothing here reads another study's enrolment, so what a
researcher does in one study never changes what anyone is or can do in another
(docs/security.md, "Tenancy").

*Rater pools* by one attribute KEY (``attribute_pools``): the humans who judged in the study grouped by
the value of KEY they gave to it, as ``agreement --breakdown annotator:KEY`` groups them (``str`` of the
value; those without it are in no pool). The label sources ``consensus@KEY=VALUE`` and
``judgements@KEY=VALUE`` read one pool (``annotations.selectors.labels``; docs/metrics.md, "Rater pools").
"""

from __future__ import annotations

import hashlib
from typing import Any

from annotations.models import Annotator, Enrollment, Pool, Study
from annotations.selectors.counted import counted_annotations

# An attribute with more values than this gives no pool sources to choose from (an age, a free text):
# pools are a handful of regions or recruitment routes, not one person each.
MAX_POOLS = 8


def pool_in_study(*, study_id: int, annotator: Annotator | None) -> str:
    """The annotator's pool in this study (one query for an account; none otherwise)."""
    if annotator is None or annotator.is_machine:
        return Pool.CROWD
    if annotator.user_id is None:
        return annotator.study_pool if annotator.study_id == study_id else Pool.CROWD
    pool = Enrollment.objects.filter(study_id=study_id, user_id=annotator.user_id).values_list(
        "pool", flat=True
    )
    return pool.first() or Pool.CROWD


def is_expert_in(*, study_id: int, annotator: Annotator | None) -> bool:
    """Is the annotator of the expert pool in this study (expert-only items and questions)?"""
    return pool_in_study(study_id=study_id, annotator=annotator) == Pool.EXPERT


def sees_expert_questions(*, study: Study, annotator: Annotator | None) -> bool:
    """Is the annotator asked the protocol's expert-only questions in this study? (No query when the
    protocol has none: the task page and a submit then cost nothing more.)"""
    if not any(question.expert_only for question in study.protocol_obj.questions):
        return False
    return is_expert_in(study_id=study.pk, annotator=annotator)


def pools_in_study(study_id: int) -> dict[int, str]:
    """Annotator id -> pool, for every human of the study who has one other than the default.

    Look up with ``.get(annotator_id, Pool.CROWD)``. Two queries, whatever the study's size.
    """
    pools = dict(
        Enrollment.objects.filter(study_id=study_id, user__annotator__isnull=False)
        .exclude(pool=Pool.CROWD)
        .values_list("user__annotator__id", "pool")
    )
    pools.update(
        Annotator.objects.filter(study_id=study_id)
        .exclude(study_pool=Pool.CROWD)
        .values_list("id", "study_pool")
    )
    return pools


def pools_by_user_in_study(study_id: int) -> dict[int, str]:
    """User id -> pool of every account enrolled in the study."""
    return dict(Enrollment.objects.filter(study_id=study_id).values_list("user_id", "pool"))


def attributes_in_study(study_id: int, annotator_ids: list[int] | None = None) -> dict[int, dict[str, Any]]:
    """Annotator id -> the demographic answers given to this study (empty for those who gave none)."""
    enrolled = Enrollment.objects.filter(study_id=study_id, user__annotator__isnull=False)
    imported = Annotator.objects.filter(study_id=study_id)
    if annotator_ids is not None:
        enrolled = enrolled.filter(user__annotator__id__in=annotator_ids)
        imported = imported.filter(pk__in=annotator_ids)
    found: dict[int, dict[str, Any]] = {}
    for annotator_id, attributes in enrolled.values_list("user__annotator__id", "attributes"):
        found[annotator_id] = attributes or {}
    for annotator_id, attributes in imported.values_list("id", "study_attributes"):
        found[annotator_id] = attributes or {}
    return found


def _judging_humans(study: Study) -> list[int]:
    """The ids of the humans with a counted judgement in ``study`` (one query)."""
    return sorted(
        set(
            counted_annotations(study)
            .filter(annotator__kind=Annotator.Kind.HUMAN)
            .values_list("annotator_id", flat=True)
            .distinct()
        )
    )


def pool_name(value: Any) -> str | None:
    """The pool an attribute value names (``str`` of it, trimmed), or None for a blank one."""
    if value is None:
        return None
    name = str(value).strip()
    return name or None


def attribute_pools(study: Study, key: str) -> dict[str, list[int]]:
    """Value -> the ids of the humans who judged in ``study`` and gave that value of ``key`` to it, values
    sorted; humans without ``key`` (or with a blank value) are in no pool. Two queries."""
    humans = _judging_humans(study)
    pools: dict[str, list[int]] = {}
    for annotator_id, attributes in sorted(attributes_in_study(study.pk, humans).items()):
        name = pool_name((attributes or {}).get(key))
        if name is not None:
            pools.setdefault(name, []).append(annotator_id)
    return dict(sorted(pools.items()))


def pool_keys(study: Study) -> dict[str, dict[str, list[int]]]:
    """Every attribute KEY the study's judging humans gave with 2 to ``MAX_POOLS`` values, each as
    ``attribute_pools`` gives it, keys sorted: the pools a reader can switch between. Two queries."""
    humans = _judging_humans(study)
    by_key: dict[str, dict[str, list[int]]] = {}
    for annotator_id, attributes in sorted(attributes_in_study(study.pk, humans).items()):
        for key, value in (attributes or {}).items():
            name = pool_name(value)
            if name is not None:
                by_key.setdefault(str(key), {}).setdefault(name, []).append(annotator_id)
    return {
        key: dict(sorted(pools.items()))
        for key, pools in sorted(by_key.items())
        if 2 <= len(pools) <= MAX_POOLS
    }


def attribute_keys(study: Study) -> list[str]:
    """Every attribute KEY a judging human of the study gave (sorted): what a pool source may name."""
    humans = _judging_humans(study)
    return sorted(
        {
            str(key)
            for attributes in attributes_in_study(study.pk, humans).values()
            for key in attributes or {}
        }
    )


def pools_fingerprint(study: Study, key: str) -> str:
    """A short digest of who is in which pool of ``key``: a cached report read from a pool changes when an
    enrolment's answers do (annotations alone would not say so)."""
    pools = attribute_pools(study, key)
    text = ";".join(f"{name}={','.join(map(str, ids))}" for name, ids in pools.items())
    return hashlib.sha256(text.encode()).hexdigest()[:16]
