from __future__ import annotations

import json

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.http import HttpRequest

from annotations import models
from common.redaction import redact


@admin.register(models.User)
class WorkbenchUserAdmin(UserAdmin[models.User]):
    fieldsets = (*(UserAdmin.fieldsets or ()), ("Workbench", {"fields": ("role",)}))
    add_fieldsets = (*UserAdmin.add_fieldsets, ("Workbench", {"fields": ("role",)}))
    list_display = ("username", "role", "is_staff", "is_active", "last_login")
    list_filter = ("role", "is_staff", "is_active")


class StudyQualitySettingsInline(admin.StackedInline[models.StudyQualitySettings, models.Study]):
    """The quality settings chosen (empty: the default); changed on the study's quality page."""

    model = models.StudyQualitySettings
    can_delete = False
    extra = 0


class ConsensusRuleChoiceInline(admin.TabularInline[models.ConsensusRuleChoice, models.Study]):
    """The consensus rule chosen per question (changed with ``manage.py consensus --rule``)."""

    model = models.ConsensusRuleChoice
    extra = 0


class ValidationSampleInline(admin.StackedInline[models.ValidationSample, models.Study]):
    """Read-only: drawn and cleared with ``manage.py sample_for_validation``."""

    model = models.ValidationSample
    fields = ("labeller", "labeller_name", "seed", "stratify_by", "size", "created_at")
    readonly_fields = fields
    can_delete = False
    extra = 0

    @admin.display(description="items")
    def size(self, sample: models.ValidationSample) -> int:
        return sample.items.count()

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin[models.Study]):
    list_display = ("name", "owner", "preset", "overlap", "status", "reveal_after_submit", "created_at")
    list_filter = ("status", "preset", "reveal_after_submit")
    search_fields = ("name",)
    filter_horizontal = ("shared_with",)
    readonly_fields = ("protocol",)
    raw_id_fields = ("visualness_study",)
    fieldsets = (
        (None, {"fields": ("name", "description", "owner", "shared_with", "status")}),
        ("Protocol", {"fields": ("preset", "protocol", "overlap", "lease_minutes")}),
        ("Settings", {"fields": ("reveal_after_submit", "seed", "imported_from", "visualness_study")}),
    )
    inlines = (StudyQualitySettingsInline, ConsensusRuleChoiceInline, ValidationSampleInline)


@admin.register(models.Item)
class ItemAdmin(admin.ModelAdmin[models.Item]):
    list_display = ("external_id", "study", "kind", "condition", "model_name", "is_reference", "control_kind")
    list_filter = ("kind", "is_reference", "control_kind")
    search_fields = ("external_id", "prompt")
    list_select_related = ("study",)


@admin.register(models.Annotator)
class AnnotatorAdmin(admin.ModelAdmin[models.Annotator]):
    """A labeller's configuration is shown with its secrets masked and is not edited here (a new
    configuration is a new version: ``manage.py register_labeller``; docs/security.md)."""

    list_display = ("name", "version", "kind", "user", "study")
    list_filter = ("kind",)
    search_fields = ("name",)
    exclude = ("config",)
    readonly_fields = ("configuration",)

    @admin.display(description="configuration (secrets masked)")
    def configuration(self, obj: models.Annotator) -> str:
        return json.dumps(redact(obj.config), indent=2, ensure_ascii=False, sort_keys=True)


@admin.register(models.Annotation)
class AnnotationAdmin(admin.ModelAdmin[models.Annotation]):
    list_display = ("item", "annotator", "question_key", "source", "updated_at")
    list_filter = ("source",)
    list_select_related = ("item", "annotator")
    raw_id_fields = ("item", "annotator", "study")


@admin.register(models.Assignment)
class AssignmentAdmin(admin.ModelAdmin[models.Assignment]):
    list_display = ("item", "annotator", "status", "lease_expires_at")
    list_filter = ("status",)
    raw_id_fields = ("item", "annotator", "study")


@admin.register(models.Enrollment)
class EnrollmentAdmin(admin.ModelAdmin[models.Enrollment]):
    list_display = ("study", "user", "pool", "created_at")
    list_filter = ("pool",)
    raw_id_fields = ("study", "user")


@admin.register(models.ExportJob)
class ExportJobAdmin(admin.ModelAdmin[models.ExportJob]):
    list_display = ("study", "format", "status", "requested_by", "created_at")


@admin.register(models.RevealLog)
class RevealLogAdmin(admin.ModelAdmin[models.RevealLog]):
    """Read-only: each row is one showing of machine labels after a submit (anchoring records)."""

    list_display = ("item", "annotator", "created_at", "answered_at")
    list_select_related = ("item", "annotator")
    raw_id_fields = ("item", "annotator", "study", "assignment")

    def has_change_permission(self, request: HttpRequest, obj: models.RevealLog | None = None) -> bool:
        return False


@admin.register(models.Invitation)
class InvitationAdmin(admin.ModelAdmin[models.Invitation]):
    """Links are made and revoked on the study's invitation page (docs/crowd.md); the admin reads them."""

    list_display = ("__str__", "study", "platform", "pool", "uses", "max_uses", "expires_at", "revoked_at")
    list_filter = ("platform", "pool")
    list_select_related = ("study",)
    raw_id_fields = ("study", "created_by")
    readonly_fields = ("token", "uses")


@admin.register(models.Participant)
class ParticipantAdmin(admin.ModelAdmin[models.Participant]):
    list_display = ("user", "study", "platform", "participant_id", "created_at", "completed_at")
    list_filter = ("platform",)
    search_fields = ("participant_id", "user__username")
    list_select_related = ("user", "study")
    raw_id_fields = ("invitation", "study", "user")


@admin.register(models.AnnotatorExclusion)
class AnnotatorExclusionAdmin(admin.ModelAdmin[models.AnnotatorExclusion]):
    """Read-only: exclusions are made and undone on the progress page, which recomputes the consensus."""

    list_display = (
        "annotator",
        "study",
        "reason",
        "excluded_by",
        "excluded_at",
        "reinstated_by",
        "reinstated_at",
    )
    list_select_related = ("annotator", "study", "excluded_by", "reinstated_by")
    raw_id_fields = ("annotator", "study", "excluded_by", "reinstated_by")

    def has_change_permission(
        self, request: HttpRequest, obj: models.AnnotatorExclusion | None = None
    ) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
