"""The reliability gate, valid ranges and degenerate statistics through ``manage.py metrics --json``, the
findings API and the agreement API, on a study built to have one question answered at random (alpha near
0), one subgroup with 3 human labels and a consensus of one class (docs/metrics.md, "Reliability gate")."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from annotations.models import Annotator, FindingsExclusion
from annotations.services.findings_reliability import (
    findings_question_exclude,
    findings_question_include,
    findings_thresholds_set,
)
from annotations.services.validation_sample import validation_sample_create
from common.errors import ValidationFailed
from findings.tables import Column, Method, Table
from tests.annotations.builders import RELIABILITY_ITEMS, reliability_study
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

N = RELIABILITY_ITEMS


@pytest.fixture
def study(owner):
    return reliability_study(owner)


def run(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def rows(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    table = next(t for t in report["tables"] if t["key"] == key)
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def gate(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["question"]: e for e in report["reliability"]}


def test_the_random_question_is_unreliable_and_named_beside_every_finding(study, owner) -> None:
    report = run("metrics", str(study.pk), "--json")
    entries = gate(report)
    assert set(entries["gender"]) >= {
        "question",
        "level",
        "alpha",
        "low",
        "high",
        "n_items",
        "verdict",
        "reason",
    }
    gender = entries["gender"]
    assert gender["verdict"] == "unreliable" and abs(gender["alpha"]) < 0.2 and gender["n_items"] == N
    assert gender["level"] == "nominal" and gender["low"] <= gender["alpha"] <= gender["high"]
    assert entries["age"]["verdict"] == "reliable" and entries["age"]["alpha"] == pytest.approx(1.0)
    assert entries["age"]["reason"] is None
    # one value in the whole domain: undefined, with the reason
    assert entries["person"]["verdict"] == "undefined" and entries["person"]["alpha"] is None
    assert "same value" in entries["person"]["reason"]
    # questions nobody answered: undefined, one rater
    assert entries["ethnicity"]["verdict"] == "undefined" and "nobody" in entries["ethnicity"]["reason"]
    assert "Krippendorff" in report["reliability_thresholds"]["statement"]
    assert report["reliability_thresholds"]["reliable_at"] == 0.8
    # every table that reads the random question says so, with its alpha
    label_tables = [t for t in report["tables"] if t["rows"]]
    assert label_tables
    for table in label_tables:
        assert "gender" in table["warning"] and f"alpha {gender['alpha']:.3f}" in table["warning"], table[
            "key"
        ]
    for figure in report["figures"]:
        assert figure["warning"] and "gender" in figure["warning"]
    # the API carries the same gate
    api = client_for(owner).get(f"/api/studies/{study.pk}/metrics/").json()
    assert gate(api)["gender"]["verdict"] == "unreliable"
    assert api["tables"][0]["warning"] == report["tables"][0]["warning"]
    # the page shows alpha beside the finding and the warning
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studies/{study.pk}/findings/").content.decode()
    assert 'id="reliability"' in page and "unreliable" in page and f"{gender['alpha']:.3f}" in page
    assert "table-warning" in page


def test_a_machine_source_carries_no_human_reliability(study) -> None:
    report = run("metrics", str(study.pk), "--json", "--source", "vlm@1")
    assert report["reliability"] == [] and "no human reliability" in report["reliability_note"]
    assert report["source_label"] == "vlm v1 (machine labeller)"
    assert all(t.get("warning") is None for t in report["tables"])


def test_excluding_a_question_is_recorded_and_stated(study, owner) -> None:
    with pytest.raises(ValidationFailed):
        findings_question_exclude(study=study, question_key="gender", reason=" ", user=owner)
    with pytest.raises(ValidationFailed):
        findings_question_exclude(study=study, question_key="nope", reason="x", user=owner)
    findings_question_exclude(study=study, question_key="gender", reason="answered at random", user=owner)
    report = run("metrics", str(study.pk), "--json")
    assert report["excluded_questions"][0]["question"] == "gender"
    assert report["excluded_questions"][0]["reason"] == "answered at random"
    assert report["excluded_questions"][0]["by"] == owner.username
    excluded = gate(report)["gender"]
    assert excluded["excluded"] is True and excluded["verdict"] == "unreliable"
    # no table reads it any more: the gender distributions are empty, the warnings do not name it
    gender_rows = [r for r in rows(report, "biasconnect_distributions") if r["axis"] == "gender"]
    assert gender_rows and all(r["share"] is None and r["count"] == 0 for r in gender_rows)
    assert all("gender (" not in (t.get("warning") or "") for t in report["tables"])
    assert findings_question_include(study=study, question_key="gender")
    assert not FindingsExclusion.objects.filter(study=study).exists()
    back = rows(run("metrics", str(study.pk), "--json"), "biasconnect_distributions")
    assert any(r["axis"] == "gender" and r["count"] for r in back)


def test_a_study_chooses_its_thresholds(study, owner) -> None:
    findings_thresholds_set(study=study, reliable_at=0.9, tentative_at=-0.5, min_items=5, user=owner)
    report = run("metrics", str(study.pk), "--json")
    assert gate(report)["gender"]["verdict"] == "tentative"
    assert "chosen for this study" in report["reliability_thresholds"]["statement"]
    with pytest.raises(ValidationFailed):
        findings_thresholds_set(study=study, reliable_at=0.5, tentative_at=0.7, min_items=5, user=owner)


def test_ppi_rows_stay_in_range_and_a_3_label_subgroup_has_no_estimate(study) -> None:
    labeller = Annotator.objects.get(name="vlm")
    validation_sample_create(study=study, labeller=labeller, size=N, design="uniform", seed=0)
    report = run("metrics", str(study.pk), "--json", "--source", "ppi:vlm@1")
    assert report["source_label"] == f"vlm v1 + human sample (uniform, {N})"
    estimates = rows(report, "ppi_estimates")
    small = [r for r in estimates if r["group_by"] == "condition" and r["group"] == "gender:female"]
    assert small and all(r["estimate"] is None and r["low"] is None and r["high"] is None for r in small)
    assert all("needs at least 10 people-labelled items (has 3)" in r["reason"] for r in small)
    for r in estimates:
        if r["option"].startswith("mean position"):
            continue
        for key in ("estimate", "low", "high", "human_only", "human_low", "human_high"):
            assert r[key] is None or 0.0 <= r[key] <= 1.0, (key, r)
    for r in rows(report, "ppi_differences"):
        for key in ("difference", "low", "high"):
            assert r[key] is None or -1.0 <= r[key] <= 1.0
    # the coverage counts the machine's and the people's items apart
    assert report["coverage"]["human"] == {"sampled": N, "labelled": N, "waiting": 0}
    assert report["coverage"]["machine"]["settled"] == N
    assert "human part: 30 of the 30 sampled" in report["coverage"]["summary"]
    # the human part is gated: the random question is named
    assert gate(report)["gender"]["verdict"] == "unreliable"
    gender_tables = [t for t in report["tables"] if t["rows"] and t["warning"]]
    assert gender_tables and all("gender" in t["warning"] for t in gender_tables)
    # overridable: min_people 2 gives the subgroup an estimate again
    lower = run("metrics", str(study.pk), "--json", "--source", "ppi:vlm@1", "--min-people", "2")
    again = [r for r in rows(lower, "ppi_estimates") if r["group"] == "gender:female"]
    assert any(r["estimate"] is not None for r in again)


def test_kappa_on_a_one_class_consensus_is_undefined_with_its_reason(study, owner) -> None:
    agreement = client_for(owner).get(f"/api/studies/{study.pk}/agreement/").json()
    person = next(q for q in agreement["questions"] if q["key"] == "person")
    overall = person["machines_vs_consensus"][0]["overall"]
    assert overall["accuracy"] == pytest.approx(25 / 30)
    assert overall["kappa"] is None and "one class" in overall["kappa_undefined_reason"]
    # the study headline: range and median per question with the count of reliable ones
    headline = agreement["study_alpha"]["headline"]
    assert headline["n_reliable"] == 1 and headline["n_unreliable"] == 1
    assert "median" in headline["text"] and "mean" not in headline["text"]
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studies/{study.pk}/agreement/").content.decode()
    assert "1 reliable" in page and "mean alpha" not in page


def test_a_figure_marks_the_tables_corrected_decision_and_carries_its_warning() -> None:
    from matplotlib.figure import Figure

    from findings.figures import DRAW

    columns = [
        Column("model", "label"),
        Column("object", "label"),
        Column("condition", "label"),
        Column("bds", "estimate"),
        Column("p_value", "p"),
        Column("significant", "flag"),
        Column("p_adjusted", "p_adjusted"),
        Column("significant_adjusted", "flag"),
    ]
    row: list[Any] = ["m", "car", "gender:women", 0.2, 0.01, True, 0.06, False]
    table = Table(
        key="soda_bds",
        title="BDS",
        n_items=40,
        columns=columns,
        # raw p 0.01 would be starred by the uncorrected decision; Holm's 0.06 is not significant
        rows=[row],
        method=Method("BDS", correction="Holm step-down (family-wise error) over 6 tests (...)"),
        warning="Reads labels people do not agree on reliably: car_body_type (alpha 0.026, unreliable).",
    )
    fig = Figure()
    DRAW["soda_bds"](fig, table, {})
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts == ["0.20"]  # no star: the table's corrected decision says not significant
    title = fig.get_suptitle()
    assert "p_adjusted < 0.05, Holm step-down" in title and "uncorrected" not in title
    assert "car_body_type (alpha 0.026, unreliable)" in title
    row[-1] = True
    fig = Figure()
    DRAW["soda_bds"](fig, table, {})
    assert [t.get_text() for ax in fig.axes for t in ax.texts] == ["0.20*"]


def test_the_page_forms_write_through_the_services_and_refuse_with_the_reason(
    study, owner, other_researcher
) -> None:
    client = Client()
    client.force_login(owner)
    url = f"/studies/{study.pk}/findings/reliability/"
    no_reason = client.post(url, {"action": "exclude", "question": "gender", "reason": ""}, follow=True)
    assert "Nothing was changed" in no_reason.content.decode()
    assert not FindingsExclusion.objects.filter(study=study).exists()
    client.post(url, {"action": "exclude", "question": "gender", "reason": "random"})
    assert FindingsExclusion.objects.get(study=study).excluded_by == owner
    bad = client.post(
        url, {"action": "thresholds", "reliable_at": "x", "tentative_at": "0.6", "min_items": "5"}
    )
    assert bad.status_code == 302
    client.post(url, {"action": "thresholds", "reliable_at": "0.9", "tentative_at": "0.7", "min_items": "5"})
    page = client.get(f"/studies/{study.pk}/findings/").content.decode()
    assert "chosen for this study" in page and "random" in page
    # the validation sample form: the service's rules (an unknown design is refused), then the ppi source
    sample = f"/studies/{study.pk}/findings/sample/"
    refused = client.post(sample, {"labeller": "vlm@1", "design": "bogus", "size": "5"}, follow=True)
    assert "No sample was drawn" in refused.content.decode() and "unknown design" in refused.content.decode()
    no_size = client.post(sample, {"labeller": "vlm@1", "design": "uniform", "size": "abc"}, follow=True)
    assert "No sample was drawn" in no_size.content.decode()
    for bad_input in ({"size": "٣"}, {"size": "5", "seed": "9" * 4401}, {"size": "5", "mix": "nan"}):
        odd = client.post(sample, {"labeller": "vlm@1", "design": "uniform", **bad_input}, follow=True)
        assert odd.status_code == 200 and "size and seed must be whole numbers" in odd.content.decode()
    drawn = client.post(sample, {"labeller": "vlm@1", "design": "uniform", "size": "12", "seed": "1"})
    assert drawn.status_code == 302 and "source=ppi%3Avlm%401" in drawn["Location"]
    assert client.post(sample, {"labeller": "nobody", "design": "uniform", "size": "5"}).status_code == 302
    # another researcher may not see the study: 404, nothing written
    other = Client()
    other.force_login(other_researcher)
    assert other.post(url, {"action": "include", "question": "gender"}).status_code == 404
    assert FindingsExclusion.objects.filter(study=study).exists()


def test_the_audit_report_states_the_gate_and_the_exclusion(study, owner) -> None:
    from reports.formats import renderer
    from reports.gather import report_build

    findings_question_exclude(study=study, question_key="person", reason="one class only", user=owner)
    markdown = renderer("md")(report_build(study)).body.decode()
    # Limitations: the random question with its alpha and verdict, the left-out one with who and why
    assert "gender: alpha" in markdown and "unreliable" in markdown
    assert (
        "person (alpha undefined, undefined) is left out of the findings by owner: one class only" in markdown
    )
    # beside each findings table: its warning; the study line is a range and median, never a mean
    assert "Reads labels people do not agree on reliably: gender (alpha" in markdown
    assert "Agreement per question: alpha" in markdown and "Mean alpha" not in markdown
