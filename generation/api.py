"""REST API for generation jobs: list/read, create from a design or prompt list, cancel, re-run."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotations import access
from common.checked_input import MAX_ID, MAX_POSITIVE_INT, MIN_BIG_INT
from common.errors import ValidationFailed
from common.jobs import JOB_FIELDS
from generation.models import GenerationFailure, GenerationJob
from generation.prompts.base import PromptSet, PromptSpec
from generation.prompts.sets import PromptSetError, prompt_set_build
from generation.services import (
    generation_job_cancel,
    generation_job_create,
    generation_job_rerun,
    model_source_check,
    model_spec_from_dict,
)


class GenerationFailureSerializer(serializers.ModelSerializer[GenerationFailure]):
    class Meta:
        model = GenerationFailure
        fields = ["external_id", "prompt", "condition", "seed", "reason", "created_at"]


class GenerationJobSerializer(serializers.ModelSerializer[GenerationJob]):
    progress_percent = serializers.IntegerField(read_only=True)
    worker_note = serializers.CharField(
        read_only=True, help_text='"worker lost, resumed" when a run was taken over from a lost worker'
    )
    prompt_count = serializers.SerializerMethodField()

    class Meta:
        model = GenerationJob
        fields = [
            "id",
            "study",
            "name",
            "paper",
            "parent_name",
            "model_spec",
            "model_label",
            "base_seed",
            *JOB_FIELDS,
            "cancel_requested",
            "total_images",
            "generated",
            "skipped",
            "failed",
            "progress_percent",
            "prompt_count",
            "provenance",
        ]

    def get_prompt_count(self, job: GenerationJob) -> int:
        return len(job.prompts)


class PromptInputSerializer(serializers.Serializer[Any]):
    text = serializers.CharField(max_length=2000)
    condition = serializers.CharField(max_length=128, required=False, default="base")
    metadata = serializers.DictField(required=False, default=dict)
    images_per_prompt = serializers.IntegerField(min_value=1, max_value=1000, required=False, default=1)


class GenerationJobCreateSerializer(serializers.Serializer[Any]):
    study = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    design = serializers.ChoiceField(
        choices=["ssi", "visage", "biasconnect", "soda"],
        required=False,
        help_text="A paper's prompt set; or give 'prompts'",
    )
    prompts = PromptInputSerializer(many=True, required=False)
    name = serializers.CharField(max_length=200, required=False)
    images_per_prompt = serializers.IntegerField(min_value=1, max_value=1000, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_POSITIVE_INT, required=False)
    model = serializers.DictField(
        help_text="ModelSpec fields: source, revision, dtype, scheduler, steps, guidance, "
        "width, height, negative_prompt, batch_size"
    )
    base_seed = serializers.IntegerField(
        required=False, default=0, min_value=MIN_BIG_INT, max_value=MAX_ID, help_text="A 64-bit integer"
    )
    model_label = serializers.CharField(max_length=120, required=False)


def _prompt_set(data: dict[str, Any]) -> PromptSet:
    if bool(data.get("design")) == bool(data.get("prompts")):
        raise ValidationFailed("give a design or a list of prompts (one of the two)")
    try:
        if data.get("design"):
            return prompt_set_build(
                data["design"],
                images_per_prompt=data.get("images_per_prompt"),
                limit=data.get("limit"),
                name=data.get("name"),
            )
        specs = tuple(
            PromptSpec(
                text=p["text"],
                condition=p["condition"],
                metadata=p["metadata"],
                images_per_prompt=data.get("images_per_prompt") or p["images_per_prompt"],
            )
            for p in data["prompts"]
        )
        return PromptSet(name=data.get("name") or "prompts", paper="", prompts=specs)
    except (PromptSetError, ValueError) as exc:
        raise ValidationFailed(str(exc)) from exc


class GenerationJobViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[GenerationJob]
):
    """Generation jobs of your studies (researchers)."""

    serializer_class = GenerationJobSerializer
    filterset_fields = ["study", "status"]

    def get_queryset(self) -> QuerySet[GenerationJob]:
        if getattr(self, "swagger_fake_view", False):
            return GenerationJob.objects.none()
        user = access.request_user(self.request)
        if not user.is_researcher:
            return GenerationJob.objects.none()
        return GenerationJob.objects.filter(study__in=access.studies_for_user(user))

    @extend_schema(request=GenerationJobCreateSerializer, responses={201: GenerationJobSerializer})
    def create(self, request: Request, format: str | None = None) -> Response:
        data = GenerationJobCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        user = access.request_user(request)
        study = access.study_get_for_user(user=user, id=values["study"], write=True)
        spec = model_spec_from_dict(values["model"])
        model_source_check(spec.source)
        job = generation_job_create(
            study=study,
            prompt_set=_prompt_set(values),
            spec=spec,
            user=user,
            base_seed=values["base_seed"],
            model_label=values.get("model_label"),
        )
        return Response(GenerationJobSerializer(job).data, status=status.HTTP_201_CREATED)

    def _writable(self, request: Request, pk: str) -> GenerationJob:
        job = self.get_object()
        access.study_get_for_user(user=access.request_user(request), id=job.study_id, write=True)
        return job

    @extend_schema(request=None, responses=GenerationJobSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str, format: str | None = None) -> Response:
        return Response(GenerationJobSerializer(generation_job_cancel(job=self._writable(request, pk))).data)

    @extend_schema(request=None, responses=GenerationJobSerializer)
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, pk: str, format: str | None = None) -> Response:
        return Response(GenerationJobSerializer(generation_job_rerun(job=self._writable(request, pk))).data)

    @extend_schema(responses=GenerationFailureSerializer(many=True))
    @action(detail=True, methods=["get"])
    def failures(self, request: Request, pk: str, format: str | None = None) -> Response:
        return Response(GenerationFailureSerializer(self.get_object().failures.all()[:1000], many=True).data)
