"""Issue 36, the researcher's points, in real headless Chromium, each through the researcher's path:

- loose image files chosen with a manifest whose rows name the template's ``images/`` paths are found
  by their names (they were refused: "images/cat.png: no such file");
- a study made from a Label Studio export starts as a Draft, and its Overview and Progress page give
  the same judgement count and the same words for its imported answers (it was Active, and the
  Overview said "20 annotations" against Progress's "0 of 12 judgements");
- the demo study's findings fold their long tables behind a summary line, the page is a quarter of
  its height (17,152 px before at 1280×800), an open table scrolls under a header row that stays in
  view, and the contents box, in a column of its own, covers no table header;
- the new-study page asks which protocol: sent without a choice, it says so at the field; with one,
  the study is made.

Screenshots: ``test-output/browser/researcher-*.png``. Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.browser.pages import open_page, png, shot, sign_in

LS = Path(__file__).resolve().parents[1] / "fixtures" / "labelstudio"


@pytest.fixture
def researcher(transactional_db: None) -> Any:
    from tests.factories import UserFactory

    return UserFactory.create(username="res", role="researcher")


def test_loose_files_chosen_with_a_template_manifest_are_found_by_name(
    browser: Any, server: Any, researcher: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    from annotations.models import Item
    from annotations.services.studies import study_create
    from protocols.schema import load_preset

    study = study_create(
        owner=researcher,
        name="Markers",
        protocol=load_preset("stereotype-markers"),
        preset="stereotype-markers",
    )
    (tmp_path / "cat.png").write_bytes(png((30, 30), (200, 10, 10)))
    (tmp_path / "dog.png").write_bytes(png((30, 30), (10, 200, 10)))
    (tmp_path / "manifest.csv").write_text(
        'external_id,file,attributes\nc1,images/cat.png,"[""hat""]"\nc2,images/dog.png,"[""tie""]"\n'
    )
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/items/")
    page.get_by_label("A zip, or a CSV/JSONL manifest").set_input_files(str(tmp_path / "manifest.csv"))
    page.get_by_label("Or several images").set_input_files(
        [str(tmp_path / "cat.png"), str(tmp_path / "dog.png")]
    )
    page.get_by_role("button", name="Import", exact=True).click()
    page.get_by_text("Done: 2 items imported.").wait_for()
    expect(page.locator("#upload-results li.refused")).to_have_count(0)
    assert Item.objects.get(study=study, external_id="c2").images.get().original_name == "images/dog.png"
    page.get_by_role("link", name="Show the items").click()
    expect(page.locator(".item-card strong", has_text="c1")).to_be_visible()
    assert page.js_errors == []


def labelstudio_zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(LS / "snapshot_export.json", "export.json")
        archive.write(LS / "config.xml", "config.xml")
        for file in (LS / "media").rglob("*.png"):
            archive.write(file, file.relative_to(LS / "media").as_posix())
    return path


def judgement_numbers(page: Any, where: str) -> tuple[str, str]:
    box = page.locator(where)
    return (
        box.locator("[data-field=judgements]").inner_text(),
        box.locator("[data-field=judgements_needed]").inner_text(),
    )


def test_a_label_studio_study_starts_as_a_draft_and_its_pages_count_alike(
    browser: Any, server: Any, researcher: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    from annotations.models import Study

    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto("/studies/new/")
    form = page.get_by_role("region", name="Or bring a Label Studio project")
    form.get_by_label("Name", exact=True).fill("From LS")
    form.get_by_label("Export: JSON").set_input_files(str(labelstudio_zip(tmp_path / "project.zip")))
    form.get_by_role("button", name="Create from Label Studio").click()
    study = Study.objects.get(name="From LS")
    page.wait_for_url(f"**/studies/{study.pk}/")
    expect(page.locator("#study-status")).to_have_text("Draft")
    expect(page.get_by_role("button", name="Launch study")).to_be_visible()
    expect(page.locator(".messages")).to_contain_text("It is a draft: launch it from its Overview")
    overview = judgement_numbers(page, "#overview-judgements")
    overview_note = page.locator("#imported-note").inner_text()
    shot(page, "researcher-labelstudio-overview")
    page.get_by_role("link", name="Progress", exact=True).click()
    page.wait_for_url(f"**/studies/{study.pk}/progress/")
    progress = judgement_numbers(page, "#progress-text")
    assert overview == progress == ("0", "12")
    assert page.locator("#imported-note").inner_text() == overview_note
    assert overview_note.startswith(
        "Imported from files, not given here: 4 judgements by 2 people (16 answers) and 2 machine "
        "predictions (4 answers)."
    )
    assert "not toward the 12 judgements this study's annotators give here" in overview_note
    assert page.js_errors == []


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def test_long_findings_tables_fold_and_an_open_one_keeps_its_header_in_view(
    browser: Any, server: Any, demo: Any
) -> None:
    from playwright.sync_api import expect

    page = open_page(browser, server, width=1280, height=800)
    sign_in(page, "researcher")
    page.goto(f"/studies/{demo.pk}/findings/")
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height < 17152 / 3, height  # 17,152 px with every row open
    fold = page.locator("details.rows-fold").filter(has_text="128 rows")
    summary = fold.locator("summary")
    expect(summary).to_contain_text("128 rows, one per ")
    expect(summary).not_to_contain_text("0.")  # no bare estimate of one row in the summary
    expect(fold).not_to_have_attribute("open", "")
    expect(fold.locator("tbody tr").first).to_be_hidden()
    summary.click()
    expect(fold.locator("tbody tr").first).to_be_visible()
    box = fold.locator(".table-tall")
    head = fold.locator("thead")
    # The page scrolled so the open table's box is at the top, then its rows scrolled down a long way.
    box.evaluate("b => { b.scrollIntoView({block: 'start'}); b.scrollTop = 1500; }")
    page.wait_for_timeout(100)
    box_at, head_at = box.bounding_box(), head.bounding_box()
    assert box_at is not None and head_at is not None
    assert abs(head_at["y"] - box_at["y"]) <= 2, (head_at, box_at)  # the header row stays at the top
    assert fold.locator("tbody tr").first.bounding_box()["y"] < box_at["y"]  # the first rows scrolled away
    expect(head.locator("th").first).to_be_in_viewport()
    toc = page.get_by_role("navigation", name="On this page")
    expect(toc).to_be_in_viewport()  # the contents stay in view...
    assert toc.evaluate("n => getComputedStyle(n).position") == "sticky"
    toc_at = toc.bounding_box()
    assert toc_at is not None and not overlap(toc_at, head_at)  # ...beside the table, not over its header
    shot(page, "researcher-findings-long-table")
    assert page.js_errors == []


def test_the_new_study_page_asks_which_protocol(browser: Any, server: Any, researcher: Any) -> None:
    from playwright.sync_api import expect

    from annotations.models import Study

    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto("/studies/new/")
    select = page.get_by_label("Protocol", exact=True)
    expect(select).to_have_value("")
    page.get_by_label("Name", exact=True).first.fill("Asked")
    page.get_by_role("button", name="Create study").click()
    page.wait_for_load_state()
    field = page.locator(".field", has=page.locator("#id_preset"))
    expect(field.get_by_role("alert")).to_have_text(
        "Choose which protocol this study uses: a paper's preset, or your own protocol file."
    )
    expect(page.get_by_label("Protocol", exact=True)).to_have_attribute("aria-invalid", "true")
    assert not Study.objects.filter(name="Asked").exists()
    shot(page, "researcher-new-study-asks")
    page.get_by_label("Protocol", exact=True).select_option("bias-axes")
    expect(page.locator("#preview-bias-axes")).to_be_visible()
    page.get_by_role("button", name="Create study").click()
    study = Study.objects.get(name="Asked")
    page.wait_for_url(f"**/studies/{study.pk}/")
    assert (study.preset, study.status) == ("bias-axes", "draft")
    assert page.js_errors == []
