"""Findings per rater pool: the metrics API read from one pool (``?source=consensus@region=in``), the
compare of two pools side by side with their differences, the findings page's pool switch, and the pool
sources refused with their reason (the study of tests/findings/pool_study.py, its values by hand there).
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from annotations.models import Study, User
from findings.report import findings_report
from tests.findings.pool_study import region_pool_study
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

LABELS = ["strongly_agree", "agree", "disagree", "strongly_disagree", "unsure"]


@pytest.fixture
def study(owner: User) -> Study:
    return region_pool_study(owner)


def _metrics(owner: User, study: Study, **params: str) -> Any:
    response = client_for(owner).get(f"/api/studies/{study.pk}/metrics/", params)
    assert response.status_code == 200, response.content[:400]
    return response.json()


def _table(report: dict[str, Any], key: str) -> dict[str, Any]:
    return next(t for t in report["tables"] if t["key"] == key)


def _shares(report: dict[str, Any]) -> dict[str, tuple[int, int, float]]:
    rows = _table(report, "visualness_shares")["rows"]
    return {label: (count, n, share) for label, count, n, share in rows}


def test_the_api_reads_the_findings_of_one_pool(owner: User, study: Study) -> None:
    mine = _metrics(owner, study, source="consensus@region=in")
    assert mine["source"] == "consensus@region=in"
    assert mine["source_label"] == "human consensus of the region = in pool"
    # in: hat SA, kind SD, poor A, tall A: 4 settled items (5 of the pool's 5 judgements each)
    assert _shares(mine) == {
        "strongly_agree": (1, 4, 0.25),
        "agree": (2, 4, 0.5),
        "disagree": (0, 4, 0.0),
        "strongly_disagree": (1, 4, 0.25),
        "unsure": (0, 4, 0.0),
    }
    assert [row[0] for row in _table(mine, "visual_attributes")["rows"]] == ["hat", "poor", "tall"]
    assert (mine["coverage"]["settled"], mine["coverage"]["partial"], mine["coverage"]["needed"]) == (4, 0, 5)
    assert mine["pool"] == {
        "key": "region",
        "value": "in",
        "annotators": 5,
        "pools": ["in", "na"],
        "needed": 5,
        "overlap": 10,
        "settled_rule": "an item is settled for the pool once 5 of its people judged it: "
        "ceil(overlap 10 / 2 pools of region)",
    }
    # the gate reads the pool's own alpha: 5 raters, not the study's 10
    (gate,) = mine["reliability"]
    assert gate["question"] == "visual" and gate["n_raters"] == 5
    assert "the people of the region = in pool" in mine["reliability_note"]
    theirs = _metrics(owner, study, source="consensus@region=na")
    # na: hat SA, kind SD, poor D; tall has 2 of the 5 judgements: partial, not counted
    assert _shares(theirs) == {
        "strongly_agree": (1, 3, pytest.approx(1 / 3)),
        "agree": (0, 3, 0.0),
        "disagree": (1, 3, pytest.approx(1 / 3)),
        "strongly_disagree": (1, 3, pytest.approx(1 / 3)),
        "unsure": (0, 3, 0.0),
    }
    assert (theirs["coverage"]["settled"], theirs["coverage"]["partial"]) == (3, 1)
    assert [row[0] for row in _table(theirs, "visual_attributes")["rows"]] == ["hat"]
    provisional = _metrics(owner, study, source="consensus@region=na", partial="1")
    assert _shares(provisional)["agree"] == (1, 4, 0.25)  # tall's provisional label from its 2 judgements


def test_every_judgement_of_one_pool_on_a_visage_study(owner: User, study: Study) -> None:
    every = _metrics(owner, study, source="judgements@region=na")
    assert every["source_label"] == "every judgement of the region = na pool"
    # label shares where at least 2 of the pool's raters chose the label, over its 3 settled terms
    shares = _shares(every)
    assert shares["disagree"][0] == 1 and shares["agree"][0] == 0 and shares["strongly_agree"][0] == 1


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("consensus@nokey=x", "no annotator of this study gave 'nokey' (attributes given: region)"),
        ("consensus@region=", "names no value"),
        ("consensus@region=mars", "values of region: in, na"),
        ("ppi:consensus@region=in", "needs a machine labeller"),
    ],
)
def test_a_bad_pool_source_is_a_400_with_the_reason(
    owner: User, study: Study, source: str, reason: str
) -> None:
    response = client_for(owner).get(f"/api/studies/{study.pk}/metrics/", {"source": source})
    assert response.status_code == 400 and reason in response.json()["detail"]
    page = Client()
    page.force_login(owner)
    shown = page.get(f"/studies/{study.pk}/findings/", {"source": source})
    assert shown.status_code == 400 and reason.replace("'", "&#x27;") in shown.content.decode()
    csv = page.get(f"/studies/{study.pk}/findings/visualness_shares.csv", {"source": source})
    assert csv.status_code == 400 and reason in csv.content.decode()


def test_judgements_of_a_pool_apply_where_judgements_do(owner: User) -> None:
    from tests.annotations.builders import make_study

    soda = make_study(
        owner,
        "object-attributes",
        [{"external_id": "b1", "model": "m", "condition": "base", "metadata": {"object": "car"}}],
        [
            {
                "item": "b1",
                "annotator": a,
                "question": "product_color",
                "value": "red",
                "annotator_attributes": {"region": r},
            }
            for a, r in (("h1", "in"), ("h2", "na"))
        ],
    )
    response = client_for(owner).get(f"/api/studies/{soda.pk}/metrics/", {"source": "judgements@region=in"})
    assert response.status_code == 400 and "visage studies only" in response.json()["detail"]
    pooled = client_for(owner).get(f"/api/studies/{soda.pk}/metrics/", {"source": "consensus@region=in"})
    assert pooled.status_code == 200


def test_the_compare_of_two_pools_gives_the_hand_differences(owner: User, study: Study) -> None:
    response = client_for(owner).get(
        "/api/compare/",
        [
            ("study", study.pk),
            ("study", study.pk),
            ("source", "consensus@region=in"),
            ("source", "consensus@region=na"),
        ],
    )
    assert response.status_code == 200, response.content[:400]
    comparison = response.json()
    assert [s["source"] for s in comparison["sides"]] == ["consensus@region=in", "consensus@region=na"]
    shares = next(t for t in comparison["tables"] if t["key"] == "visualness_shares")
    rows = {row[0]: dict(zip(shares["columns"], row, strict=True)) for row in shares["rows"]}
    # na - in, by hand (tests/findings/pool_study.py)
    assert rows["agree"]["share [B-A]"] == pytest.approx(-1 / 2)
    assert rows["disagree"]["share [B-A]"] == pytest.approx(1 / 3)
    assert rows["strongly_agree"]["share [B-A]"] == pytest.approx(1 / 12)
    assert rows["strongly_disagree"]["share [B-A]"] == pytest.approx(1 / 12)
    assert rows["agree"]["count [B-A]"] == -2 and rows["agree"]["n [A]"] == 4 and rows["agree"]["n [B]"] == 3
    # Each side's share has no interval or test of its own here; the difference of two shares gets
    # Newcombe's hybrid score interval, by hand: Wilson 95% of in's 2/4 and na's 0/3, combined.
    assert not any(c.endswith(("low [A]", "p_adjusted [A]")) for c in shares["columns"])
    z = 1.959963984540054

    def wilson(k: int, n: int) -> tuple[float, float]:
        p = k / n
        centre, half = (
            (p + z * z / (2 * n)) / (1 + z * z / n),
            z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)),
        )
        return centre - half, centre + half

    (l_in, u_in), (l_na, u_na) = wilson(2, 4), wilson(0, 3)
    low = -1 / 2 - math.sqrt((0 - l_na) ** 2 + (u_in - 1 / 2) ** 2)
    high = -1 / 2 + math.sqrt((u_na - 0) ** 2 + (1 / 2 - l_in) ** 2)
    assert rows["agree"]["share_low [B-A]"] == pytest.approx(low)
    assert rows["agree"]["share_high [B-A]"] == pytest.approx(high)
    assert -1 <= low < -1 / 2 < high < 0.2  # wide: 4 and 3 items
    assert "count_low [B-A]" not in rows["agree"]  # a count is no share
    listed = next(t for t in comparison["tables"] if t["key"] == "visual_attributes")
    index = {column: i for i, column in enumerate(listed["columns"])}
    membership = {row[0]: [row[index["listed [A]"]], row[index["listed [B]"]]] for row in listed["rows"]}
    assert membership == {"hat": [True, True], "poor": [True, False], "tall": [True, False]}
    # each side says what it rests on (the pool's own settled items)
    assert [s["coverage"]["settled"] for s in comparison["sides"]] == [4, 3]
    bad = client_for(owner).get(
        "/api/compare/",
        [
            ("study", study.pk),
            ("study", study.pk),
            ("source", "consensus@region="),
            ("source", "consensus@region=na"),
        ],
    )
    detail = bad.json()["detail"]
    assert bad.status_code == 400 and "side A" in detail and "names no value" in detail


def test_the_findings_page_offers_each_pool_and_their_compare(owner: User, study: Study) -> None:
    page = Client()
    page.force_login(owner)
    html = page.get(f"/studies/{study.pk}/findings/").content.decode()
    assert 'id="pool-switch"' in html and "Judged by rater pool (region)" in html
    assert "source=consensus%40region%3Din" in html and "source=consensus%40region%3Dna" in html
    assert (
        f"/compare/?study={study.pk}&amp;study={study.pk}&amp;source=consensus%40region%3Din"
        "&amp;source=consensus%40region%3Dna" in html
    )
    pooled = page.get(f"/studies/{study.pk}/findings/", {"source": "consensus@region=na"})
    text = pooled.content.decode()
    assert pooled.status_code == 200 and "human consensus of the region = na pool" in text
    assert 'aria-current="true">na (5 people)' in text and 'id="pool-note"' in text
    assert '<option value="consensus@region=na" selected>' in text
    # The compare link it offers works: the page compares the two pools (a bad pool is refused there).
    pair = f"study={study.pk}&study={study.pk}"
    compared = page.get(f"/compare/?{pair}&source=consensus%40region%3Din&source=consensus%40region%3Dna")
    assert compared.status_code == 200 and "is not a label source" not in compared.content.decode()
    assert 'class="card fold" id="t-' in compared.content.decode()
    refused = page.get(f"/compare/?{pair}&source=consensus%40region%3Din&source=consensus%40region%3Dxx")
    assert refused.status_code == 400


def test_the_metrics_command_reads_a_pool(study: Study) -> None:
    out = io.StringIO()
    call_command("metrics", str(study.pk), "--source", "consensus@region=in", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["source"] == "consensus@region=in" and report["pool"]["annotators"] == 5


def test_a_report_of_any_other_source_carries_no_pool(study: Study) -> None:
    assert "pool" not in findings_report(study=study).to_json()
    assert findings_report(study=study, source="consensus@region=in").to_json()["pool"]["value"] == "in"
