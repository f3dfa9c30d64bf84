"""Submit-to-next-item wall time on the annotator's task page, in real headless Chromium.

Run (SQLite, a fresh database in a temporary folder; nothing else is touched):
    .venv/bin/python -m tests.benchmarks.bench_task_page
    .venv/bin/python -m tests.benchmarks.bench_task_page --items 30 --workers 2 --threads 4

The script migrates a temporary SQLite database, collects static files, makes a study (the test suite's
example protocol, overlap 1) of ``--items`` + 2 image items (800x600 PNGs, so the display image is real
work), one annotator, and starts gunicorn on 127.0.0.1 (gthread workers, the deploy configuration of
docs/deploy.md, scaled down). Playwright drives Debian's Chromium: sign in, open the first item, then
``--items`` times: wait until the page's own requests are over (a person looks at the item meanwhile),
answer it (two clicks; none of this is timed), and time from the click on Submit to the next item's page
being ready: its URL changed, DOMContentLoaded fired and its image drawn (``complete``, with a width).
It prints p50, p95 and max, where the time went (Navigation Timing), and the load average before and
after. Browser and server share the machine's cores, so the figures are for this machine under its load.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
PASSWORD = "bench password 42"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _png(colour: tuple[int, int, int]) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (800, 600), colour)
    ImageDraw.Draw(image).ellipse([200, 150, 600, 450], fill=(250, 250, 250))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _prepare(items: int) -> int:
    """Migrate, collect static files, and make the study; returns its id."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.files.base import ContentFile
    from django.core.management import call_command

    from annotations.models import Item, ItemImage, User
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import EXAMPLE_PROTOCOL

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    owner = User.objects.create_user(username="bench-owner", password=PASSWORD, role="researcher")
    study = study_create(
        owner=owner, name="Task page bench", protocol=load_protocol_text(EXAMPLE_PROTOCOL), overlap=1
    )
    for index in range(items + 2):  # one more than submitted, and the one leased ahead
        item = Item.objects.create(study=study, external_id=f"b{index}", kind="image", sha256=f"{index:064d}")
        image = ItemImage(
            item=item,
            position=0,
            width=800,
            height=600,
            content_type="image/png",
            sha256=f"{index:064d}",
            original_name=f"{index}.png",
        )
        colour = (40 + index * 7 % 200, 90, 160 - index * 5 % 150)
        image.file.save(f"b{index}.png", ContentFile(_png(colour)), save=False)
        image.save()
    annotator = User.objects.create_user(username="bench-ann", password=PASSWORD, role="annotator")
    enrollment_add(study=study, user=annotator)
    return int(study.pk)


def _start_server(port: int, workers: int, threads: int) -> subprocess.Popen[bytes]:
    from tests.benchmarks.bench_vs_labelstudio import gunicorn_flags, start_server

    command = [str(ROOT / ".venv/bin/gunicorn"), "workbench.wsgi", *gunicorn_flags(port, workers, threads)]
    return start_server(command, dict(os.environ), ROOT, port, "/healthz/")


# Where the time of one navigation went (Navigation Timing, ms from the click's navigation start): the
# POST answered with its redirect (redirectEnd), the next page's response (responseEnd), and its DOM ready.
# ``inpage``: from the click (the browser's clock, kept in sessionStorage across the navigation) to the
# later of DOMContentLoaded and the image's arrival (Resource Timing), without Playwright's own overhead.
MARK_CLICK = """() => document.getElementById('submit-button').addEventListener('click',
  () => sessionStorage.setItem('bench-click', String(performance.timeOrigin + performance.now())),
  {once: true})"""
NAVIGATION_PARTS = """() => { const n = performance.getEntriesByType('navigation')[0];
  const img = document.querySelector('.box-canvas img');
  const r = performance.getEntriesByName(img.src)[0];
  const ready = Math.max(n.domContentLoadedEventEnd, r ? r.responseEnd : 0);
  return {post: n.redirectEnd - n.startTime, page: n.responseEnd - n.fetchStart,
          dom: n.domContentLoadedEventEnd - n.responseEnd,
          inpage: performance.timeOrigin + ready - Number(sessionStorage.getItem('bench-click'))}; }"""


def _ready(page: Any, previous_url: str) -> None:
    """The next item's page: a new URL, DOMContentLoaded, and its image drawn."""
    page.wait_for_url(
        lambda url: url != previous_url and "/assignments/" in url, wait_until="domcontentloaded"
    )
    page.wait_for_function(
        "() => { const img = document.querySelector('.box-canvas img');"
        " return img && img.complete && img.naturalWidth > 0; }"
    )


def _drive(base: str, study_id: int, items: int) -> tuple[list[float], list[dict[str, float]]]:
    from playwright.sync_api import sync_playwright

    times: list[float] = []
    parts: list[dict[str, float]] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless=new", "--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base).new_page()
        page.set_default_timeout(30000)
        page.goto("/accounts/login/")
        page.get_by_label("Username").fill("bench-ann")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url("**/")
        page.goto(f"/annotate/studies/{study_id}/next/")
        _ready(page, "")
        for _index in range(items):
            # A person looks at the item for seconds: the page's own requests after load (the lease of
            # the next item ahead, its image) are over before they submit. Not timed.
            page.wait_for_load_state("networkidle")
            page.locator('input[name="q-gender"][value="female"]').check()
            page.locator('input[name="q-attributes"][value="hat"]').check()
            url = page.url
            page.evaluate(MARK_CLICK)
            started = time.perf_counter()
            page.locator("#submit-button").click()
            _ready(page, url)
            times.append(time.perf_counter() - started)
            parts.append(page.evaluate(NAVIGATION_PARTS))
        browser.close()
    return times, parts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=30, help="items submitted (timed)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    temp = tempfile.TemporaryDirectory(prefix="bench-task-page-")
    os.environ.pop("DATABASE_URL", None)  # always a temporary SQLite database
    os.environ.update(
        {
            "WORKBENCH_DATA_DIR": temp.name,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "DJANGO_DEBUG": "0",
        }
    )
    study_id = _prepare(args.items)
    port = _free_port()
    load_before = os.getloadavg()
    server = _start_server(port, args.workers, args.threads)
    try:
        times, parts = _drive(f"http://127.0.0.1:{port}", study_id, args.items)
    finally:
        server.terminate()
        server.wait(timeout=30)
        temp.cleanup()
    load_after = os.getloadavg()
    ms = [t * 1000 for t in times]
    machine = f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores"
    print(f"machine: {machine}, Python {platform.python_version()}")
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    print(f"load average after:  {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(f"server: gunicorn {args.workers} workers x {args.threads} threads, SQLite")
    print(
        f"submit-to-next-item over {len(ms)} submits (click -> next item's DOMContentLoaded and image drawn):"
    )
    print(
        f"  p50 {statistics.median(ms):.0f} ms  p95 {_percentile(ms, 95):.0f} ms  max {max(ms):.0f} ms"
        f"  mean {statistics.fmean(ms):.0f} ms"
    )
    inpage = [p["inpage"] for p in parts]
    print(
        f"  in the page (click to DOMContentLoaded and image received, browser clock): p50"
        f" {statistics.median(inpage):.0f} ms  p95 {_percentile(inpage, 95):.0f} ms"
    )
    for name, what in (
        ("post", "click to the POST's redirect received (submit + claim, server and network)"),
        ("page", "the next page's GET, request to last byte"),
        ("dom", "last byte to DOMContentLoaded"),
    ):
        print(f"  {what}: p50 {statistics.median(p[name] for p in parts):.0f} ms")


if __name__ == "__main__":
    main()
