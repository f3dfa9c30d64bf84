"""The task page's canvas tools and server drafts in headless Chromium, as an annotator uses them:
Space pans over the image only when no form control has focus, Shift + drag draws a box inside
another, multi-level undo and redo, the region list (hide, lock) by keyboard, two-finger pinch-zoom
on a touch screen, and a draft kept on the server restored in a second browser (and sent when back
online). Screenshots go to ``test-output/browser/``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.canvas_world import build_world, drag, image_box, open_task, stored_boxes
from tests.browser.pages import AXE, axe_violations, open_page, shot, sign_in

PROTOCOL = """
name: Canvas tools
unit: image
questions:
  - key: person
    kind: single
    prompt: Is there a person in the image?
    options: ["yes", "no"]
  - key: attributes
    kind: multi
    prompt: Which attributes are visible?
    options: [hat, glasses, scarf]
    none_option: None of the above
  - key: boxes
    kind: boxes
    prompt: Draw a box around each selected attribute.
    linked_question: attributes
    required: false
  - key: colour
    kind: text
    prompt: Main colour of the clothing?
    normaliser: colour
  - key: clear
    kind: likert
    prompt: The image is clear.
    options: [Strongly agree, Agree, Disagree, Strongly disagree]
    unsure: Unsure
"""


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    return build_world(PROTOCOL, "Tools study")


def _ready_to_draw(page: Any, option: str = "hat") -> dict[str, float]:
    page.locator("#question-attributes").get_by_label(option).check()
    page.get_by_label("New boxes support").select_option(option)
    return image_box(page)


def test_space_ticks_a_focused_checkbox_over_the_image_and_pans_otherwise(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = open_page(browser, server)
    open_task(page, world)
    image = image_box(page)
    page.mouse.move(
        image["x"] + image["width"] / 2, image["y"] + image["height"] / 2
    )  # the pointer rests here
    scarf = page.locator("#question-attributes").get_by_label("scarf")
    scarf.focus()
    page.keyboard.press(" ")
    assert scarf.is_checked()  # the focused checkbox took Space
    assert "panning" not in (page.locator(".box-canvas").first.get_attribute("class") or "")
    page.keyboard.press(" ")
    assert not scarf.is_checked()
    # nothing focused: Space held over the image pans (the image shows the grab cursor)
    page.evaluate("document.activeElement.blur()")
    page.keyboard.down(" ")
    assert "panning" in page.locator(".box-canvas").first.get_attribute("class")
    page.keyboard.up(" ")
    assert "panning" not in page.locator(".box-canvas").first.get_attribute("class")
    assert page.evaluate("window.scrollY") == 0  # Space did not scroll the page either
    assert page.js_errors == []


def test_shift_drag_draws_inside_a_box_and_undo_redo_go_many_steps(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = open_page(browser, server)
    open_task(page, world)
    image = _ready_to_draw(page)
    x, y = image["x"] + 0.1 * image["width"], image["y"] + 0.2 * image["height"]
    drag(page, (x, y), (x + 300, y + 200))
    (big,) = stored_boxes(page)
    # a plain drag inside the box moves it
    drag(page, (x + 100, y + 100), (x + 120, y + 110))
    (moved,) = stored_boxes(page)
    assert moved["x"] > big["x"] and moved["w"] == big["w"]
    # Shift + drag inside it draws a new box there
    page.keyboard.down("Shift")
    drag(page, (x + 140, y + 120), (x + 200, y + 170))
    page.keyboard.up("Shift")
    boxes = stored_boxes(page)
    assert len(boxes) == 2 and boxes[0] == moved
    assert boxes[1]["w"] < moved["w"] / 2
    # the option of the new box changes (a change to undo too)
    page.locator("#question-attributes").get_by_label("glasses").check()
    page.get_by_label("Option of box 2").select_option("glasses")
    assert stored_boxes(page)[1]["option"] == "glasses"
    # undo, step by step: the option, the new box, the move, the first box; then redo them
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Control+z")
    assert stored_boxes(page)[1]["option"] == "hat"
    page.keyboard.press("Control+z")
    assert stored_boxes(page) == [moved]
    page.keyboard.press("Control+z")
    assert stored_boxes(page) == [big]
    page.keyboard.press("Control+z")
    assert stored_boxes(page) == []
    assert page.locator(".box-canvas .box").count() == 0
    page.keyboard.press("Control+Shift+z")
    assert stored_boxes(page) == [big]
    page.keyboard.press("Control+y")
    assert stored_boxes(page) == [moved]
    page.get_by_role("button", name="Redo").click()  # the toolbar's buttons do the same
    page.get_by_role("button", name="Redo").click()
    assert len(stored_boxes(page)) == 2 and stored_boxes(page)[1]["option"] == "glasses"
    # a delete is undone too
    page.get_by_role("button", name="Delete box 1").click()
    assert len(stored_boxes(page)) == 1
    page.get_by_role("button", name="Undo").click()
    assert stored_boxes(page)[0] == moved and len(stored_boxes(page)) == 2
    # the key help lists the keys
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("?")
    help_text = page.locator("#help-overlay").inner_text()
    assert "Shift + drag" in help_text and "redo" in help_text and "pinch" in help_text
    page.keyboard.press("Escape")
    assert page.js_errors == []


def test_the_region_list_hides_and_locks_boxes_by_keyboard(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = open_page(browser, server)
    open_task(page, world)
    image = _ready_to_draw(page)
    x, y = image["x"] + 0.1 * image["width"], image["y"] + 0.2 * image["height"]
    drag(page, (x, y), (x + 300, y + 200))
    (first,) = stored_boxes(page)
    regions = page.locator("#question-boxes .box-list")
    # hide by keyboard (Space: Enter on the list's buttons submits the form): the box leaves the image,
    # stays in the answer and the list
    regions.get_by_role("button", name="Hide box 1").focus()
    page.keyboard.press(" ")
    show = regions.get_by_role("button", name="Show box 1")
    assert show.get_attribute("aria-pressed") == "true"
    assert page.evaluate("document.activeElement.textContent") == "Show box 1"  # focus stays on it
    assert page.locator(".box-canvas .box").count() == 0 and stored_boxes(page) == [first]
    page.keyboard.press(" ")
    assert page.locator(".box-canvas .box").count() == 1
    # lock by keyboard: no move (a drag on it draws a new box), no resize handle, no delete
    regions.get_by_role("button", name="Lock box 1").focus()
    page.keyboard.press(" ")
    assert regions.get_by_role("button", name="Unlock box 1").get_attribute("aria-pressed") == "true"
    assert regions.get_by_role("button", name="Delete box 1").is_disabled()
    assert page.locator(".box-canvas .box-handle").count() == 0
    page.evaluate("window.scrollTo(0, 0)")  # focus scrolled the list into view
    drag(page, (x + 100, y + 100), (x + 160, y + 150))
    boxes = stored_boxes(page)
    assert boxes[0] == first and len(boxes) == 2
    page.locator(".box-canvas .box").nth(1).click(position={"x": 5, "y": 5})  # select the new one
    page.keyboard.press("Escape")
    page.evaluate("document.activeElement.blur()")
    shot(page, "c10-region-list-locked-1280")
    regions.get_by_role("button", name="Hide box 2").click()
    if AXE.exists():  # the page with a locked and a hidden box: no axe-core violation
        assert axe_violations(page) == []
    regions.get_by_role("button", name="Show box 2").click()
    # unlock: it moves again
    regions.get_by_role("button", name="Unlock box 1").click()
    page.evaluate("window.scrollTo(0, 0)")
    drag(page, (x + 20, y + 20), (x + 40, y + 20))
    assert stored_boxes(page)[0]["x"] > first["x"]
    assert page.js_errors == []


def test_two_fingers_pinch_zoom_on_a_touch_screen(browser: Any, server: Any, world: dict[str, Any]) -> None:
    context = browser.new_context(
        viewport={"width": 820, "height": 1000}, base_url=server.url, has_touch=True, is_mobile=False
    )
    page = context.new_page()
    page.set_default_timeout(10000)
    sign_in(page)
    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    page.wait_for_selector("#task-form")
    _ready_to_draw(page)
    view = page.locator(".canvas-viewport").first.bounding_box()
    cx, cy = view["x"] + view["width"] / 2, view["y"] + view["height"] / 2
    cdp = context.new_cdp_session(page)

    def touch(kind: str, spread: float) -> None:
        points = (
            []
            if kind == "touchEnd"
            else [
                {"x": cx - spread, "y": cy, "id": 1},
                {"x": cx + spread, "y": cy, "id": 2},
            ]
        )
        cdp.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": points})

    assert page.locator("#zoom-level").inner_text() == "Fit"
    touch("touchStart", 40)
    for spread in (60, 90, 120):
        touch("touchMove", spread)
    touch("touchEnd", 0)
    level = page.locator("#zoom-level").inner_text()
    assert level.startswith("×") and 2.5 <= float(level[1:]) <= 3.5, level  # fingers 3x as far apart
    assert stored_boxes(page) == []  # the first finger drew nothing
    # one finger still draws a box
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": cx, "y": cy, "id": 3}]})
    for step in (10, 30, 60):
        cdp.send(
            "Input.dispatchTouchEvent",
            {"type": "touchMove", "touchPoints": [{"x": cx + step, "y": cy + step, "id": 3}]},
        )
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    assert len(stored_boxes(page)) == 1
    context.close()


def test_a_draft_on_the_server_is_restored_in_another_browser_and_sent_when_back_online(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import AssignmentDraft

    page = open_page(browser, server)
    open_task(page, world)
    pk = int(page.url.rstrip("/").split("/")[-1])
    image = _ready_to_draw(page)
    x, y = image["x"] + 0.1 * image["width"], image["y"] + 0.2 * image["height"]
    drag(page, (x, y), (x + 300, y + 200))
    page.locator("#question-person").get_by_label("no").check()
    page.wait_for_timeout(1500)  # the last change is sent 0.8 s after it
    assert int(page.locator("#flow").get_attribute("data-draft-sent") or 0) >= 1
    fields = dict(AssignmentDraft.objects.get(assignment_id=pk).fields)
    assert fields["q-person"] == "no" and fields["q-attributes"] == "hat"
    drawn = stored_boxes(page)

    # another browser (no localStorage of the first): the same answers, from the server
    other = open_page(browser, server, width=1366, height=860)
    sign_in(other)
    other.goto(f"/annotate/assignments/{pk}/")
    other.wait_for_selector("#task-form")
    assert other.locator("#draft-note").is_visible()
    assert other.locator("#question-person").get_by_label("no").is_checked()
    assert other.locator("#question-attributes").get_by_label("hat").is_checked()
    assert stored_boxes(other) == drawn and other.locator(".box-canvas .box").count() == 1
    shot(other, "c11-draft-restored-other-browser-1366")

    # offline: the change waits in localStorage, and goes to the server once back online
    other.context.set_offline(True)
    other.locator("#question-attributes").get_by_label("scarf").check()
    other.wait_for_timeout(1500)
    key = f"workbench-draft:{world['annotator'].pk}:{pk}"
    waiting = other.evaluate("key => JSON.parse(localStorage.getItem(key))", key)
    assert waiting["pending"] is True and ["q-attributes", "scarf"] in waiting["fields"]
    assert ["q-attributes", "scarf"] not in AssignmentDraft.objects.get(assignment_id=pk).fields
    other.context.set_offline(False)
    other.evaluate("window.dispatchEvent(new Event('online'))")  # what the browser fires on reconnecting
    for _attempt in range(50):
        if not other.evaluate("key => JSON.parse(localStorage.getItem(key)).pending", key):
            break
        other.wait_for_timeout(100)
    assert ["q-attributes", "scarf"] in AssignmentDraft.objects.get(assignment_id=pk).fields

    # submit: the server drops the draft
    other.get_by_label("Main colour of the clothing?").fill("red")
    other.keyboard.press("Escape")
    other.get_by_label("Unsure").check()
    other.locator("#submit-button").click()
    other.wait_for_url(lambda url: f"/assignments/{pk}/" not in url)
    assert not AssignmentDraft.objects.filter(assignment_id=pk).exists()
    offline = "net::ERR_INTERNET_DISCONNECTED"  # the send tried while offline, as expected
    assert page.js_errors == [] and [error for error in other.js_errors if offline not in error] == []
