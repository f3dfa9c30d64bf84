"""The Label Studio export: tasks, annotations and predictions as Label Studio imports them, the labeling
config from the protocol, and the round trip back through import_labelstudio --create."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.interchange.labelstudio.config import COMMENT_RE, config_to_protocol
from annotations.models import Annotation, Annotator, Assignment, ExportJob, Item, Study
from annotations.services.annotation_writes import AnswerToSave, annotations_save
from annotations.services.studies import annotator_for_user, study_create
from common.files import MemorySource
from protocols.schema import load_preset, load_protocol_text
from tests.annotations.imagefiles import png_bytes
from tests.factories import UserFactory
from tests.helpers import client_for
from tests.s3_server import FileStore, fetch_download, served_disposition

pytestmark = pytest.mark.django_db

PROTOCOL = """
name: Round trip
unit: image
questions:
  - {key: gender, kind: single, prompt: "Gender?",
     options: [{key: male, label: Man}, {key: female, label: Woman}]}
  - key: attributes
    kind: multi
    prompt: Which attributes?
    options: [hat, glasses, beard]
    none_option: None of the above
  - {key: boxes, kind: boxes, prompt: Box them, linked_question: attributes, required: false}
  - {key: colour, kind: text, prompt: "Colour?", required: false}
  - {key: smiling, kind: binary, prompt: "Smiling?", required: false}
  - key: agree
    kind: likert
    prompt: "Stereotypical?"
    options: [{key: disagree, label: Disagree}, {key: neutral, label: Neutral}, {key: agree, label: Agree}]
    unsure: Unsure
    required: false
  - {key: stars, kind: likert, prompt: "Quality?", options: ["1", "2", "3", "4", "5"], required: false}
"""


def _record(item: str, annotator: str, question: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"item": item, "annotator": annotator, "question": question, "value": value, **extra}


@pytest.fixture
def rich_study(owner) -> Study:
    study = study_create(owner=owner, name="Round trip", protocol=load_protocol_text(PROTOCOL))
    files = {"a.png": png_bytes(size=(400, 300)), "b.png": png_bytes((10, 200, 10), size=(640, 480))}
    items_import_records(
        study=study,
        records=[
            (
                "row 1",
                {
                    "external_id": "img-a",
                    "file": "a.png",
                    "prompt": "a nurse",
                    "model": "sd-1.5",
                    "condition": "gender:female",
                    "seed": 7,
                    "metadata": {"group": "nurse", "tags": ["x", 1]},
                },
            ),
            (
                "row 2",
                {"external_id": "img-b", "file": "b.png", "prompt": "an engineer", "settings": {"steps": 20}},
            ),
            (
                "row 3",
                {
                    "external_id": "ref-c",
                    "metadata": {"image": "https://example.org/c.jpg", "group": "pilot"},
                },
            ),
        ],
        source=MemorySource(files),
    )
    records = [
        _record("img-a", "rater-1", "gender", "female", time_spent_ms=5000),
        _record("img-a", "rater-1", "attributes", ["hat", "glasses"], time_spent_ms=5000),
        _record(
            "img-a",
            "rater-1",
            "boxes",
            [
                {"option": "hat", "x": 10, "y": 20, "w": 100, "h": 50},
                {"option": "glasses", "x": 0, "y": 0, "w": 400, "h": 300},
            ],
            time_spent_ms=5000,
        ),
        _record("img-a", "rater-1", "colour", "dark red", time_spent_ms=5000),
        _record("img-a", "rater-1", "smiling", 1, time_spent_ms=5000),
        _record("img-a", "rater-1", "agree", "unsure", time_spent_ms=5000),
        _record("img-a", "rater-1", "stars", "4", time_spent_ms=5000),
        _record("img-b", "rater-1", "attributes", ["none_of_the_above"]),
        _record("img-b", "rater-1", "smiling", 0),
        _record("img-b", "rater-1", "agree", "agree"),
        _record("ref-c", "rater-1", "gender", "male"),
        _record("img-a", "detector", "attributes", ["hat"], annotator_kind="machine", annotator_version="2"),
        _record(
            "img-a",
            "detector",
            "boxes",
            [{"option": "hat", "x": 12, "y": 21, "w": 97, "h": 49}],
            annotator_kind="machine",
            annotator_version="2",
        ),
        _record("img-b", "vlm", "gender", "male", annotator_kind="machine"),
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    person = UserFactory.create(username="eve", email="eve@example.org", role="annotator")
    annotator = annotator_for_user(user=person)
    item_b = Item.objects.get(study=study, external_id="img-b")
    item_c = Item.objects.get(study=study, external_id="ref-c")
    protocol = study.protocol_obj
    from protocols.answers import ItemContext, clean_answer

    answer = clean_answer(protocol.question("gender"), "female", context=ItemContext(metadata={}))
    annotations_save(
        study_id=study.pk,
        answers=[AnswerToSave(item_id=item_b.pk, annotator=annotator, answer=answer, time_spent_ms=1234)],
        source="ui",
    )
    Assignment.objects.create(
        study=study, item=item_c, annotator=annotator, status="skipped", time_spent_ms=800
    )
    return study


def export_zip(study: Study, tmp_path: Path) -> Path:
    out = tmp_path / "study.labelstudio.zip"
    call_command("export", str(study.pk), "--format", "labelstudio", "--out", str(out), stderr=io.StringIO())
    return out


def test_the_zip_holds_tasks_config_and_images_as_label_studio_reads_them(rich_study, tmp_path) -> None:
    with zipfile.ZipFile(export_zip(rich_study, tmp_path)) as archive:
        names = sorted(archive.namelist())
        tasks = json.loads(archive.read("tasks.json"))
        config = archive.read("labeling-config.xml").decode()
    assert names[:1] == ["files/" + names[0][6:]] and len([n for n in names if n.startswith("files/")]) == 2
    assert {"tasks.json", "labeling-config.xml"} <= set(names)
    by_id = {task["data"]["external_id"]: task for task in tasks}
    a = by_id["img-a"]
    assert a["data"]["image"].startswith("/data/local-files/?d=files/") and a["data"]["prompt"] == "a nurse"
    human = a["annotations"][0]
    assert human["completed_by"] == {
        "id": human["completed_by"]["id"],
        "email": "rater-1@workbench.invalid",
        "first_name": "rater-1",
        "last_name": "",
    }
    assert human["lead_time"] == 5.0 and human["was_cancelled"] is False
    results = {r["from_name"]: r for r in human["result"] if r["type"] != "rectanglelabels"}
    assert results["gender"]["value"] == {"choices": ["female"]}
    assert results["attributes"]["value"] == {"choices": ["hat", "glasses"]}
    assert results["stars"] == {
        "id": results["stars"]["id"],
        "type": "rating",
        "value": {"rating": 4},
        "from_name": "stars",
        "to_name": "image",
        "origin": "manual",
    }
    assert results["colour"]["value"] == {"text": ["dark red"]} and results["smiling"]["value"] == {
        "choices": ["1"]
    }
    box = next(r for r in human["result"] if r["type"] == "rectanglelabels")
    assert (box["original_width"], box["original_height"], box["image_rotation"]) == (400, 300, 0)
    assert box["value"].pop("rectanglelabels") == ["hat"]
    assert box["value"] == pytest.approx(
        {"x": 2.5, "y": 20 / 3, "width": 25.0, "height": 50 / 3, "rotation": 0}
    )
    assert [p["model_version"] for p in a["predictions"]] == ["detector@2"]
    c = by_id["ref-c"]
    assert c["data"]["image"] == "https://example.org/c.jpg"
    assert [x["was_cancelled"] for x in c["annotations"]] == [False, True]
    assert c["annotations"][1]["completed_by"]["email"] == "eve@example.org"
    assert '<Choices name="gender" toName="image" choice="single" required="true">' in config
    assert '<Choice value="Woman" alias="female"/>' in config
    assert '<Rating name="stars" toName="image" maxRating="5"/>' in config
    assert '<Choices name="agree" toName="image" choice="single-radio">' in config
    assert '<RectangleLabels name="boxes" toName="image">' in config
    plain = config_to_protocol(COMMENT_RE.sub("", config), name="plain").protocol
    assert [(q.key, q.kind) for q in plain.questions] == [
        ("gender", "single"),
        ("attributes", "multi"),
        ("colour", "text"),
        ("smiling", "single"),
        ("agree", "single"),
        ("stars", "likert"),
        ("boxes", "boxes"),
    ]


def _items(study: Study) -> dict[str, tuple[Any, ...]]:
    found = {}
    for item in Item.objects.filter(study=study).prefetch_related("images"):
        images = [(image.width, image.height, image.file.read()) for image in item.images.all()]
        found[item.external_id] = (
            item.kind,
            item.prompt,
            item.model_name,
            item.condition,
            item.seed,
            item.generation_settings,
            item.metadata,
            item.is_reference,
            images,
        )
    return found


def _answers(study: Study) -> set[tuple[Any, ...]]:
    return {
        (
            a.item.external_id,
            a.annotator.name,
            a.annotator.kind,
            a.annotator.version,
            a.annotator.user_id,
            a.question_key,
            json.dumps(a.value, sort_keys=True),
            a.time_spent_ms,
        )
        for a in Annotation.objects.filter(study=study).select_related("item", "annotator")
    }


def test_export_then_import_gives_the_same_items_annotations_and_boxes(rich_study, owner, tmp_path) -> None:
    out = io.StringIO()
    call_command(
        "import_labelstudio",
        str(export_zip(rich_study, tmp_path)),
        "--create",
        "Copy",
        "--owner",
        "owner",
        stdout=out,
    )
    report = json.loads(out.getvalue())
    copy = Study.objects.get(pk=report["study"])
    assert report["protocol_restored"] is True and report["shape"] == "snapshot"
    assert copy.protocol_obj.to_dict() | {"name": "Round trip"} == rich_study.protocol_obj.to_dict()
    assert _items(copy) == _items(rich_study)
    assert _answers(copy) == _answers(rich_study)
    skips = Assignment.objects.filter(study=copy).values_list(
        "item__external_id", "annotator__user__username", "status", "time_spent_ms"
    )
    assert list(skips) == [("ref-c", "eve", "skipped", 800)]
    # The machine labellers come back as the copy's own (issue 24, L4: machine names are per study).
    assert set(Annotator.objects.filter(study=copy).values_list("name", "kind")) == {
        ("rater-1", "human"),
        ("detector", "machine"),
        ("vlm", "machine"),
    }


def test_api_and_page_export_label_studio_in_the_background(
    rich_study, owner, django_capture_on_commit_callbacks, default_store: FileStore
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(owner).post(f"/api/studies/{rich_study.pk}/export/labelstudio/")
    assert response.status_code == 202
    job = ExportJob.objects.get(pk=response.json()["id"])
    assert job.status == "done" and job.format == "labelstudio"
    download = client_for(owner).get(f"/api/exports/{job.pk}/download/")
    assert f'filename="study-{rich_study.pk}.labelstudio.zip"' in served_disposition(download)
    assert fetch_download(download, default_store)[:2] == b"PK"
    client = Client()
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        page = client.post(f"/studies/{rich_study.pk}/export/labelstudio/", follow=True)
    assert "being prepared in the background" in page.content.decode()


def test_a_zip_export_needs_an_output_path(owner, tmp_path) -> None:
    # Image sets and options from the item are exported now: tests/annotations/test_labelstudio_every_study.py
    study = study_create(owner=owner, name="markers", protocol=load_preset("stereotype-markers"))
    with pytest.raises(CommandError, match="is a zip: it needs --out"):
        call_command("export", str(study.pk), "--format", "parquet")
