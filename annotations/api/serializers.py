"""API serializers: they check the shape of input; services and constraints enforce the rules."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotations.models import Annotation, Annotator, Enrollment, ExportJob, Item, ItemImage, Study, User
from annotations.selectors.study_options import study_options


class UserSerializer(serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["id", "username", "role", "is_superuser"]


class StudySerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    shared_with = serializers.SlugRelatedField(many=True, read_only=True, slug_field="username")
    item_count = serializers.IntegerField(read_only=True, required=False)
    options = serializers.SerializerMethodField(
        help_text="The study's settings as one object (see annotations/selectors/study_options.py)"
    )

    class Meta:
        model = Study
        fields = [
            "id",
            "name",
            "description",
            "owner",
            "shared_with",
            "preset",
            "protocol",
            "overlap",
            "lease_minutes",
            "status",
            "options",
            "created_at",
            "updated_at",
            "item_count",
        ]
        read_only_fields = ["owner", "shared_with", "preset", "protocol", "created_at", "updated_at"]

    @extend_schema_field(serializers.DictField())
    def get_options(self, instance: Study) -> dict[str, Any]:
        request = self.context.get("request")
        user = getattr(request, "user", None)
        # Annotators must not learn the control rate or qualification (docs/crowd.md).
        return study_options(instance, researcher=user is None or getattr(user, "is_researcher", False))


class StudyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    preset = serializers.CharField(required=False, allow_blank=True)
    protocol = serializers.JSONField(required=False, help_text="A protocol as a JSON object")
    protocol_yaml = serializers.CharField(required=False, help_text="A protocol file's YAML text")
    overlap = serializers.IntegerField(required=False, default=3, min_value=1, max_value=100)
    lease_minutes = serializers.IntegerField(required=False, default=30, min_value=1, max_value=10080)


class StudyUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    overlap = serializers.IntegerField(required=False, min_value=1, max_value=100)
    lease_minutes = serializers.IntegerField(required=False, min_value=1, max_value=10080)
    status = serializers.ChoiceField(choices=Study.Status.choices, required=False)
    options = serializers.JSONField(
        required=False, help_text="The settings as one object; it replaces them all (keys left out: defaults)"
    )

    def validate_options(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class UsernameSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)


class EnrollmentSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Enrollment
        fields = ["id", "username", "created_at"]


class EnrollmentCreateSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    pool = serializers.ChoiceField(choices=Annotator.Pool.choices, required=False)


class UploadSerializer(serializers.Serializer):
    file = serializers.FileField()


class ItemImageSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()

    class Meta:
        model = ItemImage
        fields = ["position", "original_name", "sha256", "width", "height", "content_type", "url"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_url(self, image: ItemImage) -> str | None:
        if not image.file:
            return None
        return f"/items/{image.item_id}/images/{image.position}/"


class ItemSerializer(serializers.ModelSerializer):
    images = ItemImageSerializer(many=True, read_only=True)
    control_kind = serializers.CharField(
        read_only=True, help_text="gold, attention, or empty for a real item"
    )
    model = serializers.CharField(source="model_name")
    settings = serializers.JSONField(source="generation_settings")

    class Meta:
        model = Item
        fields = [
            "id",
            "study",
            "external_id",
            "kind",
            "text",
            "prompt",
            "model",
            "condition",
            "seed",
            "settings",
            "metadata",
            "sha256",
            "is_reference",
            "images",
            "note",
            "control_kind",
            "control_answers",
            "created_at",
        ]
        read_only_fields = ["note", "control_kind", "control_answers"]


class AnnotatorSerializer(serializers.ModelSerializer):
    class Meta:
        model = Annotator
        fields = ["id", "kind", "name", "version", "pool", "config", "attributes", "created_at"]


class AnnotationSerializer(serializers.ModelSerializer):
    item_external_id = serializers.CharField(source="item.external_id", read_only=True)
    annotator_name = serializers.CharField(source="annotator.name", read_only=True)
    annotator_kind = serializers.CharField(source="annotator.kind", read_only=True)

    class Meta:
        model = Annotation
        fields = [
            "id",
            "study",
            "item",
            "item_external_id",
            "annotator",
            "annotator_name",
            "annotator_kind",
            "question_key",
            "value",
            "shown",
            "reason",
            "time_spent_ms",
            "source",
            "created_at",
            "updated_at",
        ]


class ExportJobSerializer(serializers.ModelSerializer):
    download_url = serializers.SerializerMethodField()
    worker_note = serializers.CharField(
        read_only=True, help_text='"worker lost, resumed" when a run was taken over from a lost worker'
    )

    class Meta:
        model = ExportJob
        fields = [
            "id",
            "study",
            "format",
            "status",
            "error",
            "created_at",
            "heartbeat_at",
            "finished_at",
            "resumed_count",
            "resumed_at",
            "worker_note",
            "download_url",
        ]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_download_url(self, job: ExportJob) -> str | None:
        return f"/api/exports/{job.pk}/download/" if job.status == ExportJob.Status.DONE else None


class ProtocolValidateSerializer(serializers.Serializer):
    protocol_yaml = serializers.CharField()


class ImportReportSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    references = serializers.IntegerField(required=False)
    updated = serializers.IntegerField(required=False)
    unchanged = serializers.IntegerField(required=False)
    duplicates = serializers.ListField(child=serializers.DictField(), required=False)
    item_ids = serializers.ListField(child=serializers.IntegerField(), required=False)
    annotators_created = serializers.ListField(child=serializers.CharField(), required=False)
