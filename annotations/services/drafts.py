"""Drafts kept on the server: the answers to a leased item not yet submitted (``AssignmentDraft``).

The task page sends its form here while the annotator works (``static/js/flow.js``, debounced), and
the page restores it on any device or browser. A draft is written only by the assignment's own
annotator while the lease is theirs, is at most ``MAX_DRAFT_BYTES`` of JSON, and holds only the task
form's answer fields, checked like a submit's answers except that it may be incomplete
(``protocols.answers.clean_draft``). Submit, skip, release and expiry drop it
(``services/assignment.py`` calls ``drafts_drop``). docs/annotating.md, "Drafts".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from annotations.models import Assignment, AssignmentDraft, User
from annotations.selectors.drafts import lease_is_live
from annotations.selectors.pools import sees_expert_questions
from annotations.services.annotation_writes import item_context
from common.checked_input import InputRefused, json_loads
from common.errors import Conflict, NotAllowed, ValidationFailed
from protocols.answers import SubmissionError, clean_draft, questions_to_answer

MAX_DRAFT_BYTES = 64 * 1024
MAX_DRAFT_FIELDS = 500
FIELD_NAME = re.compile(r"^(q|shown|reason)-(.{1,200})$")


class DraftTooLarge(ValidationFailed):
    status_code = 413


def draft_fields_from_json(body: bytes | str) -> list[list[str]]:
    """The draft a task page sent: ``{"fields": [[name, value], ...]}`` with the form's answer fields
    (``q-KEY``, ``shown-KEY``, ``reason-KEY``), each value text. ValidationFailed otherwise (413 when
    larger than ``MAX_DRAFT_BYTES``)."""
    if len(body) > MAX_DRAFT_BYTES:
        raise DraftTooLarge(f"the draft is larger than {MAX_DRAFT_BYTES // 1024} KiB")
    try:
        data = json_loads(body, where="draft")
    except InputRefused as exc:
        raise ValidationFailed(exc.message) from exc
    fields = data.get("fields") if isinstance(data, dict) else None
    if not isinstance(fields, list):
        raise ValidationFailed('the draft must be a JSON object {"fields": [[name, value], ...]}')
    if len(fields) > MAX_DRAFT_FIELDS:
        raise ValidationFailed(f"the draft has more than {MAX_DRAFT_FIELDS} fields")
    checked: list[list[str]] = []
    for index, pair in enumerate(fields):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair)):
            raise ValidationFailed(f"draft field {index + 1} must be a [name, value] pair of text")
        if not FIELD_NAME.match(pair[0]):
            raise ValidationFailed(f"draft field {index + 1}: '{pair[0][:50]}' is not an answer field")
        checked.append([pair[0], pair[1]])
    return checked


@transaction.atomic
def draft_save(
    *,
    assignment: Assignment,
    fields: list[list[str]],
    answers: Mapping[str, Mapping[str, Any]],
    user: User,
    now: Any = None,
) -> AssignmentDraft:
    """Keep ``fields`` (from ``draft_fields_from_json``) as the assignment's draft, replacing the one
    before; ``answers`` are the same fields read as the task form's answers
    (``views.task_form.answers_from_form``). Only the annotator of the assignment, while the lease is
    theirs (Conflict otherwise); the answers are checked like a submit's but may be incomplete
    (SubmissionError names each problem), and every non-empty field must belong to one of them."""
    assignment = (
        Assignment.objects.select_for_update(of=("self",))
        .select_related("study", "item", "annotator")
        .get(pk=assignment.pk)
    )
    if assignment.annotator.user_id != user.pk:
        raise NotAllowed("this is not your assignment")
    if not lease_is_live(assignment, now):
        raise Conflict(f"this item is no longer leased to you ({_state(assignment)}); its draft is not kept")
    study, item = assignment.study, assignment.item
    expert = sees_expert_questions(study=study, annotator=assignment.annotator)
    asked = {
        question.key for question in questions_to_answer(study.protocol_obj, item.metadata, expert=expert)
    }
    clean_draft(study.protocol_obj, answers, context=item_context(item), expert=expert)
    for name, _value in fields:
        match = FIELD_NAME.match(name)
        if match and match.group(2) not in asked:
            raise SubmissionError({match.group(2): "is not a question asked on this item"})
    draft, _created = AssignmentDraft.objects.update_or_create(
        assignment=assignment, defaults={"fields": fields}
    )
    return draft


def _state(assignment: Assignment) -> str:
    if assignment.status == Assignment.Status.LEASED:
        return "the lease expired"
    return str(assignment.status)


def draft_drop(*, assignment: Assignment, user: User) -> None:
    """Remove the assignment's draft (its annotator only)."""
    if assignment.annotator.user_id != user.pk:
        raise NotAllowed("this is not your assignment")
    AssignmentDraft.objects.filter(assignment_id=assignment.pk).delete()


def drafts_drop(assignments: QuerySet[Assignment] | list[int]) -> int:
    """Remove the drafts of these assignments (submitted, skipped, released or expired)."""
    if isinstance(assignments, list):
        found = AssignmentDraft.objects.filter(assignment_id__in=assignments)
    else:
        found = AssignmentDraft.objects.filter(assignment__in=assignments)
    return found.delete()[0]
