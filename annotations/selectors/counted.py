"""What counts in consensus, agreement and metrics (docs/crowd.md, "Quality control"): the one place
that decides it.

An annotation counts unless it is on a control item (gold or attention check) or by an annotator
excluded from the study (an ``AnnotatorExclusion`` not reinstated). Consensus, the agreement report,
every metric and the quality report read through these, so excluding someone or marking a control
changes all of them at their next computation.
"""

from __future__ import annotations

from django.db.models import QuerySet

from annotations.models import Annotation, AnnotatorExclusion, Item, Study


def active_exclusions(study: Study) -> QuerySet[AnnotatorExclusion]:
    """The study's exclusions in force (not reinstated)."""
    return AnnotatorExclusion.objects.filter(study=study, reinstated_at__isnull=True)


def counted_annotations(study: Study) -> QuerySet[Annotation]:
    """Annotations that count: not on a control item, not by an annotator excluded from the study.

    Consensus, the agreement report and every metric read annotations through this (one query, the
    two conditions as a join and a subquery), so excluding someone or marking a control changes all of
    them at the next computation.
    """
    return Annotation.objects.filter(study=study, item__control_kind="").exclude(
        annotator_id__in=active_exclusions(study).values("annotator_id")
    )


def uncounted_ids(study: Study) -> tuple[list[int], list[int]]:
    """The ids of the study's excluded annotators and of its control items: what ``counted_annotations``
    leaves out, for code that filters large arrays itself (``agreement_data.question_matrix``)."""
    return (
        list(active_exclusions(study).values_list("annotator_id", flat=True)),
        list(Item.objects.filter(study=study).exclude(control_kind="").values_list("id", flat=True)),
    )


def counted_items(study: Study) -> QuerySet[Item]:
    """The study's real items (control items left out)."""
    return Item.objects.filter(study=study, control_kind="")
