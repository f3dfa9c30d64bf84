"""Every number of the audit report equals the API's value for the same cell (issue 26 point 2): the demo
study's report, a ViSAGe-imported study's report and a compare report of the two, walked table by table
and compared with ``/api/studies/{id}/metrics/``, ``/agreement/``, ``/quality/``, ``/exclusions/``,
``/consensus/`` and ``/api/compare/``."""

from __future__ import annotations

import pytest

from annotations.models import Study
from reports.document import DocFigure
from reports.gather import report_build
from tests.reports.api_walk import walk

pytestmark = pytest.mark.django_db


def test_every_number_of_the_demo_report_equals_the_api(demo_study: Study) -> None:
    owner = demo_study.owner
    document = report_build(demo_study)
    checked = walk(document, owner)
    # Every kind of table was there and held numbers: findings, alpha, machine vs human, pools.
    assert checked["metrics"] > 100
    assert checked["agreement:alpha"] >= 6 * 8
    assert checked["agreement:machines"] > 0
    assert checked["quality:pools"] > 0 and checked["consensus"] > 0
    # The findings tables have the API's columns in order; the figures were drawn in both formats.
    figures = [b for s in document.sections for b in s.blocks if isinstance(b, DocFigure)]
    assert figures and all(f.svg.lstrip().startswith("<?xml") and f.pdf.startswith(b"%PDF") for f in figures)


def test_every_number_of_a_visage_report_and_of_a_compare_report_equals_the_api(visage_import) -> None:
    first = visage_import()["stereotype-markers"]
    second = visage_import()["stereotype-markers"]
    owner = first.owner
    document = report_build(first)
    checked = walk(document, owner)
    assert checked["metrics"] > 0 and checked["agreement:alpha"] > 0
    tendency = next(t for t in document.tables() if t.key == "visage_tendency")
    assert tendency.rows and {c.kind for c in tendency.columns} >= {"label", "estimate"}

    compare = report_build(first, compare=[second])
    assert compare.study_ids == [first.pk, second.pk]
    assert [s.key for s in compare.sections] == ["compare", f"study-{first.pk}", f"study-{second.pk}"]
    checked = walk(compare, owner)
    # the aligned tables were compared cell by cell, and both studies' own tables too
    assert checked["compare"] > 0 and checked["metrics"] > 0
