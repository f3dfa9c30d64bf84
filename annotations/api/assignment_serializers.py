"""Serializers of the annotation workflow API (claim, task, submit, skip)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from rest_framework import serializers

from annotations.access import assignment_gives_direct_urls
from annotations.models import Assignment
from annotations.presenters import image_views
from annotations.selectors.pools import sees_expert_questions
from annotations.selectors.tasks import stored_answers
from annotations.services.stored_files import item_image_direct_url
from common.file_storage import serve_by_redirect
from protocols.answers import questions_to_answer
from protocols.schema import Question


def _question(question: Question, metadata: dict[str, Any]) -> dict[str, Any]:
    data = dict(question.schema_dict)  # a copy of the shared dict: keys are dropped and replaced below
    data.pop("options_from", None)
    data.pop("applies_if", None)
    if question.is_choice:
        data["options"] = [{"key": o.key, "label": o.label} for o in question.options_for(metadata)]
    return data


class AssignmentSerializer(serializers.ModelSerializer[Assignment]):
    # Plain text in the schema: a second enum named "status" (besides the study's) would collide.
    status = serializers.CharField(read_only=True, help_text="leased, submitted, skipped or expired")

    class Meta:
        model = Assignment
        fields = [
            "id",
            "study",
            "item",
            "status",
            "lease_expires_at",
            "created_at",
            "completed_at",
            "skip_reason",
            "time_spent_ms",
        ]
        read_only_fields = fields


class TaskSerializer(AssignmentSerializer):
    """An assignment with what is needed to answer it: the item, its questions, your own answers.

    Item metadata is not included (it may hold what annotators must not see, e.g. the identity a
    stereotype study is about); choice options that come from metadata are resolved per item.
    """

    task = serializers.SerializerMethodField()

    class Meta(AssignmentSerializer.Meta):
        fields = [*AssignmentSerializer.Meta.fields, "task"]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField())
    def get_task(self, assignment: Assignment) -> dict[str, Any]:
        return _task(assignment)


_DATETIME = serializers.DateTimeField(read_only=True)


def assignment_data(assignment: Assignment) -> dict[str, Any]:
    """``AssignmentSerializer(assignment).data`` without building the serializer's fields per response
    (the claim and submit hot path, issue 17); the serializer stays for the schema and the other views."""
    stamp = _DATETIME.to_representation
    return {
        "id": assignment.pk,
        "study": assignment.study_id,
        "item": assignment.item_id,
        "status": str(assignment.status),
        "lease_expires_at": stamp(assignment.lease_expires_at) if assignment.lease_expires_at else None,
        "created_at": stamp(assignment.created_at) if assignment.created_at else None,
        "completed_at": stamp(assignment.completed_at) if assignment.completed_at else None,
        "skip_reason": assignment.skip_reason,
        "time_spent_ms": assignment.time_spent_ms,
    }


def task_data(assignment: Assignment, *, gives_direct_urls: bool | None = None) -> dict[str, Any]:
    """``TaskSerializer(assignment).data``, as ``assignment_data``. ``gives_direct_urls``: the answer
    of ``access.assignment_gives_direct_urls`` when the caller has it (the claim reads it with the
    item's images: ``selectors.tasks.task_images_load``), else it is asked here when needed."""
    return {**assignment_data(assignment), "task": _task(assignment, gives_direct_urls)}


def _task(assignment: Assignment, gives_direct_urls: bool | None = None) -> dict[str, Any]:
    """The task part of a task: the item, its questions, your own answers."""
    item, annotator = assignment.item, assignment.annotator
    expert = sees_expert_questions(study=assignment.study, annotator=annotator)
    protocol = assignment.study.protocol_obj
    # Presigned bucket URLs only for the caller's current lease in a study they are still in (asked
    # only when the files are answered by redirect and there is a file: no query otherwise).
    stored = [image for image in item.images.all() if image.file.name]
    direct = (
        bool(stored)
        and serve_by_redirect()
        and (assignment_gives_direct_urls(assignment) if gives_direct_urls is None else gives_direct_urls)
    )
    direct_urls = {image.position: item_image_direct_url(image) for image in stored} if direct else {}
    return {
        "item": {
            "id": item.pk,
            "kind": item.kind,
            "text": item.text,
            "note": item.note,
            "prompt": item.prompt if item.kind == "image_set" else "",
            "image_unavailable": item.is_reference,
            "images": [
                {
                    "position": image.position,
                    "url": image.url,
                    "display_url": image.display_url,
                    # The presigned bucket URL ``url`` redirects to (files in S3), for the annotator's
                    # own current lease only: the client loads the image without another request to
                    # the workbench. Null for anything else (a submitted, skipped or expired one).
                    "direct_url": direct_urls.get(image.position),
                    "width": image.width,
                    "height": image.height,
                }
                for image in image_views(item)
            ],
        },
        "instructions": protocol.instructions,
        "questions": [
            _question(question, item.metadata)
            for question in questions_to_answer(protocol, item.metadata, expert=expert)
        ],
        # Answers are stored only by a submit: a leased item has none (saves a query per claim).
        "answers": stored_answers(item=item, annotator=annotator)
        if assignment.status == Assignment.Status.SUBMITTED
        else {},
    }


class SubmitSerializer(serializers.Serializer[Any]):
    answers = serializers.DictField(
        child=serializers.DictField(),
        help_text='{"QUESTION_KEY": {"value": ..., "shown": [...], "reason": "..."}}',
    )
    time_spent_ms = serializers.IntegerField(required=False, min_value=0, max_value=24 * 3600 * 1000)


_SUBMIT: list[SubmitSerializer] = []


def submit_input(data: Any) -> dict[str, Any]:
    """``SubmitSerializer(data=data)``'s ``validated_data``, or its ``ValidationError`` with the same
    errors, from one serializer kept for the process (its fields are built once, not per submit: the
    hot path, issue 38). A serializer's validation keeps nothing of the data it checks."""
    if not _SUBMIT:
        _SUBMIT.append(SubmitSerializer())
    validated: dict[str, Any] = _SUBMIT[0].run_validation(data)
    return validated


NEXT_PARAMETER = OpenApiParameter(
    "next",
    OpenApiTypes.BOOL,
    description="1: also claim your next item; the answer is {submitted, next (a task or null), detail}",
)


class SkipSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(max_length=500)
