"""The home page (each role's dashboard), the health check and ``/favicon.ico``."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static

from annotations.access import request_user, studies_for_user
from annotations.selectors.studies import studies_completion


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """A researcher's studies with % complete; an annotator's own work is their dashboard."""
    user = request_user(request)
    if not user.is_researcher:
        return redirect("annotate-dashboard")
    studies = list(
        studies_for_user(user).select_related("owner").annotate(item_count=Count("items", distinct=True))
    )
    completion = studies_completion(study.pk for study in studies)  # one query (docs/annotating.md)
    for study in studies:
        study.completion = completion.get(study.pk, {"judgements": 0, "needed": 0, "percent": 0.0})  # type: ignore[attr-defined]
    return render(request, "workbench/home.html", {"studies": studies})


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for ``/favicon.ico`` whatever the page links: send them to the static SVG."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))
