"""A study under an overlap policy in real headless Chromium (docs/overlap.md, "A study under a policy"):
the researcher sets ``agree:2/3`` on the study page's Overlap tab, two annotators give the one item the
same answer on the task page, and a third is given nothing: the item stopped after two agreeing
judgements. Then the Overlap tab replays a policy on those answers.

Screenshots in ``test-output/browser/overlap-*.png``. Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import image_items, open_page, shot, sign_in

PROTOCOL = """
name: Present or not
unit: image
questions:
  - key: present
    kind: single
    prompt: Is the attribute present?
    options: ["yes", "no"]
"""


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name="Agreeing study", protocol=load_protocol_text(PROTOCOL), overlap=3)
    image_items(study, [(40, 90, 160)], (400, 300))
    for name in ("ann1", "ann2", "ann3"):
        enrollment_add(study=study, user=UserFactory.create(username=name, role="annotator"))
    return {"study": study}


def _answer(browser: Any, server: Any, study_id: int, username: str, value: str) -> None:
    page = open_page(browser, server)
    sign_in(page, username)
    page.goto(f"/annotate/studies/{study_id}/next/")
    page.wait_for_selector("#task-form")
    task_url = page.url
    page.locator("#question-present").get_by_label(value).check()
    page.locator("#submit-button").click()
    page.wait_for_url(lambda url: url != task_url)
    assert page.js_errors == []
    page.context.close()


def test_agree_stops_handing_out_an_item_after_two_agreeing_judgements(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Assignment, Item, Study

    study = world["study"]
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/#overlap")
    page.get_by_label("Overlap policy").fill("agree:2/3")
    page.get_by_role("button", name="Save policy").click()
    page.wait_for_url(f"**/studies/{study.pk}/#overlap")
    assert page.locator("#overlap-policy-current").inner_text() == "agree:2/3"
    assert page.locator("#overlap-question-current").inner_text() == "present"
    shot(page, "overlap-1-policy-saved")
    assert Study.objects.get(pk=study.pk).overlap_policy == "agree:2/3"

    _answer(browser, server, study.pk, "ann1", "no")
    item = Item.objects.get(study=study)
    assert (item.judgements, item.policy_stopped) == (1, False)
    _answer(browser, server, study.pk, "ann2", "no")
    item.refresh_from_db()
    assert (item.judgements, item.policy_stopped, item.policy_slots) == (2, True, 2)

    third = open_page(browser, server)
    sign_in(third, "ann3")
    third.goto(f"/annotate/studies/{study.pk}/next/")
    assert "There is nothing left for you in this study right now" in third.locator("main").inner_text()
    shot(third, "overlap-2-nothing-left")
    assert not Assignment.objects.filter(annotator__user__username="ann3").exists()
    assert third.js_errors == []

    # The replay on the study's own answers: two judgements, both used, nothing saved by agree:2/3.
    page.goto(f"/studies/{study.pk}/#overlap")
    page.get_by_label("Policy to replay").fill("agree:1/3")
    page.get_by_role("button", name="Replay").click()
    page.wait_for_selector("#overlap-replay")
    assert page.locator("#replay-used").inner_text() == "1 of 2"
    assert page.locator("#replay-saved").inner_text() == "50.0%"
    assert page.locator("#replay-same").inner_text() == "100.0%"
    assert "no" in page.locator("#replay-by-label").inner_text()
    shot(page, "overlap-3-replay")
    assert page.js_errors == []
