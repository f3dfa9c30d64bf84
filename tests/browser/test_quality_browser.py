"""Quality control in real headless Chromium: an annotator meets a gold item and an attention check on
the ordinary task page, fails the check, and the researcher sees the flag and excludes them.

Screenshots go to ``test-output/browser/`` (``quality-*.png``). Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import PASSWORD, open_page, shot, sign_in, unlabelled_inputs

PROTOCOL = """
name: Stance on terms
unit: text
instructions: Read the term, then say how much you agree that it describes a place.
questions:
  - key: stance
    kind: likert
    prompt: "{text} describes a place."
    options: [Strongly agree, Agree, Disagree, Strongly disagree]
"""
NOTE = "Select 'Agree' for this item."


@pytest.fixture
def crowd(transactional_db: None) -> dict[str, Any]:
    from annotations.models import Item
    from annotations.services.controls import control_mark, quality_settings_update
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_protocol_text
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    study = study_create(owner=owner, name="Terms study", protocol=load_protocol_text(PROTOCOL), overlap=1)
    for index, term in enumerate(["harbour", "meadow", "kitchen"]):
        Item.objects.create(study=study, external_id=f"term-{index}", kind="text", text=term)
    gold = Item.objects.create(study=study, external_id="term-gold", kind="text", text="valley")
    check = Item.objects.create(study=study, external_id="term-check", kind="text", text="lantern")
    control_mark(study=study, item=gold, kind="gold", answers={"stance": "strongly_agree"})
    control_mark(study=study, item=check, kind="attention", answers={"stance": "agree"}, note=NOTE)
    # one gold item first (qualification that anyone passes), then controls at one claim in two
    quality_settings_update(
        study=study,
        changes={"control_rate": 0.5, "qualification_items": 1, "qualification_min_accuracy": 0.0},
    )
    annotator = UserFactory.create(username="ann", role="annotator")
    enrollment_add(study=study, user=annotator)
    return {"study": study, "gold": gold, "check": check}


def test_gold_and_attention_check_then_flag_and_exclusion(
    browser: Any, server: Any, crowd: dict[str, Any]
) -> None:
    from playwright.sync_api import expect

    from annotations.models import AnnotatorExclusion, Assignment

    page = open_page(browser, server)
    sign_in(page)
    page.goto(f"/annotate/studies/{crowd['study'].pk}/next/")
    met: list[str] = []
    while page.locator("#task-form").count():
        assignment = Assignment.objects.select_related("item").get(
            pk=int(page.url.rstrip("/").split("/")[-1])
        )
        kind = assignment.item.control_kind
        met.append(kind or "real")
        text = page.locator("main").inner_text().lower()
        for word in ("gold", "control", "attention", "qualif"):  # nothing says what the item is for
            assert word not in text
        question = page.locator("#question-stance")
        if kind == "attention":
            expect(page.locator(".item-note")).to_have_text(NOTE)  # the instruction is in the item ...
            shot(page, "quality-01-attention-check-1280")
            question.get_by_role("radio", name="Disagree", exact=True).check()  # ... and ignored
        elif kind == "gold":
            assert page.locator(".item-note").count() == 0
            shot(page, "quality-02-gold-item-1280")
            question.get_by_role("radio", name="Strongly agree", exact=True).check()
        else:
            question.get_by_role("radio", name="Agree", exact=True).check()
        assert unlabelled_inputs(page) == []
        answered = page.url
        page.locator("#submit-button").click()
        page.wait_for_url(lambda new, answered=answered: new != answered)
    assert met[0] == "gold" and "attention" in met and met.count("real") == 3
    expect(page.get_by_text("nothing left for you")).to_be_visible()
    assert page.js_errors == []

    researcher = open_page(browser, server)
    sign_in(researcher, "res")
    researcher.goto(f"/studies/{crowd['study'].pk}/progress/")
    row = researcher.locator("tr", has=researcher.get_by_role("rowheader", name="ann"))
    expect(row.locator('.badge.flag[data-flag="attention"]')).to_have_text("failed 1 attention check")
    expect(row.locator('.badge.flag[data-flag="speed"]')).to_be_visible()  # a robot answers in under 3 s
    expect(row).to_contain_text("1 of 1 (1.00)")  # the gold item was right
    shot(researcher, "quality-03-progress-flag-1280")
    expect(researcher.locator("#quality")).to_contain_text("figures as of")
    researcher.get_by_role("link", name="recompute now").click()  # ?fresh=1: computed again, same figures
    researcher.wait_for_url("**/progress/?fresh=1#quality")
    expect(row.locator('.badge.flag[data-flag="attention"]')).to_have_text("failed 1 attention check")
    assert unlabelled_inputs(researcher) == []
    # Exclude is a secondary action and a second step: a page says what it does and asks for the reason
    exclude = researcher.get_by_role("link", name="Exclude ann…")
    expect(exclude).to_have_class("button secondary")
    exclude.click()
    expect(researcher.locator("main")).to_contain_text("Nothing is deleted")
    researcher.get_by_label("Reason for excluding ann").fill("failed the attention check")
    researcher.get_by_role("button", name="Exclude ann").click()
    expect(researcher.get_by_text("ann is excluded")).to_be_visible()
    expect(researcher.get_by_role("button", name="Reinstate ann")).to_be_visible()
    shot(researcher, "quality-04-excluded-1280")
    exclusion = AnnotatorExclusion.objects.get()
    assert exclusion.reason == "failed the attention check" and exclusion.excluded_by.username == "res"
    assert exclusion.reinstated_at is None

    # the quality page lists the controls and the exclusion; an item's control page shows its answers
    researcher.get_by_role("link", name="Quality settings and control items").click()
    expect(researcher.locator("main")).to_contain_text("failed the attention check")
    expect(researcher.get_by_role("link", name="term-check")).to_be_visible()
    assert unlabelled_inputs(researcher) == []
    shot(researcher, "quality-05-settings-1280")
    researcher.get_by_role("link", name="term-check").click()
    expect(researcher.get_by_role("radio", name="Attention check")).to_be_checked()
    expect(
        researcher.locator("#question-stance").get_by_role("radio", name="Agree", exact=True)
    ).to_be_checked()
    assert unlabelled_inputs(researcher) == []
    shot(researcher, "quality-06-control-item-1280")
    assert researcher.js_errors == []


@pytest.fixture
def demo_with_a_straight_liner(transactional_db: None, settings: Any, tmp_path: Any) -> dict[str, Any]:
    """The demo study (three honest annotators, ``setup_demo``) and a fourth annotator who answers the
    first option of every question on the items left open, through the assignments API."""
    from annotations.models import Item, User
    from annotations.services.studies import enrollment_add
    from tests.helpers import client_for
    from workbench.demo import demo_accounts_ensure, demo_study_ensure

    settings.DATA_DIR = tmp_path
    demo_accounts_ensure()
    study, _ = demo_study_ensure()
    researcher = User.objects.get(username="researcher")
    researcher.set_password(PASSWORD)
    researcher.save()
    lazy = User.objects.create_user(username="lazy", password=PASSWORD, role="annotator")
    enrollment_add(study=study, user=lazy)
    api = client_for(lazy)
    protocol = study.protocol_obj
    answered = 0
    while (claimed := api.post(f"/api/studies/{study.pk}/assignments/next/")).status_code == 200:
        task = claimed.json()
        item = Item.objects.get(pk=task["item"])
        answers = {  # the first option of each question; the same colour word every time
            q.key: {"value": q.choice_keys(item.metadata)[0] if q.kind == "single" else "red"}
            for q in protocol.questions_for(item.metadata)
        }
        done = api.post(f"/api/assignments/{task['id']}/submit/", {"answers": answers}, format="json")
        assert done.status_code == 200, done.content
        answered += 1
    assert answered >= 12
    return {"study": study}


def test_straight_lining_is_judged_against_each_questions_own_shares(
    browser: Any, server: Any, demo_with_a_straight_liner: dict[str, Any]
) -> None:
    """Issue 25 point 6: the demo's honest annotators answer "no" to "text in the background?" dozens of
    times in a row, as the drawings ask, and are not flagged; an annotator who always picks the first
    option is. The thresholds are stated beside the table."""
    from playwright.sync_api import expect

    study = demo_with_a_straight_liner["study"]
    page = open_page(browser, server)
    sign_in(page, "researcher")
    page.goto(f"/studies/{study.pk}/progress/")
    for honest in ("annotator1", "annotator2", "annotator3"):
        row = page.locator("tr", has=page.get_by_role("rowheader", name=honest))
        expect(row.locator('.badge.flag[data-flag="straight_lining"]')).to_have_count(0, timeout=1)
    row = page.locator("tr", has=page.get_by_role("rowheader", name="lazy"))
    expect(row.locator('.badge.flag[data-flag="straight_lining"]')).to_contain_text("times in a row")
    thresholds = page.locator("#quality-thresholds")
    expect(thresholds).to_contain_text("a run of at least 10 of one answer")
    expect(thresholds).to_contain_text("0.30 more often")
    expect(thresholds).to_contain_text("0.90 or more of the others' answers")
    expect(page.get_by_role("link", name="Exclude lazy…")).to_have_class("button secondary")
    shot(page, "quality-06-straight-lining-1280")
    assert page.js_errors == []
