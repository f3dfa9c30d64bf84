"""The Label Studio export of every study (issue 25, point 7): an image-set study travels as one
``<Image valueList="$images">`` (rectangles say their image in ``item_index``), a question whose options
come from each item's metadata as dynamic choices (``<Choices value="$options_KEY">``, the task listing
them); both come back through import_labelstudio --create as the same items and answers."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.interchange.labelstudio.config import COMMENT_RE, config_to_protocol, protocol_to_config
from annotations.models import Annotation, ExportJob, Item, Study
from annotations.services.studies import study_create
from common.files import MemorySource
from protocols.schema import list_presets, load_preset, load_protocol_text
from tests.annotations.imagefiles import png_bytes
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

IMAGE_SET = """
name: Sets
unit: image_set
questions:
  - {key: gender, kind: single, prompt: "Gender?",
     options: [{key: male, label: Man}, {key: female, label: Woman}]}
  - {key: props, kind: multi, prompt: "Props?", options: [hat, cup]}
  - {key: marks, kind: boxes, prompt: Box them, linked_question: props, required: false}
  - {key: stars, kind: likert, prompt: "Quality?", options: ["1", "2", "3"], required: false}
"""

FROM_ITEM = """
name: From the item
unit: image
questions:
  - {key: occupation, kind: single, prompt: "Which occupation?", options_from: occupations}
  - key: attributes
    kind: multi
    prompt: Which attributes?
    options_from: attributes
    none_option: {key: none_of_the_above, label: None of the above}
  - {key: attribute_boxes, kind: boxes, prompt: Box them, linked_question: attributes, required: false}
"""


def export_zip(study: Study, tmp_path: Path) -> Path:
    out = tmp_path / f"study-{study.pk}.labelstudio.zip"
    call_command("export", str(study.pk), "--format", "labelstudio", "--out", str(out), stderr=io.StringIO())
    return out


def _items(study: Study) -> dict[str, tuple[Any, ...]]:
    """Each item as the import must give it back: provenance, metadata, its images in order (bytes)."""
    found = {}
    for item in Item.objects.filter(study=study).prefetch_related("images"):
        images = [(i.position, i.width, i.height, i.file.read()) for i in item.images.order_by("position")]
        found[item.external_id] = (item.kind, item.prompt, item.condition, item.metadata, images)
    return found


def _answers(study: Study) -> set[tuple[Any, ...]]:
    return {
        (
            a.item.external_id,
            a.annotator.name,
            a.annotator.kind,
            a.annotator.version,
            a.question_key,
            json.dumps(a.value, sort_keys=True),
        )
        for a in Annotation.objects.filter(study=study).select_related("item", "annotator")
    }


def _import(zip_path: Path, name: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("import_labelstudio", str(zip_path), "--create", name, "--owner", "owner", stdout=out)
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


@pytest.fixture
def set_study(owner) -> Study:
    study = study_create(owner=owner, name="Sets", protocol=load_protocol_text(IMAGE_SET))
    files = {
        "a0.png": png_bytes(size=(400, 300)),
        "a1.png": png_bytes((10, 200, 10), size=(200, 100)),
        "a2.png": png_bytes((10, 10, 200), size=(64, 64)),
        "b0.png": png_bytes((90, 90, 10), size=(120, 80)),
        "b1.png": png_bytes((90, 10, 90), size=(80, 120)),
    }
    items_import_records(
        study=study,
        records=[
            ("row 1", {"external_id": "set-a", "files": ["a0.png", "a1.png", "a2.png"], "prompt": "a nurse"}),
            ("row 2", {"external_id": "set-b", "files": ["b0.png", "b1.png"], "metadata": {"q": "x"}}),
        ],
        source=MemorySource(files),
    )
    records: list[dict[str, Any]] = [
        {"item": "set-a", "annotator": "rater-1", "question": "gender", "value": "female"},
        {"item": "set-a", "annotator": "rater-1", "question": "props", "value": ["hat", "cup"]},
        {
            "item": "set-a",
            "annotator": "rater-1",
            "question": "marks",
            "value": [
                {"option": "hat", "x": 10, "y": 20, "w": 100, "h": 50, "image": 0},
                {"option": "cup", "x": 40, "y": 10, "w": 160, "h": 90, "image": 1},
                {"option": "hat", "x": 0, "y": 0, "w": 64, "h": 64, "image": 2},
            ],
        },
        {"item": "set-a", "annotator": "rater-1", "question": "stars", "value": "2"},
        {"item": "set-b", "annotator": "rater-1", "question": "gender", "value": "male"},
        {"item": "set-b", "annotator": "rater-2", "question": "props", "value": ["cup"]},
        {
            "item": "set-b",
            "annotator": "rater-2",
            "question": "marks",
            "value": [{"option": "cup", "x": 5, "y": 6, "w": 20, "h": 30, "image": 1}],
        },
        {
            "item": "set-b",
            "annotator": "detector",
            "annotator_kind": "machine",
            "annotator_version": "3",
            "question": "props",
            "value": ["hat"],
        },
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    return study


@pytest.fixture
def from_item_study(owner) -> Study:
    study = study_create(owner=owner, name="From the item", protocol=load_protocol_text(FROM_ITEM))
    items_import_records(
        study=study,
        records=[
            (
                "row 1",
                {
                    "external_id": "img-a",
                    "file": "a.png",
                    "metadata": {"occupations": ["Nurse", "Surgeon"], "attributes": ["caring", "Tall hat"]},
                },
            ),
            (
                "row 2",
                {
                    "external_id": "img-b",
                    "file": "b.png",
                    "metadata": {"occupations": ["Pilot", "Engineer", "Cook"], "attributes": ["strong"]},
                },
            ),
        ],
        source=MemorySource(
            {"a.png": png_bytes(size=(300, 200)), "b.png": png_bytes((0, 90, 0), size=(50, 40))}
        ),
    )
    records: list[dict[str, Any]] = [
        {"item": "img-a", "annotator": "rater-1", "question": "occupation", "value": "surgeon"},
        {"item": "img-a", "annotator": "rater-1", "question": "attributes", "value": ["caring", "tall_hat"]},
        {
            "item": "img-a",
            "annotator": "rater-1",
            "question": "attribute_boxes",
            "value": [{"option": "tall_hat", "x": 30, "y": 0, "w": 60, "h": 40}],
        },
        {"item": "img-b", "annotator": "rater-1", "question": "occupation", "value": "cook"},
        {"item": "img-b", "annotator": "rater-1", "question": "attributes", "value": ["none_of_the_above"]},
        {
            "item": "img-b",
            "annotator": "vlm",
            "annotator_kind": "machine",
            "question": "occupation",
            "value": "pilot",
        },
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    return study


def test_an_image_set_is_one_image_list_per_task_and_rectangles_name_their_image(set_study, tmp_path) -> None:
    with zipfile.ZipFile(export_zip(set_study, tmp_path)) as archive:
        tasks = {t["data"]["external_id"]: t for t in json.loads(archive.read("tasks.json"))}
        config = archive.read("labeling-config.xml").decode()
        files = [n for n in archive.namelist() if n.startswith("files/")]
    assert '<Image name="image" valueList="$images"/>' in config
    assert len(files) == 5  # every image of every set, not only the first
    a = tasks["set-a"]
    assert len(a["data"]["images"]) == 3
    assert all(path.startswith("/data/local-files/?d=files/") for path in a["data"]["images"])
    boxes = [r for r in a["annotations"][0]["result"] if r["type"] == "rectanglelabels"]
    assert [(b["item_index"], b["original_width"], b["original_height"]) for b in boxes] == [
        (0, 400, 300),
        (1, 200, 100),
        (2, 64, 64),
    ]
    assert boxes[1]["value"]["x"] == pytest.approx(20.0) and boxes[1]["value"]["width"] == pytest.approx(80.0)
    plain = config_to_protocol(COMMENT_RE.sub("", config), name="plain")
    assert plain.protocol.unit == "image_set" and plain.data_field == "images"


def test_image_sets_come_back_whole_through_the_import(set_study, tmp_path) -> None:
    report = _import(export_zip(set_study, tmp_path), "Copy of sets")
    copy = Study.objects.get(pk=report["study"])
    assert report["protocol_restored"] is True
    assert copy.protocol_obj.to_dict() | {"name": "Sets"} == set_study.protocol_obj.to_dict()
    assert _items(copy) == _items(set_study)
    assert _answers(copy) == _answers(set_study)


def test_options_from_the_item_travel_as_each_tasks_dynamic_choices(from_item_study, tmp_path) -> None:
    with zipfile.ZipFile(export_zip(from_item_study, tmp_path)) as archive:
        tasks = {t["data"]["external_id"]: t for t in json.loads(archive.read("tasks.json"))}
        config = archive.read("labeling-config.xml").decode()
    assert (
        '<Choices name="occupation" toName="image" choice="single" value="$options_occupation" '
        'required="true"/>' in config
    )
    assert '<RectangleLabels name="attribute_boxes" toName="image" value="$options_attributes"/>' in config
    a = tasks["img-a"]["data"]
    assert a["options_occupation"] == [
        {"value": "Nurse", "alias": "nurse"},
        {"value": "Surgeon", "alias": "surgeon"},
    ]
    assert a["options_attributes"] == [
        {"value": "caring", "alias": "caring"},
        {"value": "Tall hat", "alias": "tall_hat"},
        {"value": "None of the above", "alias": "none_of_the_above"},
    ]
    results = {r["from_name"]: r for r in tasks["img-a"]["annotations"][0]["result"]}
    assert results["occupation"]["value"] == {"choices": ["surgeon"]}
    assert results["attribute_boxes"]["value"]["rectanglelabels"] == ["tall_hat"]


def test_options_from_the_item_come_back_whole_through_the_import(from_item_study, tmp_path) -> None:
    report = _import(export_zip(from_item_study, tmp_path), "Copy of options")
    copy = Study.objects.get(pk=report["study"])
    assert report["protocol_restored"] is True
    assert copy.protocol_obj.to_dict() | {"name": "From the item"} == from_item_study.protocol_obj.to_dict()
    assert _items(copy) == _items(from_item_study)  # metadata too: no options_KEY field left in it
    assert _answers(copy) == _answers(from_item_study)


def test_without_the_kept_protocol_dynamic_choices_read_the_tasks_options(from_item_study, tmp_path) -> None:
    """A config edited in Label Studio (the workbench comment gone): the question takes its options from
    the task's own list, kept in the item's metadata under that field."""
    zip_path = export_zip(from_item_study, tmp_path)
    with zipfile.ZipFile(zip_path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["labeling-config.xml"] = COMMENT_RE.sub("", members["labeling-config.xml"].decode()).encode()
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(edited, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    report = _import(edited, "Edited")
    copy = Study.objects.get(pk=report["study"])
    assert report["protocol_restored"] is False
    occupation = copy.protocol_obj.question("occupation")
    assert occupation.options_from == "options_occupation"
    item = Item.objects.get(study=copy, external_id="img-b")
    assert item.metadata["options_occupation"] == ["Pilot", "Engineer", "Cook"]
    answers = {
        (a.item.external_id, a.annotator.name, a.question_key): a.value
        for a in Annotation.objects.filter(study=copy)
    }
    assert answers[("img-b", "rater-1", "occupation")] == "cook"
    assert answers[("img-a", "rater-1", "attributes")] == ["caring", "tall_hat"]
    assert answers[("img-b", "rater-1", "attributes")] == ["none_of_the_above"]


def test_every_preset_has_a_config_that_brings_it_back_whole() -> None:
    for key in list_presets():
        protocol = load_preset(key)
        config = config_to_protocol(protocol_to_config(protocol), name="x")
        assert config.restored and config.protocol == protocol, key


def test_the_api_exports_the_studies_it_used_to_refuse(
    set_study, owner, django_capture_on_commit_callbacks
) -> None:
    markers = study_create(owner=owner, name="markers", protocol=load_preset("stereotype-markers"))
    for study in (set_study, markers):
        with django_capture_on_commit_callbacks(execute=True):
            response = client_for(owner).post(f"/api/studies/{study.pk}/export/labelstudio/")
        assert response.status_code == 202, response.content
        assert ExportJob.objects.get(pk=response.json()["id"]).status == "done"
