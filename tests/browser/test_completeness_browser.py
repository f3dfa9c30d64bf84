"""The stereotype-markers task page in real Chromium: before submit it says what the protocol still
needs ("2 selected attributes have no box", "2 more pages of options") and sends nothing until done."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.base import ContentFile

from tests.browser.pages import open_page, png, shot, sign_in, unlabelled_inputs

ATTRIBUTES = [
    "hat",
    "poncho",
    "sombrero",
    "moustache",
    "cactus",
    "guitar",
    "desert",
    "tequila",
    "donkey",
    "serape",
    "maracas",
    "taco",
]


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    from annotations.models import Item, ItemImage
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_preset
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name="Markers", protocol=load_preset("stereotype-markers"), overlap=1)
    item = Item.objects.create(
        study=study,
        external_id="img-0",
        kind="image",
        sha256="0" * 64,
        metadata={"identity": "Xland", "attributes": ATTRIBUTES},
    )
    image = ItemImage(item=item, position=0, width=800, height=600, content_type="image/png", sha256="0" * 64)
    image.file.save("0.png", ContentFile(png((800, 600), (40, 90, 160))), save=False)
    image.save()
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    return {"study": study}


def _draw(page: Any, option: str, at: float) -> None:
    from playwright.sync_api import expect

    page.get_by_label("New boxes support").select_option(option)
    image = page.locator(".box-canvas img").first
    expect(image).to_have_js_property("complete", True)
    area = image.bounding_box()
    x, y = area["x"] + at * area["width"], area["y"] + 0.3 * area["height"]
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 40, y + 30, steps=4)
    page.mouse.up()


def test_the_page_warns_before_submit_until_boxes_and_pages_are_done(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from playwright.sync_api import expect

    from annotations.models import Annotation

    page = open_page(browser, server)
    sign_in(page)
    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    page.wait_for_selector("#task-form")
    task_url = page.url
    attributes = page.locator("#question-attributes")
    attributes.get_by_label("hat").check()
    attributes.get_by_label("poncho").check()
    check = page.locator("#submit-check")
    assert check.is_hidden()

    page.locator("#submit-button").click()
    expect(check).to_be_visible()
    expect(check).to_contain_text("2 more pages of options to see in question 1")
    expect(check).to_contain_text("2 selected attributes have no box: hat, poncho")
    assert page.url == task_url and not Annotation.objects.exists()  # nothing was sent
    shot(page, "11-markers-submit-check-1280")
    assert unlabelled_inputs(page) == []

    # The list follows the answers: one box drawn, one page seen.
    _draw(page, "hat", 0.1)
    expect(check).to_contain_text("1 selected attribute has no box: poncho")
    attributes.get_by_role("button", name="More options").click()
    expect(check).to_contain_text("1 more page of options to see in question 1")
    attributes.get_by_role("button", name="More options").click()
    _draw(page, "poncho", 0.5)
    expect(check).to_be_hidden()

    page.locator("#submit-button").click()
    page.wait_for_url(lambda url: url != task_url)
    stored = {a.question_key: a for a in Annotation.objects.all()}
    assert stored["attributes"].value == ["hat", "poncho"]
    assert set(stored["attributes"].shown) == {*ATTRIBUTES, "none_of_the_above"}
    assert sorted(box["option"] for box in stored["attribute_boxes"].value) == ["hat", "poncho"]
    assert json.dumps(stored["attribute_boxes"].value)  # plain JSON, in image pixels
    assert page.js_errors == []
