"""Quality control over REST: control items, quality settings, the per-annotator report, exclusions.

One APIView per action (input serializer, service, output). Researchers of the study only: an
annotator is told a study or item does not exist (as everywhere in the API).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.api.imports import import_answer
from annotations.api.serializers import ImportJobSerializer, ItemSerializer, UploadSerializer
from annotations.interchange.import_jobs import import_upload
from annotations.models import AnnotatorExclusion, ControlKind, ImportJob
from annotations.selectors import controls as control_selectors
from annotations.selectors import quality as quality_selectors
from annotations.services import controls as control_services
from annotations.services import quality as quality_services
from common.errors import ValidationFailed


class ControlSerializer(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=ControlKind.choices)
    answers = serializers.DictField(help_text='The expected answers, {"QUESTION_KEY": value}')
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        help_text="Shown with the item (an attention check's instruction)",
    )


class ExcludeSerializer(serializers.Serializer[Any]):
    annotator = serializers.IntegerField(help_text="The annotator's id")
    reason = serializers.CharField(max_length=2000)


class ReinstateSerializer(serializers.Serializer[Any]):
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class ExclusionSerializer(serializers.ModelSerializer[AnnotatorExclusion]):
    annotator_name = serializers.CharField(source="annotator.name", read_only=True)
    excluded_by = serializers.CharField(source="excluded_by.username", read_only=True, allow_null=True)
    reinstated_by = serializers.CharField(source="reinstated_by.username", read_only=True, allow_null=True)
    active = serializers.BooleanField(read_only=True)

    class Meta:
        model = AnnotatorExclusion
        fields = [
            "id",
            "study",
            "annotator",
            "annotator_name",
            "reason",
            "excluded_by",
            "excluded_at",
            "reinstated_by",
            "reinstated_at",
            "reinstate_note",
            "active",
        ]


class ItemControlView(APIView):
    """Mark an item as a control (PUT: kind, expected answers, note) or make it a real item again (DELETE)."""

    @extend_schema(request=ControlSerializer, responses={200: ItemSerializer})
    def put(self, request: Request, pk: int) -> Response:
        item = access.item_get_for_researcher(user=request_user(request), id=pk, write=True)
        data = ControlSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        item = control_services.control_mark(
            study=item.study,
            item=item,
            kind=data.validated_data["kind"],
            answers=data.validated_data["answers"],
            note=data.validated_data.get("note", ""),
        )
        return Response(ItemSerializer(item).data)

    @extend_schema(request=None, responses={200: ItemSerializer})
    def delete(self, request: Request, pk: int) -> Response:
        item = access.item_get_for_researcher(user=request_user(request), id=pk, write=True)
        return Response(ItemSerializer(control_services.control_unmark(study=item.study, item=item)).data)


class ControlImportView(APIView):
    """Mark controls from a CSV or JSONL file (the same as ``manage.py mark_gold``); an upload over
    ``WORKBENCH_IMPORT_INLINE_MB`` becomes an import job (202)."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": UploadSerializer},
        responses={201: OpenApiTypes.OBJECT, 202: ImportJobSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return import_answer(
            import_upload(
                study=study,
                user=request_user(request),
                kind=ImportJob.Kind.CONTROLS,
                upload=data.validated_data["file"],
            )
        )


class QualityReportView(APIView):
    """Every annotator's gold accuracy, attention checks, agreement (leave-one-out), time, straight-lining
    and flags (the same as ``manage.py quality STUDY --json``)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        return Response(quality_selectors.quality_report(study=study))


class QualitySettingsView(APIView):
    """The study's quality settings: control rate, qualification, flag thresholds (PATCH some of them)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        return Response(control_selectors.quality_settings(study).to_dict())

    @extend_schema(request=OpenApiTypes.OBJECT, responses={200: OpenApiTypes.OBJECT})
    def patch(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        if not isinstance(request.data, dict):
            raise ValidationFailed("send a JSON object of settings")
        changes: dict[str, Any] = dict(request.data)
        return Response(control_services.quality_settings_update(study=study, changes=changes).to_dict())


class ExclusionListView(APIView):
    """Every exclusion of the study, reinstated ones included (GET); exclude an annotator (POST)."""

    @extend_schema(responses={200: ExclusionSerializer(many=True)})
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        return Response(ExclusionSerializer(quality_selectors.exclusion_history(study), many=True).data)

    @extend_schema(request=ExcludeSerializer, responses={201: ExclusionSerializer})
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = ExcludeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        exclusion = quality_services.annotator_exclude(
            study=study,
            annotator=access.annotator_get_in_study(study=study, id=data.validated_data["annotator"]),
            user=request_user(request),
            reason=data.validated_data["reason"],
        )
        return Response(ExclusionSerializer(exclusion).data, status=status.HTTP_201_CREATED)


class ExclusionReinstateView(APIView):
    """Reinstate an excluded annotator; the exclusion row records who and when."""

    @extend_schema(request=ReinstateSerializer, responses={200: ExclusionSerializer})
    def post(self, request: Request, pk: int, annotator_id: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = ReinstateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        exclusion = quality_services.annotator_reinstate(
            study=study,
            annotator=access.annotator_get_in_study(study=study, id=annotator_id),
            user=request_user(request),
            note=data.validated_data.get("note", ""),
        )
        return Response(ExclusionSerializer(exclusion).data)
