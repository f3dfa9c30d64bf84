"""The home page (each role's dashboard) and the health check."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from annotations.access import request_user, studies_for_user


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """A researcher's studies; an annotator's own work is their dashboard (no researcher words)."""
    if not request_user(request).is_researcher:
        return redirect("annotate-dashboard")
    studies = (
        studies_for_user(request_user(request))
        .select_related("owner")
        .annotate(item_count=Count("items", distinct=True))
    )
    return render(request, "workbench/home.html", {"studies": studies})


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})
