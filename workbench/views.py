"""The home page (each role's dashboard) and the health check."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from annotations.access import request_user, studies_for_user
from annotations.selectors.studies import studies_completion


@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    studies = list(
        studies_for_user(user).select_related("owner").annotate(item_count=Count("items", distinct=True))
    )
    if user.is_researcher:  # % complete of every study, in one query (docs/annotating.md)
        completion = studies_completion(study.pk for study in studies)
        for study in studies:
            study.completion = completion.get(study.pk, {"judgements": 0, "needed": 0, "percent": 0.0})  # type: ignore[attr-defined]
    return render(request, "workbench/home.html", {"studies": studies})


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})
