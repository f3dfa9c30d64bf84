"""Issue 14, points 8 and 9: the agreement page (one row per option, undefined numbers with their
reason, a warning on small samples) and the findings summary (tables, never a raw dict)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.models import User
from annotations.services.studies import study_create
from protocols.schema import load_preset
from tests.annotations.builders import subgroup_study

pytestmark = pytest.mark.django_db

SHOWN = ["hat", "poor", "none_of_the_above"]


def page_for(user: User, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def alpha_rows(page: str) -> dict[str, str]:
    """Question label -> the text of its alpha cell, from the agreement page's alpha table."""
    table = page.split('class="table compact alpha-chart"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>\s*<td>(.*?)</td><td>[a-z]+</td>\s*<td>(.*?)</td>", table, re.S)
    labels = [label for label, _cell in rows]
    assert len(labels) == len(set(labels)), f"a row appears twice: {labels}"
    return {label: html.unescape(re.sub(r"<[^>]+>", " ", cell)) for label, cell in rows}


@pytest.fixture
def markers(owner: User):
    """One image judged by two raters: hat 1 vs 0, poor 0 vs 0, None of the above 0 vs 1."""
    study = study_create(owner=owner, name="Markers", protocol=load_preset("stereotype-markers"))
    items_import_records(
        study=study,
        records=[
            ("row 1", {"external_id": "a", "metadata": {"identity": "X", "attributes": ["hat", "poor"]}})
        ],
    )
    lines: list[dict[str, Any]] = [
        {"item": "a", "annotator": "r1", "question": "attributes", "value": ["hat"], "shown": SHOWN},
        {
            "item": "a",
            "annotator": "r1",
            "question": "attribute_boxes",
            "value": [{"option": "hat", "x": 0, "y": 0, "w": 5, "h": 5}],
        },
        {
            "item": "a",
            "annotator": "r2",
            "question": "attributes",
            "value": ["none_of_the_above"],
            "shown": SHOWN,
        },
    ]
    annotations_import_records(study=study, records=list(enumerate(lines, start=1)))
    return study


def test_agreement_page_one_row_per_option_reasons_and_small_sample_warning(markers, owner) -> None:
    page = page_for(owner, f"/studies/{markers.pk}/agreement/?resamples=50")
    rows = alpha_rows(page)
    assert list(rows) == ["attributes:hat", "attributes:poor", "attributes:none_of_the_above"]
    # Both said "no" to poor: alpha cannot be told apart from chance; the page says why.
    assert rows["attributes:poor"].strip() == "undefined: every judgement has the same value"
    # One item with two judgements gives "0.000 [0.000, 0.000]": shown, with the warning beside it.
    hat = " ".join(rows["attributes:hat"].split())
    assert hat.startswith("0.000 [0.000, 0.000]")
    assert (
        "small sample: only 1 item judged by two or more annotators (fewer than 10); "
        "this alpha and its interval are not reliable" in hat
    )
    assert "2 of them from fewer than 10 items" in page
    # Boxes: only r1 drew; the rates are undefined, with their reason.
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    assert "humans match rate undefined: neither annotator drew a box" in text
    assert re.findall(r"undefined(?!: )", text.split("Consensus")[0]) == []  # never without its reason
    csv_text = page_for(owner, f"/studies/{markers.pk}/agreement/?format=csv&resamples=20")
    assert csv_text.splitlines()[0].endswith(",undefined_reason,small_sample")
    assert sum(line.startswith("attributes:none_of_the_above,") for line in csv_text.splitlines()) == 1


def test_findings_summary_is_tables_not_a_python_dict(visage_studies, owner) -> None:
    study = visage_studies["stereotype-markers"]
    page = page_for(owner, f"/studies/{study.pk}/findings/?source=judgements")
    summary = page.split('id="summary"', 1)[1].split("</section>", 1)[0]
    assert "{" not in summary and "&#x27;" not in summary and "<code>" not in summary
    captions = re.findall(r"<caption>(.*?)</caption>", summary)
    assert captions == ["Headline numbers", "thrice_ratio"]
    ratio = summary.split("<caption>thrice_ratio</caption>", 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<th scope="col">(.*?)</th>', ratio) == [
        "value",
        "numerator",
        "denominator",
        "n",
        "reason",
    ]
    assert '<th scope="row">identities_eligible</th>' in summary


def test_findings_summary_per_labeller_is_a_table_with_a_row_each(owner) -> None:
    study = subgroup_study(owner)
    page = page_for(owner, f"/studies/{study.pk}/findings/")
    summary = page.split('id="summary"', 1)[1].split("</section>", 1)[0]
    assert "{" not in summary
    table = summary.split("<caption>detection_accuracy</caption>", 1)[1].split("</table>", 1)[0]
    assert re.findall(r'<th scope="col">(.*?)</th>', table) == ["", "detection_accuracy", "n_pairs"]
    assert re.search(r'<th scope="row">vlm@1</th><td>[0-9.–]+</td><td>\d+</td>', table)
