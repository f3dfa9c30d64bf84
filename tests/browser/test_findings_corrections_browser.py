"""Issue 26 point 2 in real headless Chromium: on the demo study's findings (SODA: a permutation test per
condition), the reader switches the multiple-comparison correction from Holm to Benjamini-Hochberg and
the page says which one its adjusted p-values use; each figure also downloads as PDF.

Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

from tests.browser.pages import open_page, sign_in


def test_the_reader_switches_the_correction_of_the_findings(browser: Any, server: Any, demo: Any) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, server)
    sign_in(page, "researcher")
    page.goto(f"/studies/{demo.pk}/findings/")
    choice = page.get_by_label("Multiple comparisons")
    expect(choice).to_have_value("holm")
    expect(page.locator("#correction-note")).to_contain_text("Holm")
    # The first table with corrected p-values; a long one starts folded behind its summary line.
    fold = page.locator("details.rows-fold", has=page.locator("th", has_text="p_adjusted")).first
    if fold.count():
        fold.locator("summary").click()
    expect(page.locator("th", has_text="p_adjusted").first).to_be_visible()

    choice.select_option("bh")
    page.get_by_role("button", name="Show", exact=True).click()
    page.wait_for_url("**correction=bh**")
    expect(page.get_by_label("Multiple comparisons")).to_have_value("bh")
    expect(page.locator("#correction-note")).to_contain_text("Benjamini-Hochberg")
    # the figure downloads keep the reader's choices and offer PDF beside PNG and SVG
    pdf = page.locator("a[href*='.pdf']").first
    expect(pdf).to_have_attribute("href", _contains("correction=bh"))


def _contains(text: str) -> Any:
    import re

    return re.compile(re.escape(text))
