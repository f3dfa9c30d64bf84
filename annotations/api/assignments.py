"""The annotation workflow over REST: claim the next item, read it, submit, skip, release; your assignments.

One APIView per action: input serializer, then the assignment service, then an output serializer.
Only the annotator's own assignments are visible; a study they are not enrolled in is not found.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.api import assignment_serializers as s
from annotations.models import Annotation, Assignment
from annotations.selectors.quality import claim_refusal
from annotations.selectors.tasks import task_images_load
from annotations.services.assignment import (
    assignment_claim_for_user,
    assignment_release,
    assignment_skip,
    assignment_submit_for_user,
)
from annotations.services.studies import annotator_for_user
from common.errors import NotAllowed, WorkbenchError


def _task_data(assignment: Assignment) -> dict[str, Any]:
    """The claimed task's answer: its item's images and whether it may carry their presigned URLs are
    read in one query (study, item and annotator are at hand)."""
    return s.task_data(assignment, gives_direct_urls=task_images_load(assignment))


def _next_task(request: Request, study_id: int) -> tuple[Assignment | None, str]:
    """Claim the next item for the request's account: the lease (or None) and, when None, why (the
    qualification's message, "" when simply nothing is left). A final refusal raises ``NotAllowed``
    only for the claim call itself (see ``ClaimNextView``)."""
    annotator = annotator_for_user(user=request_user(request))
    study, assignment = assignment_claim_for_user(
        user=request_user(request), study_id=study_id, annotator=annotator
    )
    if assignment is not None:
        return assignment, ""
    refusal = claim_refusal(study=study, annotator=annotator)
    if refusal is not None and refusal.final:
        return None, refusal.message
    return None, ""


# The two calls an annotating client makes all day answer JSON only: no browsable-API page to choose.
HOT_RENDERERS = [JSONRenderer]


class ClaimNextView(APIView):
    """Lease your next item in a study (or get back the one you hold). 204 when nothing is left; 403 when
    you did not pass the study's qualification (the detail says so)."""

    renderer_classes = HOT_RENDERERS

    @extend_schema(
        request=None, responses={200: s.TaskSerializer, 204: OpenApiResponse(description="nothing left")}
    )
    def post(self, request: Request, pk: int) -> Response:
        assignment, refused = _next_task(request, pk)
        if refused:
            raise NotAllowed(refused)
        if assignment is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(_task_data(assignment))


class SubmitView(APIView):
    """Submit (or change) your answers to an assigned item. Errors per question come back as 400.

    With ``?next=1`` the next item is claimed in the same call (after the submit is stored, in its
    own transaction) and the answer is ``{"submitted": ASSIGNMENT, "next": TASK or null,
    "detail": why there is no next item, or ""}`` (docs/api.md, "Submit and claim the next item")."""

    renderer_classes = HOT_RENDERERS

    @extend_schema(
        request=s.SubmitSerializer,
        parameters=[s.NEXT_PARAMETER],
        responses={200: s.AssignmentSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        user = request_user(request)
        try:
            data = s.submit_input(request.data)
        except ValidationError:
            access.assignment_get_for_user(user=user, id=pk)  # someone else's: 404 before 400, as ever
            raise
        assignment = assignment_submit_for_user(
            user=user,
            id=pk,
            answers=data["answers"],
            source=Annotation.Source.API,
            time_spent_ms=data.get("time_spent_ms"),
        )
        submitted = s.assignment_data(assignment)
        if request.query_params.get("next", "") not in ("1", "true", "yes"):
            return Response(submitted)
        try:
            following, refused = _next_task(request, assignment.study_id)
        except WorkbenchError as exc:  # e.g. the study was paused: the submit stands, no next item
            following, refused = None, exc.message
        return Response(
            {
                "submitted": submitted,
                "next": _task_data(following) if following is not None else None,
                "detail": refused,
            }
        )


class SkipView(APIView):
    @extend_schema(request=s.SkipSerializer, responses={200: s.AssignmentSerializer})
    def post(self, request: Request, pk: int) -> Response:
        assignment = access.assignment_get_for_user(user=request_user(request), id=pk)
        data = s.SkipSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        assignment = assignment_skip(
            assignment=assignment, reason=data.validated_data["reason"], user=request_user(request)
        )
        return Response(s.AssignmentSerializer(assignment).data)


class ReleaseView(APIView):
    @extend_schema(request=None, responses={200: s.AssignmentSerializer})
    def post(self, request: Request, pk: int) -> Response:
        assignment = access.assignment_get_for_user(user=request_user(request), id=pk)
        return Response(
            s.AssignmentSerializer(assignment_release(assignment=assignment, user=request_user(request))).data
        )


class MyAssignmentViewSet(viewsets.ReadOnlyModelViewSet[Assignment]):
    """Your own assignments (filter by study and status); one of them with its task."""

    filterset_fields = ["study", "status"]

    def get_serializer_class(self) -> type[s.AssignmentSerializer]:
        return s.TaskSerializer if self.action == "retrieve" else s.AssignmentSerializer

    def get_queryset(self) -> QuerySet[Assignment]:
        if getattr(self, "swagger_fake_view", False):
            return Assignment.objects.none()
        queryset = access.assignments_for_user(request_user(self.request)).order_by("-id")
        if self.action == "retrieve":
            queryset = queryset.select_related("study", "item", "annotator").prefetch_related("item__images")
        return queryset
