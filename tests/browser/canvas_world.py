"""A study to draw boxes on and the moves the canvas browser tests make on it (shared by
tests/browser/test_canvas_browser.py and tests/browser/test_canvas_tools_browser.py)."""

from __future__ import annotations

import json
from typing import Any

from django.core.files.base import ContentFile

from tests.browser.pages import png, sign_in

WIDTH, HEIGHT = 2000, 1000  # the original image; the page shows a 1024 px display copy


def build_world(protocol: str, name: str) -> dict[str, Any]:
    """A study of ``protocol`` with two 2000x1000 images and one enrolled annotator (``ann``); the world of
    the canvas browser tests (test_canvas_browser.py, test_canvas_tools_browser.py)."""
    from annotations.models import Item, ItemImage
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name=name, protocol=load_protocol_text(protocol), overlap=1)
    for index in range(2):
        item = Item.objects.create(
            study=study, external_id=f"img-{index}", kind="image", sha256=f"{index:064d}"
        )
        image = ItemImage(
            item=item,
            position=0,
            width=WIDTH,
            height=HEIGHT,
            content_type="image/png",
            sha256=f"{index:064d}",
            original_name=f"{index}.png",
        )
        image.file.save(f"{index}.png", ContentFile(png((WIDTH, HEIGHT), (40, 90, 160))), save=False)
        image.save()
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    return {"study": study, "annotator": annotator}


def open_task(page: Any, world: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    sign_in(page)
    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    page.wait_for_selector("#task-form")
    expect(page.locator(".box-canvas img").first).to_have_js_property("complete", True)


def image_box(page: Any) -> dict[str, float]:
    return page.locator(".box-canvas img").first.bounding_box()


def drag(page: Any, start: tuple[float, float], end: tuple[float, float]) -> None:
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move((start[0] + end[0]) / 2, (start[1] + end[1]) / 2, steps=3)
    page.mouse.move(*end, steps=3)
    page.mouse.up()


def stored_boxes(page: Any) -> list[dict[str, Any]]:
    return json.loads(page.locator('input[name="q-boxes"]').input_value())
