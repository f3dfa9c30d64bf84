"""Rater pools with quotas in real headless Chromium (docs/crowd.md, "Rater pools and quotas"): the researcher
declares the pools on the study page's Overlap tab (a SeeGULL-shaped pair: raters from the identity's region
and raters in North America), a North American rater is given the item, and a rater of a pool the study
does not collect is told why on the task page.

Screenshots in ``test-output/browser/pools-*.png``. Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import image_items, open_page, shot, sign_in


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    from annotations.services.studies import enrollment_add
    from tests.factories import StudyFactory, UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = StudyFactory.create(owner=owner, name="Whose stereotype?", overlap=3)
    image_items(study, [(40, 90, 160)], (400, 300))
    for name, region in (("ann-na", "North America"), ("ann-eu", "Europe")):
        user = UserFactory.create(username=name, role="annotator")
        enrollment_add(study=study, user=user, attributes={"region": region})
    return {"study": study}


def test_the_overlap_tab_declares_pools_and_the_task_page_follows_them(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Assignment, Study

    study = world["study"]
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/#overlap")
    page.get_by_label("Pool attribute").fill("region")
    page.get_by_label("Quotas (judgements per item from each pool)").fill(
        "Sub-Saharan Africa: 2\nNorth America: 1"
    )
    page.get_by_role("button", name="Save rater pools").click()
    page.wait_for_url(f"**/studies/{study.pk}/#overlap")
    assert "Rater pools saved." in page.content()
    assert page.locator("#pool-quotas tbody tr").count() == 2
    shot(page, "pools-1-declared")
    assert Study.objects.get(pk=study.pk).rater_pool_quotas == {"Sub-Saharan Africa": 2, "North America": 1}
    assert page.js_errors == []
    page.context.close()

    american = open_page(browser, server)
    sign_in(american, "ann-na")
    american.goto(f"/annotate/studies/{study.pk}/next/")
    american.wait_for_selector("#task-form")
    assert Assignment.objects.get().rater_pool == "North America"
    american.context.close()

    european = open_page(browser, server)
    sign_in(european, "ann-eu")
    european.goto(f"/annotate/studies/{study.pk}/next/")
    assert (
        "This study collects judgements per region; your region is not one it collects" in european.content()
    )
    shot(european, "pools-2-not-collected")
    european.context.close()


def test_the_invitations_page_makes_a_link_per_pool_and_keeps_fixed_attributes_as_written(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from annotations.models import Invitation
    from annotations.services.rater_pools import study_rater_pools_set

    study = study_rater_pools_set(
        study=world["study"], attribute="region", quotas={"Sub-Saharan Africa": 2, "North America": 1}
    )
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/invitations/")
    pool_form = page.locator("#per-pool form")
    pool_form.get_by_label("Items per participant (quota)").fill("5")
    pool_form.get_by_label("Completion code").fill("C0DE42")
    pool_form.get_by_role("button", name="Make one Prolific link per pool").click()
    page.wait_for_load_state()
    text = page.content()
    assert "2 Prolific links made, one per pool" in text
    # one item, 5 per participant: each pool still needs its quota of people
    assert "Prolific: Sub-Saharan Africa: 2 participants" in text
    assert dict(Invitation.objects.values_list("label", "max_uses")) == {
        "Prolific: North America": 1,
        "Prolific: Sub-Saharan Africa": 2,
    }
    assert page.get_by_text("region: North America").count() >= 1
    shot(page, "pools-3-links-per-pool")

    # A link of its own with a fixed attribute YAML would have read as false: kept as written.
    new = page.locator("form").filter(has=page.get_by_label("Fixed attributes (YAML)"))
    new.get_by_label("Label").fill("Norway")
    new.get_by_label("Fixed attributes (YAML)").fill("country: NO")
    new.get_by_role("button", name="Create link").click()
    page.wait_for_load_state()
    assert Invitation.objects.get(label="Norway").attributes == {"country": "NO"}
    assert page.get_by_text("country: NO").count() == 1
    assert page.js_errors == []
    page.context.close()
