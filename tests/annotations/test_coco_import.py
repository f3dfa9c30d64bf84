"""COCO boxes import: images matched to items, categories to options, bbox to pixel boxes; round trip with
the COCO export; refusals by index and name that leave the study as it was."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from annotations.interchange.exports import export_coco
from annotations.models import Annotation, Annotator
from tests.annotations.builders import image_item, row_counts
from tests.helpers import client_for
from tests.s3_server import FileStore

pytestmark = pytest.mark.django_db


@pytest.fixture
def boxed(study):
    items = [image_item(study, "a"), image_item(study, "b", size=(640, 480))]
    machine = Annotator.objects.create(kind="machine", name="detector", version="3")
    human = Annotator.objects.create(kind="human", name="rater-1", study=study)
    for annotator, item, boxes in (
        (
            machine,
            items[0],
            [
                {"option": "hat", "x": 10, "y": 20, "w": 30, "h": 40},
                {"option": "beard", "x": 0, "y": 0, "w": 5, "h": 2},
            ],
        ),
        (human, items[0], [{"option": "hat", "x": 11, "y": 19, "w": 31, "h": 42}]),
        (human, items[1], [{"option": "glasses", "x": 100, "y": 100, "w": 200, "h": 50}]),
    ):
        selected = sorted({str(box["option"]) for box in boxes})
        Annotation.objects.create(
            study=study, item=item, annotator=annotator, question_key="attributes", value=selected
        )
        Annotation.objects.create(
            study=study, item=item, annotator=annotator, question_key="boxes", value=boxes
        )
    return study


def boxes_of(study) -> dict[tuple[str, str, str], Any]:
    return {
        (a.item.external_id, a.annotator.name, a.annotator.kind): a.value
        for a in Annotation.objects.filter(study=study, question_key="boxes").select_related(
            "item", "annotator"
        )
    }


def run(study, path: Path, *args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("import_annotations", str(study.pk), str(path), "--format", "coco", *args, stdout=out)
    return json.loads(out.getvalue())


def write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(document))
    return path


def test_coco_export_and_import_round_trip(file_store: FileStore, boxed, tmp_path) -> None:
    expected = boxes_of(boxed)
    path = write(tmp_path, export_coco(boxed))
    Annotation.objects.filter(study=boxed, question_key="boxes").delete()
    report = run(boxed, path, "--question", "boxes")
    assert report["created"] == 3 and report["derived"] == 0 and report["boxes"] == 4
    assert boxes_of(boxed) == expected
    again = run(boxed, path, "--question", "boxes")
    assert again["created"] == 0 and again["unchanged"] == 3
    assert len(file_store.names("items/")) == 2  # the boxed items' images, untouched


def test_a_plain_coco_file_matches_by_file_name_and_category_name(study, tmp_path) -> None:
    image_item(study, "a")
    document = {
        "images": [
            {"id": 7, "file_name": "a.png", "width": 2000, "height": 1000},
            {"id": 8, "file_name": "elsewhere.jpg"},
        ],
        "categories": [{"id": 1, "name": "Hat", "supercategory": "attributes"}, {"id": 2, "name": "dog"}],
        "annotations": [
            {
                "id": 1,
                "image_id": 7,
                "category_id": 1,
                "bbox": [10.4, 20.6, 30, 40],
                "area": 1200,
                "iscrowd": 0,
                "score": 0.9,
            },
            {
                "id": 2,
                "image_id": 7,
                "category_id": 1,
                "bbox": [500, 500, 20, 20],
                "area": 400,
                "iscrowd": 0,
                "score": 0.4,
            },
        ],
    }
    report = run(study, write(tmp_path, document), "--question", "attributes", "--annotator", "yolo")
    assert report["images_left_out"] == 1 and report["derived"] == 1 and report["question"] == "boxes"
    annotator = Annotator.objects.get(name="yolo")
    assert annotator.kind == "machine"  # a score: a machine's
    assert boxes_of(study)[("a", "yolo", "machine")] == [
        {"option": "hat", "x": 10, "y": 21, "w": 30, "h": 40},
        {"option": "hat", "x": 500, "y": 500, "w": 20, "h": 20},
    ]
    assert Annotation.objects.get(annotator=annotator, question_key="attributes").value == ["hat"]
    human = run(
        study,
        write(tmp_path, document | {"annotations": document["annotations"][:1]}),
        "--question",
        "boxes",
        "--annotator",
        "me",
        "--kind",
        "human",
    )
    assert human["annotators_created"] == ["me"] and Annotator.objects.get(name="me").study == study


BAD = [
    (
        "category",
        lambda d: (
            d["categories"].append({"id": 9, "name": "dog"}) or d["annotations"][0].update(category_id=9)
        ),
        "categories[3] 'dog' (id 9) is not an option of 'attributes' (hat, glasses, beard)",
    ),
    ("image", lambda d: d["images"][0].update(file_name="nobody.png", item=None), "images[0] (id"),
    (
        "outside",
        lambda d: d["annotations"][0].update(bbox=[1990, 10, 30, 40]),
        "is outside the 2000x1000 image",
    ),
    ("bbox", lambda d: d["annotations"][0].update(bbox=[1, 2, 3]), "bbox must be [x, y, width, height]"),
    (
        "size",
        lambda d: d["images"][0].update(width=100),
        "is 100x1000 in the file but 2000x1000 in the study",
    ),
    (
        "selected",
        lambda d: d["annotations"][1].update(category_id=2),
        "option 'glasses' is not selected in 'attributes'",
    ),
]


@pytest.mark.parametrize("case,change,message", BAD, ids=[b[0] for b in BAD])
def test_bad_coco_files_are_refused_and_leave_the_study_as_it_was(
    boxed, tmp_path, case, change, message
) -> None:
    document = export_coco(boxed)
    change(document)
    before = row_counts()
    stored = boxes_of(boxed)
    with pytest.raises(CommandError) as caught:
        run(boxed, write(tmp_path, document), "--question", "boxes")
    assert message in str(caught.value)
    assert row_counts() == before and boxes_of(boxed) == stored


def test_coco_through_the_api_and_the_page(boxed, owner, tmp_path) -> None:
    data = json.dumps(export_coco(boxed)).encode()
    Annotation.objects.filter(study=boxed, question_key="boxes").delete()
    missing = client_for(owner).post(
        f"/api/studies/{boxed.pk}/annotations/import/",
        {"file": SimpleUploadedFile("instances.json", data), "format": "coco"},
        format="multipart",
    )
    assert missing.status_code == 400 and "boxes question" in missing.json()["detail"]
    response = client_for(owner).post(
        f"/api/studies/{boxed.pk}/annotations/import/",
        {"file": SimpleUploadedFile("instances.json", data), "format": "coco", "question": "boxes"},
        format="multipart",
    )
    assert response.status_code == 201 and response.json()["created"] == 3
    client = Client()
    client.force_login(owner)
    page = client.post(
        f"/studies/{boxed.pk}/import/annotations/",
        {"file": SimpleUploadedFile("instances.json", data), "format": "coco", "question": "boxes"},
        follow=True,
    )
    assert "Imported 4 COCO boxes: 0 answers new, 0 changed, 3 unchanged." in page.content.decode()
