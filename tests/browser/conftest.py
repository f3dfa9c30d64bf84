"""Fixtures every browser test shares: one live server and one headless Chromium per test module.

Every test under ``tests/browser/`` is marked ``browser`` and skipped when Debian's Chromium is
missing (``scripts/browser-deps.sh`` installs it). Helpers for pages live in ``tests/browser/pages.py``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Iterator[None]:
    """After each browser test, before its fixtures are torn down: wait until its pages have no
    request in flight, then close them. A page asks for work in the background after it shows (the
    next item leased ahead, its image prefetched) and as it is left (a draft); a request still
    running in the live server while the test's tables are truncated deadlocked PostgreSQL's TRUNCATE."""
    yield
    browser = item.funcargs.get("browser")
    if browser is None:
        return
    for context in list(browser.contexts):
        for page in context.pages:
            with contextlib.suppress(Exception):  # a page that failed or is gone: close it anyway
                page.wait_for_load_state("networkidle", timeout=10000)
            with contextlib.suppress(Exception):
                _leave(page)
        context.close()
    _requests_finish()


def _requests_finish(timeout: float = 10.0) -> None:
    """Wait (up to ``timeout`` s) until the live server answers no request: one the browser gave up on
    as its context closed still runs its queries in a server thread, and the test's TRUNCATE then
    deadlocks with it on PostgreSQL."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(
        "process_request_thread" in thread.name for thread in threading.enumerate()
    ):
        time.sleep(0.05)


def _leave(page: Any) -> None:
    """What a page sends as it is left (the task page's draft, static/js/flow.js) goes now and is
    waited for (up to 10 s), not while its context closes."""
    flying: set[Any] = set()
    page.on("request", flying.add)
    page.on("requestfinished", flying.discard)
    page.on("requestfailed", flying.discard)
    page.evaluate("() => window.dispatchEvent(new Event('pagehide'))")
    for _wait in range(200):
        if not flying:
            break
        page.wait_for_timeout(50)


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


@pytest.fixture
def demo(transactional_db: None, settings: Any, tmp_path: Any) -> Any:
    """The demo study (``setup_demo``'s), every demo account's password set to the tests' one. A module
    that needs more around the demo (the accessibility walk) defines its own ``demo``."""
    from tests.browser.pages import demo_study_with_passwords

    return demo_study_with_passwords(settings, tmp_path)
