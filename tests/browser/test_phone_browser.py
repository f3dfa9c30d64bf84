"""The task page on a phone (390x844, touch, mobile emulation in headless Chromium), as an annotator
uses it: the image in view at load with the questions below it, a one-line top bar, no key hints on a
touch screen, one finger drawing the box of its gesture (touch sent through CDP's
``Input.dispatchTouchEvent``: Playwright's touchscreen only taps) without ever leaving the page, and
two fingers zooming and moving the view. The figures printed here are in docs/benchmarks.md ("The
task page on a phone"). Screenshots go to ``test-output/browser/`` (phone-*.png).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.pages import AXE, SHOTS, axe_violations, image_items, shot, sign_in

WIDTH, HEIGHT = 900, 1200  # a portrait original; the page shows its display copy
ATTRIBUTES = ["sombrero", "poncho", "moustache", "guitar", "cactus", "donkey"]  # two pages of options


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    from annotations.models import Item
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_preset
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(
        owner=owner, name="Phone study", protocol=load_preset("stereotype-markers"), overlap=1
    )
    image_items(study, [(40, 90, 160), (160, 60, 40)], (WIDTH, HEIGHT))
    Item.objects.filter(study=study).update(metadata={"attributes": ATTRIBUTES})
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    return {"study": study, "annotator": annotator}


def _phone(browser: Any, server: Any) -> Any:
    context = browser.new_context(
        viewport={"width": 390, "height": 844},
        base_url=server.url,
        has_touch=True,
        is_mobile=True,
        device_scale_factor=3,
    )
    page = context.new_page()
    page.set_default_timeout(10000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.js_errors = errors
    return page


def _open_task(page: Any, world: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    sign_in(page)
    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    page.wait_for_selector("#task-form")
    expect(page.locator(".box-canvas img").first).to_have_js_property("complete", True)
    page.wait_for_load_state("networkidle")  # the lease ahead adds Next: nothing may move after


def _visible_share(page: Any) -> float:
    """The share of the image's area inside the window as the page is now (not scrolled by the test)."""
    return float(
        page.evaluate(
            """() => {
              const r = document.querySelector('.box-canvas img').getBoundingClientRect();
              const w = Math.max(0, Math.min(r.right, innerWidth) - Math.max(r.left, 0));
              const h = Math.max(0, Math.min(r.bottom, innerHeight) - Math.max(r.top, 0));
              return (w * h) / (r.width * r.height);
            }"""
        )
    )


def _boxes(page: Any) -> list[dict[str, Any]]:
    return json.loads(page.locator('input[name="q-attribute_boxes"]').input_value())


def test_a_phone_shows_the_image_at_load_with_a_one_line_top_bar_and_no_key_hints(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = _phone(browser, server)
    _open_task(page, world)
    assert page.evaluate("matchMedia('(hover: none) and (pointer: coarse)').matches")  # a touch screen
    share = _visible_share(page)
    scrolled = page.evaluate("window.scrollY")
    bar = page.locator("header.topbar").bounding_box()
    rows = page.evaluate(
        """() => new Set(Array.from(document.querySelectorAll('header.topbar a, header.topbar button'))
            .filter(el => el.offsetParent !== null)
            .map(el => Math.round(el.getBoundingClientRect().top + el.getBoundingClientRect().height / 2)))
            .size"""
    )
    hints = page.evaluate(
        "() => Array.from(document.querySelectorAll('kbd')).filter(k => k.getClientRects().length).length"
    )
    question = page.locator("#question-attributes").bounding_box()
    image = page.locator(".box-canvas img").first.bounding_box()
    print(
        f"\nphone 390x844 at load: {share:.1%} of the image visible (page scrolled {scrolled:.0f} px); "
        f"image {image['width']:.0f}x{image['height']:.0f} px at y={image['y']:.0f}; "
        f"top bar {bar['height']:.0f} px on {rows} line(s); key hints shown: {hints}"
    )
    SHOTS.mkdir(parents=True, exist_ok=True)  # the window as the phone shows it (a full-page shot resizes it)
    page.screenshot(path=str(SHOTS / "phone-01-task-at-load-390.png"))
    assert share == pytest.approx(1.0, abs=1e-6)
    assert scrolled == 0
    assert question["y"] >= image["y"] + image["height"]  # the questions come below the image
    assert rows == 1 and bar["height"] <= 48
    assert page.evaluate(
        "() => { const nav = document.querySelector('header.topbar nav'); "
        "return nav.scrollWidth <= nav.clientWidth; }"
    )  # all of it on the screen
    assert hints == 0
    assert page.get_by_role("button", name="Keyboard keys (?)").is_hidden()
    assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
    if AXE.exists():
        assert axe_violations(page) == []
    assert page.js_errors == []


def _touch(cdp: Any, kind: str, points: list[tuple[float, float]]) -> None:
    cdp.send(
        "Input.dispatchTouchEvent",
        {
            "type": kind,
            "touchPoints": []
            if kind == "touchEnd"
            else [{"x": x, "y": y, "id": i} for i, (x, y) in enumerate(points)],
        },
    )


def _frames(page: Any) -> None:
    """Wait two animation frames: Chromium hands touch moves to the page aligned with frames."""
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def test_one_finger_draws_the_box_of_its_gesture_and_two_fingers_zoom_and_pan(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = _phone(browser, server)
    _open_task(page, world)
    url = page.url
    page.locator("#question-attributes").get_by_label("sombrero").tap()
    page.get_by_label("New boxes support").select_option("sombrero")
    page.evaluate("window.scrollTo(0, 0)")
    image = page.locator(".box-canvas img").first.bounding_box()
    cdp = page.context.new_cdp_session(page)
    gesture = (240.0, 370.0)
    x0, y0 = image["x"] + 40, image["y"] + 30
    assert x0 + gesture[0] <= image["x"] + image["width"] and y0 + gesture[1] <= image["y"] + image["height"]
    _touch(cdp, "touchStart", [(x0, y0)])
    for step in range(1, 13):
        _touch(cdp, "touchMove", [(x0 + gesture[0] * step / 12, y0 + gesture[1] * step / 12)])
    _touch(cdp, "touchEnd", [])
    page.wait_for_timeout(500)
    drawn = _boxes(page)
    per = WIDTH / image["width"]  # original pixels per screen pixel
    expected = (gesture[0] * per, gesture[1] * per)
    got = (drawn[0]["w"], drawn[0]["h"]) if drawn else (0, 0)
    print(
        f"\none finger, {gesture[0]:.0f}x{gesture[1]:.0f} px gesture on the image shown at "
        f"{image['width']:.0f}x{image['height']:.0f}: box {got[0]}x{got[1]} original px, expected "
        f"{expected[0]:.0f}x{expected[1]:.0f} ({got[0] / expected[0]:.1%} x {got[1] / expected[1]:.1%}); "
        f"URL unchanged: {page.url == url}"
    )
    assert page.url == url
    assert len(drawn) == 1 and drawn[0]["option"] == "sombrero"
    assert got[0] == pytest.approx(expected[0], rel=0.05) and got[1] == pytest.approx(expected[1], rel=0.05)
    assert drawn[0]["x"] == pytest.approx(40 * per, abs=2 * per)
    assert drawn[0]["y"] == pytest.approx(30 * per, abs=2 * per)
    # a sideways swipe from the screen's left edge draws too: no history navigation, no page scroll
    _touch(cdp, "touchStart", [(image["x"] + 2, image["y"] + 420)])
    for step in range(1, 9):
        _touch(cdp, "touchMove", [(image["x"] + 2 + 30 * step, image["y"] + 420 + 5 * step)])
    _touch(cdp, "touchEnd", [])
    page.wait_for_timeout(500)
    assert page.url == url and len(_boxes(page)) == 2
    assert page.evaluate("window.scrollY") == 0
    shot(page, "phone-02-boxes-drawn-390")

    # two fingers: spread to zoom about their middle, then move together to pan; no box is drawn
    view = page.locator(".canvas-viewport").first
    box = view.bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    _touch(cdp, "touchStart", [(cx - 30, cy), (cx + 30, cy)])
    for spread in (45, 60, 75, 90):
        _touch(cdp, "touchMove", [(cx - spread, cy), (cx + spread, cy)])
    _frames(page)
    level = page.locator("#zoom-level").inner_text()
    before = view.evaluate("el => [el.scrollLeft, el.scrollTop]")
    for shift in (10, 20, 30, 40):
        _touch(cdp, "touchMove", [(cx - 90 - shift, cy - shift), (cx + 90 - shift, cy - shift)])
    _frames(page)
    _touch(cdp, "touchEnd", [])
    after = view.evaluate("el => [el.scrollLeft, el.scrollTop]")
    print(f"two fingers: zoom {level}, view moved by {after[0] - before[0]}, {after[1] - before[1]} px")
    assert level.startswith("×") and 2.5 <= float(level[1:]) <= 3.5, level
    assert after[0] - before[0] == pytest.approx(40, abs=3) and after[1] - before[1] == pytest.approx(
        40, abs=3
    )
    assert len(_boxes(page)) == 2 and page.url == url
    assert page.js_errors == []
