"""The Parquet export loads back with pandas, pyarrow and Hugging Face datasets, as docs/import-export.md
says: one row per answer with provenance, annotator kind and condition; one row per item."""

from __future__ import annotations

import io
import json
import zipfile

import pandas as pd
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command

from annotations.models import Annotation, Annotator
from tests.annotations.builders import image_item
from tests.factories import ItemFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(study, tmp_path):
    item = image_item(study, "a")
    item.condition, item.prompt, item.model_name, item.seed, item.metadata = (
        "gender:female",
        "a nurse",
        "sd",
        3,
        {"g": 1},
    )
    item.save()
    ItemFactory(study=study, external_id="ref", metadata={"image": "https://x/y.jpg"})
    human = Annotator.objects.create(kind="human", name="r1", study=study)
    machine = Annotator.objects.create(kind="machine", name="vlm", version="2")
    for annotator, question, value, extra in (
        (human, "gender", "female", {"time_spent_ms": 900}),
        (human, "attributes", ["hat"], {"shown": ["hat", "glasses"]}),
        (human, "boxes", [{"option": "hat", "x": 1, "y": 2, "w": 3, "h": 4}], {}),
        (human, "smiling", 1, {"reason": "teeth"}),
        (machine, "colour", "red", {}),
    ):
        Annotation.objects.create(
            study=study, item=item, annotator=annotator, question_key=question, value=value, **extra
        )
    out = tmp_path / "study.parquet.zip"
    call_command("export", str(study.pk), "--format", "parquet", "--out", str(out), stderr=io.StringIO())
    return study, out


def test_pandas_reads_both_tables_straight_from_the_zip(exported) -> None:
    study, path = exported
    archive = zipfile.ZipFile(path)
    annotations, items = (
        pd.read_parquet(archive.open(f"{name}.parquet")) for name in ("annotations", "items")
    )
    assert sorted(archive.namelist()) == ["annotations.parquet", "items.parquet"]
    assert len(annotations) == Annotation.objects.filter(study=study).count() == 5
    row = annotations.set_index("question").loc["gender"]
    assert (row["item"], row["condition"], row["prompt"], row["model"], row["seed"]) == (
        "a",
        "gender:female",
        "a nurse",
        "sd",
        3,
    )
    assert (row["annotator"], row["annotator_kind"], row["label"], row["time_spent_ms"]) == (
        "r1",
        "human",
        "female",
        900,
    )
    multi = annotations.set_index("question").loc["attributes"]
    assert (
        list(multi["labels"]) == ["hat"]
        and list(multi["shown"]) == ["hat", "glasses"]
        and json.loads(str(multi["value"])) == ["hat"]
    )
    boxes = annotations.set_index("question").loc["boxes"]["boxes"]
    assert [dict(b) for b in boxes] == [{"option": "hat", "x": 1, "y": 2, "w": 3, "h": 4, "image": 0}]
    assert annotations.set_index("question").loc["smiling"]["label"] == "1"
    assert annotations.set_index("question").loc["colour"]["annotator_kind"] == "machine"
    assert str(annotations["created_at"].dtype).startswith("datetime64")
    assert set(items["item"]) == {"a", "ref"}
    ref = items.set_index("item").loc["ref"]
    assert bool(ref["is_reference"]) and json.loads(str(ref["metadata"])) == {"image": "https://x/y.jpg"}
    assert [dict(i)["width"] for i in items.set_index("item").loc["a"]["images"]] == [2000]


def test_pyarrow_and_hugging_face_datasets_load_the_extracted_files(exported, tmp_path) -> None:
    _study, path = exported
    folder = tmp_path / "study"
    zipfile.ZipFile(path).extractall(folder)
    table = pq.read_table(folder / "annotations.parquet")
    assert table.num_rows == 5 and table.schema.field("boxes").type.value_type.num_fields == 6
    datasets = pytest.importorskip("datasets")
    annotations = datasets.load_dataset(
        "parquet",
        data_files=str(folder / "annotations.parquet"),
        split="train",
        cache_dir=str(tmp_path / "hf"),
    )
    items = datasets.load_dataset(
        "parquet", data_files=str(folder / "items.parquet"), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert annotations.num_rows == 5 and items.num_rows == 2
    assert sorted(annotations["question"]) == ["attributes", "boxes", "colour", "gender", "smiling"]
    assert "annotator_kind" in annotations.column_names and "condition" in annotations.column_names


def test_an_empty_study_exports_empty_tables(study, tmp_path) -> None:
    out = tmp_path / "empty.zip"
    call_command("export", str(study.pk), "--format", "parquet", "--out", str(out), stderr=io.StringIO())
    frame = pd.read_parquet(zipfile.ZipFile(out).open("annotations.parquet"))
    assert len(frame) == 0 and "annotator_kind" in frame.columns
