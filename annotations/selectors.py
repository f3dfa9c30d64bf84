"""Reads shaped for pages and APIs (select_related/prefetch_related, aggregate counts)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, QuerySet

from annotations.models import Annotation, AnnotatorExclusion, Item, ItemImage, Study


def study_summary(study: Study) -> dict[str, Any]:
    """Counts a study page shows: items by kind and condition, annotations by source and question."""
    items = Item.objects.filter(study=study)
    annotations = Annotation.objects.filter(study=study)
    return {
        "items": items.count(),
        "references": items.filter(is_reference=True).count(),
        "conditions": list(items.values("condition").annotate(n=Count("id")).order_by("condition")),
        "annotations": annotations.count(),
        "by_annotator_kind": list(
            annotations.values("annotator__kind").annotate(n=Count("id")).order_by("annotator__kind")
        ),
        "by_question": list(annotations.values("question_key").annotate(n=Count("id")).order_by("question_key")),
        "annotators": annotations.values("annotator_id").distinct().count(),
    }


def items_page(study: Study) -> QuerySet[Item]:
    return Item.objects.filter(study=study).prefetch_related(
        Prefetch("images", queryset=ItemImage.objects.order_by("position"))
    ).order_by("id")


# --- What counts in consensus, agreement and metrics (docs/crowd.md, "Quality control") ----------------


def active_exclusions(study: Study) -> QuerySet[AnnotatorExclusion]:
    """The study's exclusions in force (not reinstated)."""
    return AnnotatorExclusion.objects.filter(study=study, reinstated_at__isnull=True)


def counted_annotations(study: Study) -> QuerySet[Annotation]:
    """Annotations that count: not on a control item, not by an annotator excluded from the study.

    Consensus, the agreement report and every metric read annotations through this (one query, the
    two conditions as a join and a subquery), so excluding someone or marking a control changes all of
    them at the next computation.
    """
    return (Annotation.objects.filter(study=study, item__control_kind="")
            .exclude(annotator_id__in=active_exclusions(study).values("annotator_id")))


def counted_items(study: Study) -> QuerySet[Item]:
    """The study's real items (control items left out)."""
    return Item.objects.filter(study=study, control_kind="")
