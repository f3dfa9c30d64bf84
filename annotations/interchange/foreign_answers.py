"""Answers read from other tools' files (Label Studio, COCO): who gave them, checked, then stored.

Shared by ``labelstudio/importer.py`` and ``coco_import.py``; the JSONL import has its own line-numbered
twin in ``annotation_import.py``. Every value goes through ``clean_answer`` like any answer, and a
refusal names the place in the file (``task 12, annotations[0].result[3]``) the caller gave. Values are
stored with ``annotations_save``, the one annotation write.

Annotators, by the rule documented in docs/import-export.md ("Who the annotators are"):

- a machine (``Who(kind="machine")``) is this study's machine annotator of that name and version
  (``annotation_writes.machine_annotator_for_import``), never a registered labeller or another
  study's;
- a person named by an email address is, among the people already working in studies the study's
  owner may change (enrolled, or with answers there), the account with that username or, failing
  that, the one with that email (case-insensitive); any other email (unknown, or an account of
  someone else's studies) becomes an annotator of this study without an account, named
  ``imported-person-<digest>`` (``stand_in_name``), so nothing tells whether the email has an
  account elsewhere; the report gives counts only (``accounts_matched``, ``emails_not_matched``);
- a person named without an email (a Label Studio user id, a COCO annotator name) is an annotator of
  this study without an account, like the raters of a JSONL import.

A boxes answer names options of its linked multi question: they must be selected in that question's
answer by the same annotator, given in the same file or stored already. When neither exists, the
linked answer is the options the boxes name (in the question's order), stored with them and counted
as ``derived``: drawing a box labelled "hat" says a hat is there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from annotations.access import studies_writable_by
from annotations.interchange.box_cover import GivenSelection, boxes_cover_check
from annotations.models import Annotation, Annotator, Assignment, Enrollment, Study, User
from annotations.services.annotation_writes import (
    AnswerToSave,
    annotations_save,
    machine_annotator_for_import,
)
from annotations.services.studies import annotator_for_user
from common.errors import ImportRefused
from common.planner_statistics import statistics_refresh
from protocols.answers import (
    AnswerError,
    CleanAnswer,
    ItemContext,
    clean_answer,
)
from protocols.schema import Protocol, Question

CHUNK = 2000
STAND_IN_PREFIX = "imported-person-"


@dataclass(frozen=True)
class Who:
    """An annotator as a file names it (see the module docstring for how it is found or made)."""

    kind: str  # human | machine
    name: str
    version: str = ""
    email: str = ""

    def label(self) -> str:
        return f"{self.name} {self.version}".strip() if self.kind == Annotator.Kind.MACHINE else self.name


@dataclass(frozen=True)
class ItemFacts:
    """What checking an answer needs to know of its item."""

    item_id: int
    external_id: str
    metadata: dict[str, Any]
    image_sizes: tuple[tuple[int, int] | None, ...] = ()


@dataclass
class ForeignAnswer:
    where: str
    item: ItemFacts
    who: Who
    question_key: str
    value: Any
    time_spent_ms: int | None = None


@dataclass
class ForeignSkip:
    """An item a person declined (a cancelled Label Studio annotation): a skipped assignment."""

    where: str
    item: ItemFacts
    who: Who
    time_spent_ms: int | None = None
    when: datetime | None = None
    reason: str = "cancelled in Label Studio"


@dataclass
class AnswersReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    derived: int = 0
    skips: int = 0
    annotators_created: list[str] = field(default_factory=list)
    accounts_matched: int = 0  # counts only: an import never names whose email matched
    emails_not_matched: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "derived": self.derived,
            "skips": self.skips,
            "annotators_created": self.annotators_created,
            "accounts_matched": self.accounts_matched,
            "emails_not_matched": self.emails_not_matched,
        }


def _own_accounts(study: Study, emails: Sequence[str]) -> dict[str, User]:
    """The accounts among the people already working in studies ``study``'s owner may change
    (enrolled there, or with answers there) whose username, else email, is one of ``emails``
    (lower-case), by email. Nobody else is ever matched, so an import tells nothing of which emails
    have accounts elsewhere (docs/security.md)."""
    if not emails:
        return {}
    own_studies = studies_writable_by(study.owner).values("id")
    people = User.objects.filter(
        Exists(Enrollment.objects.filter(user=OuterRef("pk"), study__in=own_studies))
        | Exists(Annotation.objects.filter(annotator__user=OuterRef("pk"), study__in=own_studies))
    )
    found: dict[str, User] = {}
    candidates: list[User] = []
    for start in range(0, len(emails), CHUNK):
        wanted = Q()
        for email in emails[start : start + CHUNK]:
            wanted |= Q(username__iexact=email) | Q(email__iexact=email)
        candidates.extend(people.filter(wanted).order_by("id"))
    for email in emails:
        by_name = [user for user in candidates if user.username.lower() == email]
        by_email = [user for user in candidates if user.email.lower() == email]
        if by_name:
            found[email] = by_name[0]
        elif len(by_email) > 1:
            raise ImportRefused(
                f"several of your studies' annotators have the email {email!r}; give one of them that "
                "username"
            )
        elif by_email:
            found[email] = by_email[0]
    return found


def stand_in_name(study: Study, email: str) -> str:
    """The name of the annotator without an account that an unmatched email becomes in ``study``:
    machine-made (a digest of the study and the email, so a re-import finds the same one), never the
    email itself."""
    digest = hashlib.sha256(f"{study.pk}\x00{email.lower()}".encode()).hexdigest()[:12]
    return f"{STAND_IN_PREFIX}{digest}"


def annotators_resolve(study: Study, people: set[Who], report: AnswersReport) -> dict[Who, Annotator]:
    """The annotator of each ``Who`` (found, or created by the module's rule); call inside a transaction."""
    found: dict[Who, Annotator] = {}
    emails = sorted({who.email for who in people if who.kind == Annotator.Kind.HUMAN and who.email})
    accounts = _own_accounts(study, emails)
    stand_ins = {email: stand_in_name(study, email) for email in emails if email not in accounts}
    report.accounts_matched = len({user.pk for user in accounts.values()})
    report.emails_not_matched = len(stand_ins)
    plain = sorted(
        {who.name for who in people if who.kind == Annotator.Kind.HUMAN and not who.email}
        | set(stand_ins.values())
    )
    known = {
        annotator.name: annotator
        for start in range(0, len(plain), CHUNK)
        for annotator in Annotator.objects.filter(
            kind=Annotator.Kind.HUMAN, study=study, name__in=plain[start : start + CHUNK]
        )
    }
    new = [
        Annotator(kind=Annotator.Kind.HUMAN, study=study, name=name) for name in plain if name not in known
    ]
    for annotator in Annotator.objects.bulk_create(new, batch_size=CHUNK):
        known[annotator.name] = annotator
        report.annotators_created.append(annotator.name)
    for who in sorted(people, key=lambda w: (w.kind, w.name, w.version, w.email)):
        if who.kind == Annotator.Kind.MACHINE:
            annotator, created = machine_annotator_for_import(study=study, name=who.name, version=who.version)
            if created:
                report.annotators_created.append(who.label())
        elif who.email and who.email in accounts:
            annotator = annotator_for_user(user=accounts[who.email])
        elif who.email:
            annotator = known[stand_ins[who.email]]
        else:
            annotator = known[who.name]
        found[who] = annotator
    return found


def _stored_selections(
    study: Study, wanted: set[tuple[int, int, str]]
) -> dict[tuple[int, int, str], list[str]]:
    """Stored answers to linked multi questions, by (item id, annotator id, question key)."""
    stored: dict[tuple[int, int, str], list[str]] = {}
    items = sorted({item for item, _a, _q in wanted})
    annotators = sorted({a for _i, a, _q in wanted})
    questions = sorted({q for _i, _a, q in wanted})
    for start in range(0, len(items), CHUNK):
        rows = Annotation.objects.filter(
            study=study,
            item_id__in=items[start : start + CHUNK],
            annotator_id__in=annotators,
            question_key__in=questions,
        ).values_list("item_id", "annotator_id", "question_key", "value")
        for item_id, annotator_id, question_key, value in rows:
            if isinstance(value, list):
                stored[(item_id, annotator_id, question_key)] = [str(v) for v in value]
    return stored


def _clean(
    protocol: Protocol, question: Question, entry: ForeignAnswer, value: Any, selected: Sequence[str] | None
) -> CleanAnswer:
    if not question.applies_to(entry.item.metadata):
        raise ImportRefused(
            f"{entry.where}: question {question.key!r} does not apply to item {entry.item.external_id!r}"
        )
    context = ItemContext(metadata=entry.item.metadata, image_sizes=entry.item.image_sizes)
    try:
        return clean_answer(question, value, context=context, protocol=protocol, selected=selected)
    except AnswerError as exc:
        raise ImportRefused(f"{entry.where}: {exc}") from exc


@transaction.atomic
def foreign_answers_save(
    *, study: Study, answers: Sequence[ForeignAnswer], skips: Sequence[ForeignSkip] = ()
) -> AnswersReport:
    """Check every answer and store them all, or refuse the first bad one by its place in the file.

    Also records ``skips`` as skipped assignments (an assignment the person already has is left as
    it is). Runs in the caller's transaction, so a refusal leaves the study as it was.
    """
    protocol = study.protocol_obj
    report = AnswersReport()
    seen: dict[tuple[int, Who, str], str] = {}
    for entry in answers:
        if not protocol.has_question(entry.question_key):
            raise ImportRefused(f"{entry.where}: question {entry.question_key!r} is not in the protocol")
        key = (entry.item.item_id, entry.who, entry.question_key)
        if key in seen:
            raise ImportRefused(
                f"{entry.where}: a second answer to {entry.question_key!r} (first: {seen[key]})"
            )
        seen[key] = entry.where
    annotators = annotators_resolve(study, {a.who for a in answers} | {s.who for s in skips}, report)
    cleaned: dict[tuple[int, Who, str], tuple[ForeignAnswer, CleanAnswer]] = {}
    boxes: list[ForeignAnswer] = []
    for entry in answers:
        question = protocol.question(entry.question_key)
        if question.kind == "boxes":
            boxes.append(entry)
            continue
        answer = _clean(protocol, question, entry, entry.value, None)
        cleaned[(entry.item.item_id, entry.who, question.key)] = (entry, answer)
    missing = {
        (
            entry.item.item_id,
            annotators[entry.who].pk,
            str(protocol.question(entry.question_key).linked_question),
        )
        for entry in boxes
        if (entry.item.item_id, entry.who, protocol.question(entry.question_key).linked_question)
        not in cleaned
    }
    stored = _stored_selections(study, missing) if missing else {}
    for entry in boxes:
        question = protocol.question(entry.question_key)
        linked = protocol.question(str(question.linked_question))
        link_key = (entry.item.item_id, entry.who, linked.key)
        given = cleaned.get(link_key)
        selected = given[1].value if given is not None else None
        if selected is None:
            selected = stored.get((entry.item.item_id, annotators[entry.who].pk, linked.key))
        if selected is None:
            named = {box.get("option") for box in entry.value if isinstance(box, dict)}
            derived = [o.key for o in linked.options_for(entry.item.metadata) if o.key in named]
            cleaned[link_key] = (entry, _clean(protocol, linked, entry, derived, None))
            report.derived += 1
            selected = derived
        answer = _clean(protocol, question, entry, entry.value, selected)
        cleaned[(entry.item.item_id, entry.who, question.key)] = (entry, answer)
    _check_boxes_cover_selections(study, protocol, cleaned, annotators)
    counts = annotations_save(
        study_id=study.pk,
        answers=[
            AnswerToSave(
                item_id=entry.item.item_id,
                annotator=annotators[entry.who],
                answer=answer,
                time_spent_ms=entry.time_spent_ms,
            )
            for entry, answer in cleaned.values()
        ],
        source=Annotation.Source.IMPORT,
    )
    report.created, report.updated, report.unchanged = counts.created, counts.updated, counts.unchanged
    report.skips = _skips_save(study, skips, annotators)
    statistics_refresh(Annotation, Annotator, rows=counts.created)
    return report


def _check_boxes_cover_selections(
    study: Study,
    protocol: Protocol,
    cleaned: dict[tuple[int, Who, str], tuple[ForeignAnswer, CleanAnswer]],
    annotators: dict[Who, Annotator],
) -> None:
    """``boxes_required: each_selected`` for a selection whose boxes are not in the file (the one rule:
    ``interchange/box_cover.py``); boxes given in the file were checked when cleaned."""

    def stored(key: str, pairs: set[tuple[int, Any]]) -> dict[tuple[int, Any], Any]:
        by_id = _stored_boxes(study, key, {(item_id, annotators[who].pk) for item_id, who in pairs})
        return {
            (item_id, who): by_id[(item_id, annotators[who].pk)]
            for item_id, who in pairs
            if (item_id, annotators[who].pk) in by_id
        }

    boxes_cover_check(
        protocol,
        [
            GivenSelection(
                item_id=item_id,
                annotator=who,
                question_key=key,
                value=answer.value,
                metadata=entry.item.metadata,
                machine=who.kind == Annotator.Kind.MACHINE,
                where=entry.where,
            )
            for (item_id, who, key), (entry, answer) in cleaned.items()
        ],
        set(cleaned),
        stored,
    )


def _stored_boxes(study: Study, question_key: str, pairs: set[tuple[int, int]]) -> dict[tuple[int, int], Any]:
    """Stored answers to a boxes question by (item id, annotator id), for ``pairs``, in one query."""
    if not pairs:
        return {}
    rows = Annotation.objects.filter(
        study=study,
        item_id__in={item for item, _annotator in pairs},
        annotator_id__in={annotator for _item, annotator in pairs},
        question_key=question_key,
    ).values_list("item_id", "annotator_id", "value")
    return {(item_id, annotator_id): value for item_id, annotator_id, value in rows}


def _skips_save(study: Study, skips: Sequence[ForeignSkip], annotators: dict[Who, Annotator]) -> int:
    if not skips:
        return 0
    pairs = {(skip.item.item_id, annotators[skip.who].pk) for skip in skips}
    existing: set[tuple[int, int]] = set()
    items = sorted({item for item, _a in pairs})
    for start in range(0, len(items), CHUNK):
        existing.update(
            Assignment.objects.filter(
                item_id__in=items[start : start + CHUNK], annotator_id__in={a for _i, a in pairs}
            ).values_list("item_id", "annotator_id")
        )
    now = timezone.now()
    rows = []
    for skip in skips:
        pair = (skip.item.item_id, annotators[skip.who].pk)
        if pair in existing:
            continue
        existing.add(pair)
        rows.append(
            Assignment(
                study=study,
                item_id=skip.item.item_id,
                annotator=annotators[skip.who],
                status=Assignment.Status.SKIPPED,
                skip_reason=skip.reason,
                completed_at=skip.when or now,
                time_spent_ms=skip.time_spent_ms,
            )
        )
    Assignment.objects.bulk_create(rows, batch_size=CHUNK)
    return len(rows)
