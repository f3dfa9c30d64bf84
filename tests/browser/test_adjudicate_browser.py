"""Adjudication in real headless Chromium: an expert works through the queue item by item.

Skipped when /usr/bin/chromium is missing (see test_annotate_browser.py for the shared fixtures).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import open_page, shot, sign_in


def _line(item: str, who: str, value: str, kind: str = "human") -> dict[str, Any]:
    return {"item": item, "annotator": who, "annotator_kind": kind, "question": "gender", "value": value}


@pytest.fixture
def judged(transactional_db: None) -> dict[str, Any]:
    from annotations.interchange.annotation_import import annotations_import_records
    from annotations.services.consensus import consensus_compute
    from annotations.services.studies import enrollment_add
    from tests.factories import ItemFactory, StudyFactory, UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    # Overlap 2: every item is fully rated (i3 has two judgements), so i3's tie is a tie, not pending.
    study = StudyFactory.create(owner=owner, name="Adjudicated <study>", overlap=2)
    for name in ("i1", "i2", "i3"):
        ItemFactory.create(study=study, external_id=name)
    records = [
        _line("i1", "r1", "male"),
        _line("i1", "r2", "male"),
        _line("i1", "r3", "female"),
        _line("i2", "r1", "female"),
        _line("i2", "r2", "female"),
        _line("i2", "r3", "female"),
        _line("i3", "r1", "male"),
        _line("i3", "r2", "female"),
        _line("i1", "bot", "male", "machine"),
        _line("i2", "bot", "male", "machine"),
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    consensus_compute(study=study, question="gender")  # i1 male; i2 female but bot said male; i3 a tie
    expert = UserFactory.create(username="expert", role="annotator")
    enrollment_add(study=study, user=expert, pool="expert")
    crowd = UserFactory.create(username="crowd", role="annotator")
    enrollment_add(study=study, user=crowd)
    return {"study": study, "expert": expert}


def test_an_expert_works_through_the_queue(browser: Any, server: Any, judged: dict[str, Any]) -> None:
    """By keyboard: the consensus is pre-selected (Enter saves it and opens the next item), a tie has
    nothing pre-selected (Enter alone is refused, a digit picks an option), the filters narrow the queue."""
    from playwright.sync_api import expect

    from annotations.models import ConsensusLabel

    study = judged["study"]
    page = open_page(browser, server)
    sign_in(page, "expert")
    page.get_by_role("link", name="Annotate").click()
    page.get_by_role("link", name="Adjudicate").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(2)
    assert "bot said 'male'" in rows.nth(0).inner_text() and "tie" in rows.nth(1).inner_text()
    shot(page, "20-adjudication-queue")
    page.get_by_label("Reason").select_option("tie")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    assert "reason=tie" in page.url and "i3" in rows.nth(0).inner_text()
    page.get_by_role("link", name="Clear the filters").click()
    expect(rows).to_have_count(2)

    rows.nth(0).get_by_role("link", name="i2").click()
    gender = page.locator("#question-gender")
    assert "needs a decision" in gender.inner_text()
    answers = gender.locator("table tbody tr")
    expect(answers).to_have_count(4)  # everyone's answers: r1, r2, r3 and bot
    assert "bot" in gender.inner_text() and "machine" in gender.inner_text()
    assert "Adjudicated &lt;study&gt;" in page.content()  # the study's name is escaped
    # The consensus (female) is pre-selected and focused: Enter saves it and opens i3.
    expect(gender.get_by_role("radio", name="female")).to_be_checked()
    expect(gender.get_by_role("radio", name="female")).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/studies/{study.pk}/adjudicate/{study.items.get(external_id='i3').pk}/?*done=1*")
    expect(page.get_by_text("Decision recorded for i2: gender.")).to_be_visible()
    # The progress goes on: one decided, i3 the one item left.
    expect(page.locator("#queue-progress")).to_contain_text("1 decided so far · 1 item left in the queue")
    shot(page, "21-adjudication-item")
    tie = page.locator("#question-gender")
    assert "No majority" in tie.inner_text()
    assert page.locator("input[name='d-gender']:checked").count() == 0
    page.keyboard.press("Enter")  # nothing chosen: the browser refuses before sending
    assert page.evaluate("document.querySelector('input[name=d-gender]:invalid') !== null")
    page.keyboard.press("1")  # the first option, male
    expect(tie.get_by_role("radio", name="male", exact=True)).to_be_checked()
    page.keyboard.press("Enter")

    page.wait_for_url(f"**/studies/{study.pk}/adjudicate/")
    expect(page.get_by_text("Nothing to adjudicate")).to_be_visible()
    decided = {
        label.item.external_id: label
        for label in ConsensusLabel.objects.filter(study=study, rule="adjudicated").select_related(
            "item", "adjudicated_by"
        )
    }
    assert {k: (v.value, v.adjudicated_by.username) for k, v in decided.items()} == {
        "i2": ("female", "expert"),
        "i3": ("male", "expert"),
    }
    assert page.js_errors == []


def test_a_crowd_annotator_cannot_open_the_queue_or_an_item(
    browser: Any, server: Any, judged: dict[str, Any]
) -> None:
    study = judged["study"]
    page = open_page(browser, server)
    sign_in(page, "crowd")
    page.get_by_role("link", name="Annotate").click()
    assert page.get_by_role("link", name="Adjudicate").count() == 0
    for url in (
        f"/studies/{study.pk}/adjudicate/",
        f"/studies/{study.pk}/adjudicate/{study.items.first().pk}/",
    ):
        response = page.goto(url)
        assert response.status == 403 and "bot" not in page.content()


@pytest.fixture
def boxed(transactional_db: None, settings: Any, tmp_path: Any) -> dict[str, Any]:
    """A stereotype-markers item (2000x1000) on which two annotators drew boxes, its attributes a tie."""
    from annotations.interchange.annotation_import import annotations_import_records
    from annotations.services.consensus import consensus_compute
    from annotations.services.studies import study_create
    from protocols.schema import load_preset
    from tests.annotations.builders import image_item
    from tests.factories import UserFactory

    settings.DATA_DIR = tmp_path
    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name="Boxes", protocol=load_preset("stereotype-markers"), overlap=2)
    item = image_item(study, "m1", size=(2000, 1000))
    item.metadata = {"attributes": ["hat", "scarf"], "identity": "x"}
    item.save(update_fields=["metadata"])

    def line(who: str, question: str, value: Any) -> dict[str, Any]:
        return {
            "item": "m1",
            "annotator": who,
            "annotator_kind": "human",
            "question": question,
            "value": value,
        }

    records = [
        line("ann", "attributes", ["hat"]),
        line("ann", "attribute_boxes", [{"option": "hat", "x": 100, "y": 50, "w": 400, "h": 200}]),
        line("bea", "attributes", ["scarf"]),
        line("bea", "attribute_boxes", [{"option": "scarf", "x": 1000, "y": 500, "w": 300, "h": 100}]),
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    consensus_compute(study=study, question="attributes")
    return {"study": study, "item": item}


def test_everyones_boxes_follow_the_canvas_zoom(browser: Any, server: Any, boxed: dict[str, Any]) -> None:
    """The task page's canvas: + zooms, the read-only boxes grow with the image, F fits again."""
    from playwright.sync_api import expect

    study, item = boxed["study"], boxed["item"]
    page = open_page(browser, server, 1366, 860)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/adjudicate/{item.pk}/")
    expect(page.locator("#canvas-tools")).to_be_visible()
    rects = page.locator(".canvas-stage svg rect")
    expect(rects).to_have_count(2)
    image = page.locator(".canvas-stage img")
    expect(image).to_have_js_property("complete", True)

    def widths() -> tuple[float, float]:
        return (image.bounding_box()["width"], rects.nth(0).bounding_box()["width"])

    fit_image, fit_box = widths()
    assert abs(fit_box / fit_image - 400 / 2000) < 0.02  # the box in original pixels, scaled to the fit
    page.keyboard.press("+")
    expect(page.locator("#zoom-level")).not_to_have_text("Fit")
    zoomed_image, zoomed_box = widths()
    assert zoomed_image > fit_image * 1.3 and abs(zoomed_box / zoomed_image - 400 / 2000) < 0.02
    page.keyboard.press("f")
    expect(page.locator("#zoom-level")).to_have_text("Fit")
    listed = page.locator(".box-list").inner_text()
    # each annotator's boxes, also as text; people blinded by number
    assert "Annotator 1: " in listed and "Annotator 2: " in listed and "ann: " not in listed
    assert page.js_errors == []
