"""The study page's People tab in real headless Chromium (issue 25, point 5): enrol several accounts at
once (all or none) and unenrol one; the leases they held go back, their answers stay.

Screenshot in ``test-output/browser/people-*.png``. Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.browser.pages import open_page, shot, sign_in, unlabelled_inputs


@pytest.fixture
def studies(transactional_db: None) -> dict[str, Any]:
    from django.utils import timezone

    from annotations.models import Assignment, Item
    from annotations.services.studies import enrollment_add
    from protocols.schema import load_preset
    from tests.factories import StudyFactory, UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    first = StudyFactory.create(
        owner=owner, name="First study", protocol=load_preset("object-attributes").to_dict()
    )
    second = StudyFactory.create(owner=owner, name="Second study", protocol=first.protocol)
    for name in ("ann1", "ann2", "ann3"):
        enrollment_add(study=first, user=UserFactory.create(username=name, role="annotator"))
    enrollment_add(study=second, user=UserFactory.create(username="keeper", role="annotator"))
    item = Item.objects.create(study=second, external_id="x", kind="text", text="x")
    lease = Assignment.objects.create(
        study=second,
        item=item,
        annotator=UserFactory._meta.model.objects.get(username="keeper").annotator,
        lease_expires_at=timezone.now() + timedelta(minutes=30),
    )
    return {"second": second, "lease": lease}


def test_bulk_enrol_all_or_none_and_unenrol(browser: Any, server: Any, studies: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    from annotations.models import Annotation, Assignment, Enrollment

    second = studies["second"]
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{second.pk}/#people")
    people = page.locator("#people")
    people.get_by_text("Enrol several accounts at once").click()
    assert unlabelled_inputs(page) == []
    page.get_by_label("Usernames to enrol").fill("ann1, ann2\nghost")
    page.get_by_label("Pool", exact=True).last.select_option("expert")
    page.get_by_role("button", name="Enrol all").click()
    expect(page.locator(".messages")).to_contain_text("Nobody was enrolled")
    expect(page.locator(".messages")).to_contain_text("ghost")
    assert set(Enrollment.objects.filter(study=second).values_list("user__username", flat=True)) == {"keeper"}
    page.get_by_text("Enrol several accounts at once").click()
    page.get_by_label("Usernames to enrol").fill("ann1\nann2, ann3")
    page.get_by_role("button", name="Enrol all").click()
    expect(page.locator(".messages")).to_contain_text(
        "3 accounts enrolled in the crowd pool: ann1, ann2, ann3"
    )
    expect(people.locator(".enrolled li")).to_have_count(4)
    shot(page, "people-1-bulk-enrolled")

    page.get_by_role("button", name="Unenrol keeper").click()
    expect(page.locator(".messages")).to_contain_text("keeper is unenrolled")
    expect(page.locator(".messages")).to_contain_text("1 item they held went back to the queue")
    expect(people.locator(".enrolled li")).to_have_count(3)
    assert not Enrollment.objects.filter(study=second, user__username="keeper").exists()
    assert Assignment.objects.get(pk=studies["lease"].pk).status == "expired"
    assert Annotation.objects.count() == 0  # nothing else touched
    shot(page, "people-2-unenrolled")
    assert page.js_errors == []
