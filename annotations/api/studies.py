"""REST API of studies: create, read, change, delete and share (the viewset and the share action)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.api import serializers as s
from annotations.models import Study
from annotations.selectors.study_options import with_study_options
from annotations.services import studies as study_services
from common.checked_input import id_from_text
from common.errors import NotFoundError


class StudyViewSet(viewsets.ModelViewSet[Study]):
    """Studies you own, that are shared with you, or (annotators) that you are enrolled in."""

    serializer_class = s.StudySerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    filterset_fields = ["status", "preset"]

    def get_serializer_class(self) -> type[Any]:
        """Researchers see the whole study; annotators only what the task pages need."""
        if getattr(self, "swagger_fake_view", False):
            return s.StudySerializer
        user = getattr(self.request, "user", None)
        return s.StudySerializer if getattr(user, "is_researcher", False) else s.AnnotatorStudySerializer

    def get_queryset(self) -> QuerySet[Study]:
        return (
            with_study_options(access.studies_for_user(request_user(self.request)))
            .select_related("owner")
            .prefetch_related("shared_with")
            .annotate(item_count=Count("items", distinct=True))
            .order_by("-created_at", "-id")
        )

    def _study_id(self) -> int:
        """The id in the URL; the router's pattern takes any text, so one that is not an id is a 404."""
        study_id = id_from_text(self.kwargs["pk"])
        if study_id is None:
            raise NotFoundError(f"study {str(self.kwargs['pk'])[:40]!r} does not exist")
        return study_id

    def get_object(self) -> Study:
        write = self.request.method not in ("GET", "HEAD", "OPTIONS")
        return access.study_get_for_user(user=request_user(self.request), id=self._study_id(), write=write)

    @extend_schema(request=s.StudyCreateSerializer, responses={201: s.StudySerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = s.StudyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        protocol = study_services.protocol_resolve(
            preset=values.get("preset") or None,
            protocol_text=values.get("protocol_yaml"),
            protocol=values.get("protocol"),
            source="request",
        )
        with transaction.atomic():  # a refused overlap policy leaves no study behind
            study = study_services.study_create(
                owner=request_user(request),
                name=values["name"],
                protocol=protocol,
                preset=values.get("preset") or "",
                overlap=values["overlap"],
                lease_minutes=values["lease_minutes"],
                description=values["description"],
                status=Study.Status.DRAFT,  # launched on the study page once it has items and people
            )
            if "overlap_policy" in values or "overlap_question" in values:
                study = study_services.study_overlap_set(
                    study=study,
                    policy=values.get("overlap_policy"),
                    question=values.get("overlap_question"),
                    overlap=values["overlap"] if "overlap" in request.data else None,
                )
        return Response(s.StudySerializer(study).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.StudyUpdateSerializer, responses=s.StudySerializer)
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        study = self.get_object()
        data = s.StudyUpdateSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        study = study_services.study_update(
            study=study, linkable=access.studies_for_user(request_user(request)), **data.validated_data
        )
        return Response(s.StudySerializer(study, context={"request": request}).data)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        study = access.study_get_for_owner(user=request_user(request), id=self._study_id())
        study.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class StudyShareView(APIView):
    @extend_schema(request=s.UsernameSerializer, responses={200: s.StudySerializer})
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_owner(user=request_user(request), id=pk)
        data = s.UsernameSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        study_services.study_share(study=study, username=data.validated_data["username"])
        return Response(s.StudySerializer(study).data)
