"""What browser tests do to a page: open one with JS errors collected, sign in, screenshot, and
find controls a screen reader could not name. Screenshots go to ``test-output/browser/``."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "browser"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
PASSWORD = "correct horse battery"


def png(size: tuple[int, int], colour: tuple[int, int, int]) -> bytes:
    image = Image.new("RGB", size, colour)
    ImageDraw.Draw(image).rectangle(
        [size[0] // 4, size[1] // 4, size[0] // 2, size[1] // 2], fill=(250, 250, 250)
    )
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def image_items(study: Any, colours: list[tuple[int, int, int]], size: tuple[int, int]) -> None:
    """One image item per colour in ``study`` (``img-0``, ``img-1``, ...), each with a stored PNG of ``size``
    (a plain background and a white square), as an import would leave them."""
    from django.core.files.base import ContentFile

    from annotations.models import Item, ItemImage

    for index, colour in enumerate(colours):
        item = Item.objects.create(
            study=study, external_id=f"img-{index}", kind="image", sha256=f"{index:064d}"
        )
        image = ItemImage(
            item=item,
            position=0,
            width=size[0],
            height=size[1],
            content_type="image/png",
            sha256=f"{index:064d}",
            original_name=f"{index}.png",
        )
        image.file.save(f"{index}.png", ContentFile(png(size, colour)), save=False)
        image.save()


def open_page(browser: Any, server: Any, width: int = 1280, height: int = 800) -> Any:
    context = browser.new_context(viewport={"width": width, "height": height}, base_url=server.url)
    page = context.new_page()
    page.set_default_timeout(10000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    # The favicon is missing and a refused submit answers 400 on purpose; any other error counts.
    page.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error"
            and "favicon" not in str(message.location.get("url", ""))
            and "status of 400" not in message.text
            else None
        ),
    )
    page.js_errors = errors
    return page


def sign_in(page: Any, username: str = "ann") -> None:
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/")


def shot(page: Any, name: str) -> None:
    from playwright.sync_api import expect

    # A lazy image loads only near the viewport: the full-page shot wants every one, so load them now.
    page.evaluate("document.querySelectorAll('img[loading=lazy]').forEach(img => { img.loading = 'eager'; })")
    for image in page.locator("img").all():  # wait until every image is drawn
        expect(image).to_have_js_property("complete", True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def unlabelled_inputs(page: Any) -> list[str]:
    """Form controls a screen reader could not name (no label, aria-label or aria-labelledby)."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('input, select, textarea, button'))
        .filter(el => el.type !== 'hidden' && !el.closest('[hidden]'))
        .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                      && !el.getAttribute('aria-labelledby')
                      && !(el.tagName === 'BUTTON' && el.textContent.trim()))
        .map(el => el.outerHTML.slice(0, 80))""")


AXE = Path(__file__).resolve().parents[2] / "var" / "axe" / "node_modules" / "axe-core" / "axe.min.js"


def axe_violations(page: Any) -> list[str]:
    """axe-core's violations on the page as it is now (every rule axe runs by default, WCAG 2.x A and
    AA and best practice), one line each: rule, impact, the first few elements. ``AXE`` is installed by
    ``scripts/browser-deps.sh`` (npm, pinned); the caller skips when it is missing."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE.read_text() + "\n;undefined")  # through the debugger: no CSP applies
    found = page.evaluate(
        """async () => {
          const result = await axe.run(document, {resultTypes: ["violations"]});
          return result.violations.map(
            v => [v.id, v.impact, v.nodes.slice(0, 3).map(n => n.target.join(" "))]
          );
        }"""
    )
    return [f"{rule} ({impact}): {', '.join(targets)}" for rule, impact, targets in found]


def demo_study_with_passwords(settings: Any, tmp_path: Any) -> Any:
    """The demo study (``setup_demo``'s) in ``tmp_path``, every demo account's password set to the
    tests' one (the ``demo`` fixtures of tests/browser/conftest.py and the accessibility walk)."""
    from annotations.models import User
    from workbench.demo import demo_accounts_ensure, demo_study_ensure

    settings.DATA_DIR = tmp_path
    demo_accounts_ensure()
    study, _ = demo_study_ensure()
    for user in User.objects.all():
        user.set_password(PASSWORD)
        user.save()
    return study
