"""Exports stream (issue 17): rows are read from the database a chunk at a time as the download goes,
never as a list of every annotation, and the response reaches the client in pieces of ~64 KiB."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.http import StreamingHttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotations.downloads import PIECE_CHARS, grouped
from annotations.models import Annotation, AnnotationRevision, Annotator, ConsensusLabel, Item, Study, User
from annotations.services.exports import export_csv, export_jsonl
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
    from annotations.services import exports

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
