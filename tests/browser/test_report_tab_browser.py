"""The Report tab in real headless Chromium: the study page's tab bar leads to it, the preview loads
after the page (from its own URL, "Preview loading…" meanwhile, the reason said when it fails) and shows
the report in a sandboxed frame (the study's name as text, nothing run), a PDF is made in the background
and its row follows the job live until its link shows; rows of jobs a worker has not finished follow
them by themselves until none is pending or running.

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
    preview = page.locator("#report-preview")
    assert preview.get_attribute("sandbox") == "" and preview.get_attribute("src") is None
    expect(page.get_by_role("status").filter(has_text="Preview")).to_have_text("Preview loaded.")
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


def test_the_preview_loads_after_the_page_and_says_why_it_failed(
    browser: Any, server: Any, study: Any
) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, server)
    sign_in(page, "res")
    held: list[Any] = []
    page.route("**/report/preview/**", lambda route: held.append(route))  # its answer waits for the test
    page.goto(f"/studies/{study.pk}/report/?correction=bh")
    status = page.locator("#report-preview-status")
    expect(status).to_have_text("Preview loading…")
    assert status.get_attribute("role") == "status"
    expect(page.locator("#report-preview")).to_be_hidden()
    assert len(held) == 1 and held[0].request.url.endswith(
        f"/studies/{study.pk}/report/preview/?correction=bh"
    )
    held[0].continue_()
    expect(page.frame_locator("#report-preview").locator("h1")).to_have_text(f"Audit report: {NAME}")
    expect(page.locator("#report-preview")).to_be_visible()
    assert page.js_errors == []

    # a refusal: its reason (plain text) said in the frame's place
    page.unroute("**/report/preview/**")
    page.route(
        "**/report/preview/**",
        lambda route: route.fulfill(
            status=400, content_type="text/plain; charset=utf-8", body="compare: study 9 is not yours"
        ),
    )
    page.reload()
    expect(status).to_have_text("The preview could not be loaded: compare: study 9 is not yours")
    expect(page.locator("#report-preview")).to_be_hidden()
    # a server that fails without a reason, or cannot be reached
    page.unroute("**/report/preview/**")
    page.route("**/report/preview/**", lambda route: route.fulfill(status=502, body="<h1>Bad gateway</h1>"))
    page.reload()
    expect(status).to_contain_text("The preview could not be loaded: the server answered 502.")
    page.unroute("**/report/preview/**")
    page.route("**/report/preview/**", lambda route: route.abort())
    page.reload()
    expect(status).to_contain_text("The preview could not be loaded: the server could not be reached.")
    shot(page, "report-3-preview-failed")


def test_job_rows_follow_their_jobs_until_none_is_open(browser: Any, server: Any, study: Any) -> None:
    from playwright.sync_api import expect

    from reports.models import ReportJob

    owner = study.owner
    queued = ReportJob.objects.create(study=study, requested_by=owner, format="pdf")
    failing = ReportJob.objects.create(study=study, requested_by=owner, format="tex")
    page = open_page(browser, server)
    sign_in(page, "res")
    polls: list[str] = []
    page.on("request", lambda request: polls.append(request.url) if "/api/" in request.url else None)
    page.goto(f"/studies/{study.pk}/report/")
    row = page.locator(f'li[data-report-job="{queued.pk}"]')
    other = page.locator(f'li[data-report-job="{failing.pk}"]')
    expect(row.locator(".export-status")).to_have_text("Pending")
    expect(other.locator(".export-status")).to_have_text("Pending")
    expect(row.get_by_role("link")).to_have_count(0)

    # a worker finishes one and fails the other: the rows change by themselves, no reload
    ReportJob.objects.filter(pk=queued.pk).update(status="done", filename=f"report-study-{study.pk}.pdf")
    ReportJob.objects.filter(pk=failing.pk).update(status="failed", error="pdflatex is missing")
    expect(row.locator(".export-status")).to_have_text("Done", timeout=12000)
    link = row.get_by_role("link", name=f"download report-study-{study.pk}.pdf")
    expect(link).to_have_attribute("href", f"/studies/{study.pk}/report/{queued.pk}/download/")
    expect(other.locator(".export-status")).to_have_text("Failed", timeout=12000)
    expect(other).to_contain_text("pdflatex is missing")
    assert polls and all(f"/api/studies/{study.pk}/report/" in url for url in polls)
    expect(page.frame_locator("#report-preview").locator("h1")).to_have_text(f"Audit report: {NAME}")
    shot(page, "report-4-jobs-followed")

    # nothing is pending or running any more: the polling has stopped
    asked = len(polls)
    page.wait_for_timeout(4500)
    assert len(polls) == asked
    assert page.js_errors == []
