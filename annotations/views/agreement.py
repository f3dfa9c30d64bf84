"""Agreement, consensus and adjudication pages (thin; selectors and services decide)."""

from __future__ import annotations

import csv
import io
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotations import access
from annotations.models import Item, ItemImage, Study
from annotations.presenters import image_display_url, image_views
from annotations.selectors.adjudication import (
    QueueFilters,
    adjudication_queue,
    adjudication_review,
    box_overlays,
    next_in_queue,
    queue_choices,
    queue_filters,
    queue_for_adjudicator,
)
from annotations.selectors.agreement import SMALL_SAMPLE_ITEMS, agreement_csv_rows, agreement_report
from annotations.services.consensus import RULES, consensus_adjudicate_item, consensus_compute
from annotations.views.pages import study_for_page
from common.errors import ValidationFailed, WorkbenchError
from common.query_params import bounded_int, query_flag
from common.spreadsheet import csv_cell


def _adjudicator_study(request: HttpRequest, pk: int) -> Study:
    return access.study_get_for_adjudicator(user=access.request_user(request), id=pk)


@login_required
def study_agreement(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    try:
        resamples = bounded_int(request.GET.get("resamples"), 1000, high=5000)
        show_empty = query_flag(request.GET.get("empty"), "empty")
    except ValidationFailed as exc:
        raise Http404(exc.message) from exc
    report = agreement_report(
        study=study, n_resamples=resamples, breakdown=request.GET.get("breakdown") or None
    )
    if request.GET.get("format") == "csv":
        buffer = io.StringIO()
        csv.writer(buffer).writerows([csv_cell(value) for value in row] for row in agreement_csv_rows(report))
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="agreement-study-{study.pk}.csv"'
        return response
    rows = []
    for question in report["questions"]:
        for alpha in question.get("humans", []):
            value = alpha["value"]
            rows.append(
                {
                    **alpha,
                    "bar": _percent(value),
                    "low": _percent(alpha["ci_low"]),
                    "high": _percent(alpha["ci_high"]),
                }
            )
    # Rows over 0 items ("undefined: the matrix is empty") hide behind ?empty=1 (a link on the page).
    empty_rows = [row for row in rows if not row.get("n_items")]
    machine_sections = [
        {
            **question,
            "machines_vs_consensus": [
                m for m in question.get("machines_vs_consensus", []) if show_empty or m.get("n_items")
            ],
        }
        for question in report["questions"]
    ]
    hidden_machines = sum(
        1 for q in report["questions"] for m in q.get("machines_vs_consensus", []) if not m.get("n_items")
    )
    return render(
        request,
        "agreement/report.html",
        {
            "study": study,
            "report": report,
            "alpha_rows": rows if show_empty else [row for row in rows if row.get("n_items")],
            "machine_sections": machine_sections,
            "show_empty": show_empty,
            "n_empty": len(empty_rows) + hidden_machines,
            "empty_toggle": "?" + urlencode({**request.GET.dict(), "empty": "0" if show_empty else "1"}),
            "small_sample_items": SMALL_SAMPLE_ITEMS,
            "rules": RULES,
            "queue": adjudication_queue(study=study)[:200],
            "can_write": access.study_can_write(access.request_user(request), study),
        },
    )


def _percent(value: float | None) -> float | None:
    """Position of an alpha on a -1..1 axis, in percent of the bar (for the CSS chart)."""
    return None if value is None else round((max(-1.0, min(1.0, value)) + 1) * 50, 1)


@login_required
@require_POST
def study_consensus(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True, write=True)
    rule: dict[str, Any] | None = None
    try:
        if request.POST.get("rule"):
            rule = {"rule": request.POST["rule"]}
            if request.POST.get("k"):  # a k that is not a whole number is refused with the others below
                rule["k"] = bounded_int(request.POST["k"], 2, low=1, high=100)
            if request.POST.get("agree_values"):
                rule["agree_values"] = [
                    v.strip() for v in request.POST["agree_values"].split(",") if v.strip()
                ]
        summary = consensus_compute(study=study, question=request.POST.get("question") or None, rule=rule)
    except WorkbenchError as exc:
        messages.error(request, f"Consensus not computed: {exc.message}")
    else:
        total = sum(row["labels"] for row in summary.values())
        unresolved = sum(row["unresolved"] for row in summary.values())
        pending = sum(row.get("pending", 0) for row in summary.values())
        messages.success(
            request,
            f"Consensus computed: {total} labels, {unresolved} unresolved, {pending} pending (fewer "
            f"judgements than the overlap of {study.overlap}).",
        )
    return redirect("study-agreement", pk=pk)


def _queue_filters(request: HttpRequest, study: Study) -> QueueFilters:
    return queue_filters(
        study=study,
        reason=request.GET.get("reason", ""),
        question=request.GET.get("question", ""),
        condition=request.GET.get("condition", ""),
    )


def _with_filters(url: str, filters: QueueFilters, **extra: str) -> str:
    params = filters.params() | {name: value for name, value in extra.items() if value}
    return f"{url}?{urlencode(params)}" if params else url


def _done_count(request: HttpRequest) -> int:
    """How many items this run of "Save and next" has decided (the ``done`` the page carries on)."""
    raw = request.GET.get("done", "")
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 7 else 0


def _decisions_posted(request: HttpRequest, study: Study) -> dict[str, Any]:
    """The decisions of a "Save and next" form: ``d-<question>`` fields (a list for multi questions,
    0/1 for binary ones); blank fields are no decision."""
    protocol = study.protocol_obj
    decisions: dict[str, Any] = {}
    for name in request.POST:
        if not name.startswith("d-"):
            continue
        key = name[2:]
        question = protocol.question(key) if protocol.has_question(key) else None
        if question is not None and question.kind == "multi":
            values = [value for value in request.POST.getlist(name) if value]
            if values:
                decisions[key] = values
            continue
        raw = request.POST.get(name, "").strip()
        if raw == "":
            continue
        decisions[key] = (
            int(raw) if question is not None and question.kind == "binary" and raw in ("0", "1") else raw
        )
    return decisions


@login_required
def adjudication_item(request: HttpRequest, pk: int, item_id: int) -> HttpResponse:
    """One item of the queue: everyone's answers and boxes on the zoomable canvas, the flagged
    questions' decisions pre-set to the consensus or majority, and one "Save and next" for them all
    (only for experts and the study's researchers)."""
    study = _adjudicator_study(request, pk)
    item = Item.objects.filter(pk=item_id, study=study).prefetch_related("images").first()
    if item is None:
        raise Http404("no such item in this study")
    try:
        filters = _queue_filters(request, study)
    except ValidationFailed as exc:
        return _queue_page(request, study, QueueFilters(), error=exc.message)
    show_all = (request.method == "POST" and request.POST.get("all") == "1") or request.GET.get("all") == "1"
    user = access.request_user(request)
    names = "1" if request.GET.get("names") == "1" else ""  # blinded unless asked
    done = _done_count(request)
    queue, own = queue_for_adjudicator(study=study, user=user, filters=filters)
    review = adjudication_review(study=study, item=item, queue=queue, show_all=show_all, blind=not names)
    errors: dict[str, str] = {}
    problem = ""
    if request.method == "POST":
        allowed = {row["question"].key for row in review["rows"]} if show_all else set(review["flagged"])
        try:
            decided = consensus_adjudicate_item(
                study=study,
                item=item,
                decisions=_decisions_posted(request, study),
                allowed=allowed,
                required=set(review["flagged"]),
                user=user,
                note=request.POST.get("note", ""),
                preselected={
                    row["question"].key: row["suggested"] for row in review["rows"] if row["flagged"]
                },
            )
        except ValidationFailed as exc:
            errors, problem = exc.details, exc.message
        else:
            keys = ", ".join(label.question_key for label in decided)
            messages.success(
                request,
                f"Decision{'s' if len(decided) != 1 else ''} recorded for {item.external_id}: {keys}.",
            )
            following = next_in_queue(queue, after=item.pk)
            if following is None:
                return redirect(_with_filters(reverse("adjudication-queue", args=[study.pk]), filters))
            return redirect(
                _with_filters(
                    reverse("adjudication-item", args=[study.pk, following]),
                    filters,
                    done=str(done + 1),
                    names=names,
                )
            )
    images = image_views(item)
    overlays, legend = box_overlays(
        protocol=study.protocol_obj,
        item=item,
        annotations=review["annotations"],
        sizes=[(image.position, image.width, image.height) for image in images],
        names=review["names"],
    )
    drawn = {overlay.position: overlay for overlay in overlays}
    items = list(dict.fromkeys(entry["item"] for entry in queue))
    following = next_in_queue(queue, after=item.pk)
    # The next item's image, fetched while the expert decides (cached by the browser for a year).
    next_image = (
        ItemImage.objects.filter(item_id=following).exclude(file="").order_by("position").first()
        if following is not None
        else None
    )
    here = _with_filters(
        reverse("adjudication-item", args=[study.pk, item.pk]), filters, done=str(done), names=names
    )
    toggle = _with_filters(
        reverse("adjudication-item", args=[study.pk, item.pk]),
        filters,
        done=str(done),
        names="" if names else "1",
    )
    return render(
        request,
        "agreement/adjudicate.html",
        {
            "study": study,
            "item": item,
            "rows": review["rows"],
            "flagged": review["flagged"],
            "others": review["others"],
            "show_all": show_all,
            "errors": errors,
            "problem": problem,
            "images": [{"image": image, "overlay": drawn.get(image.position)} for image in images],
            "legend": legend,
            "filters": filters,
            "done": done,
            "remaining": len(items),
            "in_queue": item.pk in items,
            "own_vote": sorted({e["question"] for e in own if e["item"] == item.pk}),
            "left_to_others": len({e["item"] for e in own}),
            "blinded": not names,
            "names_toggle": toggle,
            "action": here,
            "all_url": here + ("&" if "?" in here else "?") + "all=1",
            "queue_url": _with_filters(reverse("adjudication-queue", args=[study.pk]), filters),
            "next_image_url": image_display_url(next_image.item_id, next_image.position)
            if next_image
            else "",
        },
        status=400 if problem else 200,
    )


def _queue_page(
    request: HttpRequest, study: Study, filters: QueueFilters, *, error: str = ""
) -> HttpResponse:
    queue, own = queue_for_adjudicator(study=study, user=access.request_user(request), filters=filters)
    query = urlencode(filters.params())
    return render(
        request,
        "agreement/queue.html",
        {
            "study": study,
            "queue": queue,
            "items": len({entry["item"] for entry in queue}),
            "filters": filters,
            # an unfiltered queue is the one the choices read: not read twice
            "choices": queue_choices(study=study, queue=None if filters.params() else queue),
            "query": f"?{query}" if query else "",
            "error": error,
            # Ties and unmet rules that include the adjudicator's own vote: left to another expert.
            "own_vote_items": len({entry["item"] for entry in own}),
        },
        status=400 if error else 200,
    )


@login_required
def adjudication_list(request: HttpRequest, pk: int) -> HttpResponse:
    """The adjudication queue for experts and the study's researchers, filtered by reason, question
    and condition (GET parameters, kept on every item link and after each save)."""
    study = _adjudicator_study(request, pk)
    try:
        filters = _queue_filters(request, study)
    except ValidationFailed as exc:
        return _queue_page(request, study, QueueFilters(), error=exc.message)
    return _queue_page(request, study, filters)
