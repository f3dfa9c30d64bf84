"""Reads for the annotator's pages: the task page's view of one assignment, progress, reveals.

Everything here reads only the annotator's own answers: other annotators' answers and machine
labels are never part of a task (``reveal_machine_labels`` reads them only after a submit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Count, Exists, F, Min, OuterRef, Q, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.access import image_assignments, lease_is_current
from annotations.models import (
    Annotation,
    Annotator,
    AnnotatorExclusion,
    Assignment,
    Enrollment,
    Item,
    ItemImage,
    Pool,
    Study,
    User,
    ValidationSample,
    ValidationSampleItem,
)
from annotations.selectors.item_counts import eligible_count
from annotations.selectors.overlap import policy_opening
from common.file_storage import serve_by_redirect
from common.prepared_query import PreparedQuery
from common.safe_markdown import first_paragraph_text
from protocols.answers import questions_to_answer
from protocols.colours import BASIC_COLOURS
from protocols.schema import Option, Question


@dataclass
class OptionView:
    key: str
    label: str
    digit: str
    checked: bool = False


@dataclass
class QuestionView:
    """One question as the task page draws it, with the annotator's current (or just posted) answer."""

    question: Question
    number: int
    prompt: str
    options: list[OptionView] = field(default_factory=list)
    pages: list[list[OptionView]] = field(default_factory=list)
    apart: OptionView | None = None  # likert's Unsure or multi's None of the above
    value: Any = None
    shown: list[str] = field(default_factory=list)
    reason: str = ""
    error: str = ""
    hint: str = ""
    linked_options: list[OptionView] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)  # multi: options this annotator was already shown
    noun: tuple[str, str] = ("option", "options")  # boxes: what the linked options are called

    @property
    def seen_csv(self) -> str:
        return ",".join(self.seen)

    @property
    def key(self) -> str:
        return self.question.key

    @property
    def kind(self) -> str:
        return self.question.kind

    @property
    def show_if_json(self) -> str:
        return json.dumps(self.question.show_if) if self.question.show_if else ""

    @property
    def value_json(self) -> str:
        return json.dumps(self.value if self.value is not None else [])

    @property
    def shown_csv(self) -> str:
        return ",".join(self.shown)


def _option_views(options: tuple[Option, ...], selected: Any) -> list[OptionView]:
    chosen = set(selected) if isinstance(selected, list) else {selected}
    return [
        OptionView(key=o.key, label=o.label, digit=str(i + 1) if i < 9 else "", checked=o.key in chosen)
        for i, o in enumerate(options)
    ]


def question_views(
    *,
    study: Study,
    item: Item,
    expert: bool,
    answers: Mapping[str, Mapping[str, Any]],
    errors: Mapping[str, str] | None = None,
) -> list[QuestionView]:
    """The item's questions for an annotator of the expert pool in this study (``expert``) or not,
    filled with ``answers`` (stored or posted)."""
    protocol = study.protocol_obj
    metadata = item.metadata
    views: list[QuestionView] = []
    by_key: dict[str, QuestionView] = {}
    for number, question in enumerate(questions_to_answer(protocol, metadata, expert=expert), 1):
        answer = answers.get(question.key) or {}
        value = answer.get("value")
        view = QuestionView(
            question=question,
            number=number,
            prompt=question.render_prompt(text=item.text or None, metadata=metadata),
            value=value,
            reason=str(answer.get("reason") or ""),
            error=(errors or {}).get(question.key, ""),
        )
        if question.kind in ("likert", "single", "multi"):
            view.options = _option_views(question.options_for(metadata), value)
            apart = question.unsure or question.none_option
            if apart is not None:
                chosen = value if isinstance(value, list) else [value]
                view.apart = OptionView(
                    key=apart.key, label=apart.label, digit="0", checked=apart.key in chosen
                )
            if question.kind == "multi":
                size = question.page_size or len(view.options) or 1
                view.pages = [view.options[i : i + size] for i in range(0, len(view.options), size)] or [[]]
                all_keys = [o.key for o in view.options] + ([view.apart.key] if view.apart else [])
                view.shown = list(answer.get("shown") or all_keys)
                # An answer given before (an edit, or a refused post) was shown what it says it was
                # (no ``shown``: everything); a new task starts with nothing seen (the page counts).
                if value is not None:
                    view.seen = list(answer.get("shown") or all_keys)
        elif question.kind == "binary":
            view.options = [
                OptionView(key="1", label="Yes", digit="1", checked=str(value) == "1"),
                OptionView(key="0", label="No", digit="0", checked=str(value) == "0"),
            ]
        elif question.kind == "text":
            view.value = "" if value is None else str(value)
            if question.normaliser == "colour":
                view.hint = "A colour name, e.g. " + ", ".join(BASIC_COLOURS)
            elif question.normaliser == "lowercase":
                view.hint = "Free text (stored in lower case)"
        elif question.kind == "boxes":
            linked = by_key.get(question.linked_question or "")
            if linked is not None:
                view.linked_options = [OptionView(key=o.key, label=o.label, digit="") for o in linked.options]
                view.noun = option_noun(linked.question.key)
            view.value = value if isinstance(value, list) else []
        views.append(view)
        by_key[question.key] = view
    return views


def option_noun(question_key: str) -> tuple[str, str]:
    """(singular, plural) for the options of a multi question, for the task page's warnings: the
    question's key when it is a plain plural word ("attributes" -> attribute, attributes), else
    option, options."""
    if re.fullmatch(r"[a-z]{2,}[^s]s", question_key):
        return question_key[:-1], question_key
    return "option", "options"


def stored_answers(*, item: Item, annotator: Annotator) -> dict[str, dict[str, Any]]:
    """The annotator's own stored answers to an item, as ``{key: {value, shown, reason}}``."""
    return {
        a.question_key: {"value": a.value, "shown": a.shown, "reason": a.reason}
        for a in Annotation.objects.filter(item=item, annotator=annotator)
    }


@dataclass(frozen=True)
class ImagePlace:
    """One image of an item a page or the API can show: where it is in the item, and its size."""

    item_id: int
    position: int
    width: int | None
    height: int | None


def item_images(item: Item) -> list[ImagePlace]:
    """The item's images that have a file, in order (reads ``item.images``; prefetch it)."""
    return [
        ImagePlace(item_id=item.pk, position=image.position, width=image.width, height=image.height)
        for image in item.images.all()
        if image.file
    ]


def item_with_images(item_id: int) -> Item:
    return Item.objects.prefetch_related("images").get(pk=item_id)


def sample_item(study: Study) -> Item | None:
    """The item an invitation's preview shows: the study's first item that is not a control item."""
    return Item.objects.prefetch_related("images").filter(study=study, control_kind="").order_by("id").first()


# --- Progress --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowProgress:
    """One annotator's own work in one study, as their pages show it (docs/annotating.md, "Progress").

    ``done``: submitted; ``skipped``: skipped (an undo brings one back to ``left``); ``left``: items still
    open to them now (the ones they hold, plus those they never had that still have a free slot and that
    the claim rule could hand them), capped by an invitation's quota. ``held``: the assignment a claim
    would resume (their oldest live lease), or None. Times are the sums of their submitted items'
    ``time_spent_ms``; ``estimate_left_ms`` is the mean time per timed item times ``left`` (None until
    one item is timed)."""

    study: Study
    done: int
    skipped: int
    left: int
    held: int | None
    expert: bool
    time_spent_ms: int
    estimate_left_ms: int | None

    @property
    def total(self) -> int:
        return self.done + self.skipped + self.left

    @property
    def started(self) -> bool:
        return self.done + self.skipped > 0 or self.held is not None

    @property
    def time_spent_text(self) -> str:
        return duration_text(self.time_spent_ms)

    @property
    def estimate_left_text(self) -> str:
        return "" if self.estimate_left_ms is None else duration_text(self.estimate_left_ms)

    @property
    def what_to_do(self) -> str:
        """One line for the annotator: the first paragraph of the protocol's description, else of its
        instructions, its lines joined (the page shortens it at a word with an ellipsis), else nothing."""
        protocol = self.study.protocol_obj
        return first_paragraph_text(protocol.description or protocol.instructions)


def duration_text(ms: int) -> str:
    """A time a person reads: "45 s", "12 min", "1 h 05 min"."""
    seconds = max(ms, 0) // 1000
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _live_lease(now: Any) -> Q:
    return Q(status=Assignment.Status.LEASED, lease_expires_at__gt=now)


def _open_items_count(
    *, study: Study, annotator: Annotator, expert: bool, now: Any, held: int, excluded: bool, sample: bool
) -> int:
    """Items this annotator holds or could still be given in ``study``: not closed by them (submitted or
    skipped), and held by them or with fewer others occupying a slot than the item has slots (the
    ``overlap``, or what its overlap policy wants now); expert-only items
    for the expert pool only; while the study has a validation sample, only its items; nothing new for
    an excluded annotator. Control items count once handed out (a live lease of theirs).

    Flat with the study's size (issue 17): ``held`` (their live leases, counted by ``flow_progress``)
    plus the items a claim could hand out at all (``eligible_count``, cached) less those of them
    *blocked* for this person, read from the study's assignments only: occupied by ``overlap`` people
    (them included), or closed or held by them. One query (two when the eligible count is not cached),
    none reading every item."""
    if excluded:
        return held
    live = _live_lease(now)
    slots = Assignment.objects.filter(
        study=study,
        status__in=[Assignment.Status.SUBMITTED, Assignment.Status.SKIPPED, Assignment.Status.LEASED],
        item__control_kind="",
    )
    if not expert:
        slots = slots.filter(item__expert_only=False)
    if sample:
        slots = slots.filter(
            Exists(ValidationSampleItem.objects.filter(sample_id=study.pk, item=OuterRef("item")))
        )
    mine = Q(annotator=annotator) & (
        Q(status__in=[Assignment.Status.SUBMITTED, Assignment.Status.SKIPPED]) | live
    )
    # An item is full at its slots: the overlap, or what its overlap policy wants now (docs/overlap.md;
    # an item the policy stopped has as many slots as judgements).
    full = Coalesce(F("item__policy_slots"), Value(policy_opening(study)))
    blocked = (
        slots.order_by()
        .values("item", "item__policy_slots")
        .annotate(
            occupied=Count("id", filter=Q(status=Assignment.Status.SUBMITTED) | live),
            mine=Count("id", filter=mine),
        )
        .filter(Q(occupied__gte=full) | Q(mine__gt=0))
        .count()
    )
    return held + max(eligible_count(study=study, expert=expert, sample=sample) - blocked, 0)


def flow_progress(
    user: User, *, study_id: int | None = None, annotator: Annotator | None = None, now: Any = None
) -> list[FlowProgress]:
    """The annotator's own progress in each study they are enrolled in (or only ``study_id``), by name:
    two queries plus one count per study over its assignments (plus one for ``user.annotator`` unless
    ``annotator`` is given, and one per study whose item count is not cached: ``eligible_count``)."""
    now = now or timezone.now()
    if annotator is None:
        annotator = getattr(user, "annotator", None)
    enrollments = (
        Enrollment.objects.filter(user=user)
        .select_related("study")
        # an invitation's quota (a participant's account belongs to one study only)
        .annotate(
            quota=F("user__participant__invitation__items_per_participant"),
            # excluded from the study (as ``active_exclusions``); the study has a validation sample
            excluded=Exists(
                AnnotatorExclusion.objects.filter(
                    study_id=OuterRef("study_id"), annotator=annotator, reinstated_at__isnull=True
                )
            ),
            sample=Exists(ValidationSample.objects.filter(study_id=OuterRef("study_id"))),
        )
        .order_by("study__name")
    )
    if study_id is not None:
        enrollments = enrollments.filter(study_id=study_id)
    rows = [(e.study, e.pool == Pool.EXPERT, e.quota, e.excluded, e.sample) for e in enrollments]
    counts: dict[int, dict[str, Any]] = {}
    if annotator is not None and rows:
        submitted = Q(status=Assignment.Status.SUBMITTED)
        # their live leases on items their pool may hold (expert-only ones for the expert pool only)
        in_pool = Q(item__expert_only=False) | Q(study__in=[row[0] for row in rows if row[1]])
        counts = {
            row["study_id"]: dict(row)
            for row in Assignment.objects.filter(annotator=annotator, study__in=[row[0] for row in rows])
            .values("study_id")
            .annotate(
                done=Count("id", filter=submitted),
                skipped=Count("id", filter=Q(status=Assignment.Status.SKIPPED)),
                spent=Sum("time_spent_ms", filter=submitted),
                timed=Count("id", filter=submitted & Q(time_spent_ms__isnull=False)),
                # the lease a claim resumes: the oldest (ids grow with time)
                held=Min("id", filter=_live_lease(now)),
                leased=Count("id", filter=_live_lease(now) & in_pool),
            )
        }
    result = []
    for study, expert, quota, excluded, sample in rows:
        row = counts.get(study.pk, {})
        done, skipped = int(row.get("done") or 0), int(row.get("skipped") or 0)
        spent, timed = int(row.get("spent") or 0), int(row.get("timed") or 0)
        left = (
            0
            if annotator is None
            else _open_items_count(
                study=study,
                annotator=annotator,
                expert=expert,
                now=now,
                held=int(row.get("leased") or 0),
                excluded=bool(excluded),
                sample=bool(sample),
            )
        )
        if quota is not None:
            left = min(left, max(quota - done, 0))
        result.append(
            FlowProgress(
                study=study,
                done=done,
                skipped=skipped,
                left=left,
                held=row.get("held"),
                expert=expert,
                time_spent_ms=spent,
                estimate_left_ms=(spent // timed) * left if timed else None,
            )
        )
    return result


def study_progress_for(user: User, study_id: int, annotator: Annotator | None = None) -> FlowProgress | None:
    """The annotator's own progress in one study (None when not enrolled)."""
    rows = flow_progress(user, study_id=study_id, annotator=annotator)
    return rows[0] if rows else None


def machine_labels(item: Item) -> list[dict[str, Any]]:
    """Machine annotations of an item (read only for the reveal after a person has submitted)."""
    return [
        {"question": a.question_key, "labeller": str(a.annotator), "value": a.value}
        for a in Annotation.objects.filter(item=item, annotator__kind=Annotator.Kind.MACHINE)
        .select_related("annotator")
        .order_by("question_key", "annotator__name")
    ]


def first_image(item_id: int) -> ItemImage | None:
    return ItemImage.objects.filter(item_id=item_id).exclude(file="").order_by("position").first()


# ``ItemImage.objects.filter(item_id=...)`` in the model's order, compiled once per process and database.
_ITEM_IMAGES = PreparedQuery(lambda item: ItemImage.objects.filter(item_id=item), ("item",))


def item_images_load(item: Item) -> Item:
    """``prefetch_related_objects([item], "images")`` in one query, without building it each time (the
    claim's hot path, issue 17): ``item.images.all()`` then reads the loaded images."""
    return _images_set(item, _ITEM_IMAGES.all(connection.alias, item=item.pk))


# The item's images, each with ``access.assignment_gives_direct_urls``'s query as a column.
_TASK_IMAGES = PreparedQuery(
    lambda item, user, assignment: ItemImage.objects.filter(item_id=item).annotate(
        gives_direct_url=Exists(image_assignments(user).filter(pk=assignment))
    ),
    ("item", "user", "assignment"),
)


def task_images_load(assignment: Assignment) -> bool:
    """``item_images_load(assignment.item)`` and ``access.assignment_gives_direct_urls(assignment)`` in
    one statement (the claim's answer, issue 38: the access rule is a column of the images' query,
    not a second round trip). Returns whether the task may carry its images' presigned URLs: never
    where files are not answered by redirect (then the images' plain query, cheaper to plan)."""
    item, user_id = assignment.item, assignment.annotator.user_id
    if not serve_by_redirect():
        item_images_load(item)
        return False
    images: list[Any] = _TASK_IMAGES.all(
        connection.alias, item=item.pk, user=user_id if user_id is not None else 0, assignment=assignment.pk
    )
    _images_set(item, images)
    return (
        user_id is not None
        and lease_is_current(assignment)
        and any(image.gives_direct_url for image in images)
    )


def _images_set(item: Item, images: list[ItemImage]) -> Item:
    for image in images:
        image.item = item
    loaded: Any = item.images.all()
    loaded._result_cache = images
    loaded._prefetch_done = True
    cache: Any = item.__dict__.setdefault("_prefetched_objects_cache", {})
    cache[Item._meta.get_field("images").get_accessor_name()] = loaded
    return item
