"""REST API of the audit report: ``POST /api/studies/{id}/report/`` queues a report job, its state at
``GET .../report/{job}/`` and its file at ``.../download/`` (served like exports: a presigned redirect
on S3). The study's researchers only; anyone else 404 (docs/api.md, "Audit report")."""

from __future__ import annotations

from typing import Any

from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.access import request_user
from common.checked_input import MAX_ID
from common.errors import ValidationFailed
from common.jobs import JOB_FIELDS
from reports.downloads import report_file_response, report_supplement_response
from reports.formats import FORMATS
from reports.jobs import (
    CORRECTIONS,
    MAX_COMPARE,
    report_job_create,
    report_job_get_for_user,
    report_options_check,
    report_study_get,
)
from reports.models import ReportJob


class ReportRequestSerializer(serializers.Serializer[dict[str, Any]]):
    """What a report is asked with. The shape only: ``reports.jobs.report_options_check`` decides what
    is allowed and says why not (400)."""

    format = serializers.CharField(max_length=16, help_text=f"One of {', '.join(FORMATS)}")
    source = serializers.CharField(  # type: ignore[assignment]  # the request's field, not Field.source
        max_length=200, required=False, allow_blank=True, help_text="A label source (default: the protocol's)"
    )
    correction = serializers.CharField(
        max_length=16, required=False, default="holm", help_text=f"One of {', '.join(CORRECTIONS)}"
    )
    compare = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=MAX_ID),
        required=False,
        default=list,
        max_length=MAX_COMPARE,
        help_text="Ids of studies to compare with, in order (ones you are a researcher of)",
    )


class ReportJobSerializer(serializers.ModelSerializer[ReportJob]):
    download_url = serializers.SerializerMethodField()
    worker_note = serializers.CharField(
        read_only=True, help_text='"worker lost, resumed" when a run was taken over from a lost worker'
    )

    class Meta:
        model = ReportJob
        fields = [
            "id",
            "study",
            "format",
            "source",
            "correction",
            "compare",
            *JOB_FIELDS,
            "filename",
            "download_url",
            "supplement_url",
        ]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_download_url(self, job: ReportJob) -> str | None:
        if job.status != ReportJob.Status.DONE:
            return None
        return f"/api/studies/{job.study_id}/report/{job.pk}/download/"

    supplement_url = serializers.SerializerMethodField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_supplement_url(self, job: ReportJob) -> str | None:
        """The zip of every findings table in full (CSV), once the job is done; None for a datasheet."""
        if job.status != ReportJob.Status.DONE or not job.supplement.name:
            return None
        return f"/api/studies/{job.study_id}/report/{job.pk}/supplement/"


def _first_error(errors: Any) -> str:
    """One line from a serializer's errors: ``field: message``."""
    field, messages = next(iter(errors.items()))
    message = messages[0] if isinstance(messages, list) and messages else messages
    if isinstance(message, dict):  # a list field's item: {index: [message]}
        index, inner = next(iter(message.items()))
        message = f"item {index}: {inner[0] if isinstance(inner, list) else inner}"
    return f"{field}: {message}"


class StudyReportView(APIView):
    @extend_schema(request=ReportRequestSerializer, responses={202: ReportJobSerializer})
    def post(self, request: Request, pk: int) -> Response:
        user = request_user(request)
        study = report_study_get(user=user, id=pk)
        data = ReportRequestSerializer(data=request.data)
        if not data.is_valid():
            raise ValidationFailed(_first_error(data.errors))
        values = data.validated_data
        options = report_options_check(
            user=user,
            study=study,
            fmt=values["format"],
            source=values.get("source"),
            correction=values.get("correction"),
            compare=values.get("compare") or [],
        )
        job = report_job_create(study=study, user=user, options=options)
        job.refresh_from_db()  # an eager run (tests) finished it already
        return Response(ReportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class StudyReportJobView(APIView):
    @extend_schema(responses={200: ReportJobSerializer})
    def get(self, request: Request, pk: int, job_id: int) -> Response:
        user = request_user(request)
        study = report_study_get(user=user, id=pk)
        return Response(ReportJobSerializer(report_job_get_for_user(user=user, study=study, id=job_id)).data)


class StudyReportDownloadView(APIView):
    @extend_schema(responses={200: OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int, job_id: int) -> HttpResponseBase:
        user = request_user(request)
        study = report_study_get(user=user, id=pk)
        found = report_job_get_for_user(user=user, study=study, id=job_id)
        if found.status != ReportJob.Status.DONE or not found.file.name:
            raise ValidationFailed(f"report {found.pk} is {found.status}, not ready")
        return report_file_response(found)


class StudyReportSupplementView(APIView):
    """The supplement of a finished report: every findings table in full, one CSV each, in a zip."""

    @extend_schema(responses={200: OpenApiTypes.BINARY})
    def get(self, request: Request, pk: int, job_id: int) -> HttpResponseBase:
        user = request_user(request)
        study = report_study_get(user=user, id=pk)
        found = report_job_get_for_user(user=user, study=study, id=job_id)
        if found.status != ReportJob.Status.DONE or not found.supplement.name:
            raise ValidationFailed(f"report {found.pk} has no supplement ready")
        return report_supplement_response(found)
