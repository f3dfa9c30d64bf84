"""REST API for InterMit: the plan for a choice of axes and weights; loops (create, read) and their
actions (label the initial images, start the next step, advance or close the open step)."""

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
from annotations.selectors.labels import CONSENSUS
from common.errors import NotFoundError, ValidationFailed
from generation.services import model_source_check, model_spec_from_dict
from mitigation.models import MitigationLoop, MitigationStep
from mitigation.selectors import (
    intermit_params_parse,
    intermit_plan,
    labeller_by_name,
    mitigation_loop_get_for_user,
    mitigation_loop_report,
)
from mitigation.services import (
    MAX_BASE_SEED,
    MIN_BASE_SEED,
    mitigation_loop_create,
    mitigation_loop_label_initial,
    mitigation_step_advance,
    mitigation_step_start,
)


class LoopCreateSerializer(serializers.Serializer[dict[str, Any]]):
    axes = serializers.ListField(child=serializers.CharField(max_length=64), help_text="B*, in order")
    weights = serializers.ListField(
        child=serializers.FloatField(), required=False, help_text="p, one per axis (default: equal)"
    )
    epsilon = serializers.FloatField(required=False, default=0.35)
    targets = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField()),
        required=False,
        help_text="D*: axis -> one share per option, in the axis's order (an axis left out: uniform)",
    )
    group = serializers.CharField(max_length=200, required=False, help_text="The prompt group, e.g. nurse")
    labeller = serializers.CharField(
        max_length=220, required=False, help_text="A machine labeller NAME[@VERSION]; omit: people label"
    )
    model = serializers.DictField(help_text="ModelSpec fields: source, steps, guidance, width, height, ...")
    images_per_step = serializers.IntegerField(min_value=1, max_value=10_000, required=False, default=48)
    base_seed = serializers.IntegerField(
        required=False,
        default=0,
        min_value=MIN_BASE_SEED,
        max_value=MAX_BASE_SEED,
        help_text="A 64-bit integer",
    )


class StudyInterMitPlanView(APIView):
    """tau of a prompt group for a choice of B*, p and epsilon, and the next axis with its gamma."""

    @extend_schema(
        parameters=[
            OpenApiParameter("axes", str, required=True, description="B*, comma-separated: gender,age"),
            OpenApiParameter("weights", str, description="p, comma-separated (default: equal)"),
            OpenApiParameter("epsilon", float, description="default 0.35"),
            OpenApiParameter(
                "targets", str, description="D*: AXIS=SHARE,SHARE,...;AXIS=... (an axis left out: uniform)"
            ),
            OpenApiParameter(
                "group", str, description="the prompt group (needed when the study has several)"
            ),
            OpenApiParameter("source", str, description="consensus (default) or LABELLER[@VERSION]"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        q = request.query_params
        params = intermit_params_parse(
            study,
            axes=q.get("axes"),
            weights=q.get("weights"),
            epsilon=q.get("epsilon"),
            group=q.get("group"),
            targets=q.get("targets"),
        )
        return Response(intermit_plan(study, params, q.get("source") or CONSENSUS))


class StudyInterMitLoopsView(APIView):
    """The study's loops (GET) and a new loop (POST)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        return Response(
            [
                {"id": loop.pk, "group": loop.group, "axes": loop.axes, "epsilon": loop.epsilon}
                for loop in study.mitigation_loops.all()
            ]
        )

    @extend_schema(request=LoopCreateSerializer, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, write=True)
        data = LoopCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values: dict[str, Any] = data.validated_data
        params = intermit_params_parse(
            study,
            axes=values["axes"],
            weights=values.get("weights"),
            epsilon=values["epsilon"],
            group=values.get("group"),
            targets=values.get("targets"),
        )
        spec = model_spec_from_dict(values["model"])
        model_source_check(spec.source)
        loop = mitigation_loop_create(
            study=study,
            params=params,
            spec=spec,
            user=request_user(request),
            annotator=labeller_by_name(values.get("labeller")),
            images_per_step=values["images_per_step"],
            base_seed=values["base_seed"],
        )
        return Response(mitigation_loop_report(loop), status=status.HTTP_201_CREATED)


def _loop(request: Request, pk: int, *, write: bool = False) -> MitigationLoop:
    return mitigation_loop_get_for_user(user=request_user(request), id=pk, write=write)


class InterMitLoopView(APIView):
    """A loop's report: status, plan, stages, steps, MitAmt, MitSteps, warnings, validation."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        return Response(mitigation_loop_report(_loop(request, pk)))


class InterMitLoopActionView(APIView):
    """``step`` starts the next step; ``advance`` checks the open step's jobs; ``close`` records the open
    step with the labels given so far (people); ``label-initial`` queues the labeller over the initial
    images. Answers the loop's report."""

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT, 201: OpenApiTypes.OBJECT})
    def post(self, request: Request, pk: int, verb: str) -> Response:
        loop = _loop(request, pk, write=True)
        user = request_user(request)
        code: int = status.HTTP_200_OK
        if verb == "step":
            mitigation_step_start(loop=loop, user=user)
            code = status.HTTP_201_CREATED
        elif verb in ("advance", "close"):
            step = loop.steps.exclude(status=MitigationStep.Status.DONE).first()
            if step is None:
                raise ValidationFailed("no step is open", {"step": "none open"})
            mitigation_step_advance(step=step, user=user, close=verb == "close")
        elif verb == "label-initial":
            mitigation_loop_label_initial(loop=loop, user=user)
        else:
            raise NotFoundError(f"unknown action {verb!r}; use step, advance, close or label-initial")
        loop.refresh_from_db()
        return Response(mitigation_loop_report(loop), status=code)
