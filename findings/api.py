"""REST API of the findings: one study's metrics report and several studies compared (JSON made here, at
the edge, from the typed ``FindingsReport``)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations import access
from annotations.access import request_user
from common.query_params import query_flag
from findings.comparison import comparison_query_parse, comparison_report, comparison_sides
from findings.papers.ppi import ppi_min_people, width_parse
from findings.report import correction_param, findings_report_cached


class StudyMetricsView(APIView):
    """Every metric that applies to the study's protocol (the same report as ``manage.py metrics --json``)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "source",
                str,
                description="consensus, judgements, LABELLER[@VERSION], ppi:LABELLER[@VERSION] (machine + "
                "human sample, docs/metrics.md) or consensus@KEY=VALUE (one rater pool's consensus, "
                'docs/metrics.md "Rater pools"); default: the protocol\'s default '
                "source (judgements for stereotype-markers, consensus otherwise; see source_default)",
            ),
            OpenApiParameter(
                "embeddings",
                str,
                description="visage pull: whose stored image embeddings (LABELLER[@VERSION])",
            ),
            OpenApiParameter("captions", str, description="visage salience: whose stored captions"),
            OpenApiParameter(
                "partial",
                bool,
                description="1: count partial items too (fewer judgements than the overlap; provisional, "
                "marked in coverage); default 0: settled items only",
            ),
            OpenApiParameter(
                "width",
                float,
                description="source ppi:LABELLER: the 95% interval width the report says how many more human "
                "labels would reach (default 0.1)",
            ),
            OpenApiParameter(
                "correction",
                str,
                enum=["holm", "bh"],
                description="how tables that run many tests adjust their p-values (p_adjusted): holm "
                "(default, Holm step-down) or bh (Benjamini-Hochberg); anything else is a 400",
            ),
            OpenApiParameter(
                "min_people",
                int,
                description="ppi: the fewest people-labelled items a row is estimated from (2 to 100000; "
                "default WORKBENCH_PPI_MIN_PEOPLE, 10); anything else is a 400",
            ),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, pk: int) -> Response:
        study = access.study_get_for_user(user=request_user(request), id=pk, researcher=True)
        params = request.query_params
        return Response(
            findings_report_cached(
                study=study,
                source=params.get("source") or None,
                embeddings=params.get("embeddings") or None,
                captions=params.get("captions") or None,
                include_partial=query_flag(params.get("partial"), "partial"),
                width=width_parse(params.get("width")),
                correction=correction_param(params.get("correction")),
                min_people=ppi_min_people(params.get("min_people")) if params.get("min_people") else None,
            ).to_json()  # the typed report serialised at the API's edge
        )


class CompareView(APIView):
    """Several studies' metrics aligned on the same groups, side by side with n and differences (the data of
    the ``/compare/`` page; docs/metrics.md "Comparing studies"). Repeated parameters pair by position."""

    @extend_schema(
        parameters=[
            OpenApiParameter("study", int, many=True, required=True, description="2 to 6 study ids (repeat)"),
            OpenApiParameter(
                "source",
                str,
                many=True,
                description="consensus (default) or LABELLER[@VERSION]: one for all, or one per study",
            ),
            OpenApiParameter("condition", str, many=True, description="narrow every study to one condition"),
            OpenApiParameter("model", str, many=True, description="narrow every study to one model"),
            OpenApiParameter(
                "where",
                str,
                many=True,
                description="narrow every study to column=value (e.g. group=nurse; several joined by ';')",
            ),
            OpenApiParameter("partial", bool, description="1: count partial items too (provisional)"),
            OpenApiParameter(
                "correction",
                str,
                enum=["holm", "bh"],
                description="how each side's many-test tables adjust their p-values: holm (default) or bh",
            ),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        get = request.query_params.getlist
        queries = comparison_query_parse(
            studies=get("study"),
            sources=get("source"),
            conditions=get("condition"),
            models=get("model"),
            wheres=get("where"),
        )
        studies = access.studies_get_for_user(
            user=request_user(request), ids=[q.study_id for q in queries], researcher=True
        )
        return Response(
            comparison_report(
                sides=comparison_sides(studies=studies, queries=queries),
                include_partial=query_flag(request.query_params.get("partial"), "partial"),
                correction=correction_param(request.query_params.get("correction")),
            )
        )
