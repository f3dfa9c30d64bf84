"""Generation jobs and their failed images in the Django admin (read-mostly: jobs are started,
cancelled and re-run on the study's generation page, the API or ``manage.py generate``)."""

from __future__ import annotations

import json

from django.contrib import admin

from common.audit_admin import AuditLogAdmin
from generation.models import GenerationFailure, GenerationJob


class GenerationFailureInline(admin.TabularInline[GenerationFailure, GenerationJob]):
    model = GenerationFailure
    fields = ("external_id", "condition", "seed", "reason", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0


@admin.register(GenerationJob)
class GenerationJobAdmin(admin.ModelAdmin[GenerationJob]):
    list_display = (
        "pk",
        "name",
        "study",
        "model_label",
        "status",
        "total_images",
        "generated",
        "skipped",
        "failed",
        "created_by",
        "created_at",
    )
    list_filter = ("status", "paper", "model_label")
    search_fields = ("name", "model_label", "study__name")
    list_select_related = ("study", "created_by")
    raw_id_fields = ("study", "created_by")
    date_hierarchy = "created_at"
    exclude = ("prompts", "model_spec", "provenance")
    readonly_fields = ("model_settings", "prompt_count")
    inlines = (GenerationFailureInline,)

    @admin.display(description="model settings")
    def model_settings(self, job: GenerationJob) -> str:
        return json.dumps(job.model_spec, indent=2, ensure_ascii=False, sort_keys=True)

    @admin.display(description="prompts")
    def prompt_count(self, job: GenerationJob) -> int:
        return len(job.prompts or [])


@admin.register(GenerationFailure)
class GenerationFailureAdmin(AuditLogAdmin[GenerationFailure]):
    list_display = ("external_id", "job", "condition", "seed", "created_at")
    search_fields = ("external_id", "prompt", "reason")
    list_select_related = ("job",)
    raw_id_fields = ("job",)
