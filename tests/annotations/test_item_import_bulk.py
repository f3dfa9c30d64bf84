"""Big manifests (issue 17's million-row import): the bulk insert (COPY on PostgreSQL, multi-row
INSERT on SQLite) stores what the ORM stores, and a bad row anywhere, even after thousands of good
ones, refuses the whole file with the message the row checks give, writing nothing."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from django.db.models import Field

from annotations.interchange import item_import
from annotations.interchange.item_import import items_import
from annotations.models import Item, Study
from common.errors import ImportRefused

pytestmark = pytest.mark.django_db

ROWS = 5_000  # more than two of the import's lookup chunks (LOOKUP_CHUNK)


def write_manifest(path: Path, rows: list[str], header: str = "external_id,prompt,condition,seed") -> Path:
    path.write_text(header + "\n" + "".join(row + "\n" for row in rows), encoding="utf-8")
    return path


def good_rows(count: int = ROWS) -> list[str]:
    return [f"r{n},a photo of person {n},gender:{'fm'[n % 2]},{n}" for n in range(count)]


def test_the_bulk_insert_stores_what_the_orm_stores(study: Study, tmp_path: Path) -> None:
    # Text that COPY's text format must escape (tab, newlines, backslashes, its null marker \N),
    # non-ASCII text, JSON cells, the largest seeds, expert_only.
    prompt = 'a "quoted" \\N prompt\twith a tab,\nnewlines\r\nand \\ backslashes, ünïcödé 😀'
    manifest = tmp_path / "items.csv"
    quoted = prompt.replace('"', '""')
    manifest.write_text(
        "external_id,prompt,model,condition,seed,settings,expert_only,tags,note_text,source\n"
        f'bulk-1,"{quoted}",sd\\1.5,gender:women,-9223372036854775808,'
        '"{""steps"": 30, ""sampler"": ""k\\\\euler""}",yes,"[""a"", ""b\\tc""]",  spaced  ,web\n'
        "bulk-2,,,,9223372036854775807,,no,,,\n",
        encoding="utf-8",
    )
    report = items_import(study=study, address=manifest)
    assert report.created == 2 and report.references == 2
    made = [
        Item.objects.create(
            study=study,
            external_id="orm-1",
            kind="image",
            is_reference=True,
            prompt=prompt,
            model_name="sd\\1.5",
            condition="gender:women",
            seed=-(2**63),
            generation_settings={"steps": 30, "sampler": "k\\euler"},
            metadata={"tags": ["a", "b\tc"], "note_text": "spaced", "source": "web"},
            expert_only=True,
        ),
        Item.objects.create(
            study=study, external_id="orm-2", kind="image", is_reference=True, seed=2**63 - 1
        ),
    ]
    imported = list(Item.objects.filter(pk__in=report.item_ids).order_by("id"))
    assert [item.external_id for item in imported] == ["bulk-1", "bulk-2"]
    assert report.item_ids == [item.pk for item in imported]  # in the manifest's order
    skip = {"id", "external_id", "shuffle_key", "created_at"}
    for bulk, orm in zip(imported, made, strict=True):
        orm.refresh_from_db()
        for model_field in Item._meta.concrete_fields:
            assert isinstance(model_field, Field)
            if model_field.attname not in skip:
                name = model_field.attname
                assert getattr(bulk, name) == getattr(orm, name), name
        assert bulk.created_at is not None and 0 <= bulk.shuffle_key
    assert len({item.shuffle_key for item in imported}) == 2  # drawn per row, not once


def test_ids_follow_the_manifest_and_a_second_import_reports_every_row_as_duplicate(
    study: Study, tmp_path: Path
) -> None:
    manifest = write_manifest(tmp_path / "items.csv", good_rows())
    report = items_import(study=study, address=manifest)
    assert report.created == ROWS and report.references == ROWS
    stored = dict(Item.objects.filter(study=study).values_list("external_id", "id"))
    assert report.item_ids == [stored[f"r{n}"] for n in range(ROWS)]
    assert report.item_ids == sorted(report.item_ids)
    assert Item.objects.get(external_id="r4999").prompt == "a photo of person 4999"
    again = items_import(study=study, address=manifest)
    assert again.created == 0 and len(again.duplicates) == ROWS


def test_a_big_import_into_a_study_with_items_skips_the_ids_it_has(study: Study, tmp_path: Path) -> None:
    Item.objects.create(study=study, external_id="r4500", kind="image", is_reference=True)
    report = items_import(study=study, address=write_manifest(tmp_path / "items.csv", good_rows()))
    assert report.created == ROWS - 1
    assert report.duplicates == [{"external_id": "r4500", "reason": "already in the study"}]
    assert Item.objects.filter(study=study).count() == ROWS


@pytest.mark.parametrize(
    ("last_rows", "message"),
    [
        (
            ["late,a photo,base,not-a-number"],
            f"items.csv row {ROWS + 2}: seed 'not-a-number' is not an integer",
        ),
        (["r2,a photo,base,1"], f"items.csv row {ROWS + 2}: external_id 'r2' repeats items.csv row 4"),
        (["late,a photo,base,1,extra"], f"items.csv row {ROWS + 2}: more cells than header columns"),
        (["late,a photo\x00,base,1"], f"items.csv row {ROWS + 2}: column 'prompt' contains a null character"),
        (['late,"[1, NaN]",base,1'], f"items.csv row {ROWS + 2}: "),
    ],
)
def test_a_bad_row_after_thousands_of_good_ones_refuses_the_file_and_writes_nothing(
    study: Study, tmp_path: Path, last_rows: list[str], message: str
) -> None:
    manifest = write_manifest(tmp_path / "items.csv", good_rows() + last_rows)
    with pytest.raises(ImportRefused) as refused:
        items_import(study=study, address=manifest)
    assert refused.value.message.startswith(message), refused.value.message
    assert not Item.objects.filter(study=study).exists()


def test_with_several_bad_rows_the_refusal_is_the_one_the_checks_gave_in_turn(
    study: Study, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every row is read before any is checked against the others: a row that cannot be read beats
    an earlier row that is not an item, which beats an earlier repeated id."""
    rows = good_rows()
    rows[100] = "r1,a repeat,base,1"  # line 102: a repeated id (the later checks)
    rows[3000] = "bad-seed,a photo,base,x"  # line 3002: not an item (the row checks)
    manifest = write_manifest(tmp_path / "items.csv", rows)
    with pytest.raises(ImportRefused, match=r"^items.csv row 3002: seed 'x' is not an integer$"):
        items_import(study=study, address=manifest)
    rows[4500] = 'nan,"[NaN]",base,1'  # line 4502: a cell that cannot be read
    manifest = write_manifest(tmp_path / "items.csv", rows, header="external_id,tags,condition,seed")
    with pytest.raises(ImportRefused, match=r"^items.csv row 4502: .*NaN"):
        items_import(study=study, address=manifest)
    rows[4500] = good_rows()[4500]
    monkeypatch.setattr(item_import, "MAX_ROWS", ROWS - 1)  # too many rows beats a row that is not an item
    with pytest.raises(ImportRefused, match=rf"^more than {ROWS - 1} rows; split the import$"):
        items_import(study=study, address=write_manifest(tmp_path / "items.csv", rows))
    assert not Item.objects.filter(study=study).exists()


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        # blank lines are skipped; a row is named by its last line (csv.DictReader's numbering)
        ("external_id,seed\n\n\na,1\n\nb,x\n", "items.csv row 6: seed 'x' is not an integer"),
        ('external_id,prompt,seed\na,"two\nlines",x\n', "items.csv row 3: seed 'x' is not an integer"),
        ("external_id,seed\n\n\na,1,2\n", "items.csv row 4: more cells than header columns"),
        (
            'external_id,seed\na,1\n\nb,"' + "x" * 200_000 + '"\n',
            f"items.csv row 4: a cell is longer than {csv.field_size_limit()} characters",
        ),
    ],
)
def test_refusals_name_the_rows_as_before(study: Study, tmp_path: Path, manifest: str, message: str) -> None:
    path = tmp_path / "items.csv"
    path.write_text(manifest, encoding="utf-8")
    with pytest.raises(ImportRefused) as refused:
        items_import(study=study, address=path)
    assert refused.value.message == message
    assert not Item.objects.filter(study=study).exists()


def test_ids_added_by_someone_else_during_the_check_refuse_the_file_and_write_nothing(
    study: Study, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ids are looked up before the write transaction (SQLite's write lock stays short): an item
    added with one of them in between (a second import of the same file) breaks the unique
    constraint, which is refused with a message, not a database error, and nothing of the file stays."""
    from tests.factories import ItemFactory

    checked_files = item_import._files_report

    def someone_else_imports_first(*args: object, **kwargs: object) -> None:
        ItemFactory.create(study=study, external_id="r4000")
        checked_files(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(item_import, "_files_report", someone_else_imports_first)
    path = write_manifest(tmp_path / "items.csv", good_rows())
    with pytest.raises(ImportRefused, match="added to the study while the file was checked"):
        items_import(study=study, address=path)
    assert list(Item.objects.filter(study=study).values_list("external_id", flat=True)) == ["r4000"]
