"""Exports stream (issue 17): rows are read from the database a chunk at a time as the download goes,
never as a list of every annotation, and the response reaches the client in pieces of ~64 KiB."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.db import connection
from django.http import StreamingHttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotations.downloads import PIECE_CHARS, grouped
from annotations.interchange.exports import export_csv, export_jsonl
from annotations.models import Annotation, AnnotationRevision, Annotator, ConsensusLabel, Item, Study, User
from tests.helpers import streamed

pytestmark = pytest.mark.django_db


def _fill(study: Study, items: int, start: int = 0) -> None:
    """``items`` items answered by three people (a long reason each, so the export runs to many pieces),
    a revision on the first answer and a consensus label naming its support."""
    people = [Annotator.objects.get_or_create(kind="human", study=study, name=f"p{n}")[0] for n in range(3)]
    for n in range(start, start + items):
        item = Item.objects.create(study=study, external_id=f"item-{n}", kind="image", is_reference=True)
        answers = [
            Annotation.objects.create(
                study=study,
                item=item,
                annotator=person,
                question_key="smiling",
                value=n % 2,
                reason="why " * 500,
            )
            for person in people
        ]
        ConsensusLabel.objects.create(
            study=study,
            item=item,
            question_key="smiling",
            value=n % 2,
            rule="majority",
            support=[a.pk for a in answers],
        )
    first = Annotation.objects.filter(study=study).order_by("id").first()
    assert first is not None
    AnnotationRevision.objects.get_or_create(annotation=first, value=1 - first.value)


def _export_queries(study: Study, export: Any) -> int:
    with CaptureQueriesContext(connection) as queries:
        for _piece in export(study):
            pass
    return len(queries)


def test_the_export_pages_answer_with_the_service_s_lines_in_pieces(study: Study, owner: User) -> None:
    _fill(study, 40)
    client = Client()
    client.force_login(owner)
    for fmt, export in (("jsonl", export_jsonl), ("csv", export_csv)):
        response = client.get(f"/studies/{study.pk}/export/{fmt}/")
        assert isinstance(response, StreamingHttpResponse)
        pieces = list(streamed(response))
        expected = "".join(export(Study.objects.get(pk=study.pk)))  # as stored: jsonb orders keys
        assert b"".join(pieces).decode() == expected
        assert len(expected) > 3 * PIECE_CHARS
        assert 3 <= len(pieces) <= len(expected) // PIECE_CHARS + 1
        assert all(len(piece) < PIECE_CHARS + 4000 for piece in pieces)
    records = [json.loads(line) for line in export_jsonl(study)]
    first = next(r for r in records if r["type"] == "annotation")
    assert [r["value"] for r in first["revisions"]] == [1]
    label = next(r for r in records if r["type"] == "consensus")
    assert label["support"] == [["p0", "human", ""], ["p1", "human", ""], ["p2", "human", ""]]


def test_grouped_pieces_keep_every_line_in_order() -> None:
    lines = [f"line {n}\n" for n in range(10_000)]
    pieces = list(grouped(iter(lines), size=1000))
    assert b"".join(pieces).decode() == "".join(lines)
    assert len(pieces) == len("".join(lines)) // 1000 + 1
    assert list(grouped(iter([]))) == []


def test_exports_read_rows_lazily_with_no_query_per_row(study: Study) -> None:
    _fill(study, 5)
    # The header / study line comes before any annotation is read.
    for export in (export_jsonl, export_csv):
        lines = export(study)
        with CaptureQueriesContext(connection) as queries:
            next(lines)
        assert not any("annotations_annotation" in q["sql"] for q in queries.captured_queries)
    small = {export: _export_queries(study, export) for export in (export_jsonl, export_csv)}
    _fill(study, 25, start=5)  # six times the rows: the same statements (each reads a chunk of 2,000)
    assert {export: _export_queries(study, export) for export in (export_jsonl, export_csv)} == small


def test_consensus_pages_split_inside_an_item_lose_and_repeat_no_label(
    study: Study, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Consensus labels are read a page at a time by (item, question); with pages of 3 labels and two
    questions per item a page ends between an item's two labels, and the next page starts after it."""
    from annotations.interchange import exports

    _fill(study, 4)
    for item in Item.objects.filter(study=study):
        ConsensusLabel.objects.create(
            study=study, item=item, question_key="gender", value="female", rule="majority"
        )
    monkeypatch.setattr(exports, "CHUNK", 3)
    read = [
        (record["item"], record["question"])
        for record in map(json.loads, export_jsonl(study))
        if record["type"] == "consensus"
    ]
    stored = list(
        ConsensusLabel.objects.filter(study=study)
        .order_by("item_id", "question_key")
        .values_list("item__external_id", "question_key")
    )
    assert len(stored) == 8 and read == stored


@pytest.mark.parametrize("microsecond", [0, 120000, 7])
def test_annotation_timestamps_read_as_text_are_written_as_isoformat_writes_them(
    study: Study, microsecond: int
) -> None:
    """On PostgreSQL the export reads ``created_at``/``updated_at`` as text the database makes
    (``_IsoTimestamp``, not Django's Python loader); the lines must hold what ``isoformat()`` gives:
    no fraction at zero microseconds, all six digits otherwise (trailing zeros too), ``+00:00``."""
    import datetime as dt

    _fill(study, 1)
    stamp = dt.datetime(2026, 3, 4, 5, 6, 7, microsecond, tzinfo=dt.UTC)
    Annotation.objects.filter(study=study).update(created_at=stamp, updated_at=stamp + dt.timedelta(days=1))
    expected = (stamp.isoformat(), (stamp + dt.timedelta(days=1)).isoformat())
    assert (f".{microsecond:06d}" in expected[0]) == (microsecond != 0)
    lines = [json.loads(line) for line in "".join(export_jsonl(study)).splitlines()]
    annotations = [line for line in lines if line["type"] == "annotation"]
    assert len(annotations) == 3
    assert {(line["created_at"], line["updated_at"]) for line in annotations} == {expected}
    rows = list(csv.DictReader(io.StringIO("".join(export_csv(study)))))
    assert {(row["created_at"], row["updated_at"]) for row in rows} == {expected}


def test_a_consensus_support_naming_an_answer_of_another_item_is_still_named(
    study: Study, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Support ids are looked up among the answers of the page's items first, then by id: an id that
    is not an answer to an item of the page (an imported label, say) is named all the same."""
    from annotations.interchange import exports

    monkeypatch.setattr(exports, "CHUNK", 2)  # labels of items 0 and 1, then of item 2
    _fill(study, 3)
    first, last = ConsensusLabel.objects.filter(study=study).order_by("item_id")[::2]
    elsewhere = Annotation.objects.filter(item=last.item).order_by("id").first()
    assert elsewhere is not None
    first.support = [*first.support, elsewhere.pk]
    first.save()
    lines = [json.loads(line) for line in "".join(export_jsonl(study)).splitlines()]
    support = next(
        line["support"] for line in lines if line["type"] == "consensus" and line["item"] == "item-0"
    )
    assert support == [["p0", "human", ""], ["p1", "human", ""], ["p2", "human", ""], ["p0", "human", ""]]
