"""Reads shaped for pages and APIs (select_related/prefetch_related, aggregate counts).

Which annotations count in consensus, agreement and metrics is decided in ``selectors/counted.py``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import (
    Case,
    Count,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce, Least
from django.utils import timezone

from annotations.models import Annotation, Assignment, Item, ItemImage, Study, User
from annotations.selectors.overlap import policy_opening


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
        "by_question": list(
            annotations.values("question_key").annotate(n=Count("id")).order_by("question_key")
        ),
        "annotators": annotations.values("annotator_id").distinct().count(),
    }


def enrolled_account(study: Study, username: str) -> User | None:
    """The account ``username`` if it is enrolled in ``study``, else None. Looked up among the study's
    enrolments only, so a caller answers the same whether or not the account exists elsewhere."""
    if not username:
        return None
    return User.objects.filter(username=username, enrollments__study=study).first()


def items_page(study: Study, *, blank: bool | None = None) -> QuerySet[Item]:
    """The study's items with their images, each annotated ``has_blank`` (an image of one colour, set at
    import: ``ItemImage.is_blank``); ``blank`` True or False keeps only the items with or without one."""
    queryset = (
        Item.objects.filter(study=study)
        .annotate(has_blank=Exists(ItemImage.objects.filter(item=OuterRef("pk"), is_blank=True)))
        .prefetch_related(Prefetch("images", queryset=ItemImage.objects.order_by("position")))
        .order_by("id")
    )
    if blank is not None:
        queryset = queryset.filter(has_blank=blank)
    return queryset


def blank_items_count(study: Study) -> int:
    """How many items of ``study`` have a blank or single-colour image (one query)."""
    return Item.objects.filter(study=study, images__is_blank=True).distinct().count()


def studies_conditions_and_models(study_ids: Iterable[int]) -> tuple[list[str], list[str]]:
    """Distinct item conditions and model names of some studies (a blank model name reads as ``model``, as the
    metrics name it), for the comparison form's suggestions."""
    items = Item.objects.filter(study_id__in=list(study_ids)).order_by()
    conditions = sorted({c for c in items.values_list("condition", flat=True).distinct() if c})
    models = sorted({m or "model" for m in items.values_list("model_name", flat=True).distinct()})
    return conditions, models


def items_filter_choices(study: Study) -> tuple[list[str], list[str]]:
    """The distinct conditions and model names of ``study``'s items, sorted: what the items page may
    filter by (a filter value outside these is refused)."""
    items = Item.objects.filter(study=study).order_by()
    conditions = sorted(items.values_list("condition", flat=True).distinct())
    models = sorted(name for name in items.values_list("model_name", flat=True).distinct() if name)
    return conditions, models


def study_setup(study: Study) -> list[dict[str, Any]]:
    """The setup checklist of a study page's Overview, from the rows themselves: protocol, items, people,
    invitations, launch; each ``{key, title, done, detail, tab}`` (``tab``: where to do it)."""
    questions = len(study.protocol_obj.questions)
    items = Item.objects.filter(study=study).count()
    people = study.enrollments.count()
    links = study.invitations.filter(revoked_at__isnull=True, expires_at__gt=timezone.now()).count()
    launched = study.status != Study.Status.DRAFT
    return [
        {
            "key": "protocol",
            "title": "Protocol",
            "done": questions > 0,
            "tab": "protocol",
            "detail": f"{questions} question{'s' if questions != 1 else ''}",
        },
        {
            "key": "items",
            "title": "Items",
            "done": items > 0,
            "tab": "items",
            "detail": f"{items} item{'s' if items != 1 else ''}" if items else "no items yet: import them",
        },
        {
            "key": "people",
            "title": "People",
            "done": people > 0,
            "tab": "people",
            "detail": f"{people} enrolled" if people else "no one enrolled yet (or use an invitation link)",
        },
        {
            "key": "invitations",
            "title": "Invitations",
            "done": links > 0,
            "tab": "invitations",
            "detail": f"{links} open link{'s' if links != 1 else ''}"
            if links
            else "no open link (optional with enrolled people)",
        },
        {
            "key": "launch",
            "title": "Launch",
            "done": launched,
            "tab": "overview",
            "detail": study.get_status_display() if launched else "a draft: annotators get no items yet",
        },
    ]


def studies_completion(study_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Per study: submitted judgements (each item counted up to the judgements it needs; control items
    left out, as on the progress page) of those needed, and the percentage. An item needs the study's
    overlap under ``fixed:K``; under an overlap policy the judgements its policy wants now
    (``Item.policy_slots``, or the policy's opening for an item nobody judged: ``study_progress``'s
    rule). Two queries for all the studies (a correlated count per item, summed per study; the studies'
    openings)."""
    ids = list(study_ids)
    studies = Study.objects.filter(pk__in=ids).only("id", "overlap", "overlap_policy", "overlap_model")
    openings = {study.pk: policy_opening(study) for study in studies}
    submitted = (
        Assignment.objects.filter(item=OuterRef("pk"), status=Assignment.Status.SUBMITTED)
        .order_by()
        .values("item")
        .annotate(n=Count("id"))
        .values("n")
    )
    # Without a policy every item's policy_slots is empty: it needs the opening, the overlap.
    needs = Coalesce(F("policy_slots"), F("opening_now"), output_field=IntegerField())
    rows = (
        Item.objects.filter(study_id__in=ids, control_kind="")
        .order_by()
        .alias(
            opening_now=Case(
                *(When(study_id=pk, then=Value(n)) for pk, n in openings.items()),
                default=F("study__overlap"),
                output_field=IntegerField(),
            )
        )
        .values("study_id")
        .annotate(
            items=Count("id"),
            needed=Sum(needs),
            judged=Sum(
                Least(Coalesce(Subquery(submitted, output_field=IntegerField()), 0), needs),
                output_field=IntegerField(),
            ),
        )
    )
    completion: dict[int, dict[str, Any]] = {}
    for row in rows:
        needed = row["needed"] or 0
        judged = row["judged"] or 0
        completion[row["study_id"]] = {
            "judgements": judged,
            "needed": needed,
            "percent": round(100 * judged / needed, 1) if needed else 0.0,
        }
    return completion


def launch_refusal(study: Study) -> str:
    """Why a draft study cannot be launched yet (empty when it can): it needs items, and someone to
    judge them (an enrolled annotator or an invitation link that is neither revoked nor expired)."""
    if not study.items.exists():
        return "it has no items yet; import items first"
    open_links = study.invitations.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())
    if not study.enrollments.exists() and not open_links.exists():
        return "no one can judge its items yet; enrol an annotator or create an invitation link first"
    return ""
