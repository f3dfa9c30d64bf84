"""The stereotype table uploaded on the findings page in real headless Chromium (issue 25, point 5), with
the released SeeGULL file: the same checks as ``manage.py import_seegull``, all or nothing; a bad file
leaves the table as it was and says why.

Screenshot in ``test-output/browser/stereotypes-upload.png``. Skipped when /usr/bin/chromium is missing,
and when the released files are not under ``WORKBENCH_SHARED_DATA``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.browser.pages import open_page, shot, sign_in, unlabelled_inputs

SEEGULL = Path(settings.WORKBENCH_SHARED_DATA) / "seegull" / "stereotypes_us_states.csv"


@pytest.fixture
def study(transactional_db: None) -> Any:
    from annotations.services.studies import study_create
    from protocols.schema import load_preset
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    return study_create(owner=owner, name="Markers", protocol=load_preset("stereotype-markers"))


@pytest.mark.skipif(not SEEGULL.exists(), reason=f"the released SeeGULL file is not at {SEEGULL}")
def test_upload_the_stereotype_table_on_the_findings_page(
    browser: Any, server: Any, study: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    from annotations.models import StereotypeEntry

    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/findings/")
    section = page.locator("section", has=page.get_by_role("heading", name="Stereotype table"))
    expect(section).to_contain_text("It holds 0 rows")
    assert unlabelled_inputs(page) == []
    section.get_by_label("Stereotype table (SeeGULL CSV").set_input_files(str(SEEGULL))
    section.get_by_role("button", name="Replace the stereotype table").click()
    page.wait_for_url(f"**/studies/{study.pk}/findings/#stereotypes")
    rows = StereotypeEntry.objects.filter(study=study).count()
    assert rows > 100
    expect(page.locator(".messages")).to_contain_text(f"The stereotype table now holds {rows} rows")
    expect(section).to_contain_text(f"It holds {rows} rows")
    shot(page, "stereotypes-upload")

    bad = tmp_path / "bad.csv"
    bad.write_text("who,what\nA,b\n")  # no identity and attribute columns
    section.get_by_label("Stereotype table (SeeGULL CSV").set_input_files(str(bad))
    section.get_by_role("button", name="Replace the stereotype table").click()
    expect(page.locator(".messages")).to_contain_text("Nothing was replaced.")
    assert StereotypeEntry.objects.filter(study=study).count() == rows  # left as it was
    assert page.js_errors == []
