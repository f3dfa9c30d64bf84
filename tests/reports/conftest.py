"""Fixtures of the report tests: studies imported through ``import_visage`` from small ViSAGe-shaped
files (tests/annotations/builders.py); the demo study is tests/conftest.py's."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command

from annotations.models import Study, User
from tests.annotations.builders import visage_files


@pytest.fixture
def visage_import(owner: User, tmp_path: Path) -> Callable[[], dict[str, Study]]:
    """Import the ViSAGe-shaped files once more; the studies made, by protocol."""

    def run() -> dict[str, Study]:
        out = io.StringIO()
        call_command("import_visage", *visage_files(tmp_path), "--owner", owner.username, stdout=out)
        ids = json.loads(out.getvalue())["studies"]
        return {key: Study.objects.get(pk=pk) for key, pk in ids.items()}

    return run
