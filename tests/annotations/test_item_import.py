"""Importing items: folders, zips, manifests; refusals leave the study exactly as it was."""

from __future__ import annotations

import io
import json
import re
import stat
import zipfile
from pathlib import Path

import pytest
from django.db import models

from annotations.interchange.item_import import items_import
from annotations.models import Item, ItemImage
from common.errors import ImportRefused
from protocols.schema import load_preset
from tests.annotations.imagefiles import drawn_png_bytes, png_bytes, write_png
from tests.factories import StudyFactory
from tests.s3_server import FileStore

pytestmark = pytest.mark.django_db


def test_a_folder_of_images_becomes_items_with_hashes_and_sizes(
    study, tmp_path, file_store: FileStore
) -> None:
    write_png(tmp_path / "imgs" / "a.png", (255, 0, 0))
    write_png(tmp_path / "imgs" / "sub" / "b.png", (0, 255, 0), size=(40, 30))
    report = items_import(study=study, address=tmp_path / "imgs")
    assert report.created == 2 and report.duplicates == []
    item = Item.objects.get(study=study, external_id="sub/b.png")
    image = item.images.get()
    assert (image.width, image.height, image.content_type) == (40, 30, "image/png")
    assert item.sha256 == image.sha256 and len(item.sha256) == 64
    # stored under a generated name (a random hex could itself end in "b", so match the whole form)
    assert re.fullmatch(rf"items/{study.pk}/[0-9a-f]{{32}}\.png", image.file.name), image.file.name
    assert file_store.names() == sorted(i.file.name for i in ItemImage.objects.all())
    assert file_store.read(image.file.name) == (tmp_path / "imgs" / "sub" / "b.png").read_bytes()


def test_a_csv_manifest_keeps_provenance_and_extra_columns_as_metadata(study, tmp_path) -> None:
    write_png(tmp_path / "x.png")
    (tmp_path / "items.csv").write_text(
        "external_id,file,prompt,model,condition,seed,occupation,tags\n"
        'x1,x.png,a photo of a doctor,sd-1.5,gender:women,42,doctor,"[""a"", ""b""]"\n'
    )
    items_import(study=study, address=tmp_path / "items.csv")
    item = Item.objects.get(external_id="x1")
    assert (item.prompt, item.model_name, item.condition, item.seed) == (
        "a photo of a doctor",
        "sd-1.5",
        "gender:women",
        42,
    )
    assert item.metadata == {"occupation": "doctor", "tags": ["a", "b"]}


def test_fields_the_manifest_does_not_set_take_the_values_the_orm_would_store(study, tmp_path) -> None:
    # The import writes rows without model instances; a field without a default (the note) must come
    # out as the ORM's own default ("" for text), never the text of Django's NOT_PROVIDED marker.
    (tmp_path / "items.csv").write_text("external_id,prompt\nr1,a photo of a nurse\n")
    items_import(study=study, address=tmp_path / "items.csv")
    imported = Item.objects.get(external_id="r1")
    made = Item.objects.create(study=study, external_id="r2", prompt="a photo of a nurse")
    for name in ("note", "control_kind", "expert_only", "judgements", "text", "metadata"):
        assert getattr(imported, name) == getattr(made, name), name
    assert imported.note == ""


def test_a_zip_with_a_jsonl_manifest_builds_image_sets(file_store: FileStore, owner, tmp_path) -> None:
    study = StudyFactory.create(owner=owner, protocol=load_preset("ssi-rubric").to_dict())
    archive = tmp_path / "sets.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for index in range(4):
            zf.writestr(f"q1/{index}.png", png_bytes((index * 60, 10, 10)))
        zf.writestr(
            "manifest.jsonl",
            json.dumps(
                {
                    "external_id": "q1",
                    "files": [f"q1/{i}.png" for i in range(4)],
                    "prompt": "a photo of a Nigerian person",
                    "condition": "initial",
                    "metadata": {"category": "geocultural"},
                }
            )
            + "\n",
        )
    report = items_import(study=study, address=archive)
    item = Item.objects.get(study=study, external_id="q1")
    assert report.created == 1 and item.kind == "image_set"
    assert list(item.images.values_list("position", flat=True)) == [0, 1, 2, 3]
    stored = [image.file.name for image in item.images.all()]
    assert file_store.names() == sorted(stored)
    assert [file_store.read(name) for name in stored] == [png_bytes((i * 60, 10, 10)) for i in range(4)]


def test_identical_files_are_kept_and_reported_and_repeated_ids_skipped(
    study, tmp_path, default_store: FileStore
) -> None:
    # (issue 14 point 3 changed this on purpose: a byte-identical file under another id was skipped before)
    write_png(tmp_path / "a.png", (1, 2, 3))
    write_png(tmp_path / "copy-of-a.png", (1, 2, 3))
    report = items_import(study=study, address=tmp_path)
    assert report.created == 2 and report.duplicates == []
    assert report.identical == [
        {"external_id": "copy-of-a.png", "same_as": "a.png", "reason": "same file(s) as item 'a.png'; kept"}
    ]
    assert len(default_store.names()) == 2  # each item stores its own copy
    again = items_import(study=study, address=tmp_path)
    assert again.created == 0 and len(again.duplicates) == 2
    assert Item.objects.filter(study=study).count() == 2


def test_text_items_and_reference_items(owner, tmp_path) -> None:
    text_study = StudyFactory.create(owner=owner, protocol=load_preset("visualness").to_dict())
    (tmp_path / "terms.jsonl").write_text('{"text": "dark skin"}\n{"text": "poor"}\n')
    assert items_import(study=text_study, address=tmp_path / "terms.jsonl").created == 2
    assert set(Item.objects.filter(study=text_study).values_list("kind", "text")) == {
        ("text", "dark skin"),
        ("text", "poor"),
    }
    image_study = StudyFactory.create(owner=owner)
    (tmp_path / "refs.csv").write_text("external_id,prompt\nimg-17,a photo of a Mexican person\n")
    report = items_import(study=image_study, address=tmp_path / "refs.csv")
    assert report.references == 1
    assert Item.objects.get(study=image_study).is_reference


def test_a_bad_row_stops_the_import_and_nothing_is_written(study, tmp_path, file_store: FileStore) -> None:
    write_png(tmp_path / "ok.png")
    (tmp_path / "items.csv").write_text("external_id,file,seed\ngood,ok.png,1\nbad,ok.png,not-a-number\n")
    with pytest.raises(ImportRefused, match=r"items.csv row 3: seed 'not-a-number' is not an integer"):
        items_import(study=study, address=tmp_path / "items.csv")
    assert Item.objects.count() == 0 and file_store.names() == []


@pytest.mark.parametrize("failing", ["second file", "image rows", "cancelled"])
def test_a_failure_while_writing_removes_the_files_already_stored(
    study, tmp_path, file_store: FileStore, monkeypatch, failing: str
) -> None:
    from django.core.files.storage import default_storage
    from django.db.models.query import QuerySet

    write_png(tmp_path / "a.png", (1, 1, 1))
    write_png(tmp_path / "b.png", (2, 2, 2))
    calls = {"n": 0}
    storage_class = default_storage.__class__  # FileSystemStorage, or django-storages' S3Storage
    original_save = storage_class._save  # type: ignore[attr-defined]  # private, left out of the stubs
    original_bulk_create = QuerySet.bulk_create

    def failing_save(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return original_save(self, *args, **kwargs)

    def failing_bulk_create(self, objs, *args, **kwargs):
        if self.model is ItemImage:
            raise OSError("database went away")
        return original_bulk_create(self, objs, *args, **kwargs)

    def cancelled_bulk_create(self, objs, *args, **kwargs):
        if self.model is ItemImage:
            raise KeyboardInterrupt  # a worker stopped mid-import (a cancel, a SIGINT)
        return original_bulk_create(self, objs, *args, **kwargs)

    if failing == "second file":
        monkeypatch.setattr(storage_class, "_save", failing_save)
    elif failing == "image rows":
        monkeypatch.setattr(QuerySet, "bulk_create", failing_bulk_create)
    else:
        monkeypatch.setattr(QuerySet, "bulk_create", cancelled_bulk_create)
    with pytest.raises((OSError, KeyboardInterrupt)):
        items_import(study=study, address=tmp_path)
    assert Item.objects.count() == 0 and ItemImage.objects.count() == 0
    assert file_store.names() == []


@pytest.mark.parametrize("member", ["../evil.png", "/etc/evil.png", "a/../../evil.png", "C:/evil.png"])
def test_archive_members_outside_the_folder_are_refused_by_name(study, tmp_path, member: str) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("fine.png", png_bytes())
        zf.writestr(member, png_bytes((9, 9, 9)))
    with pytest.raises(ImportRefused, match="is outside the target folder"):
        items_import(study=study, address=archive)
    assert Item.objects.count() == 0


def test_symbolic_links_in_archives_are_refused(study, tmp_path) -> None:
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo("link.png")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(ImportRefused, match="'link.png' is a symbolic link"):
        items_import(study=study, address=archive)


def test_non_images_oversized_and_bomb_images_are_refused_by_name(study, tmp_path, settings) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ImportRefused, match=r"notes.txt: is not an image"):
        items_import(study=study, address=tmp_path)
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "fake.png").write_text("not really a png")
    with pytest.raises(ImportRefused, match=r"fake.png: is not an image"):
        items_import(study=study, address=tmp_path)
    (tmp_path / "fake.png").unlink()
    write_png(tmp_path / "big.png", size=(64, 64))
    settings.WORKBENCH_MAX_IMAGE_PIXELS = 1000
    with pytest.raises(ImportRefused, match=r"big.png: 64x64 pixels is over the 1,000-pixel limit"):
        items_import(study=study, address=tmp_path)
    settings.WORKBENCH_MAX_IMAGE_PIXELS = 10_000_000
    settings.WORKBENCH_MAX_IMAGE_BYTES = 50
    with pytest.raises(ImportRefused, match=r"big.png: .* is larger than the"):
        items_import(study=study, address=tmp_path)
    assert Item.objects.count() == 0


def test_zip_bombs_are_refused(study, tmp_path) -> None:
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("zeros.png", b"\0" * (20 * 1024 * 1024))
    with pytest.raises(ImportRefused, match="possible zip bomb"):
        items_import(study=study, address=archive)


def test_rows_must_fit_the_protocol(owner, tmp_path) -> None:
    markers = StudyFactory.create(owner=owner, protocol=load_preset("stereotype-markers").to_dict())
    (tmp_path / "m.jsonl").write_text('{"external_id": "i1", "identity": "Mexican"}\n')
    with pytest.raises(ImportRefused, match="metadata field 'attributes' is missing"):
        items_import(study=markers, address=tmp_path / "m.jsonl")
    text_study = StudyFactory.create(owner=owner, protocol=load_preset("visualness").to_dict())
    (tmp_path / "t.csv").write_text("external_id,prompt\nx,p\n")
    with pytest.raises(
        ImportRefused, match=r"t.csv row 2: this study judges text items; the row has no 'text'"
    ):
        items_import(study=text_study, address=tmp_path / "t.csv")
    (tmp_path / "dup.jsonl").write_text(
        '{"external_id": "a", "text": "x"}\n{"external_id": "a", "text": "y"}\n'
    )
    with pytest.raises(ImportRefused, match="dup.jsonl line 2: external_id 'a' repeats dup.jsonl line 1"):
        items_import(study=text_study, address=tmp_path / "dup.jsonl")
    (tmp_path / "cond.jsonl").write_text('{"text": "x", "condition": "<script>"}\n')
    with pytest.raises(ImportRefused, match="condition '<script>' is not of the form"):
        items_import(study=text_study, address=tmp_path / "cond.jsonl")
    assert Item.objects.count() == 0


def test_manifest_files_must_stay_inside_its_folder(study, tmp_path) -> None:
    write_png(tmp_path / "outside.png")
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "items.csv").write_text("external_id,file\nx,../outside.png\n")
    with pytest.raises(ImportRefused, match="is outside the target folder"):
        items_import(study=study, address=tmp_path / "inner" / "items.csv")


def test_in_memory_files_go_through_the_same_checks(study) -> None:
    from annotations.interchange.item_import import item_add_files

    record = {"external_id": "gen-1", "file": "gen-1.png", "prompt": "a cup", "seed": 5, "model": "tiny-sd"}
    report = item_add_files(study=study, record=record, files={"gen-1.png": png_bytes((5, 5, 5))})
    assert report.created == 1 and Item.objects.get(external_id="gen-1").images.get().width == 32
    again = item_add_files(study=study, record=record, files={"gen-1.png": png_bytes((5, 5, 5))})
    assert again.created == 0 and again.duplicates == [
        {"external_id": "gen-1", "reason": "already in the study"}
    ]
    with pytest.raises(ImportRefused, match="gen-2.png: is not an image"):
        item_add_files(
            study=study, record={"external_id": "gen-2", "file": "gen-2.png"}, files={"gen-2.png": b"x"}
        )


def test_adding_one_item_looks_up_only_its_own_id_and_hash(study, _media_root) -> None:
    """A generation job adds images one item at a time: each addition must not read the whole study."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotations.interchange.item_import import item_add_files

    Item.objects.bulk_create(
        [Item(study=study, external_id=f"old-{n}", kind="image", sha256=f"{n:064x}") for n in range(50)]
    )
    data = png_bytes(size=(16, 16))
    with CaptureQueriesContext(connection) as queries:
        report = item_add_files(
            study=study, record={"external_id": "new", "file": "n.png"}, files={"n.png": data}
        )
    assert report.created == 1
    item_reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and '"annotations_item"' in q["sql"].split("WHERE")[0]
    ]
    assert len(item_reads) == 2 and all(" IN (" in sql for sql in item_reads), item_reads
    # the lookups still find duplicates: by id, and by the file's hash under another id
    again = item_add_files(study=study, record={"external_id": "new", "file": "n.png"}, files={"n.png": data})
    copy = item_add_files(study=study, record={"external_id": "copy", "file": "c.png"}, files={"c.png": data})
    assert again.duplicates == [{"external_id": "new", "reason": "already in the study"}]
    assert copy.created == 1 and copy.duplicates == []  # (issue 14: identical files are kept, reported)
    assert copy.identical == [
        {"external_id": "copy", "same_as": "new", "reason": "same file(s) as item 'new'; kept"}
    ]


def test_a_bulk_import_refreshes_the_planner_statistics_on_postgresql(study) -> None:
    """Claims on a freshly imported study must not be planned from statistics that predate it
    (common/planner_statistics.py): an import of many items runs ANALYZE, a small one does not."""
    from django.db import connection

    from annotations.interchange.item_import import items_import_records
    from common.planner_statistics import BULK_ROWS, statistics_refresh

    def study_in_statistics(study_id: int) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'annotations_item' "
                "AND attname = 'study_id'"
            )
            rows = cursor.fetchall()
        return any(str(study_id) in (row[0] or "").strip("{}").split(",") for row in rows)

    small = StudyFactory.create(owner=study.owner)
    report = items_import_records(
        study=small, records=[(f"row {n}", {"external_id": f"s{n}"}) for n in range(5)]
    )
    assert report.created == 5
    if connection.vendor != "postgresql":
        assert statistics_refresh(Item, rows=10_000) is False  # SQLite plans by index shape; left alone
        return
    assert not study_in_statistics(small.pk)  # five rows: no ANALYZE
    report = items_import_records(
        study=study, records=[(f"row {n}", {"external_id": f"b{n}"}) for n in range(BULK_ROWS)]
    )
    assert report.created == BULK_ROWS and study_in_statistics(study.pk)


def test_a_precomputed_image_check_counts_only_for_the_bytes_it_was_made_from(study) -> None:
    """A generation job hands over image_check results computed in its encoder threads; results that
    do not match the bytes (by SHA-256) are ignored and the bytes are checked again."""
    from annotations.interchange.item_import import items_add_files
    from common.files import image_check

    good = png_bytes((7, 7, 7))
    checked = {"a.png": image_check(good, name="a.png")}
    with pytest.raises(ImportRefused, match="a.png: is not an image"):
        items_add_files(
            study=study,
            records=[{"external_id": "a", "file": "a.png"}],
            files={"a.png": b"junk"},
            checked=checked,
        )
    report = items_add_files(
        study=study, records=[{"external_id": "a", "file": "a.png"}], files={"a.png": good}, checked=checked
    )
    assert (
        report.created == 1
        and Item.objects.get(external_id="a").images.get().sha256 == checked["a.png"].sha256
    )


# --- issue 14 point 3: identical files never drop items; blank images are flagged -------------------


def safety_filtered_folder(folder: Path) -> Path:
    """Three prompts in two conditions whose images a safety filter blacked out (identical bytes), one
    drawn image, and a near-black frame (JPEG-like noise of 3 levels): the manifest a researcher imports."""
    from PIL import Image

    folder.mkdir()
    black = png_bytes((0, 0, 0), size=(32, 24))
    for name in ("w1.png", "w2.png", "m1.png"):
        (folder / name).write_bytes(black)
    (folder / "m2.png").write_bytes(drawn_png_bytes())
    noisy = Image.new("RGB", (32, 24), (2, 2, 2))
    noisy.putpixel((5, 5), (5, 3, 2))
    noisy.save(folder / "m3.png")
    (folder / "manifest.csv").write_text(
        "external_id,file,prompt,condition\n"
        "w1,w1.png,a nurse for women,gender:women\n"
        "w2,w2.png,a doctor for women,gender:women\n"
        "m1,m1.png,a nurse for men,gender:men\n"
        "m2,m2.png,a doctor for men,gender:men\n"
        "m3,m3.png,a judge for men,gender:men\n"
    )
    return folder


def test_the_import_command_keeps_identical_black_images_and_flags_them(
    study, tmp_path, default_store: FileStore
) -> None:
    from django.core.management import call_command

    out, err = io.StringIO(), io.StringIO()
    call_command(
        "import_items", str(study.pk), str(safety_filtered_folder(tmp_path / "in")), stdout=out, stderr=err
    )
    report = json.loads(out.getvalue())
    assert report["created"] == 5 and report["duplicates"] == []
    assert [(e["external_id"], e["same_as"]) for e in report["identical"]] == [("w2", "w1"), ("m1", "w1")]
    assert [(e["external_id"], e["colours"]) for e in report["blank"]] == [
        ("w1", ["#000000"]),
        ("w2", ["#000000"]),
        ("m1", ["#000000"]),
        ("m3", ["#030202"]),  # within 8 levels per channel: R 2..5, G 2..3, B 2..2 -> (lo + hi) // 2
    ]
    assert "2 items have the same file(s) as another item; all are kept" in err.getvalue()
    assert "4 items have a blank or single-colour image" in err.getvalue()
    conditions = dict(
        Item.objects.filter(study=study).values_list("condition").annotate(n=models.Count("id")).order_by()
    )
    assert conditions == {"gender:women": 2, "gender:men": 3}  # no condition lost an item
    flags = dict(ItemImage.objects.filter(item__study=study).values_list("item__external_id", "is_blank"))
    assert flags == {"w1": True, "w2": True, "m1": True, "m2": False, "m3": True}
    assert len(default_store.names()) == 5


def test_the_api_and_the_upload_page_report_identical_and_blank_images(
    owner, study, tmp_path, client
) -> None:
    from tests.helpers import client_for

    folder = safety_filtered_folder(tmp_path / "in")
    archive = tmp_path / "batch.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in folder.iterdir():
            zf.write(path, path.name)
    with archive.open("rb") as handle:
        response = client_for(owner).post(
            f"/api/studies/{study.pk}/items/import/", {"file": handle}, format="multipart"
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["created"] == 5 and len(body["identical"]) == 2 and len(body["blank"]) == 4
    assert any("all are kept" in w for w in body["warnings"])
    other = StudyFactory.create(owner=owner)
    client.force_login(owner)
    with archive.open("rb") as handle:
        page = client.post(f"/studies/{other.pk}/import/items/", {"file": handle}, follow=True)
    text = page.content.decode()
    assert "Imported 5 items" in text
    assert "Warning: 2 items have the same file(s) as another item; all are kept" in text
    assert "Warning: 4 items have a blank or single-colour image" in text


def test_the_items_page_flags_and_filters_blank_images(owner, study, tmp_path, client) -> None:
    items_import(study=study, address=safety_filtered_folder(tmp_path / "in"))
    client.force_login(owner)
    everything = client.get(f"/studies/{study.pk}/items/").content.decode()
    assert "<strong>4</strong> items of this study have a blank or single-colour image" in everything
    assert everything.count('<span class="badge blank">') == 4 and "blank #000000" in everything
    only = client.get(f"/studies/{study.pk}/items/?blank=1").content.decode()
    assert "4 items ·" in only and "<strong>m2</strong>" not in only and "<strong>w2</strong>" in only
    without = client.get(f"/studies/{study.pk}/items/?blank=0&condition=gender:men").content.decode()
    assert "1 item ·" in without and "<strong>m2</strong>" in without


def test_generated_black_images_are_kept_and_flagged(study) -> None:
    """A generation job stores its images through items_add_files with the checks its encoder threads made."""
    from annotations.interchange.item_import import items_add_files
    from common.files import image_check

    black = png_bytes((0, 0, 0), size=(64, 64))
    files = {"a.png": black, "b.png": black}
    report = items_add_files(
        study=study,
        records=[
            {"external_id": "job-1-0", "file": "a.png", "prompt": "a nurse", "condition": "gender:women"},
            {"external_id": "job-1-1", "file": "b.png", "prompt": "a judge", "condition": "gender:men"},
        ],
        files=files,
        checked={name: image_check(data, name=name) for name, data in files.items()},
    )
    assert report.created == 2 and [e["external_id"] for e in report.identical] == ["job-1-1"]
    assert set(ItemImage.objects.filter(item__study=study).values_list("is_blank", "blank_colour")) == {
        (True, "#000000")
    }
