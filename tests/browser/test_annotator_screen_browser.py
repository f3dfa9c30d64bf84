"""Issue 25 point 2, the annotator's screen (layout and rendering), in headless Chromium as an annotator
and a researcher use it: the image fits the window at load at 1366x860, 1280x720 and 1920x1080 (the
visible fraction is printed: docs/benchmarks.md records it); instructions beside the image, open on the
first item, folded after and remembered per study; instructions and help rendered as a safe Markdown
subset by the one renderer the invitation preview shares, whose task pages options like the real one;
the Likert scale a clean column; long legends inside their box; the restored note beside Submit; the
current lease marked on "Your answers"; the dashboard's description cut with an ellipsis; axe finds
nothing on these states. Screenshots go to ``test-output/browser/`` (screen-*.png).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.pages import AXE, axe_violations, open_page, shot, sign_in

SIZES = [(1366, 860), (1280, 720), (1920, 1080)]
HOSTILE = """
name: Hostile
unit: image
instructions: |
  Read <script>window.pwned = 1</script> this *carefully*.
  A [bad link](javascript:window.pwned=2) and a [good one](https://example.org/guide).
  <img src=x onerror="window.pwned=3">
  - first point
  - second point
questions:
  - key: attributes
    kind: multi
    prompt: Which of these are visible?
    help: "Look **closely**:\\n\\n- at the clothing\\n- at the background\\n\\n<b onmouseover=alert(1)>x</b>"
    options: [hat, scarf, glasses, boots, gloves, umbrella, cane]
    page_size: 5
    none_option: None of the above
  - key: boxes
    kind: boxes
    prompt: Box each selected attribute.
    linked_question: attributes
    required: false
  - key: long
    kind: single
    prompt: >-
      Does the image show a
      Supercalifragilisticexpialidocious_attribute_name_taken_from_the_metadata_without_a_space,
      and would a person from the group described by the prompt recognise it as theirs, whatever
      its colour, size or position in the picture?
    options: ["yes", "no"]
"""


@pytest.fixture
def world(transactional_db: None) -> dict[str, Any]:
    from datetime import timedelta

    from django.utils import timezone

    from annotations.models import Item
    from annotations.services.invitations import invitation_create
    from annotations.services.studies import enrollment_add, study_create
    from protocols.schema import load_preset, load_protocol_text
    from tests.browser.pages import image_items
    from tests.factories import UserFactory

    owner = UserFactory.create(username="res", role="researcher")
    markers = study_create(
        owner=owner, name="Markers study", protocol=load_preset("stereotype-markers"), overlap=1
    )
    image_items(markers, [(40, 90, 160), (160, 60, 40), (60, 160, 60)], (1024, 1024))
    Item.objects.filter(study=markers).update(metadata={"attributes": ["sombrero", "poncho", "moustache"]})
    visual = study_create(
        owner=owner, name="Visual-ness pilot", protocol=load_preset("visualness"), overlap=1
    )
    for index, term in enumerate(["sombrero", "talkative", "poor"]):
        Item.objects.create(
            study=visual, external_id=f"t-{index}", kind="text", text=term, sha256=f"{index + 7:064d}"
        )
    hostile = study_create(owner=owner, name="Hostile study", protocol=load_protocol_text(HOSTILE), overlap=1)
    image_items(hostile, [(90, 90, 90)], (800, 600))
    invitation = invitation_create(
        study=hostile,
        created_by=owner,
        expires_at=timezone.now() + timedelta(days=7),
        max_uses=5,
        label="Pilot",
    )
    annotator = UserFactory.create(username="ann", role="annotator")
    for study in (markers, visual, hostile):
        enrollment_add(study=study, user=annotator)
    return {"markers": markers, "visual": visual, "hostile": hostile, "invitation": invitation}


def _open_next(page: Any, study: Any) -> None:
    from playwright.sync_api import expect

    page.goto(f"/annotate/studies/{study.pk}/next/")
    page.wait_for_selector("#task-form")
    for image in page.locator(".box-canvas img").all():
        expect(image).to_have_js_property("complete", True)
    page.wait_for_load_state("networkidle")  # the lease ahead adds Next: nothing may move


def _visible_fraction(page: Any) -> float:
    """The share of the image's area inside the window, the page scrolled to the top."""
    return float(
        page.evaluate(
            """() => {
              window.scrollTo(0, 0);
              const r = document.querySelector('.box-canvas img').getBoundingClientRect();
              const w = Math.max(0, Math.min(r.right, innerWidth) - Math.max(r.left, 0));
              const h = Math.max(0, Math.min(r.bottom, innerHeight) - Math.max(r.top, 0));
              return (w * h) / (r.width * r.height);
            }"""
        )
    )


def test_the_whole_image_is_in_the_window_at_load_at_each_size(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    """First item (instructions open), then the legend appearing, then a later item (instructions
    folded): 100% of the image inside the window without a scroll, at each size."""
    from playwright.sync_api import expect

    study = world["markers"]
    for width, height in SIZES:
        page = open_page(browser, server, width, height)
        sign_in(page)
        _open_next(page, study)
        expect(page.locator("details.instructions")).to_have_attribute("open", "")
        first = _visible_fraction(page)
        box = page.locator(".box-canvas img").bounding_box()
        shot(page, f"screen-fit-{width}x{height}")
        # Choosing an option shows the box legend above the image: the image fits again.
        page.locator("#question-attributes").get_by_label("sombrero").check()
        expect(page.locator("#box-legend")).to_be_visible()
        with_legend = _visible_fraction(page)
        print(
            f"\nimage visible at load, {width}x{height}: {first:.1%} "
            f"(image {box['width']:.0f}x{box['height']:.0f} px at y={box['y']:.0f}); "
            f"with the box legend shown: {with_legend:.1%}"
        )
        assert first == pytest.approx(1.0, abs=1e-6), (width, height, first)
        assert with_legend == pytest.approx(1.0, abs=1e-6), (width, height, with_legend)
        # Not a thumbnail: the image takes most of the window's height or the panel's width.
        panel = page.locator(".item-view").bounding_box()
        assert box["height"] >= 0.6 * height or box["width"] >= panel["width"] - 24
        assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
        assert page.js_errors == []
        page.context.close()


def test_instructions_fold_after_the_first_item_and_the_choice_is_remembered(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    from playwright.sync_api import expect

    from annotations.models import Assignment

    study = world["markers"]
    page = open_page(browser, server, 1280, 720)
    sign_in(page)
    _open_next(page, study)
    instructions = page.locator("details.instructions")
    expect(instructions).to_have_attribute("open", "")
    # Beside the image, not above it.
    image = page.locator(".box-canvas img").bounding_box()
    box = instructions.bounding_box()
    assert box["x"] >= image["x"] + image["width"] and box["y"] < image["y"] + image["height"]
    Assignment.objects.filter(study=study).update(
        status=Assignment.Status.SUBMITTED, completed_at="2026-01-01T00:00Z"
    )
    _open_next(page, study)
    expect(page.locator("details.instructions")).not_to_have_attribute("open", "")
    assert _visible_fraction(page) == pytest.approx(1.0, abs=1e-6)
    page.locator("details.instructions summary").click()
    expect(page.locator("details.instructions")).to_have_attribute("open", "")
    page.reload()
    page.wait_for_selector("#task-form")
    expect(page.locator("details.instructions")).to_have_attribute("open", "")  # remembered for this study
    page.locator("details.instructions summary").click()
    page.reload()
    page.wait_for_selector("#task-form")
    expect(page.locator("details.instructions")).not_to_have_attribute("open", "")
    assert page.js_errors == []


def test_instructions_and_help_keep_their_structure_and_stay_inert(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    """The visual-ness scale definitions are a list; markup in untrusted text is shown, never run;
    a javascript: link is no link. The same on the task and on the invitation's preview."""
    from playwright.sync_api import expect

    page = open_page(browser, server, 1366, 860)
    sign_in(page)
    _open_next(page, world["visual"])
    items = page.locator("details.instructions ul > li")
    expect(items).to_have_count(5)
    assert (
        items.nth(3).inner_text().startswith("Strongly Disagree: the attribute cannot be inferred visually")
    )
    assert "\n" not in items.nth(0).inner_text()  # hard-wrapped YAML lines joined

    _open_next(page, world["hostile"])
    text = page.locator("details.instructions")
    assert "<script>window.pwned = 1</script>" in text.inner_text()
    expect(text.locator("em")).to_have_text("carefully")
    expect(text.locator("li")).to_have_count(2)
    expect(text.locator("a")).to_have_count(1)
    assert text.locator("a").get_attribute("href") == "https://example.org/guide"
    assert text.locator("a").get_attribute("rel") == "noopener noreferrer nofollow"
    help_text = page.locator("#question-attributes .help.rendered-text")
    expect(help_text.locator("strong")).to_have_text("closely")
    expect(help_text.locator("li")).to_have_count(2)
    assert page.locator('script:not([src]):not([type="application/json"])').count() == 0  # data only
    assert page.locator("img[onerror], b[onmouseover]").count() == 0
    assert page.evaluate("() => window.pwned") is None
    task_html = text.inner_html()
    page.context.close()

    researcher = open_page(browser, server, 1366, 860)
    sign_in(researcher, "res")
    study, invitation = world["hostile"], world["invitation"]
    researcher.goto(f"/studies/{study.pk}/invitations/{invitation.pk}/preview/task/")
    researcher.wait_for_selector("#task-form")
    assert researcher.locator("details.instructions").inner_html() == task_html  # the one renderer
    assert researcher.evaluate("() => window.pwned") is None
    researcher.goto(f"/studies/{study.pk}/")
    assert researcher.locator(".rendered-text li").count() >= 2
    assert researcher.evaluate("() => window.pwned") is None
    assert researcher.js_errors == []


def _option_hints(page: Any) -> list[str]:
    """The options of the multi question as shown (visible ones), with their key hints."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('#question-attributes label.choice'))
            .filter(label => label.offsetParent !== null).map(label => label.innerText.trim())"""
    )


def test_the_preview_pages_options_like_the_task(browser: Any, server: Any, world: dict[str, Any]) -> None:
    study, invitation = world["hostile"], world["invitation"]
    annotator = open_page(browser, server, 1366, 860)
    sign_in(annotator)
    _open_next(annotator, study)
    task = _option_hints(annotator)
    annotator.keyboard.press("ArrowRight")
    task_second = _option_hints(annotator)
    annotator.context.close()

    page = open_page(browser, server, 1366, 860)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/invitations/{invitation.pk}/preview/task/")
    page.wait_for_selector("#task-form")
    shot(page, "screen-preview-task")
    preview = _option_hints(page)
    print(f"\ntask options: {task}\npreview options: {preview}")
    assert preview == task
    assert len(preview) == 6  # 5 on the first page, and "None of the above"
    assert preview[0].startswith("1") and preview[-1].startswith("0")
    page.keyboard.press("ArrowRight")
    assert _option_hints(page) == task_second
    assert page.locator(".canvas-viewport").count() == 1  # the same canvas
    first_paragraph = page.locator("details.instructions p").first
    assert first_paragraph.evaluate("p => getComputedStyle(p).whiteSpace") == "normal"  # not hard-wrapped
    # Enter runs the task's checks; nothing is sent, the page stays.
    url = page.url
    page.keyboard.press("Enter")
    assert page.locator("#submit-check").is_visible()
    assert page.url == url
    assert page.locator("#submit-button").is_disabled()
    assert page.js_errors == []


def test_likert_labels_stay_on_one_line(browser: Any, server: Any, world: dict[str, Any]) -> None:
    for width, height in SIZES[:2]:
        page = open_page(browser, server, width, height)
        sign_in(page)
        _open_next(page, world["visual"])
        labels = page.locator("#question-visual .choices.scale label.choice")
        expect_count = labels.count()
        assert expect_count == 4
        boxes = [labels.nth(i).bounding_box() for i in range(expect_count)]
        lines = page.evaluate(
            """() => Array.from(document.querySelectorAll('#question-visual .choices.scale label.choice'))
                .map(label => {
                  const text = Array.from(label.childNodes)
                    .filter(n => n.nodeType === 3 && n.textContent.trim()).pop();
                  const range = document.createRange();
                  range.selectNodeContents(text);
                  return new Set(Array.from(range.getClientRects()).map(x => Math.round(x.top))).size;
                })"""
        )
        # One line per label; one row (same top) or a clean column (same left, in order).
        assert max(box["height"] for box in boxes) < 40, boxes
        assert lines == [1, 1, 1, 1], lines  # each label's text on one line
        one_row = len({round(box["y"]) for box in boxes}) == 1
        one_column = len({round(box["x"]) for box in boxes}) == 1 and [b["y"] for b in boxes] == sorted(
            b["y"] for b in boxes
        )
        assert one_row or one_column, boxes
        assert "Strongly Disagree" in labels.nth(3).inner_text()
        shot(page, f"screen-likert-{width}x{height}")
        page.context.close()


def test_a_long_legend_stays_inside_its_box(browser: Any, server: Any, world: dict[str, Any]) -> None:
    page = open_page(browser, server, 1280, 720)
    sign_in(page)
    _open_next(page, world["hostile"])
    fieldset = page.locator("#question-long")
    legend = fieldset.locator("legend")
    outer = fieldset.bounding_box()
    inner = legend.bounding_box()
    border = float(fieldset.evaluate("f => parseFloat(getComputedStyle(f).borderTopWidth)"))
    assert inner["x"] >= outer["x"] and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
    # Below the top border, not astride it (a legend on the border crosses it when it wraps).
    assert inner["y"] >= outer["y"] + border - 0.5, (inner, outer)
    assert fieldset.evaluate("f => f.scrollWidth <= f.clientWidth")
    assert inner["height"] > 40  # it wraps, inside
    fieldset.scroll_into_view_if_needed()
    shot(page, "screen-long-legend")


def test_the_restored_note_shows_beside_submit_after_a_reload(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = open_page(browser, server, 1280, 720)
    sign_in(page)
    _open_next(page, world["visual"])
    page.keyboard.press("2")
    page.wait_for_timeout(300)  # the draft is saved 150 ms after a change
    page.reload()
    page.wait_for_selector("#draft-note")
    note = page.locator("#draft-note")
    assert note.is_visible()
    assert note.evaluate("n => n.closest('.actions') !== null")
    box = note.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 720  # in the window without a scroll
    submit = page.locator("#submit-button").bounding_box()
    assert abs((box["y"] + box["height"] / 2) - (submit["y"] + submit["height"] / 2)) < 60
    shot(page, "screen-restored-note")


def test_your_answers_marks_the_current_lease(browser: Any, server: Any, world: dict[str, Any]) -> None:
    from annotations.models import Assignment

    study = world["markers"]
    page = open_page(browser, server, 1280, 720)
    sign_in(page)
    _open_next(page, study)  # leases one and, once shown, one ahead
    current = int(page.url.rstrip("/").split("/")[-1])
    leased = Assignment.objects.filter(study=study, status=Assignment.Status.LEASED)
    assert leased.count() == 2
    page.goto(f"/annotate/studies/{study.pk}/mine/")
    rows = page.locator("tr.current-lease")
    assert rows.count() == 1
    assert rows.get_attribute("id") == f"assignment-{current}"
    assert "current item" in rows.inner_text()
    ahead = [a.pk for a in leased if a.pk != current][0]
    assert "Leased ahead" in page.locator(f"#assignment-{ahead}").inner_text()
    shot(page, "screen-mine-leases")
    if AXE.exists():
        assert axe_violations(page) == []


def test_the_dashboard_cuts_a_description_with_an_ellipsis(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = open_page(browser, server, 1280, 720)
    sign_in(page)
    page.goto("/annotate/")
    text = page.locator(f'li[data-study="{world["visual"].pk}"] .what-to-do').inner_text()
    assert text.startswith(
        "You will see one attribute term at a time (a word or phrase that people use to describe a group"
    )
    assert text.endswith("…")
    assert len(text) < 260


@pytest.mark.skipif(not AXE.exists(), reason=f"needs axe-core at {AXE} (scripts/browser-deps.sh)")
def test_no_axe_violation_on_these_states(browser: Any, server: Any, world: dict[str, Any]) -> None:
    page = open_page(browser, server, 1366, 860)
    sign_in(page)
    found = {}
    for study in (world["markers"], world["visual"], world["hostile"]):
        _open_next(page, study)
        found[f"task {study.name}"] = axe_violations(page)
    page.keyboard.press("Enter")  # the check list before submit
    found["task with checks"] = axe_violations(page)
    researcher = open_page(browser, server, 1366, 860)
    sign_in(researcher, "res")
    study, invitation = world["hostile"], world["invitation"]
    researcher.goto(f"/studies/{study.pk}/invitations/{invitation.pk}/preview/task/")
    researcher.wait_for_selector("#task-form")
    found["preview task"] = axe_violations(researcher)
    assert {where: v for where, v in found.items() if v} == {}


def test_a_phone_shows_the_task_without_a_sideways_scroll(
    browser: Any, server: Any, world: dict[str, Any]
) -> None:
    page = open_page(browser, server, 390, 844)
    sign_in(page)
    for study in (world["markers"], world["hostile"]):
        _open_next(page, study)
        assert page.evaluate("() => document.documentElement.scrollWidth <= innerWidth")
        image = page.locator(".box-canvas img").bounding_box()
        assert image["x"] >= 0 and image["x"] + image["width"] <= 390
        legend = page.locator("fieldset.question legend").last.bounding_box()
        assert legend["x"] + legend["width"] <= 390
    shot(page, "screen-phone-390")
    assert page.js_errors == []
