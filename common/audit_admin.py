"""The admin's view of an audit record (a reveal log, a labeller's attempt, a generation failure): rows
the workbench writes as things happen, so an admin may read them and nobody may add, change or delete
one by hand (docs/deploy.md, "The admin")."""

from __future__ import annotations

from typing import Any, TypeVar

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

_M = TypeVar("_M", bound=Model)


class AuditLogAdmin(admin.ModelAdmin[_M]):
    """Read-only: no add, change or delete form, no bulk delete action."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
