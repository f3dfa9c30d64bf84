"""Importing annotations from JSONL: validated like any answer, all or nothing, edits keep history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from annotations.interchange.annotation_import import annotations_import
from annotations.models import Annotation, AnnotationRevision, Annotator, ItemImage
from common.errors import ImportRefused
from tests.factories import ItemFactory

pytestmark = pytest.mark.django_db


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


@pytest.fixture
def items(study):
    first = ItemFactory.create(study=study, external_id="i1", is_reference=False)
    ItemImage.objects.create(item=first, position=0, width=100, height=80, sha256="x" * 64)
    ItemFactory.create(study=study, external_id="i2")
    return study


def test_human_and_machine_annotations_import_into_one_table(items, tmp_path) -> None:
    path = write_jsonl(
        tmp_path / "a.jsonl",
        [
            {
                "item": "i1",
                "annotator": "rater-1",
                "annotator_kind": "human",
                "question": "gender",
                "value": "female",
            },
            {
                "item": "i1",
                "annotator": "gpt-4o",
                "annotator_kind": "machine",
                "annotator_version": "2024-08",
                "question": "gender",
                "value": "male",
            },
            {
                "item": "i1",
                "annotator": "rater-1",
                "annotator_kind": "human",
                "question": "attributes",
                "value": ["hat"],
                "shown": ["hat", "glasses", "none_of_the_above"],
            },
            {
                "item": "i1",
                "annotator": "rater-1",
                "annotator_kind": "human",
                "question": "boxes",
                "value": [{"option": "hat", "x": 1, "y": 2, "w": 30, "h": 20}],
            },
            {
                "item": "i2",
                "annotator": "rater-1",
                "annotator_kind": "human",
                "question": "smiling",
                "value": 0,
                "reason": "mouth closed",
            },
        ],
    )
    report = annotations_import(study=items, address=path)
    assert report.created == 5 and sorted(report.annotators_created) == ["gpt-4o 2024-08", "rater-1"]
    machine = Annotator.objects.get(kind="machine", name="gpt-4o")
    assert machine.version == "2024-08" and machine.study == items  # a file's machine: this study's
    human = Annotator.objects.get(kind="human", name="rater-1")
    assert human.study == items and human.user is None
    multi = Annotation.objects.get(question_key="attributes")
    assert multi.value == ["hat"] and multi.shown == ["hat", "glasses", "none_of_the_above"]
    assert Annotation.objects.get(question_key="smiling").reason == "mouth closed"


def test_reimporting_changed_values_keeps_the_old_ones_as_revisions(items, tmp_path) -> None:
    line = {"item": "i2", "annotator": "r", "annotator_kind": "human", "question": "gender", "value": "male"}
    annotations_import(study=items, address=write_jsonl(tmp_path / "a.jsonl", [line]))
    report = annotations_import(
        study=items, address=write_jsonl(tmp_path / "b.jsonl", [{**line, "value": "female"}])
    )
    assert (report.created, report.updated) == (0, 1)
    annotation = Annotation.objects.get()
    assert annotation.value == "female"
    assert list(AnnotationRevision.objects.values_list("value", flat=True)) == ["male"]
    same = annotations_import(
        study=items, address=write_jsonl(tmp_path / "c.jsonl", [{**line, "value": "female"}])
    )
    assert same.unchanged == 1 and AnnotationRevision.objects.count() == 1


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            {"item": "nope", "annotator": "r", "question": "gender", "value": "male"},
            "line 2: item 'nope' is not in this study",
        ),
        (
            {"item": "i1", "annotator": "r", "question": "height", "value": 1},
            "line 2: question 'height' is not in the protocol",
        ),
        (
            {"item": "i1", "annotator": "r", "question": "gender", "value": "robot"},
            "line 2: gender: 'robot' is not one of",
        ),
        (
            {
                "item": "i1",
                "annotator": "r",
                "question": "boxes",
                "value": [{"option": "hat", "x": 0, "y": 0, "w": 5, "h": 5}],
            },
            "line 2: boxes: box 1: option 'hat' is not selected in 'attributes'",
        ),
        (
            {
                "item": "i1",
                "annotator": "r",
                "question": "boxes",
                "value": [{"option": "beard", "x": 90, "y": 0, "w": 50, "h": 5}],
            },
            "outside the 100x80 image",
        ),
        (
            {
                "item": "i1",
                "annotator": "r",
                "annotator_kind": "robot",
                "question": "gender",
                "value": "male",
            },
            "annotator_kind must be 'human' or 'machine'",
        ),
        ({"item": "i1", "annotator": "r", "question": "gender"}, "line 2: 'value' is missing"),
        (
            {"item": "i1", "annotator": "r", "question": "gender", "value": "male", "colour": "red"},
            "unknown field 'colour'",
        ),
    ],
)
def test_a_bad_line_names_its_number_and_nothing_is_imported(items, tmp_path, record, message) -> None:
    good: dict[str, Any] = {"item": "i2", "annotator": "r", "question": "gender", "value": "male"}
    if record.get("question") == "boxes" and "beard" in json.dumps(record):
        good = {"item": "i1", "annotator": "r", "question": "attributes", "value": ["beard"]}
    with pytest.raises(ImportRefused, match=message.replace("(", r"\(")):
        annotations_import(study=items, address=write_jsonl(tmp_path / "bad.jsonl", [good, record]))
    assert Annotation.objects.count() == 0 and Annotator.objects.count() == 0


def test_a_repeated_answer_and_broken_json_are_refused(items, tmp_path) -> None:
    line = {"item": "i2", "annotator": "r", "question": "gender", "value": "male"}
    with pytest.raises(ImportRefused, match="line 2: repeats the answer of line 1"):
        annotations_import(study=items, address=write_jsonl(tmp_path / "a.jsonl", [line, line]))
    (tmp_path / "b.jsonl").write_text(json.dumps(line) + "\n{not json\n")
    with pytest.raises(ImportRefused, match="line 2: not valid JSON"):
        annotations_import(study=items, address=tmp_path / "b.jsonl")
    assert Annotation.objects.count() == 0
