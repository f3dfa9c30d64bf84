"""Embeddings and captions made elsewhere: import (all or nothing, validated), export, and the visage
stereotypical pull and salience they feed, checked against hand-computed values through the command,
the API and the findings page; a real (tiny) CLIP labelling job feeding the pull; the reasons shown
when nothing is stored."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotations.interchange.feature_import import features_import
from annotations.interchange.item_import import item_add_files
from annotations.models import Annotator, ItemFeature, StereotypeEntry, Study
from common.errors import ImportRefused
from tests.annotations.imagefiles import png_bytes
from tests.factories import StudyFactory
from tests.helpers import client_for, metrics_json

pytestmark = pytest.mark.django_db

# identity, condition, attribute (s/ns prompts), embedding from the GPU box, captions from the captioner
ITEMS: list[tuple[str, str, str, str | None, list[float], list[str] | None]] = [
    ("x-d1", "Xland", "default", None, [1, 0], ["a man in a sombrero", "a man with a hat"]),
    ("x-s1", "Xland", "stereotypical", "hat", [1, 0], ["a sombrero hat"]),
    ("x-s2", "Xland", "stereotypical", "sombrero", [0, 1], None),
    ("x-ns1", "Xland", "non-stereotypical", "rich", [0, 2], None),
    ("y-d1", "Yland", "default", None, [1, 1], ["a woman in a hat"]),
    ("y-s1", "Yland", "stereotypical", "hat", [1, 1], None),
    ("y-ns1", "Yland", "non-stereotypical", "tall", [1, 0], None),
]


def table(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    t = next(t for t in report["tables"] if t["key"] == key)
    return [dict(zip(t["columns"], row, strict=True)) for row in t["rows"]]


def table_meta(report: dict[str, Any], key: str) -> dict[str, Any]:
    return next(t for t in report["tables"] if t["key"] == key)


@pytest.fixture
def pull_study(owner) -> Study:
    study = StudyFactory.create(owner=owner, name="pull")
    for index, (name, identity, condition, attribute, _vector, _captions) in enumerate(ITEMS):
        item_add_files(
            study=study,
            record={
                "external_id": name,
                "file": f"{name}.png",
                "condition": condition,
                "prompt": f"a {identity} person" + (f" described as {attribute}" if attribute else ""),
                "metadata": {"identity": identity, **({"attribute": attribute} if attribute else {})},
            },
            files={f"{name}.png": png_bytes((index * 30, 10, 10))},
        )
    # Yland's stereotype from the stereotype table (NA_stereo >= 2, visual): scored before its prompted one.
    StereotypeEntry.objects.create(study=study, identity="Yland", attribute="poor", na_stereo=2, visual=True)
    return study


def features_file(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def gpu_box_lines() -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for name, _identity, _condition, _attribute, vector, captions in ITEMS:
        lines.append({"item": name, "labeller": "clip-vit-l14", "version": "gpu1", "embedding": vector})
        if captions:
            lines.append({"item": name, "labeller": "blip-large", "version": "1", "captions": captions})
    return lines


def test_imported_features_give_the_hand_computed_pull_and_salience(pull_study, tmp_path) -> None:
    out = io.StringIO()
    call_command(
        "import_features",
        str(pull_study.pk),
        str(features_file(tmp_path / "f.jsonl", gpu_box_lines())),
        stdout=out,
    )
    summary = json.loads(out.getvalue())
    assert (summary["created"], summary["embeddings"], summary["captions"]) == (10, 7, 3)
    assert sorted(summary["labellers_created"]) == ["blip-large 1", "clip-vit-l14 gpu1"]

    out = io.StringIO()
    call_command("metrics", str(pull_study.pk), "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert (report["embeddings"], report["captions"]) == ("clip-vit-l14@gpu1", "blip-large@1")
    pull = {r["identity"]: r for r in table(report, "visage_pull")}
    # Xland: d = {(1,0)}, s = {(1,0), (0,1)}, ns = {(0,2)}: Sim(d,s) = (1 + 0)/2, Sim(d,ns) = 0,
    # Sim(s,ns) = (0 + 1)/2, mean 1/3.
    x = pull["Xland"]
    assert (x["sim_d_s"], x["sim_d_ns"], x["sim_s_ns"]) == pytest.approx((0.5, 0.0, 0.5))
    assert x["mean_sim"] == pytest.approx(1 / 3) and x["pulled"] is True
    assert (x["n_d_images"], x["n_s_images"], x["n_ns_images"]) == (1, 2, 1)
    # Yland: d = s = {(1,1)}, ns = {(1,0)}: 1, 1/sqrt(2), 1/sqrt(2); mean (1 + sqrt(2))/3.
    y = pull["Yland"]
    r2 = 1 / math.sqrt(2)
    assert (y["sim_d_s"], y["sim_d_ns"], y["sim_s_ns"]) == pytest.approx((1.0, r2, r2))
    assert y["mean_sim"] == pytest.approx((1 + 2 * r2) / 3)
    assert [r["identity"] for r in table(report, "visage_pull")] == ["Yland", "Xland"]  # by mean_sim
    assert table_meta(report, "visage_pull")["n_items"] == 7
    assert report["summary"]["stereotypical_pull"] == {
        "embeddings": "clip-vit-l14@gpu1",
        "identities_pulled": 2,
        "identities_defined": 2,
    }
    # Salience over the captions of the images prompted without an attribute (x-s1's are left out):
    # C = 3 captions; df(hat) = 2, df(sombrero) = 1, df(poor) = 0; idf = ln(4/(1+df)) + 1.
    # Xland: N = 2, A = {hat, sombrero}: tf = (1+1)/(2+2) each. Yland: N = 1, A = {poor, hat}:
    # tf(poor) = (0+1)/(1+2), tf(hat) = (1+1)/(1+2).
    sal = {(r["identity"], r["attribute"]): r for r in table(report, "visage_salience")}
    assert sal[("Xland", "sombrero")]["salience"] == pytest.approx(0.5 * (math.log(2) + 1))
    assert sal[("Xland", "hat")]["salience"] == pytest.approx(0.5 * (math.log(4 / 3) + 1))
    assert sal[("Yland", "poor")]["salience"] == pytest.approx((math.log(4) + 1) / 3)
    assert sal[("Yland", "hat")]["salience"] == pytest.approx(2 / 3 * (math.log(4 / 3) + 1))
    assert (sal[("Xland", "sombrero")]["rank"], sal[("Xland", "hat")]["rank"]) == (1, 2)
    assert (sal[("Yland", "hat")]["rank"], sal[("Yland", "poor")]["rank"]) == (1, 2)
    assert sal[("Xland", "hat")]["mentions"] == 1 and sal[("Xland", "hat")]["n_captions"] == 2
    assert table_meta(report, "visage_salience")["n_items"] == 2  # x-d1 and y-d1

    # The API and the page show the same numbers; the figure draws.
    api = client_for(pull_study.owner).get(f"/api/studies/{pull_study.pk}/metrics/")
    assert api.status_code == 200
    assert table(api.json(), "visage_pull")[1]["mean_sim"] == pytest.approx(1 / 3)
    client = client_for(pull_study.owner)
    client.force_login(pull_study.owner)
    page = client.get(reverse("study-findings", args=[pull_study.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Stereotypical pull per identity" in html and "Salience of stereotypical attributes" in html
    assert "clip-vit-l14@gpu1" in html and "0.3333" in html
    figure = client.get(reverse("study-findings-figure", args=[pull_study.pk, "visage_pull", "png"]))
    assert figure.status_code == 200 and figure["Content-Type"] == "image/png"


def test_export_writes_what_import_reads(pull_study, tmp_path) -> None:
    features_import(study=pull_study, address=features_file(tmp_path / "f.jsonl", gpu_box_lines()))
    out = io.StringIO()
    call_command("export_features", str(pull_study.pk), stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 10
    assert {"item": "x-ns1", "labeller": "clip-vit-l14", "version": "gpu1", "embedding": [0.0, 2.0]} in lines
    assert {"item": "x-d1", "labeller": "blip-large", "version": "1", "captions": ITEMS[0][5]} in lines
    # Read back into another study with the same items: the same rows.
    other = StudyFactory.create(owner=pull_study.owner)
    for index, (name, *_rest) in enumerate(ITEMS):
        item_add_files(
            study=other,
            record={"external_id": name, "file": "a.png"},
            files={"a.png": png_bytes((index * 30, 10, 10))},
        )
    report = features_import(study=other, address=features_file(tmp_path / "back.jsonl", lines))
    assert (report.created, report.replaced) == (10, 0)
    # Importing again replaces (same numbers, new rows); the API exports one labeller and one kind.
    again = features_import(study=other, address=features_file(tmp_path / "back.jsonl", lines))
    assert (again.created, again.replaced) == (0, 10)
    api = client_for(pull_study.owner).get(
        f"/api/studies/{other.pk}/features/", {"labeller": "blip-large@1", "kind": "captions"}
    )
    assert api.status_code == 200
    assert [json.loads(line)["item"] for line in api.content.decode().splitlines()] == [
        "x-d1",
        "x-s1",
        "y-d1",
    ]
    assert (
        client_for(pull_study.owner).get(f"/api/studies/{other.pk}/features/", {"kind": "x"}).status_code
        == 400
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ({"item": "nope", "labeller": "c", "embedding": [1, 2]}, "item 'nope' is not in this study"),
        ({"item": "x-d1", "labeller": "c", "embedding": [1, 2], "captions": ["a"]}, "exactly one of"),
        ({"item": "x-d1", "labeller": "c"}, "exactly one of"),
        ({"item": "x-d1", "labeller": "c", "embedding": [1, "a"]}, "not a number"),
        ({"item": "x-d1", "labeller": "c", "embedding": [1, True]}, "not a number"),
        ({"item": "x-d1", "labeller": "c", "embedding": [1, 1e39]}, "must be finite"),
        ({"item": "x-d1", "labeller": "c", "embedding": []}, "non-empty list"),
        ({"item": "x-d1", "labeller": "c", "embedding": [[1, 2], [3, 4]]}, "has 1 image(s)"),
        ({"item": "x-d1", "labeller": "c", "embedding": [0.0] * 8193}, "1 to 8192 numbers"),
        ({"item": "x-d1", "labeller": "c", "captions": []}, "1 to 100 strings"),
        ({"item": "x-d1", "labeller": "c", "captions": ["a"] * 101}, "1 to 100 strings"),
        ({"item": "x-d1", "labeller": "c", "captions": ["x" * 2001]}, "at most 2000 characters"),
        ({"item": "x-d1", "labeller": "", "captions": ["a"]}, "labeller must be a name"),
        ({"item": "x-d1", "labeller": "c", "captions": ["a"], "score": 1}, "unknown field 'score'"),
    ],
)
def test_a_bad_line_refuses_the_whole_file(pull_study, tmp_path, line, message) -> None:
    good = {"item": "y-d1", "labeller": "c", "version": "1", "captions": ["fine"]}
    path = features_file(tmp_path / "bad.jsonl", [good, line])
    with pytest.raises(ImportRefused, match="line 2: ") as caught:
        features_import(study=pull_study, address=path)
    assert message in caught.value.message
    assert not ItemFeature.objects.exists() and not Annotator.objects.filter(name="c").exists()


def test_non_finite_numbers_and_dimensions(pull_study, tmp_path) -> None:
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"item": "x-d1", "labeller": "c", "embedding": [1, NaN]}\n')
    with pytest.raises(ImportRefused, match="line 1: embedding.1 is NaN: not a number JSON allows"):
        features_import(study=pull_study, address=nan)
    mixed = features_file(
        tmp_path / "mixed.jsonl",
        [
            {"item": "x-d1", "labeller": "c", "embedding": [1, 0]},
            {"item": "x-s1", "labeller": "c", "embedding": [1, 0, 0]},
        ],
    )
    with pytest.raises(ImportRefused, match="line 2: c  embeddings have 2 dimensions"):
        features_import(study=pull_study, address=mixed)
    twice = features_file(
        tmp_path / "twice.jsonl",
        [
            {"item": "x-d1", "labeller": "c", "embedding": [1, 0]},
            {"item": "x-d1", "labeller": "c", "embedding": [0, 1]},
        ],
    )
    with pytest.raises(ImportRefused, match="line 2: repeats the embedding of line 1"):
        features_import(study=pull_study, address=twice)
    features_import(
        study=pull_study,
        address=features_file(
            tmp_path / "ok.jsonl", [{"item": "x-d1", "labeller": "c", "embedding": [1, 0]}]
        ),
    )
    wider = features_file(
        tmp_path / "wider.jsonl", [{"item": "x-s1", "labeller": "c", "embedding": [1, 0, 0]}]
    )
    with pytest.raises(ImportRefused, match="already stored embeddings of 2 dimensions"):
        features_import(study=pull_study, address=wider)


def test_bad_input_is_a_clear_400_and_the_page_upload(pull_study, tmp_path, other_researcher) -> None:
    api = client_for(pull_study.owner)
    bad = SimpleUploadedFile("f.jsonl", b'{"item": "x-d1", "labeller": "c", "embedding": [1, "a"]}\n')
    response = api.post(f"/api/studies/{pull_study.pk}/features/import/", {"file": bad}, format="multipart")
    assert response.status_code == 400 and "line 1" in json.dumps(response.json())
    wrong_type = SimpleUploadedFile("f.csv", b"item\n")
    response = api.post(
        f"/api/studies/{pull_study.pk}/features/import/", {"file": wrong_type}, format="multipart"
    )
    assert response.status_code == 400
    good = SimpleUploadedFile(
        "f.jsonl", "".join(json.dumps(line) + "\n" for line in gpu_box_lines()).encode()
    )
    response = api.post(f"/api/studies/{pull_study.pk}/features/import/", {"file": good}, format="multipart")
    assert response.status_code == 201 and response.json()["embeddings"] == 7
    assert client_for(other_researcher).post(
        f"/api/studies/{pull_study.pk}/features/import/", {"file": good}, format="multipart"
    ).status_code in (403, 404)
    # An unknown embedding source is a 400 naming the known ones.
    response = api.get(f"/api/studies/{pull_study.pk}/metrics/", {"embeddings": "nobody"})
    assert response.status_code == 400 and "clip-vit-l14@gpu1" in json.dumps(response.json())
    with pytest.raises(CommandError, match="stored none here"):
        call_command("metrics", str(pull_study.pk), "--captions", "nobody", stdout=io.StringIO())
    # The page: upload, then the features appear in the source choice.
    from django.test import Client

    page = Client()
    page.force_login(pull_study.owner)
    ItemFeature.objects.all().delete()
    upload = SimpleUploadedFile(
        "f.jsonl", "".join(json.dumps(line) + "\n" for line in gpu_box_lines()).encode()
    )
    page_response = page.post(
        reverse("study-features-import", args=[pull_study.pk]), {"file": upload}, follow=True
    )
    assert "Imported 7 embeddings and 3 caption sets" in page_response.content.decode()
    assert ItemFeature.objects.count() == 10
    upload = SimpleUploadedFile("f.jsonl", b'{"item": "zz", "labeller": "c", "captions": ["a"]}\n')
    page_response = page.post(
        reverse("study-features-import", args=[pull_study.pk]), {"file": upload}, follow=True
    )
    assert (
        "Nothing was imported. line 1: item &#x27;zz&#x27; is not in this study"
        in page_response.content.decode()
    )
    export = page.get(reverse("study-features-export", args=[pull_study.pk]))
    assert export.status_code == 200 and len(export.content.decode().splitlines()) == 10


def test_without_embeddings_or_captions_the_report_says_what_to_run(pull_study) -> None:
    report = metrics_json(study=pull_study)
    pull = table_meta(report, "visage_pull")
    assert pull["rows"] == [] and any("run an embedding labeller (kind clip)" in n for n in pull["notes"])
    assert any("import_features" in n for n in pull["notes"])
    salience = table_meta(report, "visage_salience")
    assert salience["rows"] == [] and any("run a captioner (kind captioner)" in n for n in salience["notes"])
    assert any("embedding labeller" in n for n in report["notes"])
    # A study without the pull sets says how to make them.
    plain = StudyFactory.create(owner=pull_study.owner, protocol=pull_study.protocol)
    assert not any(t["key"] == "visage_pull" for t in metrics_json(study=plain)["tables"])


def test_a_clip_labelling_job_feeds_the_pull(pull_study, tmp_path) -> None:
    import numpy as np

    from labelling.services import item_embeddings, labeller_register, labelling_job_create, labelling_job_run
    from tests.fixtures.tiny_vision_models import save_tiny_clip

    clip = labeller_register(
        name="clip-tiny",
        kind="clip",
        config={"model": str(save_tiny_clip(tmp_path / "clip")), "device": "cpu"},
    )
    job = labelling_job_create(study=pull_study, annotator=clip, user=None, enqueue=False)
    assert labelling_job_run(job_id=job.pk).status == "done"
    report = metrics_json(study=pull_study, embeddings="clip-tiny")
    x = next(r for r in table(report, "visage_pull") if r["identity"] == "Xland")
    vectors = {
        pull_study.items.get(pk=item_id).external_id: v[0]
        for item_id, v in item_embeddings(study=pull_study, annotator=clip).items()
    }
    # Unit vectors: Sim(d,s) is the mean of the dot products of x-d1 with x-s1 and x-s2.
    expected = (float(vectors["x-d1"] @ vectors["x-s1"]) + float(vectors["x-d1"] @ vectors["x-s2"])) / 2
    assert x["sim_d_s"] == pytest.approx(expected, abs=1e-5)
    assert np.isfinite(x["mean_sim"]) and report["embeddings"] == f"clip-tiny@{clip.version}"
