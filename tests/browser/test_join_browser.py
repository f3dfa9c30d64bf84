"""A crowd participant's whole visit in real headless Chromium: link → consent → form → tasks → code.

Screenshots go to ``test-output/browser/`` (``20-...`` onwards). Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.browser.pages import image_items, open_page, shot, sign_in, unlabelled_inputs

PID = "5f1a2b3c4d5e6f7a8b9c0d1e"
PROLIFIC = f"?PROLIFIC_PID={PID}&STUDY_ID=60aa11&SESSION_ID=sess42"
PROTOCOL = """
name: Crowd check
unit: image
instructions: Say whether the image shows a person.
questions:
  - key: person
    kind: single
    prompt: Is there a person in the image?
    options: ["yes", "no"]
"""
DEMOGRAPHICS = """
- key: region
  label: Where do you live?
  kind: choice
  choices: [Asia, EMEA, North America]
- key: language
  label: First language
  kind: text
  required: false
"""


@pytest.fixture
def crowd(transactional_db: None) -> dict[str, Any]:
    from annotations.services.invitations import demographics_from_text, invitation_create
    from annotations.services.studies import study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name="Crowd study", protocol=load_protocol_text(PROTOCOL), overlap=1)
    image_items(study, [(40, 90, 160), (160, 60, 40), (60, 160, 40), (90, 90, 90)], (400, 300))
    invitation = invitation_create(
        study=study,
        created_by=owner,
        expires_at=timezone.now() + timedelta(days=7),
        max_uses=2,
        platform="prolific",
        completion_code="C0DE42",
        items_per_participant=2,
        consent_text="We record your answers and the time you take.\nYou can stop at any time.",
        demographics=demographics_from_text(DEMOGRAPHICS),
        label="Prolific pilot",
    )
    return {"study": study, "invitation": invitation}


def _answer_and_submit(page: Any) -> None:
    page.wait_for_selector("#task-form")
    page.locator("#question-person").get_by_label("no").check()
    url = page.url
    page.locator("#submit-button").click()
    page.wait_for_url(lambda now: now != url)


def test_participant_consents_fills_the_form_annotates_to_the_quota_and_resumes(
    browser: Any, server: Any, crowd: dict[str, Any]
) -> None:
    from annotations.models import Invitation, Participant

    study, invitation = crowd["study"], crowd["invitation"]
    page = open_page(browser, server)
    page.goto(f"/join/{invitation.token}/{PROLIFIC}")
    assert page.get_by_role("heading", name="Before you start").is_visible()
    assert "You can stop at any time." in page.locator(".consent-text").inner_text()
    shot(page, "20-join-consent-1280")
    page.get_by_role("button", name="I agree, continue").click()

    page.wait_for_selector("text=About you")
    assert unlabelled_inputs(page) == []
    page.get_by_role("button", name="Start").click()  # required answer missing: the server says so
    page.wait_for_selector("#error-region")
    assert "Please answer this question." in page.locator("#error-region").inner_text()
    assert not Participant.objects.exists()
    shot(page, "21-join-form-error-1280")
    page.get_by_label("EMEA").check()
    page.get_by_label("First language (optional)").fill("Greek")
    page.get_by_role("button", name="Start").click()

    _answer_and_submit(page)  # first item
    participant = Participant.objects.get()
    assert (participant.participant_id, participant.session_id) == (PID, "sess42")
    assert participant.user.enrollments.get().attributes == {"region": "EMEA", "language": "Greek"}
    assert page.locator("#progress-count").inner_text() == "1 done, 0 skipped, 1 left"
    assert page.locator("nav").get_by_role("link", name="Studies").count() == 0  # a scoped top bar
    shot(page, "22-join-task-1280")

    # the same participant comes back in another browser: same account, no second use, same progress
    again = open_page(browser, server)
    again.goto(f"/join/{invitation.token}/{PROLIFIC}")
    again.wait_for_selector("#task-form")
    assert again.locator("#progress-count").inner_text() == "1 done, 0 skipped, 1 left"
    assert Participant.objects.count() == 1 and Invitation.objects.get().uses == 1
    _answer_and_submit(again)  # second item: the quota

    again.wait_for_selector("#completion-code")
    assert again.locator("#completion-code").inner_text() == "C0DE42"
    assert again.locator("#completion-link").get_attribute("href") == (
        "https://app.prolific.com/submissions/complete?cc=C0DE42"
    )
    assert "You submitted 2 items" in again.locator("main").inner_text()
    shot(again, "23-join-complete-1280")
    participant.refresh_from_db()
    assert participant.completed_at is not None
    assert participant.user.annotator.assignments.filter(status="submitted").count() == 2
    assert page.js_errors == [] and again.js_errors == []
    # the researcher pages stay closed to the participant
    response = again.goto(f"/studies/{study.pk}/")
    assert response.status == 403


@pytest.mark.parametrize(
    ("change", "heading"),
    [
        ({"expires_at": timezone.now() - timedelta(minutes=1)}, "This link has expired"),
        ({"uses": 2}, "This link has been used up"),
    ],
)
def test_expired_and_exhausted_links_show_a_clear_refusal(
    browser: Any,
    server: Any,
    crowd: dict[str, Any],
    change: dict[str, Any],
    heading: str,
) -> None:
    from annotations.models import Invitation, Participant

    invitation = crowd["invitation"]
    Invitation.objects.filter(pk=invitation.pk).update(**change)
    page = open_page(browser, server)
    response = page.goto(f"/join/{invitation.token}/{PROLIFIC}")
    assert response.status == 410
    assert page.get_by_role("heading", name=heading).is_visible()
    assert "No account was created" in page.locator("main").inner_text()
    shot(page, f"24-join-refused-{'expired' if 'expires_at' in change else 'used-up'}-1280")
    assert not Participant.objects.exists()


def test_researcher_makes_a_prolific_link_on_the_page(
    browser: Any, server: Any, crowd: dict[str, Any]
) -> None:
    from annotations.models import Invitation

    study = crowd["study"]
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/")
    page.get_by_role("link", name="Invitation links").click()
    page.get_by_label("Label").fill("Prolific main run")
    page.get_by_label("Platform").select_option("prolific")
    page.get_by_label("Maximum uses (accounts)").fill("30")
    page.get_by_label("Items per participant (quota)").fill("20")
    page.get_by_label("Completion code").fill("MAIN01")
    page.get_by_label("Demographic form (YAML)").fill(DEMOGRAPHICS.strip())
    page.get_by_role("button", name="Create link").click()
    page.wait_for_selector("text=Invitation link created")
    invitation = Invitation.objects.get(label="Prolific main run")
    assert invitation.completion_url == "https://app.prolific.com/submissions/complete?cc=MAIN01"
    row = page.locator(f"#invitation-{invitation.pk}")
    assert row.locator(".invitation-link").inner_text().endswith(f"/join/{invitation.token}/")
    assert "PROLIFIC_PID, STUDY_ID, SESSION_ID" in row.inner_text() and "0 of 30" in row.inner_text()
    assert unlabelled_inputs(page) == []
    shot(page, "25-invitations-1280")
    row.get_by_role("button", name="Revoke").click()
    page.wait_for_selector("text=The link is withdrawn")
    assert "revoked" in page.locator(f"#invitation-{invitation.pk}").inner_text()
    assert page.js_errors == []


def test_participant_meets_a_gold_item_and_an_attention_check_then_gets_the_code(
    browser: Any, server: Any, crowd: dict[str, Any]
) -> None:
    """Issue 8's whole path: platform link, consent, form, ordinary-looking controls, completion code."""
    from annotations.models import Assignment, Invitation, Item
    from annotations.selectors.quality import quality_report
    from annotations.services.controls import control_mark, quality_settings_update

    study = crowd["study"]
    Invitation.objects.filter(pk=crowd["invitation"].pk).update(items_per_participant=None)
    gold, check = (Item.objects.get(external_id=name) for name in ("img-0", "img-1"))
    control_mark(study=study, item=gold, kind="gold", answers={"person": "no"})
    control_mark(
        study=study,
        item=check,
        kind="attention",
        answers={"person": "yes"},
        note="Select 'yes' for this item, whatever the image shows.",
    )
    quality_settings_update(
        study=study,
        changes={"control_rate": 0.5, "qualification_items": 1, "qualification_min_accuracy": 0.0},
    )
    page = open_page(browser, server)
    page.goto(f"/join/{crowd['invitation'].token}/{PROLIFIC}")
    page.get_by_role("button", name="I agree, continue").click()
    page.get_by_label("Asia").check()
    page.get_by_role("button", name="Start").click()
    met = []
    while True:
        page.wait_for_selector("#task-form, #completion-code")
        if page.locator("#completion-code").count():
            break
        assignment = Assignment.objects.select_related("item").get(
            pk=int(page.url.rstrip("/").split("/")[-1])
        )
        met.append(assignment.item.control_kind or "real")
        text = page.locator("main").inner_text().lower()
        assert not any(word in text for word in ("gold", "control", "attention", "qualif"))
        _answer_and_submit(page)  # always "no": right on the gold item, wrong on the attention check
    assert met[0] == "gold" and sorted(met) == ["attention", "gold", "real", "real"]
    assert page.locator("#completion-code").inner_text() == "C0DE42"
    shot(page, "26-join-controls-complete-1280")
    row = next(
        r for r in quality_report(study=study)["annotators"] if r["annotator_id"] == assignment.annotator_id
    )
    assert (row["gold"]["correct"], row["gold"]["n"]) == (1, 1)
    assert row["attention"] == {"passed": 0, "failed": 1}
    assert "attention" in [flag["code"] for flag in row["flags"]]
    assert page.js_errors == []
