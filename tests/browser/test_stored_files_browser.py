"""Item images from an S3 bucket in real headless Chromium: the task page's image is a redirect to a
presigned URL on the test S3 server, which the page's content-security policy allows and which loads
without any CORS set on the bucket (docs/deploy.md, "Object storage")."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import image_items, open_page, sign_in


@pytest.fixture
def world(transactional_db: None, s3_bucket: Any) -> dict[str, Any]:
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_preset
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(
        owner=owner, name="Bucket study", protocol=load_preset("object-attributes"), overlap=1
    )
    image_items(study, [(40, 90, 160)], (2000, 1000))
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    return {"study": study, "bucket": s3_bucket}


def test_the_task_page_shows_an_image_served_from_the_bucket(browser, server, world) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, server)
    loaded: list[str] = []
    page.on("requestfinished", lambda request: loaded.append(request.url))
    sign_in(page)
    page.goto(f"/annotate/studies/{world['study'].pk}/next/")
    image = page.locator(".box-canvas img, .item-image img, main img").first
    expect(image).to_have_js_property("complete", True)
    assert image.evaluate("img => img.naturalWidth") == 1024  # the display version, from the bucket
    bucket = world["bucket"]
    assert any(url.startswith(f"{bucket.endpoint_url}/{bucket.name}/display/") for url in loaded), loaded
    assert page.js_errors == []  # no refusal by the content-security policy, no CORS error
