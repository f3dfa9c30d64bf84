"""Placeholder replaced at merge by r26a's ``reports/gather.py``: a small but real document, so the
report's doors (the Report tab, the API job, the renderers) run on this branch before the merge.

It holds no logic the doors need: only :func:`report_build`'s signature is relied on.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Count
from django.utils import timezone

from annotations.models import Annotation, Study
from reports.document import Column, DocTable, Facts, ReportDocument, Section


def report_build(
    study: Study, *, compare: Sequence[Study] = (), source: str | None = None, correction: str = "holm"
) -> ReportDocument:
    """Placeholder replaced at merge by r26a's: the study's name, its item and annotator counts and
    its items per condition."""
    studies = [study, *compare]
    sections = []
    for each in studies:
        per_condition = list(
            each.items.values("condition")
            .annotate(n=Count("id"))
            .order_by("condition")
            .values_list("condition", "n")
        )
        annotators = Annotation.objects.filter(study=each).values("annotator").distinct().count()
        sections.append(
            Section(
                key=f"design-{each.pk}",
                title=f"Design: {each.name}",
                blocks=[
                    Facts(pairs=[("Items", f"{each.items.count():,}"), ("Annotators", f"{annotators:,}")]),
                    DocTable(
                        key=f"items_per_condition_{each.pk}",
                        title="Items per condition",
                        columns=[Column("condition", "Condition", "label"), Column("n", "Items", "n")],
                        rows=[[condition, n] for condition, n in per_condition],
                    ),
                ],
            )
        )
    title = f"Audit report: {study.name}" + "".join(f" vs {other.name}" for other in compare)
    return ReportDocument(
        title=title,
        study_ids=[each.pk for each in studies],
        source=source or "consensus",
        generated_at=timezone.now().isoformat(timespec="seconds"),
        sections=sections,
    )
