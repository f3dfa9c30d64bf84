"""The audit report's "Who judged" section and the HEDS datasheet's rater answers: the pools and their sizes,
alpha within each pool (the pool's findings gate, as the metrics API gives it), kappa_x between pools (as the
agreement API's breakdown gives it) and the findings that differ (the compare API of the two pools), on
the study of tests/findings/pool_study.py; small pools are not named; a study without pools says so."""

from __future__ import annotations

import json
from typing import Any

import pytest

from annotations.models import User
from reports.document import DocTable, Paragraph, ReportDocument, Section
from reports.formats import renderer
from reports.gather import report_build
from tests.annotations.builders import make_study
from tests.findings.pool_study import region_pool_study
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


def _section(document: ReportDocument) -> Section:
    return next(s for s in document.sections if s.key == "who_judged")


def _tables(section: Section) -> dict[str, DocTable]:
    return {b.key: b for b in section.blocks if isinstance(b, DocTable)}


def _rows(table: DocTable) -> list[dict[str, Any]]:
    return [dict(zip([c.key for c in table.columns], row, strict=True)) for row in table.rows]


def _api(owner: User, url: str, params: Any = None) -> Any:
    response = client_for(owner).get(url, params)
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


def test_who_judged_names_the_pools_their_agreement_and_what_differs(owner: User) -> None:
    study = region_pool_study(owner)
    document = report_build(study)
    keys = [s.key for s in document.sections]
    assert keys.index("who_judged") == keys.index("agreement") + 1
    section = _section(document)
    text = " ".join(b.text for b in section.blocks if isinstance(b, Paragraph))
    assert "By region: in (5 people), na (5 people)." in text
    tables = _tables(section)
    pools = _rows(tables["who_judged_pools_region"])
    # in: 4 items, each with its 5 judgements; na: 4 items judged, tall with 2 of the 5 it needs
    assert pools == [
        {"pool": "in", "people": 5, "items": 4, "settled": 4},
        {"pool": "na", "people": 5, "items": 4, "settled": 3},
    ]
    # alpha within each pool: the pool's findings gate, as the metrics API read from that pool gives it
    alphas = _rows(tables["who_judged_alpha_region"])
    for pool in ("in", "na"):
        (gate,) = _api(owner, f"/api/studies/{study.pk}/metrics/", {"source": f"consensus@region={pool}"})[
            "reliability"
        ]
        (mine,) = [a for a in alphas if a["pool"] == pool]
        assert (mine["question"], mine["alpha"], mine["n_items"], mine["n_raters"], mine["verdict"]) == (
            gate["question"],
            gate["alpha"],
            gate["n_items"],
            gate["n_raters"],
            gate["verdict"],
        )
        assert mine["n_raters"] == 5 and mine["reason"] == gate["reason"]
    # kappa_x between the pools: the agreement API's breakdown by region
    agreement = _api(owner, f"/api/studies/{study.pk}/agreement/", {"breakdown": "annotator:region"})
    (cross,) = agreement["by_annotator_attribute"]["cross"]
    (row,) = _rows(tables["who_judged_cross_region"])
    assert (row["question"], row["pool_a"], row["pool_b"]) == ("visual", "in", "na")
    assert row["kappa_x"] == pytest.approx(cross["kappa_x"]) and row["kappa_x"] is not None
    assert (row["low"], row["high"]) == (pytest.approx(cross["low"]), pytest.approx(cross["high"]))
    assert row["majority_agreement"] == pytest.approx(cross["majority_agreement"]) == 3 / 4
    assert row["n_items"] == cross["n_items"] == 4
    # the findings that differ: the compare of the two pools, largest difference first, by hand
    differences = _rows(tables["who_judged_differences_region"])
    compare = _api(
        owner,
        "/api/compare/",
        [
            ("study", study.pk),
            ("study", study.pk),
            ("source", "consensus@region=in"),
            ("source", "consensus@region=na"),
        ],
    )
    shares = next(t for t in compare["tables"] if t["key"] == "visualness_shares")
    by_label = {r[0]: dict(zip(shares["columns"], r, strict=True)) for r in shares["rows"]}
    numeric = [d for d in differences if d["difference"] is not None]
    assert [(d["group"], d["value"]) for d in numeric[:2]] == [
        ("label=agree", "share"),
        ("label=disagree", "share"),
    ]
    top = numeric[0]
    assert (top["pool_a"], top["pool_b"], top["a"], top["b"]) == ("in", "na", 0.5, 0.0)
    assert top["difference"] == pytest.approx(-1 / 2) == by_label["agree"]["share [B-A]"]
    assert (top["n_a"], top["n_b"]) == (4, 3)
    assert top["p_adjusted_a"] is None  # the visual-ness shares run no test: no corrected p to give
    # ... but a difference of two shares has Newcombe's interval (its value by hand in
    # tests/findings/test_pool_findings.py), inside [-1, 1] and around the difference
    assert (top["low"], top["high"]) == (
        by_label["agree"]["share_low [B-A]"],
        by_label["agree"]["share_high [B-A]"],
    )
    assert -1 <= top["low"] < top["difference"] < top["high"] <= 1
    # every estimate that differs, none that does not (unsure: 0 in both pools); counts are not estimates
    assert {d["group"] for d in numeric} == {
        "label=agree",
        "label=disagree",
        "label=strongly_agree",
        "label=strongly_disagree",
    }
    listed = [(d["group"], d["note"]) for d in differences if d["difference"] is None]
    assert listed == [("attribute=poor", "listed for in only"), ("attribute=tall", "listed for in only")]
    notes = " ".join(tables["who_judged_differences_region"].notes)
    assert "4 of the 5 estimates compared differ" in notes and "Newcombe's 95% hybrid score" in notes
    # the report renders (every format reads the same document)
    markdown = renderer("md")(document).body.decode()
    assert "## Who judged" in markdown and "Findings that differ between pools of region" in markdown


def test_the_datasheet_names_the_rater_pools(owner: User) -> None:
    study = region_pool_study(owner)
    sheet = report_build(study).heds
    (three,) = [s for s in sheet["sections"] if s["section"] == "3"]
    answers = {a["question"]: a["answer"] for a in three["answers"]}
    assert answers["3.2.1"] == "10 (10 crowd); rater pools by region: in 5, na 5"
    assert answers["3.2.5"].startswith("rater pools by region: in 5, na 5")
    notes = {n["topic"]: n["answer"] for n in three["notes"]}
    assert notes["Agreement between rater pools by region (kappa_x)"].startswith("visual, in vs na: 0.")
    assert (
        "in, visual: undefined" in notes["Agreement within each rater pool by region (Krippendorff's alpha)"]
    )


def test_pools_of_fewer_than_five_people_are_not_named(owner: User) -> None:
    items = [{"external_id": term, "text": term} for term in ("hat", "kind")]
    answers = [
        {
            "item": term,
            "annotator": f"{region}{n}",
            "question": "visual",
            "value": "agree",
            "annotator_attributes": {"region": region},
        }
        for term in ("hat", "kind")
        for region in ("in", "na")
        for n in (1, 2)
    ]
    study = make_study(owner, "visualness", items, answers)
    document = report_build(study)
    section = _section(document)
    assert not _tables(section)
    (intro, reason) = [b.text for b in section.blocks if isinstance(b, Paragraph)]
    assert "fewer than 2 pools of region have 5 or more people" in reason
    assert "2 smaller pools (4 people) not named" in reason
    answers_3 = {
        a["question"]: a["answer"] for s in document.heds["sections"] if "answers" in s for a in s["answers"]
    }
    assert "rater pools" not in (answers_3["3.2.1"] or "")


def test_a_study_without_pools_says_every_finding_is_the_pooled_peoples(owner: User) -> None:
    items = [{"external_id": "b1", "model": "m", "condition": "base", "metadata": {"object": "car"}}]
    answers = [
        {"item": "b1", "annotator": a, "question": "product_color", "value": "red"} for a in ("h1", "h2")
    ]
    section = _section(report_build(make_study(owner, "object-attributes", items, answers)))
    (paragraph,) = section.blocks
    assert isinstance(paragraph, Paragraph) and "no rater pools are compared" in paragraph.text
