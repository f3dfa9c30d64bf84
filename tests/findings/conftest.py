"""Fixtures of the findings tests: the demo study with its colour-rule labeller's answers."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from annotations.models import Study


@pytest.fixture
def demo_study(settings, tmp_path: Path, django_capture_on_commit_callbacks) -> Study:
    """The demo study with its colour-rule labeller's answers (so machine vs human has rows)."""
    settings.DATA_DIR = tmp_path
    with django_capture_on_commit_callbacks(execute=True):
        call_command("setup_demo", "--labellers", "colour", stdout=io.StringIO())
    return Study.objects.get()
