"""Labelling jobs, their failed attempts and the VLM answer cache in the Django admin. Labellers
themselves are machine ``Annotator`` rows (annotations' admin, configuration masked) and are
registered on the labellers page (``/labellers/``) or with ``manage.py register_labeller``."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from common.audit_admin import AuditLogAdmin
from labelling.models import LabelAttempt, LabelCacheEntry, LabellingJob


@admin.register(LabellingJob)
class LabellingJobAdmin(admin.ModelAdmin[LabellingJob]):
    list_display = (
        "pk",
        "annotator",
        "study",
        "status",
        "total_items",
        "done_items",
        "answered",
        "failed",
        "cached",
        "cost_usd",
        "created_at",
    )
    list_filter = ("status", "annotator")
    search_fields = ("annotator__name", "study__name")
    list_select_related = ("annotator", "study")
    raw_id_fields = ("study", "annotator", "created_by")
    date_hierarchy = "created_at"


@admin.register(LabelAttempt)
class LabelAttemptAdmin(AuditLogAdmin[LabelAttempt]):
    list_display = ("job", "item", "question_key", "attempt", "latency_s", "created_at")
    list_filter = ("question_key",)
    search_fields = ("error", "item__external_id")
    list_select_related = ("job", "item")
    raw_id_fields = ("job", "item")


@admin.register(LabelCacheEntry)
class LabelCacheEntryAdmin(admin.ModelAdmin[LabelCacheEntry]):
    list_display = ("key", "model", "created_at")
    list_filter = ("model",)
    search_fields = ("key", "model")

    # A cache: read and delete (to make a labeller answer again), never added or changed by hand.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: LabelCacheEntry | None = None) -> bool:
        return False
