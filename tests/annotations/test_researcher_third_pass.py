"""Issue 36, the researcher's points, through the Django test client: loose dropped files found by
their name when the manifest's path names none of them; the new-study page asks which protocol (no
preset chosen for the researcher) and reads each preset file once; a study made from a Label Studio
export starts as a draft and its overview and progress page count its imported answers alike.
(The same points in a browser: tests/browser/test_researcher_third_pass_browser.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotations.models import Item, Study
from protocols.schema import load_preset
from tests.annotations.imagefiles import png_bytes
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db

LS = Path(__file__).resolve().parents[1] / "fixtures" / "labelstudio"


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def markers_study(owner) -> Study:
    return StudyFactory.create(
        owner=owner, protocol=load_preset("stereotype-markers").to_dict(), preset="stereotype-markers"
    )


def upload(client: Client, study: Study, files: dict[str, bytes]):
    """Loose files as the items page's script sends them: every file under ``images``, each with its
    path (a file dropped alone: its name)."""
    uploads = [SimpleUploadedFile(path.rsplit("/", 1)[-1], data) for path, data in files.items()]
    return client.post(
        f"/studies/{study.pk}/import/items/",
        {"images": uploads, "paths": list(files)},
        HTTP_ACCEPT="application/json",
    )


TEMPLATE_ROWS = 'external_id,file,attributes\nc1,images/cat.png,"[""hat""]"\nc2,images/dog.png,"[""tie""]"\n'


def test_loose_files_are_found_by_name_when_the_manifest_path_names_none(owner) -> None:
    """The template's rows say ``images/cat.png``; the researcher drops cat.png, dog.png and the
    manifest loose: each row reads the one uploaded file of its name."""
    study = markers_study(owner)
    cat, dog = png_bytes((200, 10, 10)), png_bytes((10, 200, 10))
    answer = upload(
        login(owner), study, {"manifest.csv": TEMPLATE_ROWS.encode(), "cat.png": cat, "dog.png": dog}
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["created"] == 2
    c2 = Item.objects.get(study=study, external_id="c2")
    image = c2.images.get()
    assert image.file.read() == dog and image.original_name == "images/dog.png"
    assert Item.objects.get(study=study, external_id="c1").images.get().file.read() == cat


def test_a_path_that_exists_is_read_before_a_file_of_the_same_name(owner) -> None:
    study = markers_study(owner)
    inside, loose = png_bytes((1, 2, 3)), png_bytes((3, 2, 1))
    manifest = 'external_id,file,attributes\nc1,images/cat.png,"[""hat""]"\n'
    answer = upload(
        login(owner),
        study,
        {"drop/manifest.csv": manifest.encode(), "drop/images/cat.png": inside, "drop/cat.png": loose},
    )
    assert answer.status_code == 200, answer.content
    assert Item.objects.get(study=study, external_id="c1").images.get().file.read() == inside


def test_two_loose_files_of_the_same_name_are_refused_naming_the_row_and_both(owner) -> None:
    study = markers_study(owner)
    manifest = 'external_id,file,attributes\nc1,images/cat.png,"[""hat""]"\n'
    answer = upload(
        login(owner),
        study,
        {
            "manifest.csv": manifest.encode(),
            "day1/cat.png": png_bytes((1, 1, 1)),
            "day2/cat.png": png_bytes((2, 2, 2)),
        },
    )
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error.startswith("manifest.csv row 2: images/cat.png is not among the uploaded files")
    assert "2 uploaded files are named cat.png (day1/cat.png, day2/cat.png)" in error
    assert not Item.objects.filter(study=study).exists()


def test_two_manifest_paths_never_read_one_file_by_its_name(owner) -> None:
    """images/cat.png and other/cat.png are two images; one cat.png was uploaded: neither row may take
    the other's file silently."""
    study = markers_study(owner)
    manifest = 'external_id,file,attributes\nc1,images/cat.png,"[""hat""]"\nc2,other/cat.png,"[""tie""]"\n'
    answer = upload(login(owner), study, {"manifest.csv": manifest.encode(), "cat.png": png_bytes((4, 4, 4))})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error.startswith(
        "manifest.csv row 3: images/cat.png and other/cat.png would both read the uploaded file cat.png"
    )
    assert not Item.objects.filter(study=study).exists()


def test_a_name_no_uploaded_file_has_is_still_refused(owner) -> None:
    study = markers_study(owner)
    answer = upload(
        login(owner), study, {"manifest.csv": TEMPLATE_ROWS.encode(), "cat.png": png_bytes((9, 9, 9))}
    )
    assert answer.status_code == 400
    assert "images/dog.png: no such file" in answer.json()["error"]
    assert not Item.objects.filter(study=study).exists()


def test_an_import_job_finds_loose_files_by_name_too(
    owner, settings, django_capture_on_commit_callbacks
) -> None:
    """Over the inline limit the upload is kept in storage and a worker imports it: the same rule."""
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    study = markers_study(owner)
    with django_capture_on_commit_callbacks(execute=True):
        answer = upload(
            login(owner),
            study,
            {"manifest.csv": TEMPLATE_ROWS.encode(), "cat.png": png_bytes((4, 4, 4)), "dog.png": png_bytes()},
        )
    assert answer.status_code == 202, answer.content
    job = study.import_jobs.get()
    job.refresh_from_db()
    assert job.status == "done", job.error
    assert Item.objects.filter(study=study).count() == 2


# --- The new-study page asks which protocol --------------------------------------------------------

FORM = {"name": "Asked", "overlap": 3, "lease_minutes": 30}


def test_the_new_study_page_asks_and_refuses_no_choice_at_the_field(owner) -> None:
    client = login(owner)
    page = client.get("/studies/new/").content.decode()
    select = page[page.index('<select name="preset"') : page.index("</select>")]
    assert re.findall(r'<option value="([^"]*)" selected>', select) == [""]  # the question, not a preset
    refused = client.post("/studies/new/", {**FORM, "preset": ""})
    assert refused.status_code == 200 and not Study.objects.filter(name="Asked").exists()
    body = refused.content.decode()
    field = body[body.index('<select name="preset"') : body.index('id="id_protocol_file"')]
    assert 'aria-invalid="true"' in field
    assert "Choose which protocol this study uses: a paper&#x27;s preset, or your own protocol file." in field
    own = client.post("/studies/new/", {**FORM, "preset": "own"}).content.decode()
    assert "You chose “My own protocol file (upload it below)”: upload the file." in own.replace(
        "&#x27;", "'"
    )
    assert client.post("/studies/new/", {**FORM, "preset": "nope"}).status_code == 200
    assert not Study.objects.filter(name="Asked").exists()
    created = client.post("/studies/new/", {**FORM, "preset": "bias-axes"})
    study = Study.objects.get(name="Asked")
    assert created.status_code == 302 and (study.preset, study.status) == ("bias-axes", "draft")


def test_own_protocol_file_chosen_in_the_list(owner) -> None:
    text = (
        "name: Mine\nunit: text\nquestions:\n"
        "  - key: ok\n    kind: single\n    prompt: OK?\n    options: [fine, poor]\n"
    )
    answer = login(owner).post(
        "/studies/new/",
        {**FORM, "preset": "own", "protocol_file": SimpleUploadedFile("mine.yaml", text.encode())},
    )
    assert answer.status_code == 302, re.findall(r"role=.alert.>([^<]*)", answer.content.decode())
    assert Study.objects.get(name="Asked").protocol_obj.name == "Mine"


def test_the_new_study_page_reads_each_preset_file_once(owner) -> None:
    """It read and parsed every preset's YAML twice on each request (the list's labels and the
    previews: 0.19 s of its 0.2 s here, docs/benchmarks.md); a preset is now parsed once per version
    of its file."""
    from protocols.schema import _preset_parsed, list_presets

    client = login(owner)
    assert client.get("/studies/new/").status_code == 200
    parsed = _preset_parsed.cache_info().currsize
    assert parsed >= len(list_presets())
    misses = _preset_parsed.cache_info().misses
    assert client.get("/studies/new/").status_code == 200
    assert _preset_parsed.cache_info().misses == misses


# --- A study made from a Label Studio export -------------------------------------------------------


def labelstudio_zip() -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.write(LS / "snapshot_export.json", "export.json")
        archive.write(LS / "config.xml", "config.xml")
        for file in (LS / "media").rglob("*.png"):
            archive.write(file, file.relative_to(LS / "media").as_posix())
    return buffer.getvalue()


def numbers(page: str, where: str) -> tuple[int, int]:
    found = re.search(
        where + r'.*?<span data-field="judgements">(\d+)</span> of <span data-field="judgements_needed">'
        r"(\d+)</span> judgements given here",
        page,
        re.S,
    )
    assert found, where
    return int(found.group(1)), int(found.group(2))


def test_a_label_studio_study_is_a_draft_and_both_pages_count_its_answers_alike(owner) -> None:
    """The snapshot export: 4 tasks, two people's annotations (4 judgements, 16 answers), a model's
    predictions on 2 tasks (4 answers). Overlap 3: 12 judgements needed from annotators here."""
    client = login(owner)
    answer = client.post(
        "/studies/new/labelstudio/",
        {"name": "From LS", "file": SimpleUploadedFile("project.zip", labelstudio_zip())},
    )
    study = Study.objects.get(name="From LS")
    assert answer.status_code == 302 and study.status == "draft"
    overview = client.get(f"/studies/{study.pk}/").content.decode()
    progress = client.get(f"/studies/{study.pk}/progress/").content.decode()
    assert 'id="launch-button"' in overview
    assert numbers(overview, 'id="overview-judgements"') == numbers(progress, 'id="progress-text"') == (0, 12)
    note = (
        "Imported from files, not given here: "
        '<span data-imported="judgements">4</span> judgements by 2 people (16 answers) and '
        '<span data-imported="predictions">2</span> machine predictions (4 answers). They count in '
        "agreement, consensus and findings, not toward the 12 judgements this study's annotators "
        "give here."
    )
    assert note in overview and note in progress
    assert "20 annotations (one per question answered) by 3 annotators" in overview


def test_a_folded_tables_summary_says_what_its_rows_are_not_one_rows_numbers(demo_study, client) -> None:
    """The summary of a long table says how many rows and what each is; a number of its first row would
    stand there without its n or interval."""
    import re

    client.force_login(demo_study.owner)
    sources = client.get(f"/api/studies/{demo_study.pk}/metrics/").json()["sources_available"]
    machine = next(source for source in sources if source != "consensus")
    pair = f"study={demo_study.pk}&source=consensus&study={demo_study.pk}&source={machine}"
    for url in (f"/studies/{demo_study.pk}/findings/", f"/compare/?{pair}"):
        html = client.get(url).content.decode()
        summaries = re.findall(
            r'<details class="rows-fold" id="rows-[^"]*"><summary>(.*?)</summary>', html, re.S
        )
        assert summaries, url
        for summary in summaries:
            words = re.sub(r"<[^>]+>", "", summary)
            assert "first:" not in words and not re.search(r"\d\.\d", words), (url, words)
        assert any(", one per " in re.sub(r"<[^>]+>", "", s) for s in summaries), (url, summaries)


def test_a_study_without_items_says_so_instead_of_zero_percent(owner, study) -> None:
    client = login(owner)
    for url, where in (
        (f"/studies/{study.pk}/", "overview-judgements"),
        (f"/studies/{study.pk}/progress/", "progress-text"),
    ):
        html = client.get(url).content.decode()
        line = html.split(f'id="{where}"', 1)[1].split("</p>", 1)[0]
        assert "No judgements asked yet: the study has no items to judge" in line and "%" not in line, (
            url,
            line,
        )
