"""REST API for machine labelling jobs: list/read, create for a registered labeller, cancel, failed
attempts."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotations import access
from annotations.models import Annotator
from common.checked_input import MAX_ID, MAX_POSITIVE_INT, MIN_BIG_INT
from common.errors import ValidationFailed
from common.jobs import JOB_FIELDS
from labelling.models import LabelAttempt, LabellingJob
from labelling.services import labelling_job_cancel, labelling_job_create


class LabellingJobSerializer(serializers.ModelSerializer[LabellingJob]):
    labeller = serializers.CharField(source="annotator.__str__", read_only=True)
    progress_percent = serializers.IntegerField(read_only=True)
    worker_note = serializers.CharField(
        read_only=True, help_text='"worker lost, resumed" when a run was taken over from a lost worker'
    )

    class Meta:
        model = LabellingJob
        fields = [
            "id",
            "study",
            "annotator",
            "labeller",
            "sample_size",
            "seed",
            "metadata_filter",
            *JOB_FIELDS,
            "cancel_requested",
            "total_items",
            "done_items",
            "answered",
            "failed",
            "cached",
            "skipped",
            "cost_usd",
            "progress_percent",
        ]


class LabellingJobCreateSerializer(serializers.Serializer[Any]):
    study = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    annotator = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, help_text="The machine annotator (a registered labeller)"
    )
    sample_size = serializers.IntegerField(
        min_value=1, max_value=MAX_POSITIVE_INT, required=False, allow_null=True
    )
    seed = serializers.IntegerField(required=False, default=0, min_value=MIN_BIG_INT, max_value=MAX_ID)
    metadata_filter = serializers.DictField(
        child=serializers.CharField(max_length=500),
        required=False,
        default=dict,
        help_text='Only items whose metadata holds these values, e.g. {"prompt_set": NAME}',
    )


class LabelAttemptSerializer(serializers.ModelSerializer[LabelAttempt]):
    item_external_id = serializers.CharField(source="item.external_id", read_only=True)

    class Meta:
        model = LabelAttempt
        fields = [
            "item",
            "item_external_id",
            "question_key",
            "attempt",
            "raw",
            "error",
            "latency_s",
            "created_at",
        ]


class LabellingJobViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[LabellingJob]
):
    """Machine labelling jobs of your studies (researchers). Labellers are registered by an admin
    (``manage.py register_labeller`` or the admin), so no user-given endpoint is ever called."""

    serializer_class = LabellingJobSerializer
    filterset_fields = ["study", "status", "annotator"]

    def get_queryset(self) -> QuerySet[LabellingJob]:
        if getattr(self, "swagger_fake_view", False):
            return LabellingJob.objects.none()
        user = access.request_user(self.request)
        if not user.is_researcher:
            return LabellingJob.objects.none()
        return LabellingJob.objects.filter(study__in=access.studies_for_user(user)).select_related(
            "annotator"
        )

    @extend_schema(request=LabellingJobCreateSerializer, responses={201: LabellingJobSerializer})
    def create(self, request: Request, format: str | None = None) -> Response:
        data = LabellingJobCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        user = access.request_user(request)
        study = access.study_get_for_user(user=user, id=values["study"], write=True)
        annotator = Annotator.objects.filter(
            pk=values["annotator"], kind=Annotator.Kind.MACHINE, study__isnull=True
        ).first()
        if annotator is None:
            raise ValidationFailed(f"no machine labeller {values['annotator']}")
        job = labelling_job_create(
            study=study,
            annotator=annotator,
            user=user,
            sample_size=values.get("sample_size"),
            seed=values["seed"],
            metadata_filter=values["metadata_filter"],
        )
        return Response(LabellingJobSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=LabellingJobSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str, format: str | None = None) -> Response:
        job = self.get_object()
        access.study_get_for_user(user=access.request_user(request), id=job.study_id, write=True)
        return Response(LabellingJobSerializer(labelling_job_cancel(job=job)).data)

    @extend_schema(responses=LabelAttemptSerializer(many=True))
    @action(detail=True, methods=["get"])
    def attempts(self, request: Request, pk: str, format: str | None = None) -> Response:
        attempts = self.get_object().attempts.select_related("item")[:1000]
        return Response(LabelAttemptSerializer(attempts, many=True).data)
