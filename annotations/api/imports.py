"""REST API of imports into a study (items, annotations, features) and of one's import jobs; a small
upload is imported within the request (201), a larger one becomes an import job (202)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.api import serializers as s
from annotations.interchange.import_jobs import (
    ImportOutcome,
    import_job_cancel,
    import_job_from_address,
    import_job_from_uploads,
    import_upload,
    items_import_uploads,
    uploads_inline,
)
from annotations.interchange.import_kinds import items_report
from annotations.models import ImportJob
from common.errors import ImportRefused, NotFoundError, ValidationFailed


class ItemImportView(APIView):
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": s.ItemUploadSerializer},
        responses={201: s.ImportReportSerializer, 202: s.ImportJobSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        """Small uploads are imported within the request (201, the report: counts and the first 100
        new item ids); a bucket ``address`` and uploads over ``WORKBENCH_IMPORT_INLINE_MB`` or
        ``WORKBENCH_IMPORT_INLINE_ROWS`` become an import job (202; GET /api/imports/<id>/)."""
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = s.ItemUploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload, address = data.validated_data.get("file"), data.validated_data.get("address")
        try:
            if address or not uploads_inline([upload]):
                job = (
                    import_job_from_address(study=study, user=request_user(request), address=address)
                    if address
                    else import_job_from_uploads(
                        study=study, user=request_user(request), uploads=[upload], paths=[]
                    )
                )
                return Response(s.ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
            report = items_import_uploads(study=study, uploads=[upload], paths=[])
        except ImportRefused as exc:  # the refusal points to the study's manifest template
            templates = {
                fmt: request.build_absolute_uri(reverse("study-import-template", args=[study.pk, fmt]))
                for fmt in ("csv", "jsonl")
            }
            body = {
                "detail": exc.message,
                "templates": templates,
                **({"errors": exc.details} if exc.details else {}),
            }
            return Response(body, status=exc.status_code)
        return Response(items_report(report), status=status.HTTP_201_CREATED)


def import_answer(outcome: ImportOutcome) -> Response:
    """An upload's import as the API answers it: 201 and the report (finished within the request) or
    202 and the import job (GET /api/imports/<id>/ shows its status and, once done, its report)."""
    if outcome.job is not None:
        return Response(s.ImportJobSerializer(outcome.job).data, status=status.HTTP_202_ACCEPTED)
    return Response(outcome.report, status=status.HTTP_201_CREATED)


class AnnotationImportView(APIView):
    """JSONL annotations, or (``format=coco``) the boxes of a COCO file into one boxes question; an
    upload over ``WORKBENCH_IMPORT_INLINE_MB`` becomes an import job (202)."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": s.AnnotationUploadSerializer},
        responses={201: s.ImportReportSerializer, 202: s.ImportJobSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = s.AnnotationUploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        coco = values["format"] == "coco"
        if coco and not values.get("question"):
            raise ValidationFailed("a COCO import needs the boxes question", {"question": "required"})
        options = {name: values.get(name) or "" for name in ("question", "annotator", "kind")} if coco else {}
        return import_answer(
            import_upload(
                study=study,
                user=request_user(request),
                kind=ImportJob.Kind.COCO if coco else ImportJob.Kind.ANNOTATIONS,
                upload=values["file"],
                options=options,
            )
        )


class FeatureImportView(APIView):
    """Import image embeddings and captions made elsewhere (JSONL; all or nothing; docs/import-export.md);
    an upload over ``WORKBENCH_IMPORT_INLINE_MB`` becomes an import job (202)."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request={"multipart/form-data": s.UploadSerializer},
        responses={201: OpenApiTypes.OBJECT, 202: s.ImportJobSerializer},
    )
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = s.UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return import_answer(
            import_upload(
                study=study,
                user=request_user(request),
                kind=ImportJob.Kind.FEATURES,
                upload=data.validated_data["file"],
            )
        )


class ImportJobViewSet(viewsets.ReadOnlyModelViewSet[ImportJob]):
    """One's own import jobs (item uploads over the inline size, bucket imports)."""

    serializer_class = s.ImportJobSerializer
    filterset_fields = ["study", "status"]

    def get_queryset(self) -> QuerySet[ImportJob]:
        if getattr(self, "swagger_fake_view", False):
            return ImportJob.objects.none()
        return ImportJob.objects.filter(
            requested_by=request_user(self.request),
            study__in=access.studies_for_user(request_user(self.request)),
        )


class ImportJobCancelView(APIView):
    @extend_schema(request=None, responses={200: s.ImportJobSerializer})
    def post(self, request: Request, pk: int) -> Response:
        job = ImportJob.objects.filter(
            pk=pk,
            requested_by=request_user(request),
            study__in=access.studies_for_user(request_user(request)),
        ).first()
        if job is None:
            raise NotFoundError(f"import {pk} does not exist")
        return Response(s.ImportJobSerializer(import_job_cancel(job=job)).data)
