"""The study's items page (the grid, its filters and the upload) and an item's image file."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse

from annotations import access
from annotations.access import request_user
from annotations.interchange.bucket_addresses import bucket_entries
from annotations.models import Item
from annotations.selectors import studies as selectors
from annotations.views.pages import item_image_page, study_for_page
from annotations.views.studies.shared import import_job_json
from protocols.manifests import FORMATS as MANIFEST_FORMATS


@login_required
def study_items(request: HttpRequest, pk: int) -> HttpResponse:
    """The items grid with each item's provenance and metadata, and the upload (``static/js/upload.js``).

    Filters (GET, each checked: a value the study's items do not have is refused with a message and
    ignored): ``condition``, ``model``; ``blank=1`` (``0``) keeps the items with (without) a blank or
    single-colour image, as flagged at import. Paginated, 48 a page; the links keep the filters."""
    study = study_for_page(request, pk, researcher=True)
    conditions, models = selectors.items_filter_choices(study)
    problems = []
    chosen: dict[str, str] = {}
    for name, allowed in (("condition", conditions), ("model", models)):
        value = request.GET.get(name, "")
        if value and value not in allowed:
            problems.append(f"No item of this study has the {name} “{value}”; showing every {name}.")
        elif value:
            chosen[name] = value
    blank_raw = request.GET.get("blank", "")
    blank = {"1": True, "0": False}.get(blank_raw)
    if blank_raw and blank is None:
        problems.append("The blank filter is 1 (only blank) or 0 (without blank).")
    if blank is not None:
        chosen["blank"] = blank_raw
    queryset = selectors.items_page(study, blank=blank)
    if "condition" in chosen:
        queryset = queryset.filter(condition=chosen["condition"])
    if "model" in chosen:
        queryset = queryset.filter(model_name=chosen["model"])
    page = Paginator(queryset, 48).get_page(request.GET.get("page"))
    return render(
        request,
        "studies/items.html",
        {
            "study": study,
            "page": page,
            "cards": [(item, _item_details(item)) for item in page],
            "condition": chosen.get("condition", ""),
            "model": chosen.get("model", ""),
            "blank": chosen.get("blank", ""),
            "conditions": conditions,
            "models": models,
            "problems": problems,
            # The bucket import form only where this study and account may read somewhere.
            "buckets": [
                str(entry) for entry in bucket_entries(study_id=study.pk, user_id=request_user(request).pk)
            ],
            "n_blank": selectors.blank_items_count(study),
            "filters": ("&" + urlencode(chosen)) if chosen else "",
            "without_blank": urlencode({k: v for k, v in chosen.items() if k != "blank"}),
            "can_write": access.study_can_write(request_user(request), study),
            "upload_limit": settings.WORKBENCH_MAX_UPLOAD_BYTES,
            "import_jobs": [
                import_job_json(job)
                for job in study.import_jobs.filter(requested_by=request_user(request))[:5]
            ],
            "templates": {fmt: reverse("study-import-template", args=[pk, fmt]) for fmt in MANIFEST_FORMATS},
        },
        status=400 if problems else 200,
    )


def _item_details(item: Item) -> list[tuple[str, str]]:
    """What an item carries, as (name, text) rows for its card: seed, then every metadata field (lists
    joined, objects as JSON, long values cut); the template escapes them."""
    rows = [("seed", str(item.seed))] if item.seed is not None else []
    for key, value in (item.metadata or {}).items():
        if isinstance(value, list):
            text = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            text = json.dumps(value, ensure_ascii=False)
        else:
            text = str(value)
        rows.append((str(key), text if len(text) <= 200 else text[:199] + "…"))
    return rows


@login_required
def item_image(request: HttpRequest, pk: int, position: int) -> HttpResponseBase:
    """An item's image file, to users who may see the item; sandboxed and cached privately."""
    return item_image_page(request, pk, position, display=False)
