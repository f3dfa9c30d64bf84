"""The comparison page in real headless Chromium: from a study page to two studies side by side.

Screenshot in ``test-output/browser/compare.png``. Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import open_page, shot, sign_in, unlabelled_inputs


@pytest.fixture
def studies(transactional_db: None) -> dict[str, Any]:
    from tests.annotations.builders import A_MARKED, B_MARKED, ssi_study
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    return {
        "a": ssi_study(owner, "Model <b>A</b>", "m-a", A_MARKED),
        "b": ssi_study(owner, "Model B", "m-b", B_MARKED),
    }


def test_compare_two_studies_from_the_study_page(browser, server, studies) -> None:
    from playwright.sync_api import expect

    a, b = studies["a"], studies["b"]
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{a.pk}/")
    page.get_by_role("link", name="Compare with another study").click()
    expect(page.get_by_role("status")).to_contain_text("Pick at least one more study")
    expect(page.get_by_label("Study A", exact=True)).to_have_value(str(a.pk))
    page.get_by_label("Study B", exact=True).select_option(str(b.pk))
    page.get_by_role("button", name="Compare").click()
    table = page.get_by_role("table", name="Mean SSI by category, model and condition")
    expect(table).to_contain_text("B − A")
    initial = table.get_by_role("row").filter(has_text="initial")
    expect(initial).to_contain_text("0.5")
    expect(initial).to_contain_text("0.6667")
    expect(initial).to_contain_text("0.1667")
    expect(page.get_by_role("heading", name="Sides")).to_be_visible()
    expect(page.locator("#sides ~ table")).to_contain_text("Model <b>A</b>")  # shown as text, not markup
    figure = page.get_by_role(
        "img", name="Mean SSI by category, model and condition: mean_ssi per group for each study"
    )
    figure.scroll_into_view_if_needed()  # lazy: loads when near the viewport (below the warning and contents)
    expect(figure).to_have_js_property("complete", True)
    assert figure.evaluate("img => img.naturalWidth") > 100
    assert unlabelled_inputs(page) == []
    shot(page, "compare")
    assert page.js_errors == []
