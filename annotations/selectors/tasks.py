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
from django.db.models import Count, Q, QuerySet

from annotations.models import (
    Annotation,
    Annotator,
    Assignment,
    Enrollment,
    Item,
    ItemImage,
    Pool,
    Study,
    User,
)
from annotations.protocols.answers import questions_to_answer
from annotations.protocols.colours import BASIC_COLOURS
from annotations.protocols.schema import Option, Question
from common.prepared_query import PreparedQuery


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


# --- Progress --------------------------------------------------------------------------------------


def enrolled_studies(user: User) -> list[dict[str, Any]]:
    """The annotator's dashboard: each enrolled study with how many items they have done of those
    they could do (done = submitted; of = done + what is still open to them), and whether they are
    of the expert pool there (``expert``: expert-only items count, the study can be adjudicated).
    Control items count once handed to the annotator (so a control raises both numbers, like any
    item, and none is announced before it is served)."""
    annotator = getattr(user, "annotator", None)
    enrollments = Enrollment.objects.filter(user=user).select_related("study").order_by("study__name")
    studies = [enrollment.study for enrollment in enrollments]
    experts = {e.study_id for e in enrollments if e.pool == Pool.EXPERT}
    done: dict[int, int] = {}
    skipped: dict[int, int] = {}
    controls: dict[int, int] = {}
    if annotator is not None:
        rows = (
            Assignment.objects.filter(annotator=annotator, study__in=studies)
            .values("study_id")
            .annotate(
                done=Count("id", filter=Q(status="submitted")),
                skipped=Count("id", filter=Q(status="skipped")),
                controls=Count("id", filter=~Q(item__control_kind="")),
            )
        )
        done = {row["study_id"]: row["done"] for row in rows}
        skipped = {row["study_id"]: row["skipped"] for row in rows}
        controls = {row["study_id"]: row["controls"] for row in rows}
    # Expert-only items count only in the studies where this person is of the expert pool.
    items = Item.objects.filter(study__in=studies, control_kind="").filter(
        Q(expert_only=False) | Q(study__in=list(experts))
    )
    totals = {row["study_id"]: row["n"] for row in items.values("study_id").annotate(n=Count("id"))}
    result = []
    for study in studies:
        total = max(totals.get(study.pk, 0) + controls.get(study.pk, 0) - skipped.get(study.pk, 0), 0)
        result.append(
            {"study": study, "done": done.get(study.pk, 0), "total": total, "expert": study.pk in experts}
        )
    return result


def my_assignments(*, study: Study, annotator: Annotator) -> QuerySet[Assignment]:
    return (
        Assignment.objects.filter(study=study, annotator=annotator)
        .exclude(status=Assignment.Status.EXPIRED)
        .select_related("item")
        .order_by("-completed_at", "-id")
    )


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
    images = _ITEM_IMAGES.all(connection.alias, item=item.pk)
    for image in images:
        image.item = item
    loaded: Any = item.images.all()
    loaded._result_cache = images
    loaded._prefetch_done = True
    cache: Any = item.__dict__.setdefault("_prefetched_objects_cache", {})
    cache[Item._meta.get_field("images").get_accessor_name()] = loaded
    return item
