"""The researcher's setup through the Django test client: the new-study page (presets by paper, the
question preview, help text), item uploads (plain images, several files, folders, manifest templates,
refusals that link the template), the items grid (metadata, filters) and the docs pages."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotations.models import Item, Study
from protocols.schema import list_presets, load_preset
from tests.annotations.imagefiles import png_bytes
from tests.factories import ItemFactory, StudyFactory

pytestmark = pytest.mark.django_db


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def preset_study(owner, preset: str) -> Study:
    return StudyFactory.create(owner=owner, protocol=load_preset(preset).to_dict(), preset=preset)


def zip_of(files: dict[str, bytes], name: str = "items.zip") -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    buffer.seek(0)
    buffer.name = name
    return buffer


def six_pngs() -> dict[str, bytes]:
    return {f"img{n}.png": png_bytes((20 * n, 40, 90)) for n in range(1, 7)}


# --- New study page -----------------------------------------------------------------------------


def test_presets_are_named_by_their_paper_and_none_is_chosen_for_the_researcher(owner) -> None:
    page = login(owner).get("/studies/new/").content.decode()
    select = page[page.index('<select name="preset"') : page.index("</select>")]
    assert " required" in select[: select.index(">")]
    options = re.findall(r'<option value="([^"]*)"( selected)?>([^<]*)</option>', select)
    assert [value for value, _s, _l in options] == ["", *list_presets(), "own"]
    labels = {value: html.unescape(label) for value, _s, label in options}
    assert labels["stereotype-markers"] == "ViSAGe (Jha et al., ACL 2024): Visual stereotype markers"
    assert labels["visualness"].startswith("ViSAGe (Jha et al., ACL 2024): ")
    assert labels["ssi-rubric"].startswith("SSI rubric (Barve et al. 2025): ")
    assert labels["bias-axes"].startswith("BiasConnect (Shukla et al. 2025): ")
    assert labels["subgroup"].startswith("Stereotype agent (Wang et al. 2024): ")
    assert labels["object-attributes"].startswith("SODA (Choi et al. 2025): ")
    assert labels[""] == "Choose a protocol…"
    assert labels["own"].startswith("My own protocol file")
    assert [value for value, selected, _l in options if selected] == [""]  # the question, no preset


def test_help_text_sits_under_its_field_and_describes_it(owner) -> None:
    page = login(owner).get("/studies/new/").content.decode()
    for name in ("preset", "protocol_file", "overlap"):
        assert re.search(
            rf'<(select|input)[^>]*aria-describedby="id_{name}_helptext"[^>]*id="id_{name}"', page
        ) or (
            re.search(rf'<(select|input)[^>]*id="id_{name}"[^>]*aria-describedby="id_{name}_helptext"', page)
        ), name
        assert f'<p class="field-help" id="id_{name}_helptext">' in page
    assert 'href="/docs/protocols/"' in page


def test_the_preview_shows_each_presets_questions_as_annotators_see_them(owner) -> None:
    page = login(owner).get("/studies/new/").content.decode()
    previews = dict(
        re.findall(r'<details class="preset-preview" data-preset="([^"]+)"(.*?)\n  </details>', page, re.S)
    )
    assert sorted(previews) == list_presets()
    markers = previews["stereotype-markers"]
    assert not any(" open" in preview[:40] for preview in previews.values())  # nothing chosen yet
    question = load_preset("stereotype-markers").question("attributes")
    assert html.escape(question.prompt) in markers
    # Options from each item: the preview shows an example item's, 5 at a time, and None of the above.
    assert "sombrero" in markers and "None of the above" in markers and "shown 5 at a time" in markers
    assert "every selected option needs at least one box" in markers
    # Visual-ness fills the attribute term into the prompt; the likert options and Unsure are listed.
    assert "The attribute sombrero can be visually depicted in an image." in previews["visualness"]
    assert "Strongly Disagree" in previews["visualness"] and "Unsure" in previews["visualness"]
    # Questions chosen by the item's metadata: one example item per value shown.
    subgroup = previews["subgroup"]
    assert "<code>dimension</code> = gender" in subgroup and "<code>dimension</code> = race" in subgroup
    assert "Which gender subgroup" in subgroup and "Which racial or regional subgroup" in subgroup
    assert 'href="/presets/subgroup/template.csv"' in subgroup
    # Read-only: the preview holds no form field that the create form would send.
    section = page[page.index('id="preset-previews"') : page.index('id="from-labelstudio"')]
    assert "<input" not in section and "<select" not in section


def test_a_preset_and_a_file_together_are_refused_with_a_clear_message(owner) -> None:
    upload = SimpleUploadedFile("mine.yaml", load_preset("visualness").to_dict()["name"].encode())
    page = login(owner).post(
        "/studies/new/",
        {"name": "Both", "preset": "bias-axes", "protocol_file": upload, "overlap": 3, "lease_minutes": 30},
    )
    assert (
        "My own protocol file" in html.unescape(page.content.decode())
        and not Study.objects.filter(name="Both").exists()
    )
    page = login(owner).post(
        "/studies/new/", {"name": "None", "preset": "", "overlap": 3, "lease_minutes": 30}
    )
    assert (
        "Choose which protocol this study uses" in html.unescape(page.content.decode())
        and not Study.objects.filter(name="None").exists()
    )


# --- Uploading items ----------------------------------------------------------------------------


def test_a_plain_zip_of_images_for_visage_names_the_missing_field_and_links_the_template(owner) -> None:
    study = preset_study(owner, "stereotype-markers")
    client = login(owner)
    page = client.post(
        f"/studies/{study.pk}/import/items/", {"file": zip_of(six_pngs()), "next": "items"}, follow=True
    )
    text = page.content.decode()
    assert page.redirect_chain[-1][0] == f"/studies/{study.pk}/items/"
    assert "Nothing was imported." in text and "metadata field &#x27;attributes&#x27; is missing" in text
    assert "img1.png (an image without a manifest)" in text
    assert f'<a href="/studies/{study.pk}/import/template.csv">Manifest template (CSV)</a>' in text
    assert 'href="/docs/import-export/"' in text
    assert not Item.objects.filter(study=study).exists()
    answer = client.post(
        f"/studies/{study.pk}/import/items/", {"file": zip_of(six_pngs())}, HTTP_ACCEPT="application/json"
    )
    assert answer.status_code == 400
    body = answer.json()
    assert body["ok"] is False and "'attributes' is missing" in body["error"]
    assert body["templates"] == {
        "csv": f"/studies/{study.pk}/import/template.csv",
        "jsonl": f"/studies/{study.pk}/import/template.jsonl",
    }


def test_the_api_refusal_names_the_field_and_gives_the_template(owner) -> None:
    from tests.helpers import client_for

    study = preset_study(owner, "stereotype-markers")
    answer = client_for(owner).post(
        f"/api/studies/{study.pk}/items/import/", {"file": zip_of(six_pngs())}, format="multipart"
    )
    assert answer.status_code == 400
    assert "metadata field 'attributes' is missing" in answer.json()["detail"]
    assert answer.json()["templates"]["csv"] == f"http://testserver/studies/{study.pk}/import/template.csv"


def test_the_template_filled_in_imports_the_zip(owner) -> None:
    """The researcher's path: download the template, write one row per image, zip it with the images."""
    study = preset_study(owner, "stereotype-markers")
    client = login(owner)
    template = client.get(f"/studies/{study.pk}/import/template.csv")
    assert template.status_code == 200 and template["Content-Type"].startswith("text/csv")
    assert "attachment" in template["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(template.content.decode())))
    assert {"external_id", "file", "attributes", "identity"} <= set(rows[0])
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    for number, name in enumerate(six_pngs(), 1):
        writer.writerow({**rows[number % 2], "external_id": f"x{number}", "file": name})
    answer = client.post(
        f"/studies/{study.pk}/import/items/",
        {"file": zip_of({**six_pngs(), "manifest.csv": out.getvalue().encode()})},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["created"] == 6
    item = Item.objects.get(study=study, external_id="x2")
    assert item.metadata["attributes"] == json.loads(rows[0]["attributes"]) and item.images.count() == 1


def test_preset_templates_in_both_formats_and_unknown_ones(owner) -> None:
    client = login(owner)
    for preset in list_presets():
        jsonl = client.get(f"/presets/{preset}/template.jsonl")
        assert jsonl.status_code == 200
        records = [json.loads(line) for line in jsonl.content.decode().splitlines()]
        assert len(records) == 2
        protocol = load_preset(preset)
        needs = {"text": "text", "image": "file", "image_set": "files"}[protocol.unit]
        assert all(needs in record for record in records)
        for question in protocol.questions:
            if question.options_from:
                assert all(isinstance(record[question.options_from], list) for record in records)
            if question.applies_if:
                assert all(question.applies_if["field"] in record for record in records)
    assert client.get("/presets/nope/template.csv").status_code == 404
    assert client.get("/presets/subgroup/template.xlsx").status_code == 404
    assert Client().get("/presets/subgroup/template.csv").status_code == 302


def test_several_images_from_a_folder_with_a_manifest_in_one_request(owner) -> None:
    study = preset_study(owner, "subgroup")
    manifest = "external_id,file,dimension\nm1,a/1.png,gender\nm2,a/2.png,race\n"
    files = [
        SimpleUploadedFile("1.png", png_bytes((10, 10, 10)), content_type="image/png"),
        SimpleUploadedFile("2.png", png_bytes((90, 10, 10)), content_type="image/png"),
        SimpleUploadedFile("list.csv", manifest.encode(), content_type="text/csv"),
    ]
    answer = login(owner).post(
        f"/studies/{study.pk}/import/items/",
        {"images": files, "paths": ["shoot/a/1.png", "shoot/a/2.png", "shoot/list.csv"]},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["created"] == 2
    assert Item.objects.get(study=study, external_id="m2").metadata == {"dimension": "race"}


def test_plain_images_are_accepted_where_the_protocol_needs_no_metadata(owner) -> None:
    study = preset_study(owner, "bias-axes")
    files = [SimpleUploadedFile(f"p{n}.png", png_bytes((n * 30, 0, 0))) for n in range(1, 4)]
    page = login(owner).post(
        f"/studies/{study.pk}/import/items/", {"images": files, "next": "items"}, follow=True
    )
    assert "Imported 3 items" in page.content.decode()
    assert sorted(Item.objects.filter(study=study).values_list("external_id", flat=True)) == [
        "p1.png",
        "p2.png",
        "p3.png",
    ]


def test_items_without_the_field_that_selects_their_questions_are_refused(owner) -> None:
    study = preset_study(owner, "subgroup")
    answer = login(owner).post(
        f"/studies/{study.pk}/import/items/",
        {"images": [SimpleUploadedFile("p.png", png_bytes())]},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 400
    assert "metadata field 'dimension' is missing: it selects the questions" in answer.json()["error"]


def test_an_item_whose_field_selects_no_question_is_refused(owner, tmp_path) -> None:
    study = preset_study(owner, "subgroup")
    manifest = SimpleUploadedFile("m.csv", b"external_id,dimension\nx1,gender\nx2,age\n")
    answer = login(owner).post(
        f"/studies/{study.pk}/import/items/", {"file": manifest}, HTTP_ACCEPT="application/json"
    )
    assert answer.status_code == 400
    assert (
        "row 3: no question of this protocol applies to the item: dimension 'age'" in answer.json()["error"]
    )
    assert not Item.objects.filter(study=study).exists()


@pytest.mark.parametrize(
    ("names", "paths", "expected"),
    [
        (["a.png", "b.png"], ["../a.png", "b.png"], "outside the target folder"),
        (["a.png", "notes.txt"], [], "notes.txt: accepted files are images"),
        (["a.png", "a.png"], [], "a.png: sent twice"),
        (["a.csv", "b.jsonl"], [], "send one manifest"),
    ],
)
def test_several_files_are_checked_before_anything_is_imported(owner, names, paths, expected) -> None:
    study = preset_study(owner, "bias-axes")
    files = [SimpleUploadedFile(name, png_bytes()) for name in names]
    answer = login(owner).post(
        f"/studies/{study.pk}/import/items/",
        {"images": files, "paths": paths},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 400 and expected in answer.json()["error"]
    assert not Item.objects.filter(study=study).exists()


def test_the_upload_size_limit_applies_to_several_files_together(owner, settings) -> None:
    settings.WORKBENCH_MAX_UPLOAD_BYTES = 2 * len(png_bytes()) - 1
    study = preset_study(owner, "bias-axes")
    files = [SimpleUploadedFile(f"{n}.png", png_bytes()) for n in range(2)]
    answer = login(owner).post(
        f"/studies/{study.pk}/import/items/", {"images": files}, HTTP_ACCEPT="application/json"
    )
    assert answer.status_code in (400, 413)
    assert not Item.objects.filter(study=study).exists()


def test_a_reader_or_a_stranger_cannot_import_or_read_the_template(owner, other_researcher) -> None:
    study = preset_study(owner, "bias-axes")
    stranger = login(other_researcher)
    answer = stranger.post(
        f"/studies/{study.pk}/import/items/", {"images": [SimpleUploadedFile("p.png", png_bytes())]}
    )
    assert answer.status_code == 404
    assert stranger.get(f"/studies/{study.pk}/import/template.csv").status_code == 404
    assert not Item.objects.filter(study=study).exists()


def test_neither_a_file_nor_images_says_what_to_choose(owner) -> None:
    study = preset_study(owner, "bias-axes")
    answer = login(owner).post(f"/studies/{study.pk}/import/items/", {}, HTTP_ACCEPT="application/json")
    assert answer.status_code == 400 and "Choose a file to import" in answer.json()["error"]


# --- The items grid -------------------------------------------------------------------------------


def test_the_items_grid_shows_metadata_escaped_and_filters_by_condition_and_model(owner) -> None:
    study = preset_study(owner, "stereotype-markers")
    for n in range(3):
        ItemFactory.create(
            study=study,
            external_id=f"sd-{n}",
            condition="gender:women",
            model_name="sdxl",
            prompt="a <b>photo</b>",
            seed=40 + n,
            metadata={"attributes": ["hat", "<script>alert(1)</script>"], "identity": "Mexican"},
        )
    ItemFactory.create(
        study=study, external_id="dalle-0", condition="base", model_name="dall-e-3", metadata={}
    )
    client = login(owner)
    page = client.get(f"/studies/{study.pk}/items/").content.decode()
    assert "<dt>identity</dt><dd>Mexican</dd>" in page and "<dt>seed</dt><dd>41</dd>" in page
    assert "hat, &lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "a &lt;b&gt;photo&lt;/b&gt;" in page
    assert (
        '<option value="dall-e-3">dall-e-3</option>' in page and '<option value="sdxl">sdxl</option>' in page
    )
    only = client.get(f"/studies/{study.pk}/items/", {"model": "dall-e-3"}).content.decode()
    assert "dalle-0" in only and "sd-1" not in only
    both = client.get(f"/studies/{study.pk}/items/", {"model": "sdxl", "condition": "gender:women"})
    assert (
        both.status_code == 200 and "sd-2" in both.content.decode() and "dalle-0" not in both.content.decode()
    )
    none = client.get(f"/studies/{study.pk}/items/", {"model": "sdxl", "condition": "base"}).content.decode()
    assert "No items match these filters" in none
    wrong = client.get(f"/studies/{study.pk}/items/", {"model": "<i>nope</i>"})
    text = wrong.content.decode()
    assert (
        wrong.status_code == 400 and "No item of this study has the model “&lt;i&gt;nope&lt;/i&gt;”" in text
    )
    assert "dalle-0" in text and "sd-0" in text  # the bad filter is ignored


def test_pages_of_the_grid_keep_the_filters(owner) -> None:
    study = preset_study(owner, "bias-axes")
    for n in range(50):
        ItemFactory.create(study=study, external_id=f"i{n:02d}", condition="base", model_name="m a&b")
    ItemFactory.create(study=study, external_id="other", condition="base", model_name="other")
    page = login(owner).get(f"/studies/{study.pk}/items/", {"model": "m a&b"}).content.decode()
    assert "Page 1 of 2" in page
    assert 'href="?page=2&amp;model=m+a%26b"' in page
    second = login(owner).get(f"/studies/{study.pk}/items/", {"model": "m a&b", "page": "2"}).content.decode()
    assert "<strong>i49</strong>" in second and "<strong>other</strong>" not in second


# --- Docs -----------------------------------------------------------------------------------------


def test_docs_are_served_escaped_with_links_to_other_docs(admin_user) -> None:
    client = login(admin_user)  # every doc, the internal ones too (tests/test_information_exposure.py)
    page = client.get("/docs/import-export/")
    text = page.content.decode()
    assert page.status_code == 200 and '<pre class="doc">' in text
    # The markdown is text: its tags are shown, not run ("<Choices choice=...>" in the Label Studio table).
    assert "`&lt;Choices choice=&quot;multiple&quot;&gt;`" in text and "<Choices" not in text
    assert '<a href="/docs/protocols/">docs/protocols.md</a>' in text
    assert '<a href="/docs/security/">docs/security.md</a>' in text
    index = client.get("/docs/").content.decode()
    assert 'href="/docs/architecture/"' in index
    for bad in ("/docs/nope/", "/docs/..%2Fsettings/", "/docs/README/", "/docs/import-export.md/"):
        assert client.get(bad).status_code == 404, bad
    assert Client().get("/docs/import-export/").status_code == 302


def test_every_docs_link_in_the_templates_names_an_existing_doc() -> None:
    from pathlib import Path

    from workbench.docs_pages import doc_names

    linked = set()
    for template in Path("templates").rglob("*.html"):
        linked |= set(re.findall(r"\{% url 'docs-page' '([^']+)' %\}", template.read_text()))
    assert linked and linked <= set(doc_names())
    for page in ("studies/create.html", "studies/items.html"):
        text = (Path("templates") / page).read_text()
        assert not re.search(r"(?<![>/'\w])docs/[a-z-]+\.md", text), page  # every mention is a link
