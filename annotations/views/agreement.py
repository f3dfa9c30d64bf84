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
from django.views.decorators.http import require_POST

from annotations import access
from annotations.models import ConsensusLabel, Item, Study
from annotations.presenters import image_views
from annotations.selectors.adjudication import adjudication_queue, answer_text, box_overlays, reason_text
from annotations.selectors.agreement import SMALL_SAMPLE_ITEMS, agreement_csv_rows, agreement_report
from annotations.services.consensus import RULES, consensus_adjudicate, consensus_compute
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


@login_required
def adjudication_item(request: HttpRequest, pk: int, item_id: int) -> HttpResponse:
    """The item with everyone's answers (only here, only for experts and the study's researchers)."""
    study = _adjudicator_study(request, pk)
    item = Item.objects.filter(pk=item_id, study=study).prefetch_related("images").first()
    if item is None:
        raise Http404("no such item in this study")
    protocol = study.protocol_obj
    if request.method == "POST":
        key = request.POST.get("question", "")
        raw = request.POST.get("value", "")
        question = protocol.question(key) if protocol.has_question(key) else None
        value: Any = raw
        if question is not None and question.kind == "multi":
            value = request.POST.getlist("value")
        elif question is not None and question.kind == "binary" and raw in ("0", "1"):
            value = int(raw)
        try:
            consensus_adjudicate(
                study=study,
                item=item,
                question_key=key,
                value=value,
                user=access.request_user(request),
                note=request.POST.get("note", ""),
            )
        except WorkbenchError as exc:
            messages.error(request, f"Not recorded: {exc.message}")
        else:
            messages.success(request, f"Decision recorded for {key}.")
            return _next_to_adjudicate(study, item)
        return redirect("adjudication-item", pk=pk, item_id=item_id)
    annotations = list(
        item.annotations.select_related("annotator").order_by(
            "question_key", "annotator__kind", "annotator_id"
        )
    )
    answers: dict[str, list[dict[str, Any]]] = {}
    for annotation in annotations:
        if not protocol.has_question(annotation.question_key):
            continue
        question = protocol.question(annotation.question_key)
        answers.setdefault(annotation.question_key, []).append(
            {
                "annotator": annotation.annotator,
                "text": answer_text(question, item.metadata, annotation.value),
                "reason": annotation.reason,
            }
        )
    labels = {
        label.question_key: label
        for label in ConsensusLabel.objects.filter(item=item).select_related("adjudicated_by")
    }
    queue = [entry for entry in adjudication_queue(study=study) if entry["item"] == item.pk]
    open_keys = {entry["question"] for entry in queue}
    questions = [
        {
            "question": q,
            "options": q.options_for(item.metadata),
            "answers": answers.get(q.key, []),
            "label": labels.get(q.key),
            "label_text": answer_text(q, item.metadata, labels[q.key].value) if q.key in labels else "",
            "label_reason": reason_text(q, item.metadata, labels[q.key].reason or "")
            if q.key in labels
            else "",
            "open": q.key in open_keys,
        }
        for q in protocol.questions_for(item.metadata)
        if q.kind != "boxes"
    ]
    questions.sort(key=lambda row: not row["open"])  # the questions waiting for a decision first
    prompts = {q.key: q.prompt for q in protocol.questions}
    images = image_views(item)
    overlays, legend = box_overlays(
        protocol=protocol,
        item=item,
        annotations=annotations,
        sizes=[(image.position, image.width, image.height) for image in images],
    )
    drawn = {overlay.position: overlay for overlay in overlays}
    return render(
        request,
        "agreement/adjudicate.html",
        {
            "study": study,
            "item": item,
            "questions": questions,
            "queue": [
                {
                    **entry,
                    "prompt": prompts.get(entry["question"], ""),
                    "reason": reason_text(
                        protocol.question(entry["question"]), item.metadata, entry["reason"]
                    )
                    if protocol.has_question(entry["question"])
                    else entry["reason"],
                }
                for entry in queue
            ],
            "images": [{"image": image, "overlay": drawn.get(image.position)} for image in images],
            "legend": legend,
        },
    )


def _next_to_adjudicate(study: Study, item: Item) -> HttpResponse:
    """After a decision: the same item while it has open questions, else the next item, else the queue."""
    queue = adjudication_queue(study=study)
    if any(entry["item"] == item.pk for entry in queue):
        return redirect("adjudication-item", pk=study.pk, item_id=item.pk)
    later = [entry for entry in queue if entry["item"] > item.pk] or queue
    if later:
        return redirect("adjudication-item", pk=study.pk, item_id=later[0]["item"])
    return redirect("adjudication-queue", pk=study.pk)


@login_required
def adjudication_list(request: HttpRequest, pk: int) -> HttpResponse:
    """The adjudication queue for experts and the study's researchers."""
    study = _adjudicator_study(request, pk)
    return render(request, "agreement/queue.html", {"study": study, "queue": adjudication_queue(study=study)})
