"""API serializers: they check the shape of input; services and constraints enforce the rules."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from annotations.interchange.import_jobs import import_job_summary
from annotations.models import (
    Annotation,
    Annotator,
    Enrollment,
    ExportJob,
    ImportJob,
    Item,
    ItemImage,
    Pool,
    Study,
    User,
)
from annotations.presenters import labeller_summary
from annotations.selectors.overlap import model_summary, policy_question, study_policy
from annotations.selectors.study_options import study_options
from annotations.services.studies import MAX_ENROLLED_AT_ONCE
from common.jobs import JOB_FIELDS
from common.redaction import redact


class UserSerializer(serializers.ModelSerializer[User]):
    class Meta:
        model = User
        fields = ["id", "username", "role", "is_superuser"]


class StudySerializer(serializers.ModelSerializer[Study]):
    owner = serializers.CharField(source="owner.username", read_only=True)
    shared_with = serializers.SlugRelatedField[User](many=True, read_only=True, slug_field="username")
    item_count = serializers.IntegerField(read_only=True, required=False)
    options = serializers.SerializerMethodField(
        help_text="The study's settings as one object (see annotations/selectors/study_options.py)"
    )
    overlap_policy = serializers.SerializerMethodField(
        help_text="fixed:K, agree:K/MAX or posterior:P/MAX (docs/overlap.md); the overlap is K or MAX"
    )
    overlap_question = serializers.SerializerMethodField(
        help_text="The question the overlap policy reads (null: the protocol has none it can read)"
    )
    overlap_model = serializers.SerializerMethodField(
        help_text="posterior: when and on how many answers its Dawid-Skene model was fitted, and its prior"
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
            "overlap_policy",
            "overlap_question",
            "overlap_model",
            "rater_pool_attribute",
            "rater_pool_quotas",
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

    def get_overlap_policy(self, instance: Study) -> str:
        return str(study_policy(instance))

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_overlap_question(self, instance: Study) -> str | None:
        question = policy_question(instance)
        return question.key if question is not None else None

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_overlap_model(self, instance: Study) -> dict[str, Any] | None:
        return model_summary(instance)


# What an annotator sees of a study (docs/security.md, "Tenancy"): no researcher's description, no
# owner or collaborators, no study settings but the one the task pages follow, and the protocol
# without its researcher-only description. The control rate, the qualification and the validation
# sample stay hidden (docs/crowd.md): a control must look like any other item.
ANNOTATOR_STUDY_FIELDS = ("id", "name", "status", "preset", "protocol", "lease_minutes", "options")
ANNOTATOR_STUDY_OPTIONS = ("reveal_after_submit",)


class AnnotatorStudySerializer(serializers.ModelSerializer[Study]):
    """A study as an enrolled annotator sees it."""

    protocol = serializers.SerializerMethodField()
    options = serializers.SerializerMethodField()

    class Meta:
        model = Study
        fields = list(ANNOTATOR_STUDY_FIELDS)
        read_only_fields = fields

    @extend_schema_field(serializers.DictField())
    def get_protocol(self, study: Study) -> dict[str, Any]:
        return {key: value for key, value in study.protocol.items() if key != "description"}

    @extend_schema_field(serializers.DictField())
    def get_options(self, study: Study) -> dict[str, Any]:
        options = study_options(study, researcher=False)
        return {key: value for key, value in options.items() if key in ANNOTATOR_STUDY_OPTIONS}


class StudyCreateSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    preset = serializers.CharField(required=False, allow_blank=True)
    protocol = serializers.JSONField(required=False, help_text="A protocol as a JSON object")
    protocol_yaml = serializers.CharField(required=False, help_text="A protocol file's YAML text")
    overlap = serializers.IntegerField(required=False, default=3, min_value=1, max_value=100)
    overlap_policy = serializers.CharField(
        required=False, max_length=64, help_text="fixed:K, agree:K/MAX or posterior:P/MAX (docs/overlap.md)"
    )
    overlap_question = serializers.CharField(
        required=False, allow_blank=True, max_length=64, help_text="The question the policy reads"
    )
    lease_minutes = serializers.IntegerField(required=False, default=30, min_value=1, max_value=10080)


class StudyUpdateSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    overlap = serializers.IntegerField(required=False, min_value=1, max_value=100)
    overlap_policy = serializers.CharField(
        required=False,
        max_length=64,
        help_text="fixed:K, agree:K/MAX or posterior:P/MAX (docs/overlap.md); saving one (even the same) "
        "refits a posterior policy's model and decides every item again",
    )
    overlap_question = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=64,
        help_text="The single, binary or likert question the policy reads (blank: the protocol's first)",
    )
    lease_minutes = serializers.IntegerField(required=False, min_value=1, max_value=10080)
    status = serializers.ChoiceField(choices=Study.Status.choices, required=False)
    rater_pool_attribute = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=64,
        help_text="The annotator attribute whose values are the study's rater pools, e.g. region (blank: "
        "none; clears the quotas)",
    )
    rater_pool_quotas = serializers.JSONField(
        required=False,
        help_text='{pool: judgements per item}, e.g. {"South Asia": 2, "North America": 1}; each from 1 to '
        "the overlap; {}: no quotas. People of no pool with a quota are then given no items",
    )
    options = serializers.JSONField(
        required=False, help_text="The settings as one object; it replaces them all (keys left out: defaults)"
    )

    def validate_options(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class UsernameSerializer(serializers.Serializer[Any]):
    username = serializers.CharField(max_length=150)


class EnrollmentSerializer(serializers.ModelSerializer[Enrollment]):
    """An enrolment: the account, its pool in this study and the demographic answers given to this study."""

    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = Enrollment
        fields = ["id", "username", "pool", "attributes", "created_at"]


class EnrollmentCreateSerializer(serializers.Serializer[Any]):
    username = serializers.CharField(max_length=150)
    pool = serializers.ChoiceField(
        choices=Pool.choices,
        required=False,
        help_text="The pool in this study (default crowd; kept if enrolled)",
    )


class PoolEnrollSerializer(serializers.Serializer[Any]):
    pool = serializers.ChoiceField(
        choices=Pool.choices,
        help_text="Enrol every account you may enrol that is of this pool in another study you may change",
    )


class BulkEnrollSerializer(serializers.Serializer[Any]):
    usernames = serializers.ListField(
        child=serializers.CharField(max_length=150),
        min_length=1,
        max_length=MAX_ENROLLED_AT_ONCE,
        help_text="Accounts to enrol, all or none: if one cannot be enrolled, nobody is",
    )
    pool = serializers.ChoiceField(choices=Pool.choices, help_text="Their pool in this study")


class PoolEnrollResultSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField(help_text="How many accounts were enrolled now")
    enrolled = EnrollmentSerializer(many=True)


class UnenrollResultSerializer(serializers.Serializer[Any]):
    username = serializers.CharField()
    released = serializers.IntegerField(
        help_text="Items the account held (live leases) that went back to the queue"
    )


class UploadSerializer(serializers.Serializer[Any]):
    file = serializers.FileField()


class AnnotationUploadSerializer(UploadSerializer):
    """An annotation file: JSONL (default) or COCO boxes for one question."""

    format = serializers.ChoiceField(choices=["jsonl", "coco"], default="jsonl")
    question = serializers.CharField(required=False, max_length=64, help_text="coco: the boxes question")
    annotator = serializers.CharField(required=False, max_length=150, help_text="coco: who drew the boxes")
    kind = serializers.ChoiceField(choices=["human", "machine"], required=False, help_text="coco")


class LabelStudioUploadSerializer(UploadSerializer):
    """A Label Studio export (.json, or .zip with its config and media) and its labeling config."""

    config = serializers.FileField(required=False, help_text="The labeling config (.xml)")


class LabelStudioCreateSerializer(LabelStudioUploadSerializer):
    name = serializers.CharField(max_length=200)


class ItemImageSerializer(serializers.ModelSerializer[ItemImage]):
    url = serializers.SerializerMethodField()

    class Meta:
        model = ItemImage
        fields = ["position", "original_name", "sha256", "width", "height", "content_type", "url"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_url(self, image: ItemImage) -> str | None:
        if not image.file:
            return None
        return f"/items/{image.item_id}/images/{image.position}/"


class ItemSerializer(serializers.ModelSerializer[Item]):
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


class AnnotatorSerializer(serializers.ModelSerializer[Annotator]):
    """Who judged. A labeller shows its kind (vlm, clip, ...) and model; its configuration only to
    admins, with secrets masked (``common.redaction``; docs/security.md). A person's pool and
    demographic answers are per study: ``/api/studies/{id}/enrollments/``."""

    labeller_kind = serializers.SerializerMethodField()
    model = serializers.SerializerMethodField()
    config = serializers.SerializerMethodField(help_text="Admins only; secrets masked")

    class Meta:
        model = Annotator
        fields = ["id", "kind", "name", "version", "labeller_kind", "model", "config", "created_at"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_labeller_kind(self, annotator: Annotator) -> str | None:
        return labeller_summary(annotator).get("kind")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_model(self, annotator: Annotator) -> str | None:
        return labeller_summary(annotator).get("model")

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_config(self, annotator: Annotator) -> dict[str, Any] | None:
        return redact(annotator.config) if annotator.is_machine else None

    def to_representation(self, instance: Annotator) -> dict[str, Any]:
        data = super().to_representation(instance)
        request = self.context.get("request")
        if not getattr(getattr(request, "user", None), "is_admin", False):
            data.pop("config", None)
        return data


class AnnotationSerializer(serializers.ModelSerializer[Annotation]):
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


class ItemUploadSerializer(serializers.Serializer[Any]):
    """Items: a ``file`` (zip or manifest), or a bucket ``address`` (s3://bucket/prefix/) a worker reads."""

    file = serializers.FileField(required=False)
    address = serializers.CharField(required=False, max_length=1024)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if bool(attrs.get("file")) == bool(attrs.get("address")):
            raise serializers.ValidationError("give a file or a bucket address (not both)")
        return attrs


class ImportJobSerializer(serializers.ModelSerializer[ImportJob]):
    worker_note = serializers.CharField(
        read_only=True, help_text='"worker lost, resumed" when a run was taken over from a lost worker'
    )
    summary = serializers.SerializerMethodField(
        help_text="Once done, the report in a sentence (as the page shows it)"
    )

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "study",
            "kind",
            "label",
            "address",
            *JOB_FIELDS,
            "report",
            "summary",
        ]

    def get_summary(self, job: ImportJob) -> str:
        return import_job_summary(job)


class ExportJobSerializer(serializers.ModelSerializer[ExportJob]):
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
            "raw",
            "target",
            *JOB_FIELDS,
            "download_url",
        ]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_download_url(self, job: ExportJob) -> str | None:
        return f"/api/exports/{job.pk}/download/" if job.status == ExportJob.Status.DONE else None


class ProtocolValidateSerializer(serializers.Serializer[Any]):
    protocol_yaml = serializers.CharField()


class ImportReportSerializer(serializers.Serializer[Any]):
    created = serializers.IntegerField()
    references = serializers.IntegerField(required=False)
    updated = serializers.IntegerField(required=False)
    unchanged = serializers.IntegerField(required=False)
    duplicates = serializers.ListField(child=serializers.DictField(), required=False)
    identical = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="Items kept whose file(s) equal an earlier item's: external_id, same_as, reason",
    )
    blank = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="Items with a blank or single-colour image: external_id, positions, colours (#rrggbb)",
    )
    warnings = serializers.ListField(child=serializers.CharField(), required=False)
    item_ids = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="The first 100 new item ids (item_ids_count: how many; item_ids_truncated: some left out)",
    )
    item_ids_count = serializers.IntegerField(required=False)
    item_ids_truncated = serializers.BooleanField(required=False)
    duplicates_count = serializers.IntegerField(required=False)
    identical_count = serializers.IntegerField(required=False)
    blank_count = serializers.IntegerField(required=False)
    annotators_created = serializers.ListField(child=serializers.CharField(), required=False)
