"""The study page's Items and Export tabs in real headless Chromium (issue 25, point 5): one import
chooser (Items open on an empty study, the other imports folded), an import comes back to the Items
tab, an export stays on the Export tab, and a background export's status updates live until its link
shows.

Screenshots in ``test-output/browser/tabs-*.png``. Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import open_page, shot, sign_in, unlabelled_inputs

PROTOCOL = """
name: Places
unit: text
instructions: Read the term.
questions:
  - key: place
    kind: single
    prompt: "Is {text} a place?"
    options: [Place, Not a place]
"""


@pytest.fixture
def study(transactional_db: None) -> Any:
    from annotations.services.studies import study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    return study_create(owner=owner, name="Places", protocol=load_protocol_text(PROTOCOL))


def test_one_import_chooser_back_to_items_and_exports_stay_on_their_tab(
    browser: Any, server: Any, study: Any, tmp_path: Any
) -> None:
    from playwright.sync_api import expect

    from annotations.models import ExportJob, Item

    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/#items")
    items = page.locator("#items")
    # one chooser: on an empty study only the items import is open; one file field shows
    expect(items.locator("details.import-choice")).to_have_count(3)
    expect(items.locator("details.import-choice[open]")).to_have_count(1)
    expect(items.locator("details.import-choice[open] summary")).to_contain_text("Items")
    expect(items.locator("input[type=file]:visible")).to_have_count(1)
    assert unlabelled_inputs(page) == []
    shot(page, "tabs-1-import-chooser")
    manifest = tmp_path / "terms.csv"
    manifest.write_text("external_id,text\nt1,harbour\nt2,meadow\n")
    page.get_by_label("Items: a zip of images").set_input_files(str(manifest))
    page.get_by_role("button", name="Import items").click()
    page.wait_for_url(f"**/studies/{study.pk}/#items")
    expect(page.locator(".messages")).to_contain_text("Imported 2 items")
    expect(items).to_be_visible()
    assert Item.objects.filter(study=study).count() == 2
    # opening another import closes the first (one open at a time)
    items.get_by_text("Annotations: JSONL, or COCO boxes").click()
    expect(items.locator("details.import-choice[open] summary")).to_have_text(
        "Annotations: JSONL, or COCO boxes"
    )

    page.goto(f"/studies/{study.pk}/#export")
    page.locator("#export").get_by_role("button", name="ZIP", exact=True).click()
    page.wait_for_url(f"**/studies/{study.pk}/#export")
    expect(page.locator(".messages")).to_contain_text("its status is below")
    expect(page.locator("#export")).to_be_visible()
    expect(page.locator("li[data-export-job]").first).to_contain_text("ZIP · Done · download")

    # a job still waiting for a worker: its row follows it without a reload
    waiting = ExportJob.objects.create(study=study, requested_by=study.owner, format="zip")
    page.reload()
    row = page.locator(f'li[data-export-job="{waiting.pk}"]')
    expect(row).to_contain_text("Pending")
    ExportJob.objects.filter(pk=waiting.pk).update(status="running")
    expect(row.locator(".export-status")).to_have_text("Running", timeout=8000)
    ExportJob.objects.filter(pk=waiting.pk).update(status="done")
    expect(row.get_by_role("link", name="download")).to_be_visible(timeout=8000)
    shot(page, "tabs-2-export-live")
    assert page.js_errors == []
