"""The WSGI module a server imports: the app loads without torch or crowd-kit, and the objects loaded
at start-up are frozen out of the garbage collector's reach (workbench/wsgi.py explains the latency
this removes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import gc, sys
import workbench.wsgi
heavy = {"torch", "diffusers", "transformers", "crowdkit", "pandas"}
print(gc.get_freeze_count(), callable(workbench.wsgi.application),
      ",".join(sorted(heavy & set(sys.modules))) or "-")
"""


def test_importing_the_wsgi_module_freezes_the_start_up_objects() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "workbench.settings"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    frozen, app, heavy = int(out[0]), out[1], out[2]
    # Django, DRF and the libraries the views import: hundreds of thousands of objects, none scanned again
    assert frozen > 100_000 and app == "True"
    # Model and Dawid-Skene libraries load where they run (jobs, consensus), not in every web worker
    assert heavy == "-"
