"""Issue 25, points 1 and 4, in real headless Chromium: a visual-ness pilot with 1 of 3 ratings per term
says "too few" at the top of its findings and lists no visual attribute until the reader includes the
partial terms; the long pages' table of contents stays in view, sections fold, and rows over 0 items
hide behind "Show empty".

Screenshots in ``test-output/browser/findings-pilot.png`` and ``agreement-toc.png``. Skipped when
/usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import open_page, shot, sign_in

TERMS = ("kind", "sombrero", "talkative")


@pytest.fixture
def pilot(transactional_db: None) -> dict[str, Any]:
    from annotations.interchange.annotation_import import annotations_import_records
    from annotations.interchange.item_import import items_import_records
    from annotations.services.studies import study_create
    from protocols.schema import load_preset
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    visual = study_create(
        owner=owner, name="Visual-ness pilot", protocol=load_preset("visualness"), overlap=3
    )
    items_import_records(
        study=visual, records=[(f"row {n}", {"external_id": t, "text": t}) for n, t in enumerate(TERMS)]
    )
    lines = [{"item": t, "annotator": "asia", "question": "visual", "value": "agree"} for t in TERMS]
    annotations_import_records(study=visual, records=list(enumerate(lines, start=1)))
    axes = study_create(owner=owner, name="Nurses pilot", protocol=load_preset("bias-axes"), overlap=2)
    items_import_records(
        study=axes,
        records=[("row 1", {"external_id": "n1", "condition": "base", "metadata": {"occupation": "nurse"}})],
    )
    answers = [
        {"item": "n1", "annotator": who, "question": key, "value": value}
        for who, gender in (("r1", "female"), ("r2", "male"))
        for key, value in (("person", "yes"), ("gender", gender))
    ]
    annotations_import_records(study=axes, records=list(enumerate(answers, start=1)))
    return {"visual": visual, "axes": axes}


def test_the_pilot_findings_say_too_few_and_list_nothing_until_partial_is_included(
    browser, server, pilot
) -> None:
    from playwright.sync_api import expect

    study = pilot["visual"]
    page = open_page(browser, server, width=1366, height=860)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Findings").first.click()
    expect(page.locator("#findings-warning")).to_contain_text("fewer than the minimum of 30")
    expect(page.locator("#coverage-summary")).to_contain_text("0 settled · 3 partial · 0 with none")
    attributes = page.locator("#t-visual_attributes")
    expect(attributes).to_contain_text("insufficient data: no item has its 3 judgements")
    expect(attributes.get_by_role("cell", name="kind")).to_have_count(0)
    shot(page, "findings-pilot")
    page.get_by_role("switch", name="Include partial items").click()
    expect(page).to_have_url(f"{server.url}/studies/{study.pk}/findings/?source=consensus&partial=1")
    expect(attributes.get_by_role("cell", name="kind", exact=True)).to_be_visible()
    expect(attributes).to_contain_text("includes 3 partial items (provisional)")
    page.get_by_role("switch", name="Count settled items only").click()
    expect(attributes.get_by_role("cell", name="kind", exact=True)).to_have_count(0)
    assert page.js_errors == []


def test_agreement_toc_stays_in_view_sections_fold_and_empty_rows_hide(browser, server, pilot) -> None:
    from playwright.sync_api import expect

    study = pilot["axes"]
    page = open_page(browser, server, width=1280, height=720)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/agreement/")
    toc = page.get_by_role("navigation", name="On this page")
    expect(toc).to_be_visible()
    expect(page.get_by_text("undefined: the matrix is empty")).to_have_count(0)
    page.get_by_role("link", name="Consensus", exact=True).click()
    expect(page.get_by_role("heading", name="Consensus", exact=True)).to_be_in_viewport()
    expect(toc).to_be_in_viewport()  # sticky: still there after the jump down the page
    assert toc.evaluate("n => getComputedStyle(n).position") == "sticky"
    alpha = page.locator("details#alpha")
    alpha.locator("summary").click()
    expect(alpha).not_to_have_attribute("open", "")
    alpha.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(alpha).to_have_attribute("open", "")
    toc.get_by_role("link", name="Show empty").click()
    expect(page).to_have_url(f"{server.url}/studies/{study.pk}/agreement/?empty=1")
    expect(page.get_by_text("undefined: the matrix is empty").first).to_be_visible()
    shot(page, "agreement-toc")
    toc.get_by_role("link", name="Hide empty rows").click()
    expect(page.get_by_text("undefined: the matrix is empty")).to_have_count(0)
    page.goto(f"/studies/{study.pk}/findings/")
    expect(page.get_by_role("navigation", name="On this page")).to_be_visible()
    assert page.js_errors == []
