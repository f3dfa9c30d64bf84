"""Reads for the annotator's flow through their own items: Previous / Next on the task page and the
"Your answers" page (thumbnails and readable answers). docs/annotating.md explains the flow.

Only the annotator's own assignments are ever read here: every query filters on their annotator row.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, IntegerField, Prefetch, Q, QuerySet, Subquery
from django.utils import timezone

from annotations.models import Annotation, Annotator, Assignment, ItemImage, Study
from protocols.answers import questions_to_answer
from protocols.schema import Question

ANSWERS_PER_PAGE = 25


def _walkable(*, study_id: int, annotator_id: int, now: Any) -> QuerySet[Assignment]:
    """The annotator's own items one can step through: submitted ones (they open in the edit view) and
    live leases, in the order they were handed out."""
    return Assignment.objects.filter(study_id=study_id, annotator_id=annotator_id).filter(
        Q(status=Assignment.Status.SUBMITTED) | Q(status=Assignment.Status.LEASED, lease_expires_at__gt=now)
    )


def neighbours(assignment: Assignment, now: Any = None) -> tuple[int | None, int | None]:
    """(previous, next) assignment ids around ``assignment`` among the same annotator's own walkable
    items in its study, by the order they were handed out; None at either end (one query)."""
    now = now or timezone.now()
    mine = _walkable(study_id=assignment.study_id, annotator_id=assignment.annotator_id, now=now)
    at, pk = assignment.created_at, assignment.pk
    before = mine.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=pk)).order_by("-created_at", "-id")
    after = mine.filter(Q(created_at__gt=at) | Q(created_at=at, id__gt=pk)).order_by("created_at", "id")
    row = (
        Assignment.objects.filter(pk=pk)
        .annotate(
            before=Subquery(before.values("id")[:1], output_field=IntegerField()),
            after=Subquery(after.values("id")[:1], output_field=IntegerField()),
        )
        .values_list("before", "after")
        .first()
    )
    return (row[0], row[1]) if row is not None else (None, None)


@dataclass
class AnswerRow:
    """One of the annotator's items on "Your answers": what it showed, and what they answered."""

    assignment: Assignment
    thumbnail_position: int | None = None  # the first image's position (the page makes its URL)
    text: str = ""
    answers: list[tuple[str, str]] = field(default_factory=list)  # (question prompt, readable answer)
    # A leased item's place: "current" (the one a claim resumes: their oldest live lease), "ahead"
    # (another live lease, leased ahead while the current one is shown), "lapsed" (its time ran out).
    lease: str = ""


def _labels(question: Question, metadata: dict[str, Any]) -> dict[str, str]:
    options = list(question.options_for(metadata))
    for apart in (question.unsure, question.none_option):
        if apart is not None:
            options.append(apart)
    return {option.key: option.label for option in options}


def readable_answer(
    question: Question, value: Any, metadata: dict[str, Any], linked_labels: dict[str, str]
) -> str:
    """An answer as a person reads it: option labels (not keys), Yes/No, the text, or box counts per label."""
    if value is None:
        return "—"
    if question.kind in ("single", "likert"):
        return _labels(question, metadata).get(str(value), str(value))
    if question.kind == "multi":
        labels = _labels(question, metadata)
        chosen = value if isinstance(value, list) else [value]
        return ", ".join(labels.get(str(key), str(key)) for key in chosen) or "none"
    if question.kind == "binary":
        return {"1": "Yes", "0": "No", "True": "Yes", "False": "No"}.get(str(value), str(value))
    if question.kind == "boxes":
        boxes = value if isinstance(value, list) else []
        if not boxes:
            return "no boxes"
        counts = Counter(
            linked_labels.get(str(box.get("option")), str(box.get("option")))
            if isinstance(box, dict)
            else "?"
            for box in boxes
        )
        per_label = ", ".join(f"{label} ×{n}" for label, n in counts.items())
        return f"{len(boxes)} box{'es' if len(boxes) != 1 else ''}: {per_label}"
    return str(value)


def _lease_place(assignment: Assignment, current: int | None, now: Any) -> str:
    if assignment.status != Assignment.Status.LEASED:
        return ""
    if assignment.lease_expires_at is None or assignment.lease_expires_at <= now:
        return "lapsed"
    return "current" if assignment.pk == current else "ahead"


def answer_rows(
    *, study: Study, annotator: Annotator, page_number: Any
) -> tuple[Page[Assignment], list[AnswerRow]]:
    """One page of the annotator's own items in ``study`` (not expired leases), newest first (items not
    yet finished on top), with a thumbnail (first image) or the item's text, and readable answers.
    Three queries per page whatever its length (four when it shows a lease: which one is current)."""
    images = ItemImage.objects.exclude(file="").order_by("position")
    assignments = (
        Assignment.objects.filter(study=study, annotator=annotator)
        .exclude(status=Assignment.Status.EXPIRED)
        .select_related("item")
        .prefetch_related(Prefetch("item__images", queryset=images))
        .order_by(F("completed_at").desc(nulls_first=True), "-id")
    )
    page = Paginator(assignments, ANSWERS_PER_PAGE).get_page(page_number)
    shown = list(page.object_list)
    stored: dict[int, dict[str, Any]] = {}
    for annotation in Annotation.objects.filter(
        annotator=annotator, item_id__in=[a.item_id for a in shown]
    ).only("item_id", "question_key", "value"):
        stored.setdefault(annotation.item_id, {})[annotation.question_key] = annotation.value
    protocol = study.protocol_obj
    now = timezone.now()
    current = None
    if any(a.status == Assignment.Status.LEASED for a in shown):
        current = (
            Assignment.objects.filter(
                study=study, annotator=annotator, status=Assignment.Status.LEASED, lease_expires_at__gt=now
            )
            .order_by("created_at", "id")
            .values_list("id", flat=True)
            .first()
        )
    rows = []
    for assignment in shown:
        item = assignment.item
        # A skipped item's images are no longer the annotator's to see (``access.image_assignments``).
        skipped = assignment.status == Assignment.Status.SKIPPED
        first = None if skipped else next(iter(item.images.all()), None)
        row = AnswerRow(
            assignment=assignment,
            thumbnail_position=first.position if first is not None else None,
            text=item.text or "",
            lease=_lease_place(assignment, current, now),
        )
        values = stored.get(item.pk, {})
        by_key = {q.key: q for q in protocol.questions}
        for question in questions_to_answer(protocol, item.metadata, expert=True):
            if question.key not in values:
                continue
            linked = by_key.get(question.linked_question or "")
            linked_labels = _labels(linked, item.metadata) if linked is not None else {}
            row.answers.append(
                (
                    question.render_prompt(text=item.text or None, metadata=item.metadata),
                    readable_answer(question, values[question.key], item.metadata, linked_labels),
                )
            )
        rows.append(row)
    return page, rows
