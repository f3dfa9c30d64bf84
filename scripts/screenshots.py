#!/usr/bin/env python3
"""Screenshots of the workbench's main pages for the README, into docs/screenshots/.

Starts the workbench on a temporary SQLite database with the demo study (``manage.py migrate`` and
``manage.py setup_demo``, no labeller queued), serves it with gunicorn on a free port, signs in as
the demo annotator, researcher and admin in headless Chromium (Playwright, /usr/bin/chromium) and
saves one 1280x800 PNG per page (each kept under ~200 KB: a larger one is reduced to 256 colours).
Nothing outside the temporary folder and docs/screenshots/ is touched.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"
MAX_BYTES = 200 * 1024
VIEWPORT = {"width": 1280, "height": 800}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([str(PYTHON), "manage.py", *args], cwd=ROOT, env=env, check=True)


def _wait(url: str, process: subprocess.Popen[bytes], seconds: int = 60) -> None:
    for _ in range(seconds * 2):
        if process.poll() is not None:
            raise SystemExit(f"the server stopped (exit {process.returncode})")
        try:
            urllib.request.urlopen(url, timeout=2)  # our own local server
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url} did not answer in {seconds} s")


def _save(png: bytes, path: Path) -> None:
    """The PNG as taken, or reduced to 256 colours when it is over MAX_BYTES."""
    if len(png) > MAX_BYTES:
        image = (
            Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        )
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=True)
        png = buffer.getvalue()
    path.write_bytes(png)
    print(f"  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({len(png) // 1024} KB)")


class Shooter:
    def __init__(self, browser: Any, base: str, out: Path, accounts: dict[str, str]) -> None:
        self.browser, self.base, self.out, self.accounts = browser, base, out, accounts

    def signed_in(self, username: str) -> Any:
        context = self.browser.new_context(viewport=VIEWPORT, base_url=self.base)
        page = context.new_page()
        page.set_default_timeout(20000)
        page.goto("/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", self.accounts[username])
        page.click("button[type=submit]")
        page.wait_for_load_state()
        return page

    def shot(self, page: Any, name: str, url: str | None = None) -> None:
        if url is not None:
            page.goto(url)
        page.wait_for_load_state("networkidle")
        _save(page.screenshot(full_page=False), self.out / f"{name}.png")


def _first_link(page: Any, selector: str) -> str | None:
    link = page.locator(selector).first
    return str(link.get_attribute("href")) if link.count() else None


def take(shooter: Shooter, study: int) -> None:
    annotator = shooter.signed_in("annotator1")
    shooter.shot(annotator, "annotator-dashboard", "/annotate/")
    shooter.shot(annotator, "task-page", f"/annotate/studies/{study}/next/")
    shooter.shot(annotator, "your-answers", f"/annotate/studies/{study}/mine/")

    researcher = shooter.signed_in("researcher")
    shooter.shot(researcher, "studies", "/")
    shooter.shot(researcher, "study-page", f"/studies/{study}/")
    shooter.shot(researcher, "create-study", "/studies/new/")
    shooter.shot(researcher, "items-grid", f"/studies/{study}/items/")
    shooter.shot(researcher, "agreement", f"/studies/{study}/agreement/?resamples=200")
    shooter.shot(researcher, "adjudication-queue", f"/studies/{study}/adjudicate/")
    item = _first_link(researcher, f"a[href^='/studies/{study}/adjudicate/']")
    if item:
        shooter.shot(researcher, "adjudication-item", item)
    shooter.shot(researcher, "findings", f"/studies/{study}/findings/")
    shooter.shot(researcher, "report", f"/studies/{study}/report/")
    researcher.goto(f"/compare/?study={study}")
    conditions = researcher.locator("#compare-conditions option").evaluate_all(
        "(os) => os.map((o) => o.value)"
    )
    query = f"study={study}&study={study}"
    if len(conditions) >= 2:  # one study, two of its conditions side by side
        query += f"&condition={conditions[0]}&condition={conditions[1]}"
    shooter.shot(researcher, "compare", f"/compare/?{query}")
    shooter.shot(researcher, "invitations", f"/studies/{study}/invitations/")
    shooter.shot(researcher, "generation", f"/studies/{study}/generation/")

    admin = shooter.signed_in("admin")
    shooter.shot(admin, "admin", "/admin/")
    shooter.shot(admin, "admin-users", "/admin/annotations/user/")
    shooter.shot(admin, "labellers", "/labellers/")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    options = parser.parse_args()
    from playwright.sync_api import sync_playwright

    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="workbench-shots-") as data:
        env = {
            **os.environ,
            "WORKBENCH_DATA_DIR": data,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "DJANGO_DEBUG": "false",
        }
        for name in ("DATABASE_URL", "CELERY_BROKER_URL"):
            env.pop(name, None)  # the embedded SQLite defaults, inside the temporary folder
        print("Preparing a database with the demo study ...")
        _manage(env, "migrate", "--noinput", "-v0")
        _manage(env, "setup_demo", "--labellers", "", "--no-accounts")
        accounts: dict[str, str] = json.loads((Path(data) / "demo-accounts.json").read_text())
        port = _free_port()
        server = subprocess.Popen(
            [
                str(GUNICORN),
                "workbench.wsgi",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "1",
                "--threads",
                "4",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait(f"{base}/healthz/", server)
            print(f"Screenshots into {options.out}:")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=options.chromium,
                    args=["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
                )
                try:
                    take(Shooter(browser, base, options.out, accounts), study=1)
                finally:
                    browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
