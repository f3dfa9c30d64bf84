"""The machine + human sample source ``ppi:LABELLER``: sampling designs that store inclusion probabilities,
the PPI tables through the metrics command, the API and the findings page, and what is refused."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.models import Annotation, Annotator, ValidationSample, ValidationSampleItem
from annotations.services.studies import study_create
from annotations.services.validation_sample import validation_sample_store
from metrics.ppi import labels_needed, ppi_difference, ppi_mean
from protocols.schema import load_protocol_text
from tests.annotations.builders import make_study
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

N = 40
# Truth: base items 0..19 are female when n % 4 == 0 (5 of 20); women items 20..39 when n % 2 == 0 (10).
# The labeller calls every third item female as well (its errors differ by condition).


def truth(n: int) -> str:
    return "female" if (n % 4 == 0 if n < 20 else n % 2 == 0) else "male"


def machine(n: int) -> str:
    return "female" if truth(n) == "female" or n % 3 == 0 else "male"


def other(n: int) -> str:
    return machine(n) if n % 5 else ("male" if machine(n) == "female" else "female")


@pytest.fixture
def study(owner):
    items = [
        {
            "external_id": f"i{n}",
            "prompt": "people who cook",
            "condition": "base" if n < 20 else "gender:women",
            "metadata": {"dimension": "gender", "subgroup": "female"},
        }
        for n in range(N)
    ]
    answers: list[dict[str, Any]] = [
        {"item": f"i{n}", "annotator": "h1", "question": "gender", "value": truth(n)} for n in range(N)
    ]
    for name, label in (("vlm", machine), ("other", other)):
        answers += [
            {
                "item": f"i{n}",
                "annotator": name,
                "annotator_kind": "machine",
                "annotator_version": "1",
                "question": "gender",
                "value": label(n),
            }
            for n in range(N)
        ]
    return make_study(owner, "subgroup", items, answers)


def run(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def rows(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    table = next(t for t in report["tables"] if t["key"] == key)
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def sampled(study) -> dict[int, float | None]:
    """Item number -> stored inclusion probability."""
    return {
        int(external[1:]): p
        for external, p in ValidationSampleItem.objects.filter(sample__study=study).values_list(
            "item__external_id", "inclusion_probability"
        )
    }


def expected(numbers: list[int], chances: dict[int, float], option: str = "female"):
    """The estimate metrics.ppi gives on these items (hand-checked in tests/metrics/test_ppi.py)."""
    y = [float(truth(n) == option) for n in numbers if n in chances]
    f = [float(machine(n) == option) for n in numbers if n in chances]
    pi = [chances[n] for n in numbers if n in chances]
    return ppi_mean(y, f, [float(machine(n) == option) for n in numbers], pi=pi, proportion=True)


def test_uniform_design_stores_probabilities_and_the_command_reads_ppi(study) -> None:
    drawn = run(
        "sample_for_validation", str(study.pk), "--labeller", "vlm", "--design", "uniform", "--size", "10"
    )
    assert drawn["design"] == "uniform" and drawn["size"] == 10
    chances = sampled(study)
    assert len(chances) == 10 and set(chances.values()) == {0.25}
    report = run("metrics", str(study.pk), "--source", "ppi:vlm@1", "--json", "--min-people", "2")
    assert report["source"] == "ppi:vlm@1"
    found = {(r["option"], r["group_by"], r["group"]): r for r in rows(report, "ppi_estimates")}
    want = expected(list(range(N)), chances)
    row = found[("female", "all", "all")]
    assert row["estimate"] == pytest.approx(want.ppi.estimate)
    assert (row["low"], row["high"]) == pytest.approx((want.ppi.low, want.ppi.high))
    assert row["human_only"] == pytest.approx(want.human_only.estimate)
    assert row["machine_only"] == pytest.approx(sum(machine(n) == "female" for n in range(N)) / N)
    assert row["n_people"] == 10 and row["n_machine"] == N
    assert row["gain"] == pytest.approx(want.gain)
    needed = labels_needed(want, 0.1)
    assert row["more_for_width"] == (max(0, needed - 10) if needed else None)
    # per condition, and the difference women - base
    base = expected(list(range(20)), chances)
    women = expected(list(range(20, N)), chances)
    assert found[("female", "condition", "base")]["estimate"] == pytest.approx(base.ppi.estimate)
    diff = {(r["option"], r["group"]): r for r in rows(report, "ppi_differences")}[("female", "gender:women")]
    assert diff["reference"] == "base"
    assert diff["difference"] == pytest.approx(ppi_difference(women, base).ppi.estimate)
    # the labeller's accuracy on the sample, human-only and weighted
    accuracy = {(r["question"], r["group"]): r for r in rows(report, "ppi_accuracy")}[("gender", "all")]
    agree = [machine(n) == truth(n) for n in chances]
    assert accuracy["accuracy"] == pytest.approx(sum(agree) / len(agree)) and accuracy["n_people"] == 10
    assert report["summary"]["ppi"]["design"] == "uniform" and report["summary"]["ppi"]["n_machine"] == N
    assert any("not means" in note.lower() for note in report["notes"])
    # the plain summary names the source too
    out = io.StringIO()
    call_command("metrics", str(study.pk), "--source", "ppi:vlm@1", "--width", "0.3", stdout=out)
    assert "ppi:vlm@1" in out.getvalue() and "ppi_estimates" in out.getvalue()


def test_stratified_design_weights_unequal_probabilities(study) -> None:
    # stratify by a metadata field with unequal strata: 30 "a" items, 10 "b"
    for item in study.items.all():
        item.metadata = {**item.metadata, "batch": "a" if int(item.external_id[1:]) < 30 else "b"}
        item.save()
    drawn = run(
        "sample_for_validation", str(study.pk), "--labeller", "vlm", "--size", "7", "--stratify-by", "batch"
    )
    assert drawn["design"] == "stratified" and drawn["allocation"] == {"a": 5, "b": 2}
    chances = sampled(study)
    # quotas 5.25 and 1.75: 5 of 30 and 2 of 10 drawn
    assert sorted(set(chances.values())) == pytest.approx([5 / 30, 2 / 10])
    report = run("metrics", str(study.pk), "--source", "ppi:vlm@1", "--json", "--min-people", "2")
    row = next(r for r in rows(report, "ppi_estimates") if (r["option"], r["group"]) == ("female", "all"))
    assert row["estimate"] == pytest.approx(expected(list(range(N)), chances).ppi.estimate)


def test_active_design_oversamples_disagreement(study) -> None:
    drawn = run(
        "sample_for_validation",
        str(study.pk),
        "--labeller",
        "vlm",
        "--design",
        "active",
        "--against",
        "other",
        "--size",
        "12",
        "--seed",
        "4",
    )
    assert drawn["design"] == "active" and drawn["design_params"]["against"] == "other 1"
    sample = ValidationSample.objects.get(study=study)
    assert sample.design == "active" and sample.frame_size == N
    chances = sampled(study)
    # disagreeing items (n % 5 == 0, 8 of 40): pi = 12 (0.5/40 + 0.5/8) = 0.9; the others 12 * 0.5/40 = 0.15
    for n, p in chances.items():
        assert p == pytest.approx(0.9 if n % 5 == 0 else 0.15)
    report = run("metrics", str(study.pk), "--source", "ppi:vlm@1", "--json", "--min-people", "2")
    row = next(r for r in rows(report, "ppi_estimates") if (r["option"], r["group"]) == ("female", "all"))
    assert row["estimate"] == pytest.approx(expected(list(range(N)), chances).ppi.estimate)
    with pytest.raises(CommandError, match="active design only"):
        run("sample_for_validation", str(study.pk), "--labeller", "vlm", "--against", "other", "--size", "3")


def test_unknown_probabilities_and_bad_input_are_refused(study, owner) -> None:
    client = client_for(owner)
    url = f"/api/studies/{study.pk}/metrics/"
    no_sample = client.get(url, {"source": "ppi:vlm@1"})
    assert no_sample.status_code == 400 and "no validation sample" in json.dumps(no_sample.json())
    # people labelled what they chose: a sample stored without probabilities
    chosen = list(study.items.order_by("id").values_list("id", flat=True)[:5])
    validation_sample_store(
        study=study,
        labeller=Annotator.objects.get(name="vlm"),
        labeller_name="vlm",
        item_ids=chosen,
        seed=0,
        stratify_by="",
    )
    unknown = client.get(url, {"source": "ppi:vlm@1"})
    assert unknown.status_code == 400
    assert "no known inclusion probabilities" in json.dumps(unknown.json())
    with pytest.raises(CommandError, match="no known inclusion probabilities"):
        run("metrics", str(study.pk), "--source", "ppi:vlm@1", "--json")
    run("sample_for_validation", str(study.pk), "--labeller", "vlm", "--design", "uniform", "--size", "10")
    ok = client.get(url, {"source": "ppi:vlm@1", "width": "0.2"})
    assert ok.status_code == 200 and ok.json()["width"] == 0.2
    assert "ppi:vlm@1" in ok.json()["sources_available"]
    for bad in ({"source": "ppi:vlm@1", "width": "abc"}, {"source": "ppi:vlm@1", "width": "0"}):
        response = client.get(url, bad)
        assert response.status_code == 400 and "width" in json.dumps(response.json())
    assert client.get(url, {"source": "ppi:consensus"}).status_code == 400
    assert client.get(url, {"source": "ppi:nobody"}).status_code == 400
    with pytest.raises(CommandError, match="unknown design"):
        run("sample_for_validation", str(study.pk), "--labeller", "vlm", "--design", "greedy", "--size", "3")


def test_findings_page_offers_the_ppi_source(study, owner) -> None:
    run("sample_for_validation", str(study.pk), "--labeller", "vlm", "--design", "uniform", "--size", "10")
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studies/{study.pk}/findings/")
    assert page.status_code == 200 and 'value="ppi:vlm@1"' in page.content.decode()
    ppi = client.get(f"/studies/{study.pk}/findings/", {"source": "ppi:vlm@1", "width": "0.2"})
    text = ppi.content.decode()
    assert ppi.status_code == 200 and "ppi_estimates" in text and "more_for_width" in text
    assert 'name="width"' in text
    bad = client.get(f"/studies/{study.pk}/findings/", {"source": "ppi:vlm@1", "width": "-1"})
    assert bad.status_code == 400 and "width must be" in bad.content.decode()


PROTOCOL = """
name: ppi kinds
unit: image
questions:
  - key: visual
    kind: likert
    prompt: How visual?
    options:
      - {key: agree, label: Agree}
      - {key: neutral, label: Neutral}
      - {key: disagree, label: Disagree}
    unsure: {key: unsure, label: Unsure}
  - key: attributes
    kind: multi
    prompt: Which are present?
    options_from: attributes
  - key: note
    kind: text
    required: false
    prompt: Anything else?
"""


def test_likert_means_and_multi_options_from_item_metadata(owner) -> None:
    study = study_create(owner=owner, name="kinds", protocol=load_protocol_text(PROTOCOL), overlap=1)
    attrs = {n: ["hat", "scarf"] if n % 2 else ["hat"] for n in range(12)}
    items_import_records(
        study=study,
        records=[
            (f"row {n}", {"external_id": f"i{n}", "metadata": {"attributes": attrs[n], "identity": "X"}})
            for n in range(12)
        ],
    )
    scale = ["agree", "neutral", "disagree"]
    human = {n: scale[n % 3] for n in range(12)}
    bot = {n: scale[(n + (n % 4 == 0)) % 3] for n in range(12)}  # wrong on every fourth item
    hats = {n: n % 3 == 0 for n in range(12)}
    records: list[dict[str, Any]] = []
    for n in range(12):
        keys = ["hat", "scarf"] if n % 2 else ["hat"]
        for who, kind, visual, hat in (
            ("h", "human", human[n], hats[n]),
            ("bot", "machine", bot[n], n % 2 == 0),
        ):
            records.append(
                {
                    "item": f"i{n}",
                    "annotator": who,
                    "annotator_kind": kind,
                    "question": "visual",
                    "value": visual,
                }
            )
            colour = "red" if who == "h" or n % 3 else "blue"
            records.append(
                {
                    "item": f"i{n}",
                    "annotator": who,
                    "annotator_kind": kind,
                    "question": "note",
                    "value": colour,
                }
            )
            chosen = ["hat"] if hat else []
            if n % 2 and who == "bot":
                chosen.append("scarf")
            records.append(
                {
                    "item": f"i{n}",
                    "annotator": who,
                    "annotator_kind": kind,
                    "question": "attributes",
                    "value": chosen,
                    "shown": keys,
                }
            )
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    run(
        "sample_for_validation",
        str(study.pk),
        "--labeller",
        "bot",
        "--design",
        "uniform",
        "--size",
        "6",
        "--seed",
        "2",
    )
    chances = sampled(study)
    report = run("metrics", str(study.pk), "--source", "ppi:bot", "--json", "--min-people", "2")
    found = {(r["question"], r["option"], r["group"]): r for r in rows(report, "ppi_estimates")}
    # likert: mean scale position, 1 = agree
    pos = {n: float(scale.index(v) + 1) for n, v in human.items()}
    fpos = {n: float(scale.index(v) + 1) for n, v in bot.items()}
    want = ppi_mean(
        [pos[n] for n in sorted(chances)], [fpos[n] for n in sorted(chances)], [fpos[n] for n in range(12)]
    )
    row = found[("visual", "mean position (1 = agree)", "all")]
    assert row["estimate"] == pytest.approx(want.ppi.estimate) and row["high"] == pytest.approx(want.ppi.high)
    # multi, options from item metadata: scarf applies to the odd items only
    scarf = found[("attributes", "scarf", "all")]
    odd = [n for n in range(12) if n % 2]
    want_scarf = ppi_mean(
        [0.0 for n in sorted(chances) if n % 2],
        [1.0 for n in sorted(chances) if n % 2],
        [1.0] * len(odd),
        proportion=True,
    )
    assert scarf["n_machine"] == 6 and scarf["n_people"] == sum(1 for n in chances if n % 2)
    assert scarf["estimate"] == pytest.approx(want_scarf.ppi.estimate)
    hat_row = found[("attributes", "hat", "all")]
    assert hat_row["n_machine"] == 12 and hat_row["machine_only"] == pytest.approx(0.5)
    # text: the share of each answer (an observed colour, say)
    red = found[("note", "red", "all")]
    assert red["n_machine"] == 12 and red["machine_only"] == pytest.approx(8 / 12)
    assert red["estimate"] == pytest.approx(1.0) and red["n_people"] == 6


def test_compare_lines_up_two_labellers_through_the_same_sample(study, owner) -> None:
    run("sample_for_validation", str(study.pk), "--labeller", "vlm", "--design", "uniform", "--size", "10")
    client = client_for(owner)
    query = {"study": [study.pk, study.pk], "source": ["ppi:vlm@1", "ppi:other@1"]}
    response = client.get("/api/compare/", query)
    assert response.status_code == 200, response.content
    keys = [t["key"] for t in response.json()["tables"]]
    assert "ppi_estimates" in keys and "ppi_accuracy" in keys
    page = Client()
    page.force_login(owner)
    html = page.get("/compare/", query)
    assert html.status_code == 200 and "Machine + human sample: vlm@1" in html.content.decode()


def test_active_design_without_another_labeller_oversamples_unsure_answers(study) -> None:
    # the labeller could not tell on items 0..3
    Annotation.objects.filter(
        annotator__name="vlm", item__external_id__in=["i0", "i1", "i2", "i3"], question_key="gender"
    ).update(value="none")
    run("sample_for_validation", str(study.pk), "--labeller", "vlm", "--design", "active", "--size", "8")
    chances = sampled(study)
    # u = 1 on 4 items: pi = 8 (0.5/40 + 0.5/4) = 1.1 -> capped at 1; the other 36 share 4: 4/36
    assert all(chances[n] == 1.0 for n in range(4))
    assert all(p == pytest.approx(4 / 36) for n, p in chances.items() if n >= 4)
