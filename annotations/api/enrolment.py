"""REST API of a study's people: its enrolments, unenrolling, and enrolling a pool or several accounts."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.api import serializers as s
from annotations.selectors.studies import enrolled_account
from annotations.services import studies as study_services
from common.errors import NotFoundError


class StudyEnrollmentView(APIView):
    @extend_schema(responses=s.EnrollmentSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        enrollments = study.enrollments.select_related("user").order_by("user__username")
        return Response(s.EnrollmentSerializer(enrollments, many=True).data)

    @extend_schema(request=s.EnrollmentCreateSerializer, responses={201: s.EnrollmentSerializer})
    def post(self, request: Request, pk: int) -> Response:
        by = request_user(request)
        study = access.study_get_for_user(user=by, id=pk, write=True)
        data = s.EnrollmentCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = access.enrollable_account_get(by=by, username=data.validated_data["username"])
        enrollment = study_services.enrollment_add(
            study=study, user=user, pool=data.validated_data.get("pool"), by=by
        )
        return Response(s.EnrollmentSerializer(enrollment).data, status=status.HTTP_201_CREATED)


class StudyUnenrollView(APIView):
    """Unenrol an account: no more items of the study, its live leases go back; its answers stay."""

    @extend_schema(
        request=s.UsernameSerializer,
        responses={
            200: s.UnenrollResultSerializer,
            404: OpenApiResponse(description="no such study, or no such account is enrolled in it"),
            409: OpenApiResponse(description="joined through an invitation, or gave demographic answers"),
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        by = request_user(request)
        study = access.study_get_for_user(user=by, id=pk, write=True)
        data = s.UsernameSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        # Among the study's enrolments only: the answer is the same whether the account exists elsewhere.
        user = enrolled_account(study, data.validated_data["username"])
        if user is None:
            raise NotFoundError("no such account is enrolled in this study")
        released = study_services.enrollment_remove(study=study, user=user, by=by)
        return Response(s.UnenrollResultSerializer({"username": user.username, "released": released}).data)


class StudyPoolEnrollView(APIView):
    """Enrol, in a pool, every account you may enrol that is of that pool in another study you may
    change (the People tab's "enrol the pool"); idempotent."""

    @extend_schema(request=s.PoolEnrollSerializer, responses={201: s.PoolEnrollResultSerializer})
    def post(self, request: Request, pk: int) -> Response:
        by = request_user(request)
        study = access.study_get_for_user(user=by, id=pk, write=True)
        data = s.PoolEnrollSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        enrolled = study_services.enrollment_add_pool(study=study, pool=data.validated_data["pool"], by=by)
        body = {"count": len(enrolled), "enrolled": enrolled}
        return Response(s.PoolEnrollResultSerializer(body).data, status=status.HTTP_201_CREATED)


class StudyBulkEnrollView(APIView):
    """Enrol several accounts by username in one pool, all or none (the People tab's bulk enrol)."""

    @extend_schema(request=s.BulkEnrollSerializer, responses={201: s.PoolEnrollResultSerializer})
    def post(self, request: Request, pk: int) -> Response:
        by = request_user(request)
        study = access.study_get_for_user(user=by, id=pk, write=True)
        data = s.BulkEnrollSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        enrolled = study_services.enrollments_add_many(
            study=study, usernames=data.validated_data["usernames"], pool=data.validated_data["pool"], by=by
        )
        body = {"count": len(enrolled), "enrolled": enrolled}
        return Response(s.PoolEnrollResultSerializer(body).data, status=status.HTTP_201_CREATED)
