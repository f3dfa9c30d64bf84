"""An annotator's pool and demographic answers *in one study*: the only place they are read.

An account's pool (crowd or expert) and the answers it gave a study's demographic form live on its
``Enrollment`` in that study; an imported annotator (no account) belongs to one study and keeps
them on its own row (``Annotator.study_pool``, ``study_attributes``). Machine labellers and people
not enrolled are crowd with no answers. Nothing here reads another study's enrolment, so what a
researcher does in one study never changes what anyone is or can do in another
(docs/security.md, "Tenancy").
"""

from __future__ import annotations

from typing import Any

from annotations.models import Annotator, Enrollment, Pool, Study


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
