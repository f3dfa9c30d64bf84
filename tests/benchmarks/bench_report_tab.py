"""The Report tab's time to first byte on the demo study, and its preview's (loaded after the page).

Run (on the demo study of a data folder; made there first when it has none):
    export WORKBENCH_DATA_DIR=/tmp/wb-helper-d HF_HUB_OFFLINE=1
    .venv/bin/python manage.py migrate -v0
    .venv/bin/python manage.py setup_demo --labellers colour
    .venv/bin/python -m tests.benchmarks.bench_report_tab
    .venv/bin/python -m tests.benchmarks.bench_report_tab --runs 9

Signed in as the demo researcher through Django's test ``Client`` (no network, no static files), it
GETs ``/studies/<pk>/report/`` ``--runs`` times (default 5) and prints each time and the median: the
view answers a whole ``HttpResponse``, so the time to the response is its time to first byte. The
preview's own URL (``/studies/<pk>/report/preview/``), which the page fetches after it shows, is
timed the same way where the URL exists.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _timed(client: object, url: str, runs: int) -> list[float]:
    times = []
    for _run in range(runs):
        start = time.perf_counter()
        response = client.get(url)  # type: ignore[attr-defined]
        elapsed = time.perf_counter() - start
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
        times.append(elapsed * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client
    from django.urls import NoReverseMatch, reverse

    from annotations.models import Study, User

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    study = Study.objects.order_by("pk").first()
    if study is None:
        call_command("migrate", verbosity=0)
        call_command("setup_demo", "--labellers", "colour", stdout=io.StringIO())
        study = Study.objects.order_by("pk").first()
    assert study is not None
    researcher = User.objects.get(username="researcher")
    client = Client()
    client.force_login(researcher)
    print(f"study {study.pk} ({study.name}), data folder {settings.DATA_DIR}, {args.runs} runs")
    urls = [("tab", reverse("study-report", args=[study.pk]))]
    try:
        urls.append(("preview", reverse("study-report-preview", args=[study.pk])))
    except NoReverseMatch:
        pass  # before the preview had its own URL: the tab renders it
    for label, url in urls:
        times = _timed(client, url, args.runs)
        shown = ", ".join(f"{t:.0f}" for t in times)
        print(f"{label:8} {url}: median {statistics.median(times):.0f} ms to first byte ({shown} ms)")


if __name__ == "__main__":
    main()
