"""Agreement, consensus and adjudication over the API (thin; selectors and services decide)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from annotations.models import ConsensusLabel, Item, Study
from annotations.selectors.adjudication import queue_filters, queue_for_adjudicator
from annotations.selectors.agreement import agreement_report
from annotations.services.consensus import RULES, consensus_adjudicate, consensus_compute
from common.errors import NotFoundError
from common.query_params import bounded_int


def _study(request: Request, pk: int, *, write: bool = False) -> Study:
    return access.study_get_for_user(user=request_user(request), id=pk, researcher=True, write=write)


class ConsensusComputeSerializer(serializers.Serializer[Any]):
    question = serializers.CharField(required=False)
    rule = serializers.ChoiceField(choices=RULES, required=False)
    k = serializers.IntegerField(required=False, min_value=1)
    agree_values = serializers.ListField(child=serializers.CharField(), required=False)
    absolute = serializers.BooleanField(required=False)


class AdjudicationSerializer(serializers.Serializer[Any]):
    item = serializers.IntegerField()
    question = serializers.CharField()
    value = serializers.JSONField()
    note = serializers.CharField(required=False, allow_blank=True, default="")


class ConsensusLabelSerializer(serializers.ModelSerializer[ConsensusLabel]):
    item_external_id = serializers.CharField(source="item.external_id", read_only=True)
    adjudicated_by = serializers.CharField(source="adjudicated_by.username", read_only=True, default=None)

    class Meta:
        model = ConsensusLabel
        fields = [
            "item",
            "item_external_id",
            "question_key",
            "value",
            "resolved",
            "rule",
            "params",
            "support",
            "confidence",
            "reason",
            "n_votes",
            "pending",
            "adjudicated_by",
            "note",
            "computed_at",
        ]


class AgreementReportView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "resamples", int, description="bootstrap resamples (0: no interval; at most 5000)"
            ),
            OpenApiParameter("seed", int, description="the bootstrap's seed (default 0)"),
            OpenApiParameter(
                "breakdown",
                str,
                description="an item metadata field for the labeller comparisons, or annotator:KEY: "
                "alpha within each pool of annotators (their answer KEY given to this study) with its "
                "interval, and by_annotator_attribute.cross: per question and two pools, kappa_x (low, "
                "high), normalised and majority_agreement with intervals (docs/agreement.md)",
            ),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, pk: int) -> Response:
        study = _study(request, pk)
        return Response(
            agreement_report(
                study=study,
                n_resamples=bounded_int(request.query_params.get("resamples"), 1000, high=5000),
                seed=bounded_int(request.query_params.get("seed"), 0, high=2**31),
                breakdown=request.query_params.get("breakdown"),
            )
        )


class ConsensusView(APIView):
    @extend_schema(responses=ConsensusLabelSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        study = _study(request, pk)
        labels = (
            ConsensusLabel.objects.filter(study=study).select_related("item", "adjudicated_by").order_by("id")
        )
        if request.query_params.get("question"):
            labels = labels.filter(question_key=request.query_params["question"])
        return Response(ConsensusLabelSerializer(labels[:10_000], many=True).data)

    @extend_schema(request=ConsensusComputeSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        study = _study(request, pk, write=True)
        data = ConsensusComputeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        question = values.pop("question", None)
        rule = values if values.get("rule") else None
        return Response({"questions": consensus_compute(study=study, question=question, rule=rule)})


class AdjudicationView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_adjudicator(user=request_user(request), id=pk)
        filters = queue_filters(
            study=study,
            reason=request.query_params.get("reason", ""),
            question=request.query_params.get("question", ""),
            condition=request.query_params.get("condition", ""),
        )
        # A tie that includes the caller's own vote is left to another expert (as on the page).
        return Response(queue_for_adjudicator(study=study, user=request_user(request), filters=filters)[0])

    @extend_schema(request=AdjudicationSerializer, responses={201: ConsensusLabelSerializer})
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_adjudicator(user=request_user(request), id=pk)
        data = AdjudicationSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        item = Item.objects.filter(pk=data.validated_data["item"], study=study).first()
        if item is None:
            raise NotFoundError("no such item in this study")
        label = consensus_adjudicate(
            study=study,
            item=item,
            question_key=data.validated_data["question"],
            value=data.validated_data["value"],
            user=request_user(request),
            note=data.validated_data["note"],
        )
        return Response(ConsensusLabelSerializer(label).data, status=status.HTTP_201_CREATED)
