"""The reliability gate on the findings page in real headless Chromium (docs/metrics.md, "Reliability
gate"): alpha beside each finding, the warning naming the question people answered at random, leaving that
question out (and taking it back), and drawing the validation sample from the page, after which the page
reads the machine + human sample, named in words.

Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import open_page, sign_in


@pytest.fixture
def gated(transactional_db: None) -> Any:
    from tests.annotations.builders import reliability_study
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    return reliability_study(owner)


def test_alpha_warning_exclusion_and_sample_on_the_findings_page(
    browser: Any, server: Any, gated: Any
) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{gated.pk}/findings/")
    # the gate: one row per question read, the random one unreliable with its alpha
    gate = page.locator("#reliability-table")
    expect(gate).to_be_visible()
    gender = gate.locator("tr", has=page.locator("th", has_text="gender"))
    expect(gender).to_contain_text("unreliable")
    expect(page.locator("#reliability-thresholds")).to_contain_text("0.800")
    # beside each finding: the warning naming the question and its alpha, and the alphas it reads
    warning = page.locator(".table-warning").first
    expect(warning).to_be_visible()
    expect(warning).to_contain_text("gender (alpha")
    expect(page.locator(".table-alpha").first).to_contain_text("age alpha 1.000 (reliable)")

    # leave the random question out, with the reason; the report states it, the warnings stop naming it
    page.locator("#exclude-question").select_option("gender")
    page.locator("#exclude-reason").fill("answered at random in the pilot")
    page.get_by_role("button", name="Leave it out").click()
    expect(page.locator("#excluded-questions")).to_contain_text("gender is left out of the findings by res")
    expect(page.locator("#excluded-questions")).to_contain_text("answered at random in the pilot")
    expect(page.locator(".table-warning", has_text="gender (alpha")).to_have_count(0)
    page.get_by_role("button", name="Read it again").click()
    expect(page.locator("#excluded-questions")).to_have_count(0)
    expect(page.locator(".table-warning", has_text="gender (alpha").first).to_be_visible()

    # draw the validation sample from the page; the page then reads the machine + human sample
    form = page.locator("#sample-form")
    form.get_by_label("Labeller").select_option("vlm@1")
    form.get_by_label("Design").select_option("uniform")
    form.get_by_label("Size").fill("30")
    form.get_by_label("Seed").fill("3")
    form.get_by_role("button", name="Draw the sample").click()
    page.wait_for_url("**source=ppi**")
    expect(page.locator("#source-label")).to_have_text("vlm v1 + human sample (uniform, 30)")
    expect(page.locator("#coverage-summary")).to_contain_text("Human part: 30 of the 30 sampled items")
    expect(page.locator(".table-warning").first).to_contain_text("gender (alpha")
