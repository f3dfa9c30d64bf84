"""Compare's "Labels from" is a select of the label sources of the researcher's studies, and a source
typed into the URL that is none of them is a form error, not a 500 (Issue 16, point 2)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.models import Study, User
from tests.factories import ItemFactory, StudyFactory

pytestmark = pytest.mark.django_db


def _answers(study: Study, lines: list[tuple[str, str, str]]) -> None:
    ItemFactory.create(study=study, external_id="i1")
    records = [
        {"item": "i1", "annotator": who, "annotator_kind": kind, "question": "gender", "value": value}
        for who, kind, value in lines
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))


@pytest.fixture
def studies(owner: User, other_researcher: User) -> tuple[Study, Study]:
    mine = StudyFactory.create(owner=owner, name="Mine")
    _answers(mine, [("r1", "human", "male"), ("bot", "machine", "female")])
    theirs = StudyFactory.create(owner=other_researcher, name="Theirs")
    _answers(theirs, [("r1", "human", "male"), ("spy", "machine", "male")])
    return mine, theirs


def _source_options(page: str) -> list[str]:
    select = re.search(r'<select id="source-1" name="source">(.*?)</select>', page, re.S)
    assert select is not None
    return re.findall(r'<option value="([^"]*)"', select.group(1))


def test_labels_from_offers_the_sources_of_the_researchers_studies_only(
    studies: tuple[Study, Study], owner: User
) -> None:
    client = Client()
    client.force_login(owner)
    page = client.get("/compare/").content.decode()
    assert _source_options(page) == ["consensus", "bot"]  # not spy: another researcher's study
    assert "Machine labeller: bot" in page and "People: consensus" in page
    assert 'list="compare-sources"' not in page


def test_a_known_source_compares_and_stays_selected(studies: tuple[Study, Study], owner: User) -> None:
    mine, _theirs = studies
    client = Client()
    client.force_login(owner)
    response = client.get(f"/compare/?study={mine.pk}&study={mine.pk}&source=consensus&source=bot")
    assert response.status_code == 200
    page = response.content.decode()
    second = re.search(r'<select id="source-2" name="source">(.*?)</select>', page, re.S)
    assert second is not None and '<option value="bot" selected>' in second.group(1)


@pytest.mark.parametrize("source", ["spy", "<b>nobody</b>"])
def test_an_unknown_source_is_a_form_error(studies: tuple[Study, Study], owner: User, source: str) -> None:
    mine, _theirs = studies
    client = Client()
    client.force_login(owner)
    query: dict[str, list[str]] = {"study": [str(mine.pk)] * 2, "source": ["consensus", source]}
    response = client.get("/compare/", query)
    assert response.status_code == 400
    page = response.content.decode()
    assert "Labels from, side B:" in page and "is not a label source of your studies" in page
    assert "<b>nobody" not in page  # escaped
    assert _source_options(page) == ["consensus", "bot"]  # the form is shown again
