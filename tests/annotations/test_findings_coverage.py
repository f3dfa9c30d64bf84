"""Issue 25, point 1: findings never outrun their data.

A visual-ness pilot whose terms have 1 of the 3 ratings the overlap asks for lists no visual attribute and
says why; its consensus is pending, never a label; BiasConnect and InterMit say "insufficient" instead of a
number; a switch (page, API, command) counts the partial items, marked provisional; a study below the
minimum says so at the top of findings, compare and the API. A fully rated study keeps today's numbers.
"""

from __future__ import annotations

import html
import io
import json
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.exports import export_jsonl
from annotations.interchange.item_import import items_import_records
from annotations.models import ConsensusLabel, Study, User
from annotations.selectors.adjudication import adjudication_queue
from annotations.selectors.labels import labels_for
from annotations.services.consensus import consensus_compute
from annotations.services.studies import study_create
from protocols.schema import load_preset
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

TERMS = ("kind", "sombrero", "talkative")


def visualness_study(owner: User, raters: tuple[str, ...], name: str = "Visual-ness pilot") -> Study:
    """The visual-ness preset with the default 3-rater overlap; each term rated Agree by ``raters``."""
    study = study_create(owner=owner, name=name, protocol=load_preset("visualness"), overlap=3)
    assert study.overlap == 3
    items_import_records(
        study=study,
        records=[(f"row {n}", {"external_id": term, "text": term}) for n, term in enumerate(TERMS)],
    )
    lines = [
        {"item": term, "annotator": who, "question": "visual", "value": "agree"}
        for term in TERMS
        for who in raters
    ]
    annotations_import_records(study=study, records=list(enumerate(lines, start=1)))
    return study


def table(report: dict[str, Any], key: str) -> dict[str, Any]:
    return next(t for t in report["tables"] if t["key"] == key)


def page(user: User, url: str, status: int = 200) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == status, response.content[:500]
    return html.unescape(re.sub(r"\s+", " ", response.content.decode()))


def test_the_pilot_lists_no_visual_attribute_and_says_why(owner: User) -> None:
    pilot = visualness_study(owner, ("asia",))
    # The consensus service: pending, never a label, and not a disagreement for adjudication.
    summary = consensus_compute(study=pilot)["visual"]
    assert summary == {"labels": 3, "resolved": 0, "unresolved": 0, "pending": 3, "adjudicated": 0}
    rows = ConsensusLabel.objects.filter(study=pilot)
    assert {(r.value, r.resolved, r.pending, r.reason) for r in rows} == {
        (None, False, True, "pending: 1 of 3 judgements")
    }
    assert adjudication_queue(study=pilot) == []
    labels = labels_for(pilot, "visual")
    assert set(labels.values.values()) == {None} and len(labels.pending) == 3
    exported = [json.loads(line) for line in export_jsonl(pilot) if '"consensus"' in line]
    assert exported and all(r["value"] is None and r["pending"] for r in exported)

    # The API: coverage, the warning, no attribute, the reason, no headline number.
    api = client_for(owner)
    report = api.get(f"/api/studies/{pilot.pk}/metrics/").json()
    assert {k: report["coverage"][k] for k in ("settled", "partial", "none", "counted")} == {
        "settled": 0,
        "partial": 3,
        "none": 0,
        "counted": 0,
    }
    assert "fewer than the minimum of 30" in report["warning"]
    visual = table(report, "visual_attributes")
    assert visual["rows"] == [] and "insufficient data" in visual["empty_reason"]
    assert "?partial=1" in visual["empty_reason"]
    assert visual["coverage"]["partial"] == 3
    assert report["summary"]["visual_attributes"] is None
    assert api.get(f"/api/studies/{pilot.pk}/metrics/", {"partial": "maybe"}).status_code == 400

    # The page: the warning at the top, no "kind", the reason, the switch.
    text = page(owner, f"/studies/{pilot.pk}/findings/")
    assert text.index("Too few items for a result") < text.index("Visual attributes")
    assert "0 settled · 3 partial · 0 with none" in text
    assert "insufficient data: no item has its 3 judgements" in text
    assert not re.search(r"<td>(kind|sombrero|talkative)</td>", text)
    assert 'id="partial-toggle"' in text and "partial=1" in text

    # The switch: partial items counted, provisional, marked wherever shown.
    report = api.get(f"/api/studies/{pilot.pk}/metrics/", {"partial": "1"}).json()
    assert report["include_partial"] and report["coverage"]["counted"] == 3
    assert table(report, "visual_attributes")["rows"] == [[t, True] for t in sorted(TERMS)]
    text = page(owner, f"/studies/{pilot.pk}/findings/?partial=1")
    assert "includes 3 partial items (provisional)" in text and "<td>kind</td>" in text
    assert "Count settled items only" in text
    page(owner, f"/studies/{pilot.pk}/findings/?partial=maybe", status=400)

    # The command says it too.
    out = io.StringIO()
    call_command("metrics", str(pilot.pk), stdout=out)
    assert "0 settled" in out.getvalue() and "warning:" in out.getvalue()


def test_a_fully_rated_study_keeps_its_numbers_and_the_minimum_is_a_setting(owner: User) -> None:
    full = visualness_study(owner, ("asia", "emea", "na"), name="Visual-ness, fully rated")
    report = client_for(owner).get(f"/api/studies/{full.pk}/metrics/").json()
    assert report["coverage"]["settled"] == 3 and report["coverage"]["partial"] == 0
    assert [r[0] for r in table(report, "visual_attributes")["rows"]] == sorted(TERMS)
    shares = {r[0]: (r[1], r[3]) for r in table(report, "visualness_shares")["rows"]}
    assert shares["agree"] == (3, 1.0) and shares["disagree"] == (0, 0.0)
    assert report["summary"]["visual_attributes"] == 3
    assert "rest on 3 settled items" in report["warning"]
    consensus_compute(study=full)  # the preset's all-agree-set rule: every term visual, none pending
    assert set(ConsensusLabel.objects.filter(study=full).values_list("value", "pending")) == {(True, False)}
    with override_settings(WORKBENCH_FINDINGS_MIN_ITEMS=3):
        report = client_for(owner).get(f"/api/studies/{full.pk}/metrics/").json()
        assert report["warning"] is None
        assert "Too few items" not in page(owner, f"/studies/{full.pk}/findings/")


def test_compare_says_what_each_side_rests_on(owner: User) -> None:
    pilot = visualness_study(owner, ("asia",))
    full = visualness_study(owner, ("asia", "emea", "na"), name="Visual-ness, fully rated")
    api = client_for(owner)
    comparison = api.get("/api/compare/", {"study": [full.pk, pilot.pk]}).json()
    a, b = comparison["sides"]
    assert (a["coverage"]["settled"], b["coverage"]["settled"], b["coverage"]["partial"]) == (3, 0, 3)
    assert any(w.startswith("B (Visual-ness pilot)") for w in comparison["warnings"])
    text = page(owner, f"/compare/?study={full.pk}&study={pilot.pk}")
    assert "Too few items for a result on some sides" in text and "0 · 3 · 0" in text
    assert 'id="partial-toggle"' in text
    partial = api.get(f"/api/compare/?study={full.pk}&study={pilot.pk}&partial=1").json()
    assert partial["include_partial"] and partial["sides"][1]["coverage"]["counted"] == 3


def bias_axes_pilot(owner: User) -> Study:
    """One image of one occupation, rated once under an overlap of 3."""
    study = study_create(owner=owner, name="Nurses pilot", protocol=load_preset("bias-axes"), overlap=3)
    items_import_records(
        study=study,
        records=[("row 1", {"external_id": "n1", "condition": "base", "metadata": {"occupation": "nurse"}})],
    )
    answers = {"person": "yes", "gender": "female", "age": "young", "environment": "indoor"}
    lines = [{"item": "n1", "annotator": "r1", "question": k, "value": v} for k, v in answers.items()]
    annotations_import_records(study=study, records=list(enumerate(lines, start=1)))
    return study


def test_biasconnect_and_intermit_say_insufficient_instead_of_a_number(owner: User) -> None:
    study = bias_axes_pilot(owner)
    api = client_for(owner)
    report = api.get(f"/api/studies/{study.pk}/metrics/").json()
    deviation = table(report, "biasconnect_deviation")
    assert deviation["rows"] == [] and "insufficient data" in deviation["empty_reason"]
    assert report["coverage"]["partial"] == 1 and report["warning"]
    plan = api.get(f"/api/studies/{study.pk}/intermit/", {"axes": "gender"}).json()
    assert plan["plan"]["tau"] is None and plan["stage"]["tau"] is None
    assert plan["plan"]["reason"].startswith("insufficient data: none of the 1 images")
    assert plan["stage"]["coverage"]["partial"] == 1
    text = page(owner, f"/studies/{study.pk}/intermit/?axes=gender&weights=1&epsilon=0.35&group=nurse")
    assert "τ = <strong>insufficient data</strong>" in text and "0 settled" in text
    # Include the partial image: a provisional w_bar, marked.
    report = api.get(f"/api/studies/{study.pk}/metrics/", {"partial": "1"}).json()
    gender = next(r for r in table(report, "biasconnect_deviation")["rows"] if r[1] == "gender")
    assert gender[2] == pytest.approx(1.0) and gender[3] == 1
    assert table(report, "biasconnect_deviation")["coverage"]["include_partial"] is True


def test_long_pages_have_a_table_of_contents_folding_sections_and_hide_empty_rows(owner: User) -> None:
    """Issue 25, point 4 (without a browser): rows over 0 items hide behind ?empty=1."""
    study = bias_axes_pilot(owner)
    lines = [
        {"item": "n1", "annotator": "r2", "question": k, "value": v}
        for k, v in {"person": "yes", "gender": "male"}.items()
    ]
    annotations_import_records(study=study, records=list(enumerate(lines, start=1)))
    text = page(owner, f"/studies/{study.pk}/agreement/")
    assert '<nav class="toc" aria-label="On this page">' in text
    assert '<details class="card fold" id="alpha" open>' in text
    assert "undefined: the matrix is empty" not in text and ">Show empty<" in text
    hidden = int(re.search(r"(\d+) rows? with 0 items hidden", text).group(1))
    assert hidden >= 5  # ethnicity, body type, emotion, clothing, the disability parts
    shown = page(owner, f"/studies/{study.pk}/agreement/?empty=1")
    assert "undefined: the matrix is empty" in shown and ">Hide empty rows<" in shown
    page(owner, f"/studies/{study.pk}/agreement/?empty=perhaps", status=404)
    findings = page(owner, f"/studies/{study.pk}/findings/")
    assert '<nav class="toc" aria-label="On this page">' in findings
    assert 'href="#t-biasconnect_deviation"' in findings
    assert '<details class="card fold" id="t-biasconnect_deviation" open>' in findings
