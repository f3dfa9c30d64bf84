"""REST API: viewsets for plain reads and edits, one view per workflow action (import, export)."""

from __future__ import annotations

import mimetypes
from typing import Any

from django.conf import settings
from django.db.models import Count, QuerySet
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.api import serializers as s
from annotations.api.filters import ScopedFilterSet
from annotations.api.parsers import CheckedJSONParser
from annotations.downloads import raw_requested, stored_file_response, streaming_export
from annotations.interchange.exports import (
    FILE_FORMATS,
    export_filename,
    export_job_create,
    export_refusal,
    export_size,
)
from annotations.interchange.import_jobs import (
    ImportOutcome,
    import_job_cancel,
    import_job_from_address,
    import_job_from_uploads,
    import_upload,
    items_import_uploads,
    labelstudio_new_study,
    uploads_inline,
)
from annotations.interchange.import_kinds import items_report
from annotations.models import Annotation, Annotator, ExportJob, ImportJob, Item, Study
from annotations.protocols.schema import list_presets, load_preset, load_protocol_text
from annotations.selectors.features import features_export_lines
from annotations.selectors.studies import enrolled_account
from annotations.selectors.study_options import with_study_options
from annotations.services import studies as study_services
from common.checked_input import id_from_text
from common.errors import ImportRefused, NotFoundError, ValidationFailed


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


class ItemFilter(ScopedFilterSet):
    class Meta:
        model = Item
        fields = ["study", "condition", "model_name", "kind", "external_id", "is_reference", "control_kind"]


class ItemViewSet(viewsets.ReadOnlyModelViewSet[Item]):
    """Items of your studies (researchers)."""

    serializer_class = s.ItemSerializer
    filterset_class = ItemFilter

    def get_queryset(self) -> QuerySet[Item]:
        return access.items_for_user(request_user(self.request)).prefetch_related("images").order_by("id")


class AnnotationFilter(ScopedFilterSet):
    annotator_kind = filters.CharFilter(field_name="annotator__kind")

    class Meta:
        model = Annotation
        fields = ["study", "item", "question_key", "annotator", "annotator_kind", "source"]


class AnnotationViewSet(viewsets.ReadOnlyModelViewSet[Annotation]):
    """Researchers: annotations of their studies. Annotators: only their own."""

    serializer_class = s.AnnotationSerializer
    filterset_class = AnnotationFilter

    def get_queryset(self) -> QuerySet[Annotation]:
        return (
            access.annotations_for_user(request_user(self.request))
            .select_related("item", "annotator")
            .order_by("id")
        )


class AnnotatorViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Annotator]):
    """Annotators who answered in your studies, and registered machine labellers (researchers)."""

    serializer_class = s.AnnotatorSerializer
    filterset_fields = ["kind"]

    def get_queryset(self) -> QuerySet[Annotator]:
        if getattr(self, "swagger_fake_view", False):
            return Annotator.objects.none()
        user = request_user(self.request)
        if not user.is_researcher:
            return Annotator.objects.filter(user=user)
        studies = access.studies_for_user(user)
        answered = Annotation.objects.filter(study__in=studies).values("annotator_id")
        enrolled = Annotator.objects.filter(user__enrollments__study__in=studies).values("id")
        return (
            (
                Annotator.objects.filter(pk__in=answered)
                | Annotator.objects.filter(pk__in=enrolled)
                # Registered labellers (global); a file's machine names belong to its study.
                | Annotator.objects.filter(
                    kind=Annotator.Kind.MACHINE, study__isnull=True, config__has_key="kind"
                )
                | Annotator.objects.filter(kind=Annotator.Kind.MACHINE, study__in=studies)
            )
            .distinct()
            .order_by("kind", "name")
        )


class PresetListView(APIView):
    @extend_schema(operation_id="presets_list", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        presets = []
        for key in list_presets():
            protocol = load_preset(key)
            presets.append(
                {
                    "key": key,
                    "name": protocol.name,
                    "paper": protocol.paper,
                    "unit": protocol.unit,
                    "questions": len(protocol.questions),
                }
            )
        return Response(presets)


class PresetDetailView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, key: str) -> Response:
        if key not in list_presets():
            raise NotFoundError(f"no preset {key!r}")
        return Response(load_preset(key).to_dict())


class ProtocolValidateView(APIView):
    parser_classes = [CheckedJSONParser, FormParser, MultiPartParser]

    @extend_schema(
        request=s.ProtocolValidateSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="error")},
    )
    def post(self, request: Request) -> Response:
        data = s.ProtocolValidateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        protocol = load_protocol_text(data.validated_data["protocol_yaml"], source="protocol")
        return Response({"valid": True, "protocol": protocol.to_dict()})


class MeView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=s.UserSerializer)
    def get(self, request: Request) -> Response:
        return Response(s.UserSerializer(request_user(request)).data)
