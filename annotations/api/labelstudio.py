"""REST API of Label Studio imports: an export into a study, or a new study from an export and its
labeling config (``annotations/interchange/labelstudio/``; the export is ``/export/labelstudio/``)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.api import serializers as s
from annotations.api.imports import import_answer
from annotations.interchange.import_jobs import import_upload, labelstudio_new_study
from annotations.models import ImportJob


class LabelStudioImportView(APIView):
    """A Label Studio export into this study: its ``from_name``s must be the study's question keys; an
    upload over ``WORKBENCH_IMPORT_INLINE_MB`` becomes an import job (202)."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": s.LabelStudioUploadSerializer},
        responses={201: OpenApiTypes.OBJECT, 202: s.ImportJobSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = s.LabelStudioUploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return import_answer(
            import_upload(
                study=study,
                user=request_user(request),
                kind=ImportJob.Kind.LABELSTUDIO,
                upload=data.validated_data["file"],
                files={"config": data.validated_data.get("config")},
            )
        )


class LabelStudioCreateView(APIView):
    """A new study from a Label Studio export and its labeling config (which gives the protocol): 201
    and the report, or, for an upload over ``WORKBENCH_IMPORT_INLINE_MB``, 202 and the import job
    that fills the study made at once from the config (the job's ``study``)."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": s.LabelStudioCreateSerializer},
        responses={201: OpenApiTypes.OBJECT, 202: s.ImportJobSerializer},
    )
    def post(self, request: Request) -> Response:
        data = s.LabelStudioCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        return import_answer(
            labelstudio_new_study(
                user=request_user(request),
                name=values["name"],
                upload=values["file"],
                config=values.get("config"),
            )
        )
