"""Agreement, consensus and adjudication: the study pages and the API views (thin; services decide)."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.errors import NotAllowed, NotFoundError, ValidationFailed, WorkbenchError
from annotations.models import Annotation, ConsensusLabel, Item, Study
from annotations.services.agreement import agreement_csv_rows, agreement_report
from annotations.services.consensus import RULES, adjudication_queue, consensus_adjudicate, consensus_compute
from annotations.spreadsheet import csv_cell


def _study(user: Any, pk: int, *, write: bool = False) -> Study:
    return access.study_get_for_user(user=user, id=pk, researcher=True, write=write)


def _page_study(request: HttpRequest, pk: int, *, write: bool = False, adjudicate: bool = False) -> Study:
    try:
        if adjudicate:
            return access.study_get_for_adjudicator(user=request.user, id=pk)  # type: ignore[arg-type]
        return _study(request.user, pk, write=write)
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    except NotAllowed as exc:
        raise PermissionDenied(exc.message) from exc


def _int(value: str | None, default: int, *, low: int = 0, high: int = 10_000) -> int:
    try:
        return min(max(int(value), low), high) if value not in (None, "") else default  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValidationFailed(f"{value!r} is not a whole number") from exc


# --- pages -------------------------------------------------------------------------------------------


@login_required
def study_agreement(request: HttpRequest, pk: int) -> HttpResponse:
    study = _page_study(request, pk)
    try:
        resamples = _int(request.GET.get("resamples"), 1000, high=5000)
    except ValidationFailed as exc:
        raise Http404(exc.message) from exc
    report = agreement_report(study=study, n_resamples=resamples, breakdown=request.GET.get("breakdown") or None)
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
            rows.append({**alpha, "bar": _percent(value), "low": _percent(alpha["ci_low"]),
                         "high": _percent(alpha["ci_high"])})
    return render(request, "agreement/report.html", {
        "study": study, "report": report, "alpha_rows": rows, "rules": RULES,
        "queue": adjudication_queue(study=study)[:200],
        "can_write": access.study_can_write(request.user, study),  # type: ignore[arg-type]
    })


def _percent(value: float | None) -> float | None:
    """Position of an alpha on a -1..1 axis, in percent of the bar (for the CSS chart)."""
    return None if value is None else round((max(-1.0, min(1.0, value)) + 1) * 50, 1)


@login_required
@require_POST
def study_consensus(request: HttpRequest, pk: int) -> HttpResponse:
    study = _page_study(request, pk, write=True)
    rule = None
    try:
        if request.POST.get("rule"):
            rule = {"rule": request.POST["rule"]}
            if request.POST.get("k"):  # a k that is not a whole number is refused with the others below
                rule["k"] = _int(request.POST["k"], 2, low=1, high=100)  # type: ignore[assignment]
            if request.POST.get("agree_values"):
                rule["agree_values"] = [v.strip() for v in request.POST["agree_values"].split(",") if v.strip()]  # type: ignore[assignment]
        summary = consensus_compute(study=study, question=request.POST.get("question") or None, rule=rule)
    except WorkbenchError as exc:
        messages.error(request, f"Consensus not computed: {exc.message}")
    else:
        total = sum(row["labels"] for row in summary.values())
        unresolved = sum(row["unresolved"] for row in summary.values())
        messages.success(request, f"Consensus computed: {total} labels, {unresolved} unresolved.")
    return redirect("study-agreement", pk=pk)


@login_required
def adjudication_item(request: HttpRequest, pk: int, item_id: int) -> HttpResponse:
    """The item with everyone's answers (only here, only for experts and the study's researchers)."""
    study = _page_study(request, pk, adjudicate=True)
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
            consensus_adjudicate(study=study, item=item, question_key=key, value=value, user=request.user,  # type: ignore[arg-type]
                                 note=request.POST.get("note", ""))
        except WorkbenchError as exc:
            messages.error(request, f"Not recorded: {exc.message}")
        else:
            messages.success(request, f"Decision recorded for {key}.")
            return _next_to_adjudicate(study, item)
        return redirect("adjudication-item", pk=pk, item_id=item_id)
    answers: dict[str, list[Annotation]] = {}
    for annotation in item.annotations.select_related("annotator").order_by("question_key", "annotator__kind"):
        answers.setdefault(annotation.question_key, []).append(annotation)
    labels = {label.question_key: label for label in ConsensusLabel.objects.filter(item=item).select_related(
        "adjudicated_by")}
    queue = [entry for entry in adjudication_queue(study=study) if entry["item"] == item.pk]
    open_keys = {entry["question"] for entry in queue}
    questions = [{"question": q, "options": q.options_for(item.metadata), "answers": answers.get(q.key, []),
                  "label": labels.get(q.key), "open": q.key in open_keys}
                 for q in protocol.questions_for(item.metadata) if q.kind != "boxes"]
    questions.sort(key=lambda row: not row["open"])  # the questions waiting for a decision first
    return render(request, "agreement/adjudicate.html", {"study": study, "item": item, "questions": questions,
                                                          "queue": queue})


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
    study = _page_study(request, pk, adjudicate=True)
    return render(request, "agreement/queue.html", {"study": study, "queue": adjudication_queue(study=study)})


# --- API -------------------------------------------------------------------------------------------------


class ConsensusComputeSerializer(serializers.Serializer):
    question = serializers.CharField(required=False)
    rule = serializers.ChoiceField(choices=RULES, required=False)
    k = serializers.IntegerField(required=False, min_value=1)
    agree_values = serializers.ListField(child=serializers.CharField(), required=False)
    absolute = serializers.BooleanField(required=False)


class AdjudicationSerializer(serializers.Serializer):
    item = serializers.IntegerField()
    question = serializers.CharField()
    value = serializers.JSONField()
    note = serializers.CharField(required=False, allow_blank=True, default="")


class ConsensusLabelSerializer(serializers.ModelSerializer):
    item_external_id = serializers.CharField(source="item.external_id", read_only=True)
    adjudicated_by = serializers.CharField(source="adjudicated_by.username", read_only=True, default=None)

    class Meta:
        model = ConsensusLabel
        fields = ["item", "item_external_id", "question_key", "value", "resolved", "rule", "params", "support",
                  "confidence", "reason", "n_votes", "adjudicated_by", "note", "computed_at"]


class AgreementReportView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        study = _study(request.user, pk)
        return Response(agreement_report(
            study=study, n_resamples=_int(request.query_params.get("resamples"), 1000, high=5000),
            seed=_int(request.query_params.get("seed"), 0, high=2**31), breakdown=request.query_params.get("breakdown")))


class ConsensusView(APIView):
    @extend_schema(responses=ConsensusLabelSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        study = _study(request.user, pk)
        labels = ConsensusLabel.objects.filter(study=study).select_related("item", "adjudicated_by").order_by("id")
        if request.query_params.get("question"):
            labels = labels.filter(question_key=request.query_params["question"])
        return Response(ConsensusLabelSerializer(labels[:10_000], many=True).data)

    @extend_schema(request=ConsensusComputeSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        study = _study(request.user, pk, write=True)
        data = ConsensusComputeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        question = values.pop("question", None)
        rule = values if values.get("rule") else None
        return Response({"questions": consensus_compute(study=study, question=question, rule=rule)})


class AdjudicationView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_adjudicator(user=request.user, id=pk)  # type: ignore[arg-type]
        return Response(adjudication_queue(study=study))

    @extend_schema(request=AdjudicationSerializer, responses={201: ConsensusLabelSerializer})
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_adjudicator(user=request.user, id=pk)  # type: ignore[arg-type]
        data = AdjudicationSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        item = Item.objects.filter(pk=data.validated_data["item"], study=study).first()
        if item is None:
            raise NotFoundError("no such item in this study")
        label = consensus_adjudicate(study=study, item=item, question_key=data.validated_data["question"],
                                     value=data.validated_data["value"], user=request.user,  # type: ignore[arg-type]
                                     note=data.validated_data["note"])
        return Response(ConsensusLabelSerializer(label).data, status=status.HTTP_201_CREATED)
