"""The annotator's task page in real headless Chromium (Playwright), as a person uses it.

Screenshots of each page go to ``test-output/browser/`` (1280x800 and a 390 px wide phone).
Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.pages import image_items, open_page, shot, sign_in, unlabelled_inputs

PROTOCOL = """
name: Every kind
unit: image
instructions: Look at the image, then answer every question.
questions:
  - key: person
    kind: single
    prompt: Is there a person in the image?
    options: ["yes", "no"]
  - key: age
    kind: single
    prompt: How old is the person?
    options: [young, old]
    show_if: {question: person, in: ["yes"]}
  - key: clear
    kind: likert
    prompt: The image is clear.
    options: [Strongly agree, Agree, Disagree, Strongly disagree]
    unsure: Unsure
  - key: attributes
    kind: multi
    prompt: Which attributes are visible?
    options: [hat, glasses, beard, scarf, coat, umbrella, bag]
    none_option: None of the above
    page_size: 5
  - key: boxes
    kind: boxes
    prompt: Draw a box around each selected attribute.
    linked_question: attributes
    required: false
  - key: colour
    kind: text
    prompt: Main colour of the clothing?
    normaliser: colour
  - key: smiling
    kind: binary
    prompt: Is the person smiling?
    reason: optional
"""


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name="Browser study", protocol=load_protocol_text(PROTOCOL), overlap=1)
    image_items(study, [(40, 90, 160), (160, 60, 40)], (2000, 1000))
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    return {"study": study, "annotator": annotator}


def _image_box(page: Any) -> dict[str, float]:
    from playwright.sync_api import expect

    image = page.locator(".box-canvas img").first
    expect(image).to_have_js_property("complete", True)
    return image.bounding_box()


def _drag(page: Any, start: tuple[float, float], end: tuple[float, float]) -> None:
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, steps=3)
    page.mouse.move(*end, steps=3)
    page.mouse.up()


def _boxes(page: Any) -> list[dict[str, Any]]:
    return json.loads(page.locator('input[name="q-boxes"]').input_value())


def test_answer_every_kind_with_the_mouse_and_draw_boxes(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Annotation, Assignment

    page = open_page(browser, server)
    sign_in(page)
    page.get_by_role("link", name="Annotate").click()
    assert "0 done · 0 skipped · 2 left" in page.locator(".study-tasks").inner_text()
    shot(page, "01-dashboard-1280")
    page.get_by_role("link", name="Start").click()
    page.wait_for_selector("#task-form")
    assert page.locator("details.instructions").get_attribute("open") is not None
    shot(page, "02-task-1280")
    assert unlabelled_inputs(page) == []

    # show_if: the age question appears only once "yes" is chosen
    assert page.locator("#question-age").is_hidden()
    page.locator("#question-person").get_by_label("yes").check()
    assert page.locator("#question-age").is_visible()
    page.get_by_label("old").check()
    page.locator("#question-clear").get_by_role("radio", name="Agree", exact=True).check()

    # multi: paged 5 at a time; "None of the above" excludes the rest
    attributes = page.locator("#question-attributes")
    assert attributes.get_by_label("bag").is_hidden()
    attributes.get_by_label("hat").check()
    attributes.get_by_role("button", name="More options").click()
    attributes.get_by_label("umbrella").check()
    attributes.get_by_label("None of the above").check()
    assert not attributes.get_by_label("umbrella").is_checked()
    attributes.get_by_label("umbrella").check()
    assert not attributes.get_by_label("None of the above").is_checked()
    attributes.get_by_role("button", name="Previous options").click()
    attributes.get_by_label("hat").check()

    # boxes: draw, move, resize, delete; stored in original pixels (the image is shown scaled)
    page.get_by_label("New boxes support").select_option("hat")
    area = _image_box(page)
    scale = 2000 / area["width"]
    assert scale > 1.5  # really shown smaller than the original
    x0, y0 = area["x"] + 0.1 * area["width"], area["y"] + 0.2 * area["height"]
    _drag(page, (x0, y0), (x0 + 100, y0 + 60))
    (box,) = _boxes(page)
    assert box["option"] == "hat"
    assert abs(box["x"] - 200) <= 2 * scale and abs(box["w"] - 100 * scale) <= 2 * scale
    _drag(page, (x0 + 50, y0 + 30), (x0 + 80, y0 + 40))  # move by (30, 10) display px
    (moved,) = _boxes(page)
    assert abs(moved["x"] - box["x"] - 30 * scale) <= 2 * scale and moved["w"] == box["w"]
    handle = page.locator(".box-handle").first.bounding_box()
    hx, hy = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    _drag(page, (hx, hy), (hx + 40, hy + 20))  # resize
    (resized,) = _boxes(page)
    assert abs(resized["w"] - moved["w"] - 40 * scale) <= 3 * scale and resized["x"] == moved["x"]
    page.get_by_label("New boxes support").select_option("umbrella")
    _drag(page, (x0 + 300, y0 + 100), (x0 + 350, y0 + 150))
    assert [b["option"] for b in _boxes(page)] == ["hat", "umbrella"]
    page.get_by_role("button", name="Delete box 2").click()
    assert [b["option"] for b in _boxes(page)] == ["hat"]
    shot(page, "03-task-answered-1280")

    page.get_by_label("Main colour of the clothing?").fill("Navy")
    page.locator("#question-smiling").get_by_label("Yes").check()
    page.get_by_label("Reason (optional)").fill("broad smile")
    first = Assignment.objects.get(
        status="leased", annotator__user__username="ann", pk=int(page.url.rstrip("/").split("/")[-1])
    )
    page.locator("#submit-button").dblclick()  # a double click stores one set of answers
    page.wait_for_url(lambda url: f"/assignments/{first.pk}/" not in url)
    stored = {a.question_key: a for a in Annotation.objects.filter(item=first.item)}
    assert set(stored) == {"person", "age", "clear", "attributes", "boxes", "colour", "smiling"}
    assert stored["colour"].value == "blue" and stored["attributes"].value == ["hat", "umbrella"]
    assert set(stored["attributes"].shown) == {
        "hat",
        "glasses",
        "beard",
        "scarf",
        "coat",
        "umbrella",
        "bag",
        "none_of_the_above",
    }
    (saved_box,) = stored["boxes"].value
    assert {k: saved_box[k] for k in ("x", "y", "w", "h")} == {k: resized[k] for k in ("x", "y", "w", "h")}
    assert 0 < saved_box["x"] + saved_box["w"] <= 2000
    assert page.locator("#progress-count").inner_text() == "1 done, 0 skipped, 1 left"
    assert page.js_errors == []


def test_keyboard_path_validation_error_skip_and_edit(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Annotation, Assignment

    page = open_page(browser, server)
    sign_in(page)
    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    page.wait_for_selector("#task-form")
    page.keyboard.press("?")
    assert page.locator("#help-overlay").is_visible()
    shot(page, "04-help-overlay-1280")
    page.keyboard.press("Escape")
    assert page.locator("#help-overlay").is_hidden()
    page.locator("h1").click()  # nothing focused in a field
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("1")  # person: yes
    assert page.locator("#question-person").get_by_label("yes").is_checked()
    page.keyboard.press("ArrowDown")  # age (shown now)
    page.keyboard.press("2")  # old
    assert page.get_by_label("old").is_checked()
    page.keyboard.press("ArrowDown")  # likert
    page.keyboard.press("0")  # Unsure, kept apart from the scale
    assert page.get_by_label("Unsure").is_checked()
    page.keyboard.press("ArrowDown")  # multi
    page.keyboard.press("1")  # hat
    page.keyboard.press("ArrowRight")  # next 5 options
    page.keyboard.press("1")  # umbrella (first of page 2)
    assert page.get_by_label("umbrella").is_checked() and page.get_by_label("hat").is_checked()
    # a box drawn with the mouse, then Z undoes it
    area = _image_box(page)
    _drag(page, (area["x"] + 20, area["y"] + 20), (area["x"] + 90, area["y"] + 80))
    assert len(_boxes(page)) == 1
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("z")
    assert _boxes(page) == []
    page.get_by_label("Main colour of the clothing?").fill("plaid")  # not a colour: refused by the server
    page.keyboard.press("Escape")  # leave the text field
    page.keyboard.press("ArrowDown")  # smiling
    page.keyboard.press("1")  # yes
    assert page.locator("#question-smiling").get_by_role("radio", name="Yes").is_checked()
    page.keyboard.press("Enter")  # submit
    page.wait_for_selector("#error-colour")
    assert "is not a colour" in page.locator("#error-colour").inner_text()
    assert page.locator(".has-error").count() == 1
    assert page.locator("#error-summary").is_visible()
    assert page.get_by_label("old").is_checked()  # answers kept
    assert not Annotation.objects.exists()
    shot(page, "05-validation-error-1280")
    page.get_by_label("Main colour of the clothing?").fill("red")
    answered_url = page.url
    page.keyboard.press("Enter")  # Enter in a text field submits too
    page.wait_for_url(lambda url: url != answered_url)
    first_item = Annotation.objects.get(question_key="colour").item_id

    # S skips, with a reason
    page.wait_for_selector("#task-form")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("s")
    assert page.locator("#skip-reason").evaluate("el => el === document.activeElement")
    page.keyboard.type("image too dark")
    page.keyboard.press("Enter")
    page.wait_for_selector("text=nothing left for you")
    shot(page, "06-nothing-left-1280")
    assert Assignment.objects.get(status="skipped").skip_reason == "image too dark"

    # come back and edit: the hidden question's answer goes, the change keeps history
    page.get_by_role("link", name="Your answers").click()
    shot(page, "07-your-answers-1280")
    page.get_by_role("link", name="Change answers").click()
    assert page.get_by_label("old").is_checked()
    page.locator("#question-person").get_by_role("radio", name="no", exact=True).check()
    assert page.locator("#question-age").is_hidden()
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_selector("text=Your changes are saved")
    person = Annotation.objects.get(question_key="person", item_id=first_item)
    assert person.value == "no" and list(person.revisions.values_list("value", flat=True)) == ["yes"]
    assert not Annotation.objects.filter(question_key="age").exists()
    assert page.js_errors == []


def test_phone_width_and_progress_page(browser: Any, server: Any, world: dict[str, Any]) -> None:
    phone = open_page(browser, server, width=390, height=844)
    sign_in(phone)
    phone.goto("/annotate/")
    shot(phone, "08-dashboard-390")
    phone.get_by_role("link", name="Start").click()
    phone.wait_for_selector("#task-form")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 391
    assert 300 <= _image_box(phone)["width"] <= 390
    shot(phone, "09-task-390")
    assert unlabelled_inputs(phone) == []

    researcher = open_page(browser, server)
    sign_in(researcher, "res")
    researcher.goto(f"/studies/{world['study'].pk}/progress/")
    assert "0 of 2 judgements" in researcher.locator("#progress-text").inner_text()
    # an annotator submits while the page is open: the bar follows without a reload
    from annotations.models import Assignment
    from annotations.services.assignment import assignment_submit

    held = Assignment.objects.filter(status="leased").order_by("id").first()
    assignment_submit(
        assignment=held,
        answers={
            "person": {"value": "no"},
            "clear": {"value": "agree"},
            "attributes": {"value": ["none_of_the_above"]},
            "colour": {"value": "red"},
            "smiling": {"value": 0},
        },
    )
    from playwright.sync_api import expect

    expect(researcher.locator("#progress-card [data-field=judgements]")).to_have_text("1", timeout=15000)
    expect(researcher.locator("#progress-bar")).to_have_attribute("value", "1")
    shot(researcher, "10-progress-1280")
    assert unlabelled_inputs(researcher) == []
