"""Fixtures every browser test shares: one live server and one headless Chromium per test module.

Every test under ``tests/browser/`` is marked ``browser`` and skipped when Debian's Chromium is
missing (``scripts/browser-deps.sh`` installs it). Helpers for pages live in ``tests/browser/pages.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.pages import ARGS, CHROMIUM


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    here = os.path.dirname(__file__)
    skip = pytest.mark.skip(reason=f"needs Debian's chromium at {CHROMIUM}")
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.browser)
            if not os.path.exists(CHROMIUM):
                item.add_marker(skip)


@pytest.fixture(scope="module")
def server(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Any]:
    from pytest_django.live_server_helper import LiveServer

    with django_db_blocker.unblock():
        live = LiveServer("127.0.0.1:0")
    yield live
    live.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()
