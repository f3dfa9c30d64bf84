"""The researcher's setup in real headless Chromium: the new-study page's preview follows the chosen
preset (``static/js/presets.js``), and the items page uploads images, folders, zips and dropped files
with a progress bar and a summary per upload (``static/js/upload.js``).

Screenshots go to ``test-output/browser/`` (``setup-*.png``). Skipped when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import base64
import io
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.browser.pages import open_page, png, shot, sign_in, unlabelled_inputs


@pytest.fixture
def researcher(transactional_db: None) -> Any:
    from tests.factories import UserFactory

    return UserFactory.create(username="res", role="researcher")


def markers_study(owner: Any) -> Any:
    from annotations.services.studies import study_create
    from protocols.schema import load_preset

    return study_create(
        owner=owner, name="Markers", protocol=load_preset("stereotype-markers"), preset="stereotype-markers"
    )


def visible_previews(page: Any) -> list[str]:
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('.preset-preview'))
            .filter(d => !d.hidden && d.open).map(d => d.dataset.preset)"""
    )


def test_the_preview_follows_the_chosen_preset(
    browser: Any, server: Any, researcher: Any, tmp_path: Path
) -> None:
    from protocols.schema import list_presets

    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto("/studies/new/")
    select = page.get_by_label("Protocol", exact=True)
    assert select.input_value() == ""  # the page asks: no preset is chosen for the researcher
    assert visible_previews(page) == [] and page.locator("#preview-none").is_visible()
    select.select_option(list_presets()[0])
    assert visible_previews(page) == [list_presets()[0]]
    select.select_option("stereotype-markers")
    assert visible_previews(page) == ["stereotype-markers"]
    preview = page.locator("#preview-stereotype-markers")
    assert preview.locator(".preview-prompt").first.inner_text().startswith("Select all the attributes")
    assert preview.locator(".preview-options li").last.inner_text().endswith("None of the above")
    assert preview.locator(".preview-options").first.is_visible()
    shot(page, "setup-create-preview")
    # A protocol file chosen: "my own protocol file" is selected and no preset is previewed.
    (tmp_path / "mine.yaml").write_text("name: Mine\nunit: text\nquestions: []\n")
    page.get_by_label("Protocol file").set_input_files(str(tmp_path / "mine.yaml"))
    assert select.input_value() == "own"
    assert visible_previews(page) == [] and page.locator("#preview-own").is_visible()
    help_id = select.get_attribute("aria-describedby")
    assert help_id and page.locator(f"#{help_id}").is_visible()
    assert unlabelled_inputs(page) == [] and page.js_errors == []


def test_uploads_show_progress_and_a_summary_per_file(
    browser: Any, server: Any, researcher: Any, tmp_path: Path
) -> None:
    from annotations.models import Item

    study = markers_study(researcher)
    images = []
    for n in range(1, 7):
        path = tmp_path / "plain" / f"img{n}.png"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(png((40, 30), (30 * n, 60, 90)))
        images.append(str(path))
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/items/")
    assert page.locator("#drop-zone").is_visible()
    assert unlabelled_inputs(page) == []

    # Six plain images for ViSAGe: refused, naming the missing field, with the template's links.
    page.get_by_label("Or several images").set_input_files(images)
    page.get_by_role("button", name="Import", exact=True).click()
    refused = page.locator("#upload-results li.refused")
    refused.wait_for()
    assert "metadata field 'attributes' is missing" in refused.inner_text()
    href = refused.get_by_role("link", name="Manifest template (CSV)").get_attribute("href")
    assert href == f"/studies/{study.pk}/import/template.csv"
    assert Item.objects.filter(study=study).count() == 0

    # The same images in a zip with a manifest: imported, the progress bar full, the summary says so.
    manifest = "external_id,file,attributes\n" + "".join(
        f'm{n},img{n}.png,"[""hat"", ""poncho""]"\n' for n in range(1, 7)
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in images:
            archive.write(name, Path(name).name)
        archive.writestr("manifest.csv", manifest)
    (tmp_path / "batch.zip").write_bytes(buffer.getvalue())
    page.get_by_label("A zip, or a CSV/JSONL manifest").set_input_files(str(tmp_path / "batch.zip"))
    page.get_by_role("button", name="Import", exact=True).click()
    page.get_by_text("Done: 6 items imported.").wait_for()
    assert page.locator("#upload-bar").evaluate("bar => bar.value") == 100
    assert "batch.zip: imported 6 items" in page.locator("#upload-results li.ok").first.inner_text()
    assert Item.objects.filter(study=study).count() == 6
    shot(page, "setup-items-upload")
    assert page.js_errors == []


def test_files_dropped_on_the_page_are_uploaded(browser: Any, server: Any, researcher: Any) -> None:
    from annotations.models import Item

    study = markers_study(researcher)
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/items/")
    manifest = 'external_id,file,attributes\nd1,a.png,"[""hat""]"\nd2,b.png,"[""tie""]"\n'
    files = {
        "a.png": base64.b64encode(png((30, 30), (200, 10, 10))).decode(),
        "b.png": base64.b64encode(png((30, 30), (10, 200, 10))).decode(),
        "manifest.csv": base64.b64encode(manifest.encode()).decode(),
    }
    page.evaluate(
        """files => {
            const data = new DataTransfer();
            for (const [name, b64] of Object.entries(files)) {
                const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
                data.items.add(new File([bytes], name));
            }
            const zone = document.getElementById('drop-zone');
            const init = {dataTransfer: data, bubbles: true, cancelable: true};
            zone.dispatchEvent(new DragEvent('dragover', init));
            zone.dispatchEvent(new DragEvent('drop', init));
        }""",
        files,
    )
    page.get_by_text("Done: 2 items imported.").wait_for()
    assert sorted(Item.objects.filter(study=study).values_list("external_id", flat=True)) == ["d1", "d2"]
    assert Item.objects.get(study=study, external_id="d2").metadata == {"attributes": ["tie"]}
    page.get_by_role("link", name="Show the items").click()
    page.locator(".item-card strong", has_text="d2").wait_for()
    assert page.locator(".item-meta dd", has_text="tie").is_visible()
    assert page.js_errors == []


def test_a_chosen_folder_keeps_its_subfolders_for_the_manifest(
    browser: Any, server: Any, researcher: Any, tmp_path: Path
) -> None:
    from annotations.models import Item

    study = markers_study(researcher)
    folder = tmp_path / "shoot"
    (folder / "day1").mkdir(parents=True)
    (folder / "day1" / "x.png").write_bytes(png((30, 30), (1, 2, 3)))
    (folder / "day1" / "y.png").write_bytes(png((30, 30), (3, 2, 1)))
    (folder / "items.csv").write_text(
        'external_id,file,attributes\nf1,day1/x.png,"[""hat""]"\nf2,day1/y.png,"[""tie""]"\n'
    )
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto(f"/studies/{study.pk}/items/")
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="choose a folder").click()
    chooser.value.set_files(str(folder))
    page.get_by_text("Done: 2 items imported.").wait_for()
    item = Item.objects.get(study=study, external_id="f2")
    assert item.images.get().original_name == "day1/y.png"
    assert page.js_errors == []


def test_a_large_label_studio_project_becomes_a_study_whose_tasks_a_job_imports(
    browser: Any, server: Any, researcher: Any, tmp_path: Path, settings: Any
) -> None:
    """The new-study page's Label Studio form, over the inline size: the study is made from the zip's
    labeling config, the page lands on its Items tab, and the import job there says what it imported."""
    from annotations.models import ImportJob, Study

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "labelstudio"
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    with zipfile.ZipFile(tmp_path / "project.zip", "w") as archive:
        archive.write(fixtures / "snapshot_export.json", "export.json")
        archive.write(fixtures / "config.xml", "config.xml")
        for file in (fixtures / "media").rglob("*.png"):
            archive.write(file, file.relative_to(fixtures / "media").as_posix())
    page = open_page(browser, server)
    sign_in(page, "res")
    page.goto("/studies/new/")
    form = page.get_by_role("region", name="Or bring a Label Studio project")
    form.get_by_label("Name", exact=True).fill("From <LS>")
    form.get_by_label("Export: JSON").set_input_files(str(tmp_path / "project.zip"))
    form.get_by_role("button", name="Create from Label Studio").click()
    page.wait_for_url("**/items/")
    study = Study.objects.get(name="From <LS>")
    assert page.url.endswith(f"/studies/{study.pk}/items/")
    body = page.locator("main").inner_text()
    assert "Study “From <LS>” created from the labeling config" in body
    job = page.locator("li.import-job")
    assert "Label Studio" in job.inner_text() and "Imported 4 Label Studio tasks" in job.inner_text()
    assert ImportJob.objects.get(study=study).status == "done" and study.items.count() == 4
    shot(page, "setup-labelstudio-job")
    assert page.js_errors == []
