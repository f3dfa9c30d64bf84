"""Typed findings (issue 26 point 5): every table of every protocol's report declares one kind per column
and a method record; the tables that run many tests give Holm (default) or Benjamini-Hochberg adjusted
p-values through the report, the page, the API, the command and compare; figures are drawn outside the
page layer, in PNG, SVG and PDF."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from django.core.management import call_command

from common.errors import ValidationFailed
from findings.comparison import ComparisonSide, comparison_report
from findings.figures import FORMATS, table_figure
from findings.tables import COLUMN_KINDS, Table
from protocols.schema import load_preset
from tests.annotations.builders import make_study, subgroup_study
from tests.helpers import client_for, metrics_json

pytestmark = pytest.mark.django_db

OCCUPATIONAL = [
    q.key for q in load_preset("ssi-rubric").questions if q.applies_to({"category": "occupational"})
]
# Per model: q1 3/9 -> 0/9, q2 6/9 -> 2/9 (differences 3/9 and 4/9).
MARKED = {("q1", "initial"): 3, ("q1", "refined"): 0, ("q2", "initial"): 6, ("q2", "refined"): 2}
# Hand-computed: each model's paired t-test has t = 7, df = 1, so p = 1 - (2/pi) atan 7. The models pooled
# ("all") give differences 3/9, 4/9, 3/9, 4/9: mean 7/18, standard error 1/(18 sqrt 3), t = 7 sqrt 3,
# df = 3, whose two-sided p is 1 - (2/pi) (7/50 + atan 7) (t with 3 df: F(t) = 1/2 + (1/pi)(u/(1 + u^2) +
# atan u), u = t / sqrt 3 = 7).
P_MODEL = 1 - 2 / math.pi * math.atan(7)
P_ALL = 1 - 2 / math.pi * (7 / 50 + math.atan(7))


def two_model_ssi(owner: Any) -> Any:
    items = [
        {
            "external_id": f"{m}-{q}-{c}",
            "model": m,
            "condition": c,
            "metadata": {"category": "occupational", "query": q},
        }
        for m in ("m1", "m2")
        for q, c in MARKED
    ]
    answers = [
        {"item": f"{m}-{q}-{c}", "annotator": "h1", "question": k, "value": int(i < n)}
        for m in ("m1", "m2")
        for (q, c), n in MARKED.items()
        for i, k in enumerate(OCCUPATIONAL)
    ]
    return make_study(owner, "ssi-rubric", items, answers)


def soda_study(owner: Any) -> Any:
    colours = {
        "b1": ("base", "red"),
        "b2": ("base", "red"),
        "g1": ("gender:women", "blue"),
        "g2": ("gender:women", "blue"),
        "o1": ("age:old", "red"),
        "o2": ("age:old", "blue"),
    }
    items = [
        {"external_id": k, "model": "m", "condition": c, "metadata": {"object": "car"}}
        for k, (c, _) in colours.items()
    ]
    answers = [
        {"item": k, "annotator": "h1", "question": "product_color", "value": v}
        for k, (_, v) in colours.items()
    ]
    return make_study(owner, "object-attributes", items, answers)


def bias_axes_study(owner: Any) -> Any:
    items = [
        {"external_id": f"{c}{n}", "condition": c, "metadata": {"occupation": "chef"}}
        for c in ("base", "age:old")
        for n in (1, 2)
    ]
    genders = {"base1": "male", "base2": "male", "age:old1": "male", "age:old2": "female"}
    answers = [{"item": i, "annotator": "h1", "question": "person", "value": "yes"} for i in genders]
    answers += [{"item": i, "annotator": "h1", "question": "gender", "value": g} for i, g in genders.items()]
    return make_study(owner, "bias-axes", items, answers)


def rows(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    table = next(t for t in report["tables"] if t["key"] == key)
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def the_table(report: dict[str, Any], key: str) -> dict[str, Any]:
    return next(t for t in report["tables"] if t["key"] == key)


def assert_typed(report: dict[str, Any]) -> set[str]:
    """Every table declares one known kind per column and a method with an estimator and a reference;
    intervals, counts and p-values are typed as such. Returns the table keys seen."""
    assert report["tables"]
    for table in report["tables"]:
        key, columns, kinds = table["key"], table["columns"], table["kinds"]
        assert len(kinds) == len(columns), key
        assert set(kinds) <= set(COLUMN_KINDS), key
        method = table["method"]
        assert method is not None, key
        assert method["estimator"] and method["reference"] and method["unit"], key
        by_name = dict(zip(columns, kinds, strict=True))
        for column, kind in by_name.items():
            if column in ("low", "high", "human_low", "human_high"):
                assert kind == column.removeprefix("human_"), (key, column)
            if column == "p_value":
                assert kind == "p" and method["test"], (key, column)
            if column == "p_adjusted":
                assert kind == "p_adjusted" and method["correction"], (key, column)
            if column.startswith("n_"):
                assert kind == "n", (key, column)
        if "p_value" in columns:
            assert "p_adjusted" in columns and "significant_adjusted" in columns, key
        for row in table["rows"]:
            assert len(row) == len(columns), key
    return {t["key"] for t in report["tables"]}


def test_every_table_of_every_protocol_is_typed(visage_studies, owner, tmp_path) -> None:
    subgroup = subgroup_study(owner)
    reports = [
        metrics_json(study=visage_studies["stereotype-markers"]),
        metrics_json(study=visage_studies["stereotype-markers"], source="consensus"),
        metrics_json(study=visage_studies["visualness"]),
        metrics_json(study=subgroup),
        metrics_json(study=subgroup, source="vlm@1"),
        metrics_json(study=two_model_ssi(owner)),
        metrics_json(study=two_model_ssi(owner), correction="bh"),
        metrics_json(study=bias_axes_study(owner)),
        metrics_json(study=soda_study(owner)),
    ]
    out = io.StringIO()
    call_command(
        "sample_for_validation",
        str(subgroup.pk),
        "--labeller",
        "vlm",
        "--design",
        "uniform",
        "--size",
        "3",
        stdout=out,
    )
    reports.append(metrics_json(study=subgroup, source="ppi:vlm@1"))
    seen: set[str] = set()
    for report in reports:
        seen |= assert_typed(report)
    # Every table a section builds (grep "Table(" in findings/) was checked.
    assert seen >= {
        "visage_tendency",
        "visage_likelihoods",
        "visage_offensiveness",
        "visage_pull",
        "visage_salience",
        "visualness_shares",
        "visual_attributes",
        "agent_scores",
        "agent_comparison",
        "agent_pairs",
        "ssi_cells",
        "ssi_comparisons",
        "ssi_unpaired",
        "ssi_prevalence",
        "biasconnect_is",
        "biasconnect_deviation",
        "biasconnect_distributions",
        "soda_bds",
        "soda_cds",
        "soda_vac",
        "soda_vac_thresholded",
        "soda_concentrated",
        "soda_shifts",
        "ppi_estimates",
        "ppi_differences",
        "ppi_accuracy",
    }


def test_ssi_t_tests_are_corrected_holm_by_default_and_bh_on_request(owner) -> None:
    study = two_model_ssi(owner)
    holm = metrics_json(study=study)
    by_model = {r["model"]: r for r in rows(holm, "ssi_comparisons")}
    assert set(by_model) == {"m1", "m2", "all"}
    assert by_model["m1"]["p_value"] == pytest.approx(P_MODEL)
    assert by_model["all"]["p_value"] == pytest.approx(P_ALL)
    # Holm over 3 tests: sorted P_ALL (x 3), P_MODEL (x 2), P_MODEL (x 1, raised to the running maximum).
    assert by_model["all"]["p_adjusted"] == pytest.approx(3 * P_ALL)
    assert by_model["m1"]["p_adjusted"] == pytest.approx(2 * P_MODEL)
    assert by_model["m2"]["p_adjusted"] == pytest.approx(2 * P_MODEL)
    assert [by_model[m]["significant_adjusted"] for m in ("m1", "m2", "all")] == [False, False, True]
    assert [by_model[m]["significant"] for m in ("m1", "m2", "all")] == [False, False, True]
    table = the_table(holm, "ssi_comparisons")
    assert table["columns"][6:10] == ["p_value", "significant", "p_adjusted", "significant_adjusted"]
    assert table["method"]["correction"].startswith("Holm step-down (family-wise error) over 3 tests")
    assert "no correction for multiple comparisons" in table["method"]["correction"]
    assert any("p_adjusted: Holm" in n and "The paper: none stated" in n for n in table["notes"])
    assert holm["correction"] == "holm" and "Holm" in holm["correction_note"]
    # BH over 3 tests: m p / j = 3 P_ALL, 3 P_MODEL / 2, P_MODEL; the running minimum from the top gives
    # P_MODEL to both models.
    bh = metrics_json(study=study, correction="bh")
    by_model = {r["model"]: r for r in rows(bh, "ssi_comparisons")}
    assert by_model["all"]["p_adjusted"] == pytest.approx(3 * P_ALL)
    assert by_model["m1"]["p_adjusted"] == pytest.approx(P_MODEL)
    assert by_model["m2"]["p_value"] == pytest.approx(P_MODEL)
    assert the_table(bh, "ssi_comparisons")["method"]["correction"].startswith("Benjamini-Hochberg")
    with pytest.raises(ValidationFailed, match="holm, bh"):
        metrics_json(study=study, correction="bonferroni")


def test_soda_permutation_tests_are_corrected(owner) -> None:
    report = metrics_json(study=soda_study(owner))
    by_condition = {r["condition"]: r for r in rows(report, "soda_bds")}
    assert set(by_condition) == {"gender:women", "age:old"}
    raw = {c: r["p_value"] for c, r in by_condition.items()}
    low, high = sorted(raw, key=raw.__getitem__)
    # Holm over 2 tests: the smaller p doubled, the larger one kept unless the doubled one is larger.
    assert by_condition[low]["p_adjusted"] == pytest.approx(min(1.0, 2 * raw[low]))
    assert by_condition[high]["p_adjusted"] == pytest.approx(max(min(1.0, 2 * raw[low]), raw[high]))
    method = the_table(report, "soda_bds")["method"]
    assert "over 2 tests" in method["correction"] and "0.01" in method["correction"]
    assert "1000 times" in method["test"] and method["unit"] == "images"


def test_page_api_command_and_compare_take_the_correction(owner, client) -> None:
    study = two_model_ssi(owner)
    api = client_for(owner)
    body = api.get(f"/api/studies/{study.pk}/metrics/?correction=bh").json()
    assert body["correction"] == "bh"
    m1 = next(r for r in rows(body, "ssi_comparisons") if r["model"] == "m1")
    assert m1["p_adjusted"] == pytest.approx(P_MODEL)
    assert api.get(f"/api/studies/{study.pk}/metrics/").json()["correction"] == "holm"
    bad = api.get(f"/api/studies/{study.pk}/metrics/?correction=fdr")
    assert bad.status_code == 400 and "correction must be one of holm, bh" in json.dumps(bad.json())

    client.force_login(owner)
    page = client.get(f"/studies/{study.pk}/findings/?correction=bh").content.decode()
    assert 'id="correction-note"' in page and "Benjamini-Hochberg (false discovery rate)" in page
    assert '<option value="bh" selected>' in page and "correction=bh" in page  # figure and CSV links
    default = client.get(f"/studies/{study.pk}/findings/").content.decode()
    assert "Multiple comparisons: <strong>Holm step-down" in default
    wrong = client.get(f"/studies/{study.pk}/findings/?correction=%3Cb%3Ex")
    assert wrong.status_code == 400 and "correction must be one of holm, bh" in wrong.content.decode()
    assert b"<b>x" not in wrong.content
    csv_text = client.get(f"/studies/{study.pk}/findings/ssi_comparisons.csv?correction=bh").content.decode()
    assert "p_value,significant,p_adjusted,significant_adjusted" in csv_text.splitlines()[0]
    # The downloads refuse a bad query as the page and the API do: 400 and why, as plain text.
    for download in ("ssi_comparisons.csv", "figures/ssi_comparisons.svg"):
        refused = client.get(f"/studies/{study.pk}/findings/{download}?correction=%3Cb%3Ex")
        assert refused.status_code == 400 and refused["Content-Type"].startswith("text/plain")
        assert "correction must be one of holm, bh" in refused.content.decode()

    out = io.StringIO()
    call_command("metrics", str(study.pk), "--correction", "bh", "--json", stdout=out)
    assert json.loads(out.getvalue())["correction"] == "bh"
    out = io.StringIO()
    call_command("metrics", str(study.pk), stdout=out)
    assert "multiple comparisons: Tables that run many tests give p-values adjusted by Holm" in out.getvalue()

    other = two_model_ssi(owner)
    sides = [ComparisonSide(study=study, source="consensus"), ComparisonSide(study=other, source="consensus")]
    comparison = comparison_report(sides=sides, cached=False, correction="bh")
    aligned = next(t for t in comparison["tables"] if t["key"] == "ssi_comparisons")
    assert comparison["correction"] == "bh"
    assert "p_adjusted [A]" in aligned["columns"] and "p_adjusted [B-A]" not in aligned["columns"]
    compare = client.get(f"/compare/?study={study.pk}&study={other.pk}&correction=bh").content.decode()
    assert 'id="correction-note"' in compare and "Benjamini-Hochberg" in compare
    assert "&amp;partial=1&amp;correction=bh" in compare  # the partial switch keeps the correction
    assert "Use Holm step-down" in compare
    refused = client.get(f"/compare/?study={study.pk}&study={other.pk}&correction=nope")
    assert refused.status_code == 400 and "correction must be one of" in refused.content.decode()


def test_figures_are_drawn_outside_the_pages_in_png_svg_and_pdf(owner, client) -> None:
    report = metrics_json(study=two_model_ssi(owner))
    raw = the_table(report, "ssi_comparisons")
    table = Table.from_json(raw)
    params = next(f for f in report["figures"] if f["table"] == "ssi_comparisons")["params"]
    assert set(FORMATS) == {"png", "svg", "pdf"}
    png = table_figure(table, params, "png")
    svg = table_figure(table, params, "svg")
    pdf = table_figure(table, params, "pdf")
    assert png is not None and png.startswith(b"\x89PNG\r\n\x1a\n")
    assert svg is not None and b"<svg" in svg and b"<script" not in svg.lower()
    assert pdf is not None and pdf.startswith(b"%PDF") and b"%%EOF" in pdf[-32:]
    # No date in SVG or PDF: the same table gives the same bytes.
    assert table_figure(table, params, "svg") == svg and table_figure(table, None, "pdf") == pdf
    assert table_figure(Table.from_json(the_table(report, "ssi_cells")), None, "png") is None  # no figure
    assert table_figure(table, params, "gif") is None
    # Untrusted text in a table never turns into markup or a script in the SVG.
    hostile = Table.from_json(
        {
            **raw,
            "title": "<script>alert(1)</script>",
            "rows": [["<script>x</script>", "$\\alpha$", *row[2:]] for row in raw["rows"]],
        }
    )
    drawn = table_figure(hostile, params, "svg")
    assert drawn is not None and b"<script" not in drawn.lower()
    client.force_login(owner)
    study = report["study"]
    response = client.get(f"/studies/{study}/findings/figures/ssi_comparisons.pdf")
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert response.content.startswith(b"%PDF") and response["Content-Disposition"].startswith("attachment")
