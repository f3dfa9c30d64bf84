"""REST API of exports: a study's export (streamed, or a background job), one's export jobs and their
downloads, and the study's features as the JSONL their import reads."""

from __future__ import annotations

import mimetypes
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.api import serializers as s
from annotations.downloads import raw_requested, stored_file_response, streaming_export
from annotations.interchange.exports import (
    FILE_FORMATS,
    export_filename,
    export_job_create,
    export_refusal,
    export_size,
)
from annotations.models import ExportJob
from annotations.selectors.features import features_export_lines
from common.errors import NotFoundError, ValidationFailed


class FeatureExportView(APIView):
    """The study's stored embeddings and captions as the JSONL the import reads."""

    @extend_schema(
        parameters=[
            OpenApiParameter("labeller", str, description="name or name@version (default: every labeller)"),
            OpenApiParameter("kind", str, description="embedding or captions (default: both)"),
        ],
        responses={200: OpenApiTypes.BINARY},
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        lines = list(
            features_export_lines(
                study,
                labeller=request.query_params.get("labeller") or None,
                kind=request.query_params.get("kind") or None,
            )
        )
        response = HttpResponse("".join(lines), content_type="application/x-ndjson; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-features.jsonl"'
        return response


class StudyExportView(APIView):
    """POST: a small study streams at once; a large one (or a zip, or ``background=1``) becomes a
    background job (202). GET creates nothing (docs/security.md, "No writes on GET"): it streams what
    POST would stream and answers 405 where POST would start a job. CSV text that a spreadsheet would
    run as a formula gets a leading apostrophe unless ``raw=1``."""

    _parameters = [
        OpenApiParameter("background", bool, description="always write the file in the background (POST)"),
        OpenApiParameter(
            "raw", bool, description="CSV: text as stored, no apostrophe before formula-like cells"
        ),
    ]

    @extend_schema(parameters=_parameters, responses={200: OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int, fmt: str) -> Any:
        return self._export(request, pk, fmt, start=False)

    @extend_schema(
        parameters=_parameters, request=None, responses={200: OpenApiTypes.BINARY, 202: s.ExportJobSerializer}
    )
    def post(self, request: Request, pk: int, fmt: str) -> Any:
        return self._export(request, pk, fmt, start=True)

    def _export(self, request: Request, pk: int, fmt: str, *, start: bool) -> Any:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        refusal = export_refusal(study, fmt)
        if refusal is not None:
            raise ValidationFailed(refusal)
        background = request.query_params.get("background") in ("1", "true")
        raw = raw_requested(request.query_params.get("raw"))
        if fmt in FILE_FORMATS or background or export_size(study) > settings.WORKBENCH_EXPORT_INLINE_LIMIT:
            if not start:
                return Response(
                    {
                        "detail": f"This {fmt} export is written in the background: start it with POST "
                        f"/api/studies/{study.pk}/export/{fmt}/ (202 and the job). A GET never starts one."
                    },
                    status=status.HTTP_405_METHOD_NOT_ALLOWED,
                    headers={"Allow": "POST, OPTIONS"},
                )
            job = export_job_create(study=study, user=request_user(request), fmt=fmt, raw=raw)
            return Response(s.ExportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
        return streaming_export(study, fmt, raw=raw)


class ExportJobViewSet(viewsets.ReadOnlyModelViewSet[ExportJob]):
    serializer_class = s.ExportJobSerializer
    filterset_fields = ["study", "status", "format"]

    def get_queryset(self) -> QuerySet[ExportJob]:
        if getattr(self, "swagger_fake_view", False):
            return ExportJob.objects.none()
        return ExportJob.objects.filter(
            requested_by=request_user(self.request),
            study__in=access.studies_for_user(request_user(self.request)),
        )


class ExportDownloadView(APIView):
    @extend_schema(responses={200: OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int) -> HttpResponseBase:
        job = ExportJob.objects.filter(
            pk=pk,
            requested_by=request_user(request),
            study__in=access.studies_for_user(request_user(request)),
        ).first()
        if job is None:
            raise NotFoundError(f"export {pk} does not exist")
        if job.status != ExportJob.Status.DONE:
            raise ValidationFailed(f"export {pk} is {job.status}, not ready")
        filename = export_filename(job.study_id, job.format)
        return stored_file_response(
            job.file.storage,
            job.file.name or "",
            content_type=mimetypes.guess_type(filename)[0] or "application/octet-stream",
            filename=filename,
            attachment=True,
        )
