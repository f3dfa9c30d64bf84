"""The annotator's flow in headless Chromium: a draft survives a reload and goes on submit, the
[ and ] keys walk one's own items, and a skip is undone from the next page.

Screenshots go to ``test-output/browser/`` (flow-*.png). Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.browser.pages import image_items, open_page, shot, sign_in, unlabelled_inputs

PROTOCOL = """
name: Flow
unit: image
instructions: Look at the image, then answer.
questions:
  - key: wears
    kind: multi
    prompt: What does the person wear?
    options: [hat, glasses]
    none_option: None of the above
  - key: boxes
    kind: boxes
    prompt: Box each thing you selected.
    linked_question: wears
    required: false
  - key: mood
    kind: single
    prompt: Mood?
    options: [happy, sad]
  - key: note
    kind: text
    prompt: Anything else?
    required: false
"""


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name="Flow study", protocol=load_protocol_text(PROTOCOL), overlap=1)
    image_items(study, [(40, 90, 160), (160, 60, 40), (60, 160, 60)], (800, 600))
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    return {"study": study, "annotator": annotator}


def _drafts(page: Any) -> dict[str, Any]:
    return page.evaluate(
        """() => Object.fromEntries(Object.keys(localStorage).filter(k => k.startsWith('workbench-draft:'))
            .map(k => [k, JSON.parse(localStorage.getItem(k))]))"""
    )


def _assignment_id(page: Any) -> int:
    return int(page.url.split("?")[0].rstrip("/").split("/")[-1])


def _draw_box(page: Any, option: str) -> None:
    from playwright.sync_api import expect

    page.get_by_label("New boxes support").select_option(option)
    image = page.locator(".box-canvas img").first
    expect(image).to_have_js_property("complete", True)
    area = image.bounding_box()
    x0, y0 = area["x"] + 0.2 * area["width"], area["y"] + 0.2 * area["height"]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x0 + 40, y0 + 30, steps=4)
    page.mouse.move(x0 + 80, y0 + 60, steps=4)
    page.mouse.up()


def test_a_draft_survives_a_reload_and_is_gone_after_submit(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Annotation

    page = open_page(browser, server)
    sign_in(page)
    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    page.wait_for_selector("#task-form")
    first = _assignment_id(page)
    assert _drafts(page) == {}
    page.locator("#question-wears").get_by_role("checkbox", name="hat", exact=True).check()
    page.locator("#question-mood").get_by_label("sad").check()
    page.get_by_label("Anything else?").fill("a <b>scarf</b> too")
    _draw_box(page, "hat")
    box_value = page.locator('input[name="q-boxes"]').input_value()
    assert [box["option"] for box in json.loads(box_value)] == ["hat"]
    page.wait_for_timeout(400)  # the draft is written 150 ms after the last change
    key = f"workbench-draft:{world['annotator'].pk}:{first}"
    assert list(_drafts(page)) == [key]

    page.reload()
    page.wait_for_selector("#task-form")
    assert page.locator("#draft-note").is_visible()
    assert page.locator("#question-wears").get_by_role("checkbox", name="hat", exact=True).is_checked()
    assert not page.locator("#question-wears").get_by_label("glasses").is_checked()
    assert page.locator("#question-mood").get_by_label("sad").is_checked()
    assert page.get_by_label("Anything else?").input_value() == "a <b>scarf</b> too"
    assert json.loads(page.locator('input[name="q-boxes"]').input_value()) == json.loads(box_value)
    assert page.locator(".box-canvas .box").count() == 1  # annotate.js drew the restored box
    shot(page, "flow-01-draft-restored-1280")

    page.locator("#submit-button").click()
    page.wait_for_url(lambda url: f"/assignments/{first}/" not in url)
    page.wait_for_selector("#task-form")
    assert _drafts(page) == {}
    stored = {a.question_key: a.value for a in Annotation.objects.filter(item__assignments__pk=first)}
    assert stored["wears"] == ["hat"] and stored["mood"] == "sad" and stored["note"] == "a <b>scarf</b> too"
    assert [box["option"] for box in stored["boxes"]] == ["hat"]
    # the next item starts empty: no draft of another assignment leaks into it
    assert not page.locator("#draft-note").count()
    assert not page.locator("#question-mood").get_by_label("sad").is_checked()
    assert page.js_errors == []


def test_keys_walk_own_items_and_a_skip_is_undone(browser: Any, server: Any, world: dict[str, Any]) -> None:
    from annotations.models import Assignment

    page = open_page(browser, server)
    sign_in(page)
    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    page.wait_for_selector("#task-form")
    first = _assignment_id(page)
    page.locator("#question-wears").get_by_label("glasses").check()
    page.locator("#question-mood").get_by_label("happy").check()
    page.locator("#submit-button").click()
    page.wait_for_url(lambda url: f"/assignments/{first}/" not in url)
    page.wait_for_selector("#task-form")
    second = _assignment_id(page)
    assert page.locator("#progress-count").inner_text() == "1 done, 0 skipped, 2 left"
    assert unlabelled_inputs(page) == []
    shot(page, "flow-02-task-head-1280")

    # a typed answer, then [ : the previous (submitted) item in its edit view; ] comes back, answer kept
    page.locator("#question-mood").get_by_label("sad").check()
    page.locator("h1").click()
    page.keyboard.press("[")
    page.wait_for_url(f"**/assignments/{first}/")
    assert "Changing your answers" in page.locator(".task-head").inner_text()
    assert page.locator("#question-wears").get_by_label("glasses").is_checked()
    page.locator("h1").click()
    page.keyboard.press("]")
    page.wait_for_url(f"**/assignments/{second}/")
    assert page.locator("#question-mood").get_by_label("sad").is_checked()  # the draft of this item
    # the keys are listed in the help overlay
    page.keyboard.press("?")
    assert "previous / next of your items" in page.locator("#help-overlay").inner_text()
    page.keyboard.press("Escape")

    # skip, then undo from the next page
    page.get_by_text("Skip this item").click()
    page.get_by_label("Why do you skip it? (required)").fill("cannot tell")
    page.get_by_role("button", name="Skip", exact=True).click()
    page.wait_for_selector("#undo-skip")
    assert page.locator("#progress-count").inner_text() == "1 done, 1 skipped, 1 left"
    shot(page, "flow-03-skipped-undo-1280")
    page.locator("#undo-skip").get_by_role("button", name="Undo").click()
    page.wait_for_url(f"**/assignments/{second}/")
    assert page.locator("#progress-count").inner_text() == "1 done, 0 skipped, 2 left"
    assert Assignment.objects.get(pk=second).status == "leased"
    assert page.js_errors == []
