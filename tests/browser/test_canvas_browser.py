"""The task page's canvas and form in real headless Chromium (Playwright), as a person uses them:
fit, zoom and pan with boxes kept in original pixels, colours per option, the Submit bar never
covering the focused option, the help overlay giving focus back, required answers checked on the
page first, and a 360 px wide phone. Screenshots go to ``test-output/browser/``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.base import ContentFile

from tests.browser.canvas_world import HEIGHT, WIDTH, build_world, drag, image_box, open_task, stored_boxes
from tests.browser.pages import open_page, png, shot

PROTOCOL = """
name: Canvas
unit: image
instructions: |
  The first paragraph starts here
  and goes on after a hard line break, <b>not bold</b>.

  A second paragraph.
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
    return build_world(PROTOCOL, "Canvas study")


def _viewport(page: Any) -> dict[str, float]:
    return page.locator(".canvas-viewport").first.bounding_box()


def _natural(image: dict[str, float], point: tuple[float, float]) -> tuple[float, float]:
    """Where a screen point falls in the ORIGINAL image's pixels, given the image's screen box."""
    return (point[0] - image["x"]) * WIDTH / image["width"], (point[1] - image["y"]) * HEIGHT / image[
        "height"
    ]


def _expected_box(
    image: dict[str, float], start: tuple[float, float], end: tuple[float, float]
) -> dict[str, float]:
    x0, y0 = _natural(image, start)
    x1, y1 = _natural(image, end)
    return {"x": min(x0, x1), "y": min(y0, y1), "w": abs(x1 - x0), "h": abs(y1 - y0)}


def _close(box: dict[str, Any], expected: dict[str, float]) -> bool:
    return all(abs(box[key] - expected[key]) <= 1 for key in ("x", "y", "w", "h"))


def _answer_the_rest(page: Any) -> None:
    page.locator("#question-person").get_by_label("no").check()
    page.get_by_label("Main colour of the clothing?").fill("red")
    page.keyboard.press("Escape")  # closes the colour suggestions, which would take the next click
    page.get_by_label("Unsure").check()


def test_fit_zoom_pan_and_boxes_stored_in_original_pixels(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Annotation

    page = open_page(browser, server)
    open_task(page, world)

    # fit: the image fills the panel's width (the display file is 1024 px), keeping its aspect ratio
    image = image_box(page)
    panel = page.locator(".box-canvas").first.bounding_box()
    assert abs(image["width"] - panel["width"]) <= 1 and image["width"] > 600
    assert abs(image["height"] / image["width"] - HEIGHT / WIDTH) < 0.01
    assert page.locator("#zoom-level").inner_text() == "Fit"
    fit_width = image["width"]

    # colours: one per option, from a fixed palette by the option's place in the protocol
    attributes = page.locator("#question-attributes")
    attributes.get_by_label("scarf").check()
    attributes.get_by_label("hat").check()
    legend = page.locator("#box-legend li")
    assert legend.all_inner_texts() == ["hat", "scarf"]  # the protocol's order, not the ticking order
    colours = page.locator("#box-legend .swatch").evaluate_all(
        "marks => marks.map(mark => getComputedStyle(mark).borderTopColor)"
    )
    assert colours == ["rgb(230, 159, 0)", "rgb(0, 158, 115)"]  # Okabe-Ito orange (1st), green (3rd)

    # a box drawn at fit is stored in original pixels
    page.get_by_label("New boxes support").select_option("hat")
    image = image_box(page)  # the legend above it moved it down
    start = (round(image["x"] + 0.1 * image["width"]), round(image["y"] + 0.2 * image["height"]))
    end = (start[0] + 150, start[1] + 90)
    expected_fit = _expected_box(image, start, end)
    drag(page, start, end)
    (at_fit,) = stored_boxes(page)
    assert at_fit["option"] == "hat" and _close(at_fit, expected_fit), (at_fit, expected_fit)
    tag_height = page.locator(".box-tag").first.bounding_box()["height"]
    assert (
        page.locator(".box").first.evaluate("el => getComputedStyle(el).borderTopColor") == "rgb(230, 159, 0)"
    )

    # zoom 2x with the + key: the image doubles inside the same viewport; the box follows
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("+")
    page.keyboard.press("+")
    assert page.locator("#zoom-level").inner_text() == "×2.0"
    zoomed = image_box(page)
    assert abs(zoomed["width"] - 2 * fit_width) <= 2
    assert abs(_viewport(page)["width"] - panel["width"]) <= 1  # the panel did not grow
    box_on_screen = page.locator(".box").first.bounding_box()
    assert abs(box_on_screen["width"] - 2 * 150) <= 4
    # the label keeps its size on screen
    assert abs(page.locator(".box-tag").first.bounding_box()["height"] - tag_height) <= 1

    # a box drawn at 2x is stored in original pixels too
    page.get_by_label("New boxes support").select_option("scarf")
    view = _viewport(page)
    start = (round(view["x"] + view["width"] * 0.55), round(view["y"] + view["height"] * 0.5))
    end = (start[0] + 120, start[1] + 80)
    zoomed = image_box(page)
    expected_zoom = _expected_box(zoomed, start, end)
    drag(page, start, end)
    assert len(stored_boxes(page)) == 2
    at_zoom = stored_boxes(page)[1]
    assert at_zoom["option"] == "scarf" and _close(at_zoom, expected_zoom), (at_zoom, expected_zoom)
    assert abs(at_zoom["w"] - 120 * WIDTH / zoomed["width"]) <= 1  # half the original pixels of a fit drag
    shot(page, "c01-canvas-zoomed-1280")

    # pan: Space + drag moves the view and draws nothing; so does the Pan button; arrows on the image
    scroll = page.locator(".canvas-viewport").first
    before = scroll.evaluate("el => el.scrollLeft")
    page.mouse.move(view["x"] + 100, view["y"] + 100)
    page.keyboard.down(" ")
    drag(page, (view["x"] + 100, view["y"] + 100), (view["x"] + 40, view["y"] + 100))
    page.keyboard.up(" ")
    assert abs(scroll.evaluate("el => el.scrollLeft") - (before + 60)) <= 2
    assert len(stored_boxes(page)) == 2
    page.get_by_role("button", name="Pan").click()
    assert page.get_by_role("button", name="Pan").get_attribute("aria-pressed") == "true"
    before = scroll.evaluate("el => el.scrollTop")
    drag(page, (view["x"] + 100, view["y"] + 100), (view["x"] + 100, view["y"] + 70))
    assert abs(scroll.evaluate("el => el.scrollTop") - (before + 30)) <= 2
    assert len(stored_boxes(page)) == 2
    page.get_by_role("button", name="Pan").click()
    scroll.focus()
    page.keyboard.press("Escape")  # let go of the box just drawn (the arrows would move it)
    before = scroll.evaluate("el => el.scrollLeft")
    page.keyboard.press("ArrowRight")
    assert scroll.evaluate("el => el.scrollLeft") > before

    # the wheel zooms about the pointer; F fits again
    page.mouse.move(view["x"] + 50, view["y"] + 50)
    page.mouse.wheel(0, -300)
    page.wait_for_function("document.getElementById('zoom-level').textContent !== '×2.0'")
    assert image_box(page)["width"] > 2 * fit_width + 10
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("f")
    assert page.locator("#zoom-level").inner_text() == "Fit"
    assert abs(image_box(page)["width"] - fit_width) <= 1

    # the stored answer holds the same original-pixel boxes
    _answer_the_rest(page)
    url = page.url
    page.locator("#submit-button").click()
    page.wait_for_url(lambda now: now != url)
    stored = Annotation.objects.get(question_key="boxes").value
    assert [b["option"] for b in stored] == ["hat", "scarf"]
    assert _close(stored[0], expected_fit) and _close(stored[1], expected_zoom), stored
    assert page.js_errors == []


def test_submit_bar_never_covers_the_focused_option(browser: Any, server: Any, world: dict[str, Any]) -> None:
    page = open_page(browser, server, width=1280, height=520)
    open_task(page, world)
    bar = page.locator(".actions")

    def above_the_bar(selector: str) -> bool:
        box = page.locator(selector).bounding_box()
        return box["y"] + box["height"] <= bar.bounding_box()["y"] + 0.5

    # by keys: down to the last question, 0 picks "Unsure", the last option of the page
    page.evaluate("document.activeElement.blur()")
    for _ in range(3):
        page.keyboard.press("ArrowDown")  # attributes, boxes, colour (a text field takes the keys)
    page.keyboard.press("Escape")  # leave the text field
    page.keyboard.press("ArrowDown")  # the likert question
    page.keyboard.press("0")
    unsure = "#question-clear input[data-apart]"
    assert page.locator(unsure).is_checked()
    assert page.locator(unsure).evaluate("el => el === document.activeElement")
    assert above_the_bar(f"{unsure} >> xpath=..")  # its whole label, not just the radio
    # by Tab: from the Submit button back into the last question
    page.evaluate("window.scrollTo(0, 0)")
    page.locator("#submit-button").focus()
    page.keyboard.press("Shift+Tab")
    assert page.locator(unsure).evaluate("el => el === document.activeElement")
    assert above_the_bar(f"{unsure} >> xpath=..")
    shot(page, "c02-unsure-above-the-bar")
    assert page.js_errors == []


def test_help_overlay_gives_focus_back_so_enter_submits(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Annotation

    page = open_page(browser, server)
    open_task(page, world)
    page.locator("#question-attributes").get_by_label("None of the above").check()
    _answer_the_rest(page)
    page.get_by_label("Unsure").focus()
    page.keyboard.press("?")
    assert page.locator("#help-overlay").is_visible()
    assert "fit the image" in page.locator("#help-overlay").inner_text()
    page.keyboard.press("Tab")  # focus stays in the dialog
    assert page.locator("#help-close").evaluate("el => el === document.activeElement")
    page.keyboard.press("Escape")
    assert page.locator("#help-overlay").is_hidden()
    assert page.get_by_label("Unsure").evaluate("el => el === document.activeElement")  # where it was
    url = page.url
    page.keyboard.press("Enter")  # submits; does not open the list again
    page.wait_for_url(lambda now: now != url)
    assert Annotation.objects.filter(question_key="clear", value="unsure").exists()

    # opened with the button: closing gives focus to the current question, not the button
    page.wait_for_selector("#task-form")
    page.get_by_role("button", name="Keyboard keys (?)").click()
    page.keyboard.press("Escape")
    assert page.evaluate("document.getElementById('task-form').contains(document.activeElement)")
    page.keyboard.press("Enter")
    assert page.locator("#help-overlay").is_hidden()
    assert page.locator("#submit-check").is_visible()  # Enter went to the form (nothing answered yet)
    assert page.js_errors == []


def test_required_answers_are_checked_on_the_page_before_posting(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from django.test import Client

    from annotations.models import Annotation, Assignment

    page = open_page(browser, server)
    open_task(page, world)
    posts: list[str] = []
    # The answers' posts only (flow.js also leases the next item ahead with a POST to .../ahead/).
    page.on(
        "request",
        lambda request: (
            posts.append(request.url)
            if request.method == "POST" and not request.url.endswith("/ahead/")
            else None
        ),
    )
    page.get_by_label("Main colour of the clothing?").fill("   ")  # blank is not an answer
    page.locator("#submit-button").click()
    check = page.locator("#submit-check")
    assert check.is_visible()
    items = check.locator("li").all_inner_texts()
    assert items == [
        "Question 1, “Is there a person in the image?”, needs an answer",
        "Question 3, “Which attributes are visible?”, needs an answer",
        "Question 5, “Main colour of the clothing?”, needs an answer",
        "Question 6, “The image is clear.”, needs an answer",
    ]  # the age question is hidden (show_if) and the boxes are optional: neither is listed
    person = page.locator("#question-person")
    assert person.get_attribute("aria-invalid") == "true"
    assert "check-person" in person.get_attribute("aria-describedby")
    assert page.locator("#check-person").inner_text() == "This question needs an answer."
    assert posts == [] and not Annotation.objects.exists()
    shot(page, "c03-required-checked-on-the-page")

    # a link focuses its question; answering takes the question off the list
    check.get_by_role("link", name="Question 6, “The image is clear.”, needs an answer").click()
    assert page.evaluate("document.getElementById('question-clear').contains(document.activeElement)")
    person.get_by_label("yes").check()  # shows the age question, which is then required
    assert "Question 2, “How old is the person?”, needs an answer" in check.locator("li").all_inner_texts()
    assert person.get_attribute("aria-invalid") is None and page.locator("#check-person").count() == 0
    page.locator("#question-attributes").get_by_label("None of the above").check()  # an answer too
    page.get_by_label("old").check()
    page.get_by_label("Main colour of the clothing?").fill("red")
    page.keyboard.press("Escape")  # closes the colour suggestions, which would take the next click
    page.get_by_label("Unsure").check()
    assert check.is_hidden()
    url = page.url
    page.locator("#submit-button").click()
    page.wait_for_url(lambda now: now != url)
    assert len(posts) == 1 and Annotation.objects.filter(question_key="attributes").exists()

    # the server still decides: a forged post without the required answers is refused
    held = Assignment.objects.filter(status="leased").get()
    client = Client()
    client.force_login(world["annotator"])
    response = client.post(f"/annotate/assignments/{held.pk}/", {"q-colour": "red"})
    assert response.status_code == 400
    assert b'<p class="error" id="error-person">Is required</p>' in response.content
    assert not Annotation.objects.filter(item=held.item).exists()
    assert page.js_errors == []


def test_phone_360_reads_well_without_horizontal_scroll(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    phone = open_page(browser, server, width=360, height=740)
    open_task(phone, world)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 360
    image = image_box(phone)
    assert image["x"] >= 0 and image["x"] + image["width"] <= 360 and image["width"] >= 280
    # instructions: paragraphs, single line breaks joined, the text escaped
    paragraphs = phone.locator("details.instructions p").all_inner_texts()
    assert paragraphs == [
        "The first paragraph starts here and goes on after a hard line break, <b>not bold</b>.",
        "A second paragraph.",
    ]
    assert phone.locator("details.instructions b, details.instructions br").count() == 0
    # every control can be reached and lies inside the screen's width
    for name in ("Zoom in", "Zoom out", "Fit", "Pan", "Submit"):
        button = phone.get_by_role("button", name=name)
        button.scroll_into_view_if_needed()
        box = button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 360, name
    phone.get_by_role("button", name="Zoom in").click()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 360  # zoom scrolls inside the panel
    shot(phone, "c04-task-360")
    # the list of keys fits the phone: its Close button is on the screen
    from playwright.sync_api import expect

    phone.evaluate("document.activeElement.blur()")
    phone.keyboard.press("?")
    expect(phone.locator("#help-close")).to_be_in_viewport()
    phone.keyboard.press("Escape")
    assert phone.locator("#help-overlay").is_hidden()
    assert phone.js_errors == []


SET_PROTOCOL = """
name: Sets
unit: image_set
questions:
  - key: attributes
    kind: multi
    prompt: Which attributes are visible?
    options: [hat, glasses]
    none_option: None of the above
  - key: boxes
    kind: boxes
    prompt: Draw a box around each selected attribute.
    linked_question: attributes
    required: false
"""


def test_image_set_grid_fits_each_image_and_keeps_the_image_of_a_box(
    browser: Any, server: Any, transactional_db: None
) -> None:
    from annotations.models import Annotation, Item, ItemImage
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res2", role="researcher")
    study = study_create(owner=owner, name="Set study", protocol=load_protocol_text(SET_PROTOCOL), overlap=1)
    item = Item.objects.create(study=study, external_id="set-0", kind="image_set", sha256="a" * 64)
    sizes = [(2000, 1000), (600, 900)]  # a wide and a tall image side by side
    for position, size in enumerate(sizes):
        image = ItemImage(
            item=item,
            position=position,
            width=size[0],
            height=size[1],
            content_type="image/png",
            sha256=f"{position:064d}",
            original_name=f"{position}.png",
        )
        image.file.save(f"set{position}.png", ContentFile(png(size, (160, 60, 40))), save=False)
        image.save()
    enrollment_add(study=study, user=UserFactory.create(username="ann", role="annotator"))

    page = open_page(browser, server)
    open_task(page, {"study": study})
    figures = page.locator(".box-canvas")
    assert figures.count() == 2
    for index, (width, height) in enumerate(sizes):
        cell = figures.nth(index).bounding_box()
        shown = figures.nth(index).locator("img").bounding_box()
        assert shown["width"] <= cell["width"] + 1 and shown["height"] <= 0.78 * 800 + 1
        assert abs(shown["height"] / shown["width"] - height / width) < 0.01
        # fitted: as wide as its cell, or as tall as allowed
        assert abs(shown["width"] - cell["width"]) <= 1 or abs(shown["height"] - 0.78 * 800) <= 1
    tall_fit = figures.nth(1).locator("img").bounding_box()

    page.locator("#question-attributes").get_by_label("glasses").check()
    page.get_by_role("button", name="Zoom in").click()
    page.get_by_role("button", name="Zoom in").click()
    tall = figures.nth(1).locator("img").bounding_box()
    assert abs(tall["width"] - 2 * tall_fit["width"]) <= 2  # the zoom applies to every image
    view = figures.nth(1).locator(".canvas-viewport").bounding_box()
    start = (round(view["x"] + 20), round(view["y"] + 30))
    end = (start[0] + 60, start[1] + 50)
    x0, y0 = (start[0] - tall["x"]) * 600 / tall["width"], (start[1] - tall["y"]) * 900 / tall["height"]
    drag(page, start, end)
    (box,) = stored_boxes(page)
    assert box["image"] == 1 and box["option"] == "glasses"
    assert abs(box["x"] - x0) <= 1 and abs(box["y"] - y0) <= 1
    assert abs(box["w"] - 60 * 600 / tall["width"]) <= 1 and abs(box["h"] - 50 * 900 / tall["height"]) <= 1
    shot(page, "c05-image-set-zoomed")
    page.locator("#submit-button").click()
    page.wait_for_selector("text=nothing left for you")
    (stored,) = Annotation.objects.get(question_key="boxes").value
    assert {k: stored[k] for k in ("image", "x", "y", "w", "h")} == {
        k: box[k] for k in ("image", "x", "y", "w", "h")
    }
    assert page.js_errors == []


def test_boxes_by_keyboard_on_a_focusedimage_box(browser: Any, server: Any, world: dict[str, Any]) -> None:
    from annotations.models import Annotation

    page = open_page(browser, server)
    open_task(page, world)
    page.locator("#question-attributes").get_by_label("glasses").check()
    page.get_by_role("button", name="Pan").focus()
    page.keyboard.press("Tab")  # the image comes next
    assert page.evaluate("document.activeElement.classList.contains('canvas-viewport')")
    scale = image_box(page)["width"] / WIDTH  # screen pixels per original pixel at the fit
    step = max(1, round(10 / scale))
    page.keyboard.press("n")
    (box,) = stored_boxes(page)
    assert box["option"] == "glasses"
    assert abs(box["x"] + box["w"] / 2 - WIDTH / 2) <= 1 and abs(box["y"] + box["h"] / 2 - HEIGHT / 2) <= 1
    assert abs(box["w"] - WIDTH / 4) <= 2 and abs(box["h"] - HEIGHT / 4) <= 2
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Shift+ArrowRight")
    (moved,) = stored_boxes(page)
    assert (moved["x"], moved["y"], moved["w"], moved["h"]) == (
        box["x"] + step,
        box["y"] - step,
        box["w"] + step,
        box["h"],
    )
    page.keyboard.press("n")
    assert len(stored_boxes(page)) == 2
    page.keyboard.press("Delete")  # the selected (new) box
    assert stored_boxes(page) == [moved]
    # Esc lets go of the box: the arrows move a zoomed view again
    page.keyboard.press("Escape")
    page.keyboard.press("+")
    scroll = page.locator(".canvas-viewport").first
    before = scroll.evaluate("el => el.scrollLeft")
    page.keyboard.press("ArrowRight")
    assert scroll.evaluate("el => el.scrollLeft") > before and stored_boxes(page) == [moved]
    _answer_the_rest(page)
    url = page.url
    page.locator("#submit-button").click()
    page.wait_for_url(lambda now: now != url)
    (stored,) = Annotation.objects.get(question_key="boxes").value
    assert {k: stored[k] for k in ("x", "y", "w", "h")} == {k: moved[k] for k in ("x", "y", "w", "h")}
    assert page.js_errors == []
