"""The Report tab in real headless Chromium: the study page's tab bar leads to it, the preview shows the
report in a sandboxed frame (the study's name as text, nothing run), a PDF is made in the background and
its row follows the job live until its link shows.

Screenshots in ``test-output/browser/report-*.png``. Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import open_page, shot, sign_in, unlabelled_inputs

NAME = "<i>Nurses</i> & Ölçü"


@pytest.fixture
def study(transactional_db: None) -> Any:
    from tests.factories import ItemFactory, StudyFactory, UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = StudyFactory.create(owner=owner, name=NAME)
    for condition in ("base", "base", "mitigated"):
        ItemFactory.create(study=study, condition=condition)
    return study


def test_the_report_tab_previews_and_follows_its_jobs(browser: Any, server: Any, study: Any) -> None:
    from playwright.sync_api import expect

    from reports.models import ReportJob

    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/")
    page.locator("#tab-report").click()
    page.wait_for_url(f"**/studies/{study.pk}/report/")
    frame = page.frame_locator("#report-preview")
    expect(frame.locator("h1")).to_have_text(f"Audit report: {NAME}")
    expect(frame.locator("caption", has_text="Items by condition, model and prompt set")).to_have_count(1)
    assert unlabelled_inputs(page) == []
    page.locator("#report-preview").scroll_into_view_if_needed()
    shot(page, "report-1-preview")

    # the options: the label source is a choice among the sources (nobody answered: the default only)
    source = page.get_by_label("Labels from")
    expect(source.locator("option")).to_have_text(["the protocol's default (consensus)"])
    page.get_by_label("Multiple-comparison correction").select_option("bh")
    page.get_by_role("button", name="Update the preview").click()
    page.wait_for_url("**correction=bh**")
    expect(page.get_by_label("Multiple-comparison correction")).to_have_value("bh")
    expect(page.frame_locator("#report-preview").locator("h1")).to_have_text(f"Audit report: {NAME}")
    page.get_by_label("Multiple-comparison correction").select_option("holm")
    page.get_by_role("button", name="Update the preview").click()
    page.wait_for_url("**correction=holm**")

    page.get_by_role("button", name="PDF", exact=True).click()
    page.wait_for_url(f"**/studies/{study.pk}/report/**")
    expect(page.locator(".messages")).to_contain_text("is queued")
    row = page.locator("li[data-report-job]").first
    expect(row).to_contain_text("PDF · Holm · Done · download")

    # a job still waiting for a worker: its row follows it without a reload
    waiting = ReportJob.objects.create(study=study, requested_by=study.owner, format="tex")
    page.reload()
    row = page.locator(f'li[data-report-job="{waiting.pk}"]')
    expect(row).to_contain_text("Pending")
    ReportJob.objects.filter(pk=waiting.pk).update(status="running")
    expect(row.locator(".export-status")).to_have_text("Running", timeout=8000)
    ReportJob.objects.filter(pk=waiting.pk).update(status="done", filename="r.zip")
    expect(row.get_by_role("link", name="download")).to_be_visible(timeout=8000)
    shot(page, "report-2-jobs")

    with page.expect_download() as download:
        page.get_by_role("button", name="HTML", exact=True).click()
    assert download.value.suggested_filename == f"report-study-{study.pk}.html"
    assert page.js_errors == []
