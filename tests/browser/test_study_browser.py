"""The researcher's study page and invitation page in real headless Chromium: tabs and deep links, the
enrolment autocomplete, Copy buttons and the demographic form builder (static/js/study.js).

Screenshots go to ``test-output/browser/`` (``40-...`` onwards). Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.browser.pages import open_page, shot, sign_in, unlabelled_inputs


@pytest.fixture
def lab(transactional_db: None) -> dict[str, Any]:
    from annotations.models import Study
    from annotations.services.invitations import invitation_create
    from annotations.services.studies import enrollment_add
    from tests.factories import ItemFactory, StudyFactory, UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    earlier = StudyFactory.create(owner=owner, name="Earlier study")
    for name, first in (("rater_ada", "Ada"), ("rater_bob", "Bob"), ("checker", "Cy")):
        enrollment_add(
            study=earlier, user=UserFactory.create(username=name, role="annotator", first_name=first)
        )
    study = StudyFactory.create(owner=owner, name="Draft study", status=Study.Status.DRAFT)
    ItemFactory.create(study=study, kind="text", text="nurse")
    invitation = invitation_create(
        study=study,
        created_by=owner,
        expires_at=timezone.now() + timedelta(days=3),
        max_uses=5,
        label="Pilot",
    )
    return {"owner": owner, "study": study, "invitation": invitation}


def visible_panels(page: Any) -> list[str]:
    return page.evaluate(
        "() => Array.from(document.querySelectorAll('.study-panel')).filter(p => !p.hidden).map(p => p.id)"
    )


def test_tabs_switch_deep_link_and_answer_the_keyboard(
    browser: Any, server: Any, lab: dict[str, Any]
) -> None:
    from playwright.sync_api import expect

    study = lab["study"]
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/")
    assert visible_panels(page) == ["overview"]
    overview = page.get_by_role("tab", name="Overview")
    expect(overview).to_have_attribute("aria-selected", "true")
    page.get_by_role("tab", name="People").click()
    assert visible_panels(page) == ["people"] and page.url.endswith("#people")
    # the setup checklist's links open their tab
    page.get_by_role("tab", name="Overview").click()
    page.locator("[data-step=items] a").click()
    assert visible_panels(page) == ["items"]
    # arrow keys move along the tabs
    page.get_by_role("tab", name="Items").focus()
    page.keyboard.press("ArrowRight")
    assert visible_panels(page) == ["people"]
    expect(page.get_by_role("tab", name="People")).to_be_focused()
    page.keyboard.press("End")
    assert visible_panels(page) == ["settings"]
    # a deep link opens its tab
    other = open_page(browser, server)
    sign_in(other, "res")
    other.goto(f"/studies/{study.pk}/#export")
    assert visible_panels(other) == ["export"]
    assert unlabelled_inputs(page) == []
    shot(page, "40-study-tabs-1280")
    assert page.js_errors == [] and other.js_errors == []


def test_the_page_works_as_sections_without_javascript(
    browser: Any, server: Any, lab: dict[str, Any]
) -> None:
    context = browser.new_context(java_script_enabled=False, base_url=server.url)
    page = context.new_page()
    sign_in(page, "res")
    page.goto(f"/studies/{lab['study'].pk}/")
    for section in ("overview", "protocol", "items", "people", "invitations", "export", "settings"):
        assert page.locator(f"section#{section}").is_visible()
    context.close()


def test_enrol_by_autocomplete_then_launch(browser: Any, server: Any, lab: dict[str, Any]) -> None:
    from annotations.models import Study

    study = lab["study"]
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/#people")
    field = page.get_by_label("Account")
    field.press_sequentially("rat")
    page.wait_for_function("() => document.querySelectorAll('#enroll-suggestions option').length === 2")
    options = page.evaluate(
        "() => Array.from(document.querySelectorAll('#enroll-suggestions option'))"
        ".map(o => [o.value, o.label])"
    )
    assert options == [["rater_ada", "rater_ada (Ada)"], ["rater_bob", "rater_bob (Bob)"]]
    assert "2 accounts found" in page.locator("#enroll-status").inner_text()
    field.fill("rater_bob")
    page.get_by_role("button", name="Enrol", exact=True).click()
    page.wait_for_selector("text=rater_bob is enrolled in the crowd pool.")
    assert page.url.endswith("#people") and visible_panels(page) == ["people"]
    page.get_by_role("tab", name="Overview").click()
    assert page.locator("[data-step=people] .setup-state").inner_text() == "done"
    page.get_by_role("button", name="Launch study").click()
    page.wait_for_selector("text=Study launched")
    assert Study.objects.get(pk=study.pk).status == Study.Status.ACTIVE
    assert page.js_errors == []


def test_copy_a_link_and_build_a_demographic_form(browser: Any, server: Any, lab: dict[str, Any]) -> None:
    from annotations.models import Invitation

    study, invitation = lab["study"], lab["invitation"]
    page = open_page(browser, server)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/invitations/")
    link = page.locator(f"#link-{invitation.pk}")
    assert link.inner_text().endswith(f"/join/{invitation.token}/")
    box = link.bounding_box()
    assert box is not None and box["width"] < 700  # the whole link wraps inside its cell
    page.get_by_role("button", name="Copy link").click()
    page.wait_for_function("() => document.getElementById('copy-status').textContent === 'Copied'")
    assert page.evaluate("() => navigator.clipboard.readText()") == link.inner_text().strip()

    add = page.get_by_role("button", name="Add a question")
    add.click()
    page.get_by_label("Question 1: label").fill("Where do you live?")
    page.locator(".builder-question").nth(0).get_by_label("Options (one a line)").fill("Asia\nEMEA\n")
    add.click()
    page.get_by_label("Question 2: label").fill("Your age")
    page.locator(".builder-question").nth(1).get_by_label("Type").select_option("number")
    add.click()
    page.get_by_label("Question 3: label").fill("Anything else?")
    page.locator(".builder-question").nth(2).get_by_label("Type").select_option("text")
    page.locator(".builder-question").nth(2).get_by_label("Required").uncheck()
    page.get_by_role("button", name="Move up question 2").click()
    page.get_by_role("button", name="Remove question 3").click()
    assert "removed" in page.locator("#builder-status").inner_text()
    page.get_by_label("Label", exact=True).fill("Built")
    assert unlabelled_inputs(page) == []
    shot(page, "41-invitation-builder-1280")
    page.get_by_role("button", name="Create link").click()
    page.wait_for_selector("text=Invitation link created")
    built = Invitation.objects.get(label="Built")
    assert built.demographics == [
        {"key": "your_age", "label": "Your age", "kind": "number", "required": True},
        {
            "key": "where_do_you_live",
            "label": "Where do you live?",
            "kind": "choice",
            "required": True,
            "choices": ["Asia", "EMEA"],
        },
    ]
    assert page.js_errors == []


def test_a_builder_question_without_options_is_refused_by_the_server(
    browser: Any, server: Any, lab: dict[str, Any]
) -> None:
    from annotations.models import Invitation

    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{lab['study'].pk}/invitations/")
    page.get_by_role("button", name="Add a question").click()
    page.get_by_label("Question 1: label").fill("Region")
    page.get_by_role("button", name="Create link").click()
    page.wait_for_selector("text=a choice field needs a list of 1 to 50 choices")
    assert Invitation.objects.count() == 1
    # the refused form comes back with the builder filled from what was sent
    assert page.get_by_label("Question 1: label").input_value() == "Region"
    assert [e for e in page.js_errors if "status of 400" not in e] == []


def test_without_the_clipboard_api_copy_selects_the_link(
    browser: Any, server: Any, lab: dict[str, Any]
) -> None:
    study, invitation = lab["study"], lab["invitation"]
    page = open_page(browser, server)
    page.add_init_script("Object.defineProperty(navigator, 'clipboard', { value: undefined });")
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/invitations/")
    page.get_by_role("button", name="Copy link").click()
    page.wait_for_function("() => document.getElementById('copy-status').textContent !== ''")
    link = page.locator(f"#link-{invitation.pk}").inner_text().strip()
    assert page.evaluate("() => window.getSelection().toString().trim()") == link
    assert page.locator("#copy-status").inner_text() in (
        "Copied",
        "The text is selected: press Ctrl+C (or Cmd+C) to copy it",
    )
    assert page.js_errors == []


def test_preview_a_link_as_a_participant(browser: Any, server: Any, lab: dict[str, Any]) -> None:
    from annotations.models import Participant

    study, invitation = lab["study"], lab["invitation"]
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/invitations/")
    page.get_by_role("link", name="Preview as a participant").click()
    page.wait_for_selector("text=Preview — nothing is recorded")
    page.get_by_role("button", name="Start").click()  # no consent text and no form on this link
    page.wait_for_selector("#task-form[data-preview]")  # the task page itself, marked as a preview
    assert "nurse" in page.locator(".item-view").inner_text()
    assert page.get_by_role("button", name="Submit (disabled in the preview)").is_disabled()
    assert unlabelled_inputs(page) == []
    shot(page, "42-invitation-preview-task-1280")
    page.get_by_role("link", name="Leave the preview").first.click()
    page.wait_for_url(f"**/studies/{study.pk}/invitations/**")
    assert Participant.objects.count() == 0 and invitation.participants.count() == 0
    assert page.js_errors == []
