"""Agreement within and between rater pools (``agreement --breakdown annotator:rater_pool``) on a study
of SeeGULL pairs whose imported raters each carry their pool: the command's JSON, the API and the page
give each pool's alpha and the cross-pool kappa_x computed by hand in tests/metrics/test_cross_replication.py.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.models import Annotator, Study, User
from annotations.services.studies import study_create
from protocols.schema import protocol_from_dict
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

PROTOCOL = {
    "name": "SeeGULL pairs, rated by pool",
    "unit": "text",
    "questions": [
        {
            "key": "stereotype",
            "kind": "single",
            "prompt": "Is {text} a stereotype?",
            "options": [
                {"key": "not", "label": "Not a stereotype"},
                {"key": "stereotype", "label": "Stereotype"},
            ],
        },
        {
            "key": "strength",
            "kind": "likert",
            "prompt": "How strong a stereotype is {text}?",
            "options": [
                {"key": "weak", "label": "Weak"},
                {"key": "medium", "label": "Medium"},
                {"key": "strong", "label": "Strong"},
            ],
        },
    ],
}

PAIRS = ["Xlander|hat", "Xlander|rich", "Ylander|poor"]
IN_REGION, NORTH_AMERICA = "in-region", "north-america"

# The nominal hand example (tests/metrics/test_cross_replication.py): per pair, (not, stereotype) counts
# in-region (1, 2), (3, 0), (1, 2) and North-American (0, 3), (2, 1), (2, 1): kappa_x = 8/41, each pool's
# alpha 0.2, normalised 40/41, majorities agree on 2 of 3 pairs (they differ on Ylander|poor).
STEREOTYPE = {
    "r1": ["stereotype", "not", "stereotype"],
    "r2": ["stereotype", "not", "not"],
    "r3": ["not", "not", "stereotype"],
    "n1": ["stereotype", "not", "stereotype"],
    "n2": ["stereotype", "not", "not"],
    "n3": ["stereotype", "stereotype", "not"],
}
# The ordinal hand example on the first two pairs: in-region weak, medium | strong, strong; North-American
# strong | medium, strong: kappa_x = -16/35; the North-American alpha is 0, so no normalised form.
STRENGTH = {
    "r1": ["weak", "strong"],
    "r2": ["medium", "strong"],
    "n1": ["strong", "medium"],
    "n2": [None, "strong"],
}


def _line(pair: str, rater: str, question: str, value: str, pool: str | None) -> dict[str, Any]:
    line: dict[str, Any] = {"item": pair, "annotator": rater, "question": question, "value": value}
    if pool is not None:
        line["annotator_attributes"] = {"rater_pool": pool}
    return line


def seegull_pool_study(owner: User) -> Study:
    study = study_create(
        owner=owner, name="SeeGULL pairs by pool", protocol=protocol_from_dict(PROTOCOL), overlap=6
    )
    items_import_records(
        study=study,
        records=[
            (f"row {n}", {"external_id": pair, "text": pair.replace("|", " are ")})
            for n, pair in enumerate(PAIRS)
        ],
    )
    lines = []
    for rater, values in STEREOTYPE.items():
        pool = IN_REGION if rater.startswith("r") else NORTH_AMERICA
        lines += [_line(pair, rater, "stereotype", v, pool) for pair, v in zip(PAIRS, values, strict=True)]
    for rater, values in STRENGTH.items():
        pool = IN_REGION if rater.startswith("r") else NORTH_AMERICA
        lines += [
            _line(pair, rater, "strength", v, pool)
            for pair, v in zip(PAIRS[:2], values, strict=True)
            if v is not None
        ]
    # A rater without a pool: its own group "(not given)", in no cross pair and in no pool's numbers.
    lines.append(_line(PAIRS[1], "x1", "stereotype", "stereotype", None))
    annotations_import_records(study=study, records=list(enumerate(lines, start=1)))
    return study


def _cross(report: dict[str, Any], question: str) -> dict[str, Any]:
    (entry,) = [e for e in report["by_annotator_attribute"]["cross"] if e["question"] == question]
    return entry


def _pool_alpha(report: dict[str, Any], pool: str, question: str) -> dict[str, Any]:
    (group,) = [g for g in report["by_annotator_attribute"]["groups"] if g["group"] == pool]
    (entry,) = [q for q in group["questions"] if q["key"] == question]
    alpha: dict[str, Any] = entry["humans"][0]
    return alpha


def _check_hand_values(report: dict[str, Any]) -> None:
    assert [g["group"] for g in report["by_annotator_attribute"]["groups"]] == [
        "(not given)",
        IN_REGION,
        NORTH_AMERICA,
    ]
    for pool in (IN_REGION, NORTH_AMERICA):
        alpha = _pool_alpha(report, pool, "stereotype")
        assert alpha["value"] == pytest.approx(0.2) and alpha["n_items"] == 3
        assert alpha["ci_low"] is not None and alpha["ci_low"] <= alpha["ci_high"]
    stereotype = _cross(report, "stereotype")
    assert stereotype["pools"] == [IN_REGION, NORTH_AMERICA] and stereotype["level"] == "nominal"
    assert stereotype["kappa_x"] == pytest.approx(8 / 41) and stereotype["n_items"] == 3
    assert stereotype["low"] <= stereotype["kappa_x"] <= stereotype["high"]
    assert stereotype["observed_disagreement"] == pytest.approx(11 / 27)
    assert stereotype["expected_disagreement"] == pytest.approx(41 / 81)
    assert stereotype["normalised"] == pytest.approx(40 / 41)
    assert stereotype["alphas"] == [pytest.approx(0.2), pytest.approx(0.2)]
    assert stereotype["majority_agreement"] == pytest.approx(2 / 3)
    assert (stereotype["majority_n_items"], stereotype["majority_excluded"]) == (3, 0)
    assert stereotype["majority_differ"] == {"n": 1, "items": ["Ylander|poor"]}
    assert stereotype["n_ratings"] == [9, 9] and stereotype["small_sample"] is not None
    strength = _cross(report, "strength")
    assert strength["level"] == "ordinal" and strength["n_items"] == 2
    assert strength["kappa_x"] == pytest.approx(-16 / 35)
    assert strength["normalised"] is None
    assert "alpha of pool B is 0.000" in strength["normalised_undefined_reason"]
    assert strength["majority_agreement"] is None and strength["majority_undefined_reason"]
    assert len(report["by_annotator_attribute"]["cross"]) == 2  # one pair of pools x two questions


def test_the_commands_json_gives_each_pools_alpha_and_the_hand_computed_kappa_x(owner) -> None:
    study = seegull_pool_study(owner)
    out = io.StringIO()
    call_command(
        "agreement",
        str(study.pk),
        "--json",
        "--breakdown",
        "annotator:rater_pool",
        "--resamples",
        "200",
        "--seed",
        "7",
        stdout=out,
    )
    report = json.loads(out.getvalue())
    _check_hand_values(report)
    stereotype = _cross(report, "stereotype")
    assert stereotype["seed"] == 7 and stereotype["n_resamples"] + stereotype["n_resamples_undefined"] == 200
    # The same seed gives the same intervals; the text output names the same numbers.
    again = io.StringIO()
    call_command(
        "agreement",
        str(study.pk),
        "--json",
        "--breakdown",
        "annotator:rater_pool",
        "--resamples",
        "200",
        "--seed",
        "7",
        stdout=again,
    )
    assert json.loads(again.getvalue())["by_annotator_attribute"] == report["by_annotator_attribute"]
    text = io.StringIO()
    call_command(
        "agreement", str(study.pk), "--breakdown", "annotator:rater_pool", "--resamples", "50", stdout=text
    )
    assert "in-region x north-america" in text.getvalue() and "kappa_x 0.195" in text.getvalue()


def test_the_api_gives_the_same_cross_entries(owner) -> None:
    study = seegull_pool_study(owner)
    response = client_for(owner).get(
        f"/api/studies/{study.pk}/agreement/?breakdown=annotator:rater_pool&resamples=100"
    )
    assert response.status_code == 200
    _check_hand_values(response.json())


def test_no_cross_entries_without_two_pools(owner) -> None:
    study = seegull_pool_study(owner)
    Annotator.objects.filter(study=study).update(study_attributes={"rater_pool": IN_REGION})
    out = io.StringIO()
    call_command(
        "agreement",
        str(study.pk),
        "--json",
        "--breakdown",
        "annotator:rater_pool",
        "--resamples",
        "0",
        stdout=out,
    )
    breakdown = json.loads(out.getvalue())["by_annotator_attribute"]
    assert breakdown["cross"] == [] and [g["group"] for g in breakdown["groups"]] == [IN_REGION]


def test_the_page_shows_the_cross_table_with_escaped_pool_names(owner) -> None:
    study = seegull_pool_study(owner)
    client = Client()
    client.force_login(owner)
    url = f"/studies/{study.pk}/agreement/?breakdown=annotator:rater_pool&resamples=50"
    page = client.get(url).content.decode()
    assert 'id="cross-pools"' in page and "Agreement between groups by “rater_pool”" in page
    assert "in-region × north-america" in page
    assert "0.195" in page and "0.976" in page and "0.667" in page  # 8/41, 40/41, 2/3
    assert "-0.457" in page and "alpha of pool B is 0.000" in page  # -16/35; no normalised form
    assert "Ylander|poor" in page
    hostile = "<script>alert(1)</script>"
    Annotator.objects.filter(study=study, name__startswith="n").update(
        study_attributes={"rater_pool": hostile}
    )
    page = client.get(url).content.decode()
    assert hostile not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
