"""The home page (each role's dashboard), the health check and ``/favicon.ico``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static

from annotations.access import request_user, studies_for_user


@login_required
def home(request: HttpRequest) -> HttpResponse:
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


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for ``/favicon.ico`` whatever the page links: send them to the static SVG."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))
