"""Server time of the new-study page (``GET /studies/new/``), in process through Django's test client.

Run (a fresh SQLite test database in a temporary folder; nothing else is touched):
    .venv/bin/python -m tests.benchmarks.bench_new_study_page
    .venv/bin/python -m tests.benchmarks.bench_new_study_page --requests 100

It signs a researcher in, imports every view (as ``workbench/wsgi.py`` does when a worker starts; timed
apart), then times the page's first request in this fresh process ("cold": template compilation, the
presets' first reading) and ``--requests`` more ("warm"): median, min and max, and the queries of one
warm request. Results: docs/benchmarks.md, "The new-study page".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    folder = tempfile.TemporaryDirectory()
    os.environ.setdefault("WORKBENCH_DATA_DIR", folder.name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import (
        CaptureQueriesContext,
        setup_databases,
        setup_test_environment,
        teardown_databases,
    )
    from django.urls import get_resolver

    from annotations.models import User

    setup_test_environment()
    databases = setup_databases(verbosity=0, interactive=False)
    try:
        user = User.objects.create_user(username="bench", password="bench password 42", role="researcher")
        client = Client()
        client.force_login(user)
        start = time.perf_counter()
        get_resolver().url_patterns  # noqa: B018 - every view imported, as workbench/wsgi.py does at start-up
        startup = time.perf_counter() - start
        start = time.perf_counter()
        answer = client.get("/studies/new/")
        cold = time.perf_counter() - start
        assert answer.status_code == 200, answer.status_code
        times = []
        for _ in range(args.requests):
            start = time.perf_counter()
            client.get("/studies/new/")
            times.append(time.perf_counter() - start)
        with CaptureQueriesContext(connection) as queries:
            client.get("/studies/new/")
        print(
            f"views imported in {startup * 1000:.0f} ms; GET /studies/new/: first {cold * 1000:.0f} ms; "
            f"next {args.requests}: median "
            f"{statistics.median(times) * 1000:.1f} ms, min {min(times) * 1000:.1f}, "
            f"max {max(times) * 1000:.1f}; "
            f"{len(queries.captured_queries)} queries, {len(answer.content):,} bytes; load average "
            f"{os.getloadavg()[0]:.1f}"
        )
    finally:
        teardown_databases(databases, verbosity=0)
        folder.cleanup()


if __name__ == "__main__":
    main()
