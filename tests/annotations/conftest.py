"""Fixtures shared by the annotation tests."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from annotations.models import Study, User
from tests.annotations.builders import HEADER, ratings, screen, seegull


@pytest.fixture
def visage_studies(owner: User, tmp_path) -> dict[str, Study]:
    attrs = ["hat", "poor", "cheerful", "tall"]
    text = (
        HEADER
        + screen("A0", "Xland1.png", "Xland", attrs, {"hat": "['1,1', '9,9']"})
        + screen("A0", "Xland1.png", "Xland", attrs)
        + screen("A0", "Xland1.png", "Xland", attrs, {"hat": "['1,1', '9,9']", "poor": "['2,2', '8,8']"})
        + screen(
            "A0",
            "Xland1.png",
            "Xland",
            ["sombrero", "poor", "cheerful", "tall"],
            {"sombrero": "['1,1', '5,5']"},
        )
    )
    (tmp_path / "a.csv").write_text(text)
    out = io.StringIO()
    call_command(
        "import_visage",
        "--annotations",
        str(tmp_path / "a.csv"),
        "--seegull",
        str(seegull(tmp_path / "s.csv")),
        "--visual-attributes",
        str(
            ratings(
                tmp_path / "r.xlsx",
                [("hat", 5, 4, 5), ("sombrero", 5, 5, 5), ("poor", 4, 4, 2), ("hat", 5, 4, 5)],
            )
        ),
        stdout=out,
    )
    ids = json.loads(out.getvalue())["studies"]
    return {key: Study.objects.get(pk=pk) for key, pk in ids.items()}
