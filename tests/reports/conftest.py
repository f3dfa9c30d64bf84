"""Fixtures of the report tests: the demo study (with its colour-rule labeller) and studies imported
through ``import_visage`` from small ViSAGe-shaped files (tests/annotations/builders.py)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command

from annotations.models import Study, User
from tests.annotations.builders import HEADER, ratings, screen, seegull


@pytest.fixture
def demo_study(settings, tmp_path: Path, django_capture_on_commit_callbacks) -> Study:
    """The demo study with its colour-rule labeller's answers (so machine vs human has rows)."""
    settings.DATA_DIR = tmp_path
    with django_capture_on_commit_callbacks(execute=True):
        call_command("setup_demo", "--labellers", "colour", stdout=io.StringIO())
    return Study.objects.get()


def _visage_files(folder: Path) -> list[str]:
    attrs = ["hat", "poor", "cheerful", "tall"]
    text = HEADER
    for worker, image in (
        ("A0", "Xland1.png"),
        ("A1", "Xland1.png"),
        ("A2", "Xland2.png"),
        ("A3", "Xland2.png"),
    ):
        text += screen(worker, image, "Xland", attrs, {"hat": "['1,1', '9,9']"} if worker != "A1" else {})
        text += screen(
            worker, image, "Xland", ["sombrero", "poor", "cheerful", "tall"], {"poor": "['2,2', '8,8']"}
        )
    (folder / "a.csv").write_text(text)
    visual = ratings(
        folder / "r.xlsx", [("hat", 5, 4, 5), ("sombrero", 5, 5, 5), ("poor", 4, 4, 2), ("tall", 2, 2, 2)]
    )
    return [
        "--annotations",
        str(folder / "a.csv"),
        "--seegull",
        str(seegull(folder / "s.csv")),
        "--visual-attributes",
        str(visual),
    ]


@pytest.fixture
def visage_import(owner: User, tmp_path: Path) -> Callable[[], dict[str, Study]]:
    """Import the ViSAGe-shaped files once more; the studies made, by protocol."""

    def run() -> dict[str, Study]:
        out = io.StringIO()
        call_command("import_visage", *_visage_files(tmp_path), "--owner", owner.username, stdout=out)
        ids = json.loads(out.getvalue())["studies"]
        return {key: Study.objects.get(pk=pk) for key, pk in ids.items()}

    return run
