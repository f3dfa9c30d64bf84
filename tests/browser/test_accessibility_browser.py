"""Issue 25 point 8: axe-core finds 0 violations on every app page the browser tests reach, in each of
their states (the study page's tabs, a flash message, a confirmation step), as a researcher, an
annotator and an anonymous visitor, and on the error pages (403, 404).

axe-core is installed from the npm registry into ``var/axe`` by ``scripts/browser-deps.sh`` (``make
test`` runs it); the test is skipped, saying why, when it is missing. Screenshots of the error pages go
to ``test-output/browser/`` (``error-*.png``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import AXE, axe_violations, demo_study_with_passwords, open_page, shot, sign_in

pytestmark = pytest.mark.skipif(not AXE.exists(), reason=f"needs axe-core at {AXE} (scripts/browser-deps.sh)")


@pytest.fixture
def demo(transactional_db: None, settings: Any, tmp_path: Any) -> dict[str, Any]:
    """The demo study (``setup_demo``) with an invitation, a machine labeller's answers and a second
    study to compare with; every demo account's password set to the tests' one."""
    from datetime import timedelta

    from django.utils import timezone

    from annotations.models import Annotator, Item, User
    from annotations.services.invitations import invitation_create
    from tests.annotations.builders import A_MARKED, B_MARKED, ssi_study

    study = demo_study_with_passwords(settings, tmp_path)
    researcher = User.objects.get(username="researcher")
    invitation_create(
        study=study,
        created_by=researcher,
        expires_at=timezone.now() + timedelta(days=7),
        max_uses=10,
        label="Pilot",
    )
    a = ssi_study(researcher, "SSI model A", "m-a", A_MARKED)
    b = ssi_study(researcher, "SSI model B", "m-b", B_MARKED)
    return {
        "study": study,
        "compare": (a, b),
        "item": Item.objects.filter(study=study).first(),
        "annotator": Annotator.objects.get(name="annotator1"),
    }


def _check(page: Any, where: str, found: dict[str, list[str]]) -> None:
    page.wait_for_load_state("networkidle")
    violations = axe_violations(page)
    if violations:
        found[where] = violations


def test_no_axe_violation_on_any_app_page(browser: Any, server: Any, demo: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    study, item, annotator = demo["study"], demo["item"], demo["annotator"]
    a, b = demo["compare"]
    pk = study.pk
    found: dict[str, list[str]] = {}
    visited = 0

    anonymous = open_page(browser, server)
    for path in ("/accounts/login/", "/accounts/password_reset/", "/no-such-page/"):
        anonymous.goto(path)
        _check(anonymous, f"anonymous {path}", found)
        visited += 1

    researcher = open_page(browser, server)
    sign_in(researcher, "researcher")
    pages = [
        "/",
        "/studies/new/",
        *[f"/studies/{pk}/#{tab}" for tab in ("overview", "protocol", "items", "people")],
        *[f"/studies/{pk}/#{tab}" for tab in ("invitations", "export", "settings")],
        f"/studies/{pk}/progress/",
        f"/studies/{pk}/quality/",
        f"/studies/{pk}/items/{item.pk}/control/",
        f"/studies/{pk}/annotators/{annotator.pk}/exclude/",
        f"/studies/{pk}/agreement/",
        f"/studies/{pk}/adjudicate/",
        f"/studies/{pk}/findings/",
        f"/studies/{pk}/report/",
        f"/studies/{pk}/invitations/",
        f"/studies/{pk}/generation/",
        f"/studies/{pk}/labelling/",
        f"/studies/{pk}/intermit/",
        f"/compare/?study={a.pk}&study={b.pk}",
        "/compare/",
        "/docs/",
        "/docs/crowd/",
        "/studies/999999/",  # 404 through the domain error
    ]
    for path in pages:
        researcher.goto(path)
        _check(researcher, f"researcher {path}", found)
        visited += 1
    # a flash message: save the study's settings
    researcher.goto(f"/studies/{pk}/quality/")
    researcher.get_by_role("button", name="Save settings").click()
    expect(researcher.locator(".messages")).to_be_visible()
    _check(researcher, "researcher: a flash message", found)
    # the first item of the adjudication queue
    researcher.goto(f"/studies/{pk}/adjudicate/")
    first = researcher.locator("main a[href*='/adjudicate/']").first
    if first.count():
        first.click()
        _check(researcher, "researcher: an adjudication item", found)
        visited += 1
        # its other questions shown, then a save the server refuses (a flagged question left blank)
        researcher.goto(researcher.url + ("&" if "?" in researcher.url else "?") + "all=1")
        _check(researcher, "researcher: an adjudication item, every question", found)
        researcher.evaluate(
            """() => { const form = document.getElementById("task-form"); form.noValidate = true;
                       form.querySelectorAll("fieldset[data-flagged] input").forEach(i => {
                         if (i.type === "text") i.value = ""; else i.checked = false; });
                       form.requestSubmit(); }"""
        )
        expect(researcher.locator("#error-summary")).to_be_visible()
        _check(researcher, "researcher: an adjudication save refused", found)
        visited += 2
    # the queue filtered (by the first reason it offers)
    researcher.goto(f"/studies/{pk}/adjudicate/")
    reasons = researcher.locator("#filter-reason option").all()
    if len(reasons) > 1:
        researcher.locator("#filter-reason").select_option(reasons[1].get_attribute("value") or "")
        researcher.get_by_role("button", name="Filter").click()
        _check(researcher, "researcher: the adjudication queue filtered", found)
        visited += 1
    researcher.goto("/api/docs/")
    assert researcher.evaluate("document.documentElement.lang") == "en"
    # The API's own pages: the browsable API (a list, one study) and the schema's docs.
    for path in ("/api/", f"/api/studies/{pk}/", "/api/docs/"):
        researcher.goto(path)
        if path == "/api/docs/":
            expect(researcher.locator(".swagger-ui .info")).to_be_visible()
        _check(researcher, f"researcher {path}", found)
        visited += 1

    worker = open_page(browser, server)
    sign_in(worker, "annotator2")
    for path in ("/", "/annotate/", f"/annotate/studies/{pk}/next/", f"/annotate/studies/{pk}/mine/"):
        worker.goto(path)
        _check(worker, f"annotator {path}", found)
        visited += 1
    worker.goto(f"/studies/{pk}/progress/")  # a researcher's page: 403
    _check(worker, "annotator: 403", found)
    worker.goto("/no-such-page/")
    _check(worker, "annotator: 404", found)
    print(f"axe-core over {visited + 4} page states")
    assert found == {}, "\n".join(f"{where}:\n  " + "\n  ".join(lines) for where, lines in found.items())


def test_error_pages_say_why_and_offer_a_way_back(browser: Any, server: Any, demo: dict[str, Any]) -> None:
    """Issue 25 point 5: 403 and 404 pages are the workbench's own (header, navigation, main), say the
    reason, and link back; Django's bare pages had no landmark and no way back."""
    from playwright.sync_api import expect

    pk = demo["study"].pk
    worker = open_page(browser, server)
    sign_in(worker, "annotator2")
    worker.goto(f"/studies/{pk}/progress/")  # a researcher's page
    expect(worker.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(worker.get_by_role("main")).to_contain_text("Only the study's researchers may do this.")
    expect(
        worker.get_by_role("navigation", name="Ways back").get_by_role("link", name="Your studies")
    ).to_be_visible()
    shot(worker, "error-403")
    worker.goto("/studies/999999/")  # a domain error (NotFoundError) through DomainErrorMiddleware
    expect(worker.get_by_role("heading", name="Not found")).to_be_visible()
    worker.goto("/no-such-page/")
    expect(worker.get_by_role("main")).to_contain_text("There is no page at /no-such-page/")
    worker.get_by_role("link", name="Your annotation tasks").click()
    worker.wait_for_url("**/annotate/")
    shot(worker, "error-404")
    anonymous = open_page(browser, server)
    anonymous.goto("/no-such-page/")
    expect(anonymous.get_by_role("link", name="Sign in")).to_have_attribute(
        "href", "/accounts/login/?next=/no-such-page/"
    )
    # (the console reports each 403 and 404 answer as a failed load: expected here)
