"""The annotator's third pass over the task page, in headless Chromium, each through the path an
annotator takes: a refused Enter says why at the question and beside Submit and moves the focus there;
the option ticked last is the label of new boxes, the legend's chips choose another (by click or, on
the focused image, by number) and a drag inside another option's box draws; Ctrl + arrows move a box
50 px; a region-list button never swallows Enter and a click on it gives the focus back to the form;
the edit view's restored note, the undo of a skip that leaves the image's size alone, and the
instructions' fold recorded only from a person's click. Screenshots go to ``test-output/browser/``
(third-*.png).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.pages import AXE, axe_violations, image_items, open_page, shot, sign_in

ATTRIBUTES = ["sombrero", "poncho", "moustache", "guitar", "cactus", "donkey"]  # two pages of options
SIZE = 1024


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    from annotations.models import Item
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_preset
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(
        owner=owner, name="Markers study", protocol=load_preset("stereotype-markers"), overlap=1
    )
    image_items(study, [(40, 90, 160), (160, 60, 40), (60, 160, 60)], (SIZE, SIZE))
    Item.objects.filter(study=study).update(metadata={"attributes": ATTRIBUTES})
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    return {"study": study, "annotator": annotator}


def _open_next(page: Any, world: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    page.wait_for_selector("#task-form")
    expect(page.locator(".box-canvas img").first).to_have_js_property("complete", True)
    page.wait_for_load_state("networkidle")


def _boxes(page: Any) -> list[dict[str, Any]]:
    return json.loads(page.locator('input[name="q-attribute_boxes"]').input_value())


def _drag(page: Any, start: tuple[float, float], end: tuple[float, float]) -> None:
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, steps=3)
    page.mouse.move(*end, steps=3)
    page.mouse.up()


def _image(page: Any) -> dict[str, float]:
    return page.locator(".box-canvas img").first.bounding_box()


def _focused(page: Any) -> str:
    return page.evaluate(
        "() => { const e = document.activeElement; return (e.id ? '#' + e.id : e.tagName) + ' ' + "
        "(e.textContent || '').trim().slice(0, 30); }"
    )


def _in_view_above_the_bar(page: Any, selector: str) -> bool:
    return bool(
        page.evaluate(
            """selector => {
              const r = document.querySelector(selector).getBoundingClientRect();
              const bar = document.getElementById('submit-bar').getBoundingClientRect();
              return r.height > 0 && r.top >= 0 && r.bottom <= bar.top + 0.5;
            }""",
            selector,
        )
    )


def test_enter_with_a_page_of_options_unseen_says_why_where_the_eye_is(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Annotation

    page = open_page(browser, server, 1366, 768)
    sign_in(page)
    _open_next(page, world)
    url = page.url
    page.keyboard.press("0")  # "None of the above" in the first question
    assert page.locator("#question-attributes").get_by_label("None of the above").is_checked()
    page.keyboard.press("Enter")
    assert page.url == url
    # at the question, in view and above the Submit bar
    message = page.locator("#check-attributes")
    assert "1 more page of options to see before you submit" in message.inner_text()
    assert _in_view_above_the_bar(page, "#check-attributes")
    # beside Submit, in the sticky bar
    refusal = page.locator("#submit-refusal")
    assert refusal.inner_text() == "Not sent: 1 more page of options to see in question 1."
    box = refusal.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 768
    # the focus is on what to do next: Enter shows the next page, then submits
    assert _focused(page).startswith("BUTTON More options")
    shot(page, "third-01-refused-enter-1366x768")
    if AXE.exists():
        assert axe_violations(page) == []
    page.keyboard.press("Enter")
    assert page.locator("#question-attributes .page-status").inner_text() == "Options page 2 of 2"
    assert page.locator("#submit-refusal").is_hidden() and page.locator("#check-attributes").count() == 0
    page.keyboard.press("Enter")
    page.wait_for_url(lambda now: now != url)
    assert Annotation.objects.get(question_key="attributes").value == ["none_of_the_above"]
    assert page.js_errors == []


def test_the_newest_ticked_option_draws_chips_and_numbers_choose_and_a_drag_in_another_box_draws(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = open_page(browser, server, 1366, 768)
    sign_in(page)
    _open_next(page, world)
    attributes = page.locator("#question-attributes")
    chips = page.locator("#box-legend .legend-chip")
    attributes.get_by_label("sombrero").check()
    assert chips.all_inner_texts() == ["sombrero"]
    image = _image(page)
    x, y = image["x"] + 0.1 * image["width"], image["y"] + 0.1 * image["height"]
    _drag(page, (x, y), (x + 200, y + 200))
    (first,) = _boxes(page)
    assert first["option"] == "sombrero"
    # the second attribute ticked becomes the label of new boxes, pressed in the legend
    attributes.get_by_label("poncho").check()
    assert page.get_by_label("New boxes support").input_value() == "poncho"
    assert page.locator('#box-legend .legend-chip[aria-pressed="true"]').inner_text() == "poncho"
    # a drag that starts inside the sombrero box draws a poncho box; the sombrero box stays
    image = _image(page)
    x, y = image["x"] + 0.1 * image["width"], image["y"] + 0.1 * image["height"]
    _drag(page, (x + 50, y + 50), (x + 150, y + 120))
    boxes = _boxes(page)
    assert len(boxes) == 2 and boxes[0] == first and boxes[1]["option"] == "poncho"
    # the chips are clickable; on the focused image the numbers choose (1 sombrero, 2 poncho)
    chips.filter(has_text="sombrero").click()
    assert page.get_by_label("New boxes support").input_value() == "sombrero"
    assert page.evaluate("document.activeElement.classList.contains('canvas-viewport')")
    page.keyboard.press("2")
    assert page.get_by_label("New boxes support").input_value() == "poncho"
    page.keyboard.press("1")
    assert page.get_by_label("New boxes support").input_value() == "sombrero"
    # ... and never answer the question meanwhile
    assert attributes.get_by_label("sombrero").is_checked() and attributes.get_by_label("poncho").is_checked()
    assert not attributes.get_by_label("moustache").is_checked()
    # the poncho box (another label) moves once selected: a press without a drag selects it
    poncho = page.locator(".box-canvas .box").nth(1).bounding_box()
    px, py = poncho["x"] + poncho["width"] - 12, poncho["y"] + poncho["height"] - 25
    page.mouse.click(px, py)
    assert "selected" in page.locator(".box-canvas .box").nth(1).get_attribute("class")
    assert len(_boxes(page)) == 2
    _drag(page, (px, py), (px + 30, py + 20))
    moved = _boxes(page)
    assert len(moved) == 2 and moved[0] == first and moved[1]["x"] > boxes[1]["x"]
    assert moved[1]["w"] == boxes[1]["w"]
    # Ctrl + arrows: 50 screen pixels; plain arrows 10; Ctrl + Shift + arrows resize by 50
    scale = _image(page)["width"] / SIZE
    big, small = max(1, round(50 / scale)), max(1, round(10 / scale))
    page.keyboard.press("Control+ArrowRight")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Control+Shift+ArrowDown")
    (after,) = _boxes(page)[1:]
    assert (after["x"], after["y"], after["w"], after["h"]) == (
        moved[1]["x"] + big,
        moved[1]["y"] + small,
        moved[1]["w"],
        moved[1]["h"] + big,
    )
    shot(page, "third-02-label-chips-1366x768")
    if AXE.exists():
        assert axe_violations(page) == []
    assert page.js_errors == []


def test_a_region_list_button_never_swallows_enter_and_a_click_gives_the_focus_back(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Annotation

    page = open_page(browser, server, 1366, 768)
    sign_in(page)
    _open_next(page, world)
    url = page.url
    attributes = page.locator("#question-attributes")
    attributes.get_by_label("sombrero").check()
    attributes.get_by_role("button", name="More options").click()
    image = _image(page)
    x, y = image["x"] + 0.2 * image["width"], image["y"] + 0.2 * image["height"]
    _drag(page, (x, y), (x + 150, y + 100))
    regions = page.locator("#question-attribute_boxes .box-list")
    # a click: the box is locked and the focus goes back to the form, not to the button
    regions.get_by_role("button", name="Lock box 1").click()
    assert regions.get_by_role("button", name="Unlock box 1").get_attribute("aria-pressed") == "true"
    assert _focused(page).startswith("#question-attribute_boxes")
    regions.get_by_role("button", name="Unlock box 1").click()
    # the keyboard: Space presses the focused button and the focus stays on it
    regions.get_by_role("button", name="Hide box 1").focus()
    page.keyboard.press(" ")
    assert page.evaluate("document.activeElement.textContent") == "Show box 1"
    page.keyboard.press(" ")
    assert page.evaluate("document.activeElement.textContent") == "Hide box 1"
    # Enter on it submits, as the Submit bar says; it does not hide the box
    page.keyboard.press("Enter")
    page.wait_for_url(lambda now: now != url)
    assert Annotation.objects.get(question_key="attributes").value == ["sombrero"]
    assert len(Annotation.objects.get(question_key="attribute_boxes").value) == 1
    assert page.js_errors == []


def test_edit_view_note_undo_of_a_skip_and_the_instructions_fold(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = open_page(browser, server, 1280, 720)
    sign_in(page)
    _open_next(page, world)
    first = page.url
    key = f"workbench-instructions:{world['annotator'].pk}:{world['study'].pk}"
    stored = f"() => localStorage.getItem({json.dumps(key)})"
    # the instructions open on the first item; nothing is remembered until the person folds them,
    # whatever toggles them otherwise (the server's open attribute, a script)
    assert page.locator("details.instructions").get_attribute("open") is not None
    page.evaluate(
        "() => { const d = document.getElementById('instructions'); d.open = false; d.open = true; }"
    )
    page.wait_for_timeout(200)  # toggle events come as tasks
    assert page.evaluate(stored) is None

    # submit the first item (None, both pages seen)
    page.locator("#question-attributes").get_by_label("None of the above").check()
    page.locator("#question-attributes").get_by_role("button", name="More options").click()
    page.locator("#submit-button").click()
    page.wait_for_url(lambda now: now != first)
    _open_next(page, world)  # the second item
    assert page.locator("details.instructions").get_attribute("open") is None
    # a value "open" left by the race before is no one's choice: dropped, the fold follows the server
    page.evaluate(f"() => localStorage.setItem({json.dumps(key)}, 'open')")
    page.reload()
    page.wait_for_selector("#task-form")
    page.wait_for_load_state("load")
    assert page.locator("details.instructions").get_attribute("open") is None
    assert page.evaluate(stored) is None
    page.locator("details.instructions summary").click()
    assert page.evaluate(stored) == "opened"
    page.locator("details.instructions summary").click()
    assert page.evaluate(stored) == "folded"

    # skip it: the next page offers the undo; the image has the same size with and without it
    second = page.url
    page.get_by_text("Skip this item").click()
    page.get_by_label("Why do you skip it? (required)").fill("cannot tell")
    page.get_by_role("button", name="Skip", exact=True).click()
    page.wait_for_selector("#undo-skip")
    page.wait_for_load_state("networkidle")
    with_undo = _image(page)
    assert page.locator("#undo-skip").is_visible()
    shot(page, "third-03-skipped-undo-1280x720")
    page.goto(page.url.split("?")[0])
    page.wait_for_selector("#task-form")
    page.wait_for_load_state("networkidle")
    assert page.locator("#undo-skip").count() == 0
    without = _image(page)
    print(
        f"\nimage with the undo of a skip: {with_undo['width']:.0f}x{with_undo['height']:.0f}; without: "
        f"{without['width']:.0f}x{without['height']:.0f}"
    )
    assert abs(with_undo["height"] - without["height"]) <= 1 and abs(with_undo["y"] - without["y"]) <= 1
    assert second != page.url

    # the edit view of the submitted item: what is restored are changes not yet saved
    page.goto(first)
    page.wait_for_selector("#task-form")
    assert "Changing your answers" in page.locator(".task-head").inner_text()
    page.locator("#question-attributes").get_by_label("sombrero").check()
    page.wait_for_timeout(400)  # the draft is kept 150 ms after a change
    page.reload()
    page.wait_for_selector("#draft-note")
    assert page.locator("#draft-note").inner_text() == "Your changes not yet saved were restored."
    assert page.locator("#question-attributes").get_by_label("sombrero").is_checked()
    assert page.js_errors == []
