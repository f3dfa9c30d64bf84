"""Label Studio exports in the layouts it writes (project, snapshot, JSON_MIN), through the command, the
API and the study page: items, human and machine answers, skips, accounts; refusals by task id and field
that leave every table as it was."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from annotations.interchange.foreign_answers import stand_in_name
from annotations.interchange.labelstudio.importer import labelstudio_import
from annotations.models import (
    Annotation,
    Annotator,
    Assignment,
    Enrollment,
    ImportJob,
    Item,
    ItemImage,
    Study,
    User,
)
from common.errors import ImportRefused
from tests.annotations.builders import LABELSTUDIO_FIXTURES, row_counts
from tests.annotations.imagefiles import png_bytes
from tests.factories import StudyFactory, UserFactory
from tests.helpers import client_for
from tests.s3_server import FileStore

pytestmark = pytest.mark.django_db

CONFIG = LABELSTUDIO_FIXTURES / "config.xml"
MEDIA = LABELSTUDIO_FIXTURES / "media"


def run_import(export: str | Path, *args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("import_labelstudio", str(export), *args, stdout=out)
    return json.loads(out.getvalue())


def create(export: str, name: str = "from LS", *extra: str) -> tuple[dict[str, Any], Study]:
    report = run_import(
        LABELSTUDIO_FIXTURES / export,
        "--create",
        name,
        "--config",
        str(CONFIG),
        "--media-root",
        str(MEDIA),
        "--owner",
        "owner",
        *extra,
    )
    return report, Study.objects.get(pk=report["study"])


def answers(study: Study) -> dict[tuple[str, str, str], Any]:
    return {
        (a.item.external_id, a.annotator.name, a.question_key): a.value
        for a in Annotation.objects.filter(study=study).select_related("item", "annotator")
    }


def write_export(tmp_path: Path, tasks: list[dict[str, Any]], name: str = "export.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(tasks))
    return path


def project_tasks() -> list[dict[str, Any]]:
    return json.loads((LABELSTUDIO_FIXTURES / "project_export.json").read_text())


def snapshot_tasks() -> list[dict[str, Any]]:
    return json.loads((LABELSTUDIO_FIXTURES / "snapshot_export.json").read_text())


def test_project_export_with_its_config_creates_the_study(owner) -> None:
    report, study = create("project_export.json")
    protocol = study.protocol_obj
    assert [(q.key, q.kind) for q in protocol.questions] == [
        ("gender", "single"),
        ("attributes", "multi"),
        ("quality", "likert"),
        ("comment", "text"),
        ("boxes", "boxes"),
    ]
    assert protocol.question("boxes").linked_question == "attributes"
    assert protocol.question("gender").prompt == "What is the gender of the person?"
    assert [o.key for o in protocol.question("quality").options] == ["1", "2", "3", "4", "5"]
    assert report["shape"] == "project" and report["tasks"] == 3
    items_report = report["items"]
    assert (items_report["created"], items_report["references"], items_report["duplicates"]) == (3, 1, [])
    # The fixture's images are flat colours: kept, and flagged blank like any import (docs/import-export.md).
    assert [entry["external_id"] for entry in items_report["blank"]] == ["101", "102"]
    assert report["predictions_left_out"] == 2 and "ids only" in report["notes"][0]
    items = {item.external_id: item for item in Item.objects.filter(study=study)}
    assert items["101"].metadata == {"caption": "a nurse at work", "group": "nurse"}
    image = items["101"].images.get()
    assert (image.width, image.height, image.original_name) == (640, 480, "upload/3/8f2c4a1e-person1.png")
    assert items["102"].images.get().width == 800
    assert (
        items["103"].is_reference
        and items["103"].metadata["image"] == "https://example.org/images/person3.jpg"
    )
    got = answers(study)
    assert got[("101", "labelstudio-user-1", "gender")] == "female"
    assert got[("101", "labelstudio-user-1", "attributes")] == ["hat", "glasses"]
    assert got[("101", "labelstudio-user-1", "quality")] == "4"
    assert got[("101", "labelstudio-user-1", "comment")] == "red scarf"
    # 25% / 10% / 12.5% / 20% of 640x480
    assert got[("101", "labelstudio-user-1", "boxes")] == [
        {"option": "hat", "x": 160, "y": 48, "w": 80, "h": 96}
    ]
    assert got[("102", "labelstudio-user-1", "boxes")] == [
        {"option": "glasses", "x": 320, "y": 120, "w": 160, "h": 60},
        {"option": "beard", "x": 280, "y": 270, "w": 240, "h": 150},
    ]
    # The reference item: the rectangle's own original_width/height (1024x768) give the pixels.
    assert got[("103", "labelstudio-user-2", "boxes")] == [
        {"option": "beard", "x": 102, "y": 384, "w": 256, "h": 230}
    ]
    timed = Annotation.objects.get(
        study=study, item__external_id="101", annotator__name="labelstudio-user-1", question_key="gender"
    )
    assert timed.time_spent_ms == 41207 and timed.source == "import"
    assert set(Annotator.objects.filter(study=study).values_list("name", flat=True)) == {
        "labelstudio-user-1",
        "labelstudio-user-2",
    }
    assert not Annotator.objects.filter(kind="machine").exists()


def test_snapshot_export_brings_accounts_predictions_scores_and_skips(owner) -> None:
    ada = UserFactory.create(username="ada", email="Ada@Example.org", role="annotator")
    Enrollment.objects.create(study=StudyFactory.create(owner=owner), user=ada)  # one of owner's people
    report, study = create("snapshot_export.json")
    assert report["shape"] == "snapshot" and report["tasks"] == 4
    assert report["answers"]["accounts_matched"] == 1 and report["answers"]["emails_not_matched"] == 1
    assert not User.objects.filter(username="bo@example.org").exists()  # no account is made
    bo = Annotator.objects.get(study=study, name=stand_in_name(study, "bo@example.org"))
    assert bo.user is None and bo.name.startswith("imported-person-")
    got = answers(study)
    assert got[("101", "ada", "attributes")] == ["hat", "glasses"]
    assert Annotator.objects.get(name="ada").user == ada
    machine = Annotator.objects.get(kind="machine")
    assert (machine.name, machine.version) == ("yolo-attrs", "2024-05")
    assert got[("101", "yolo-attrs", "attributes")] == ["hat"]
    assert got[("101", "yolo-attrs", "boxes")] == [{"option": "hat", "x": 166, "y": 53, "w": 77, "h": 86}]
    items = {item.external_id: item for item in Item.objects.filter(study=study)}
    assert items["101"].metadata["labelstudio_scores"] == {"yolo-attrs@2024-05": 0.87}
    assert items["102"].metadata["labelstudio_scores"] == {"yolo-attrs@2024-05": 0.42}
    assert "104" in items and not items["104"].annotations.exists()
    skip = Assignment.objects.get(study=study)
    assert (skip.item.external_id, skip.annotator, skip.status) == ("102", bo, "skipped")
    assert skip.time_spent_ms == 3200 and skip.skip_reason == "cancelled in Label Studio"
    assert not Annotation.objects.filter(item=items["102"], annotator=bo).exists()


def test_json_min_gives_the_same_human_answers_as_the_full_export(owner) -> None:
    _report, full = create("project_export.json", "full")
    report, minimal = create("json_min_export.json", "min")
    assert report["shape"] == "json_min" and "JSON_MIN carries no predictions" in report["notes"][0]
    assert answers(minimal) == answers(full)
    assert Item.objects.get(study=minimal, external_id="101").metadata == {
        "caption": "a nurse at work",
        "group": "nurse",
    }


def test_an_edited_annotation_is_one_answer_its_latest(owner, tmp_path) -> None:
    tasks = project_tasks()
    first = tasks[0]["annotations"][0]
    older = copy.deepcopy(first)
    older["id"], older["updated_at"] = 199, "2024-05-02T09:12:44.118021Z"
    older["result"] = [r for r in older["result"] if r["from_name"] != "gender"] + [
        {
            "value": {"choices": ["Male"]},
            "id": "old",
            "from_name": "gender",
            "to_name": "image",
            "type": "choices",
        }
    ]
    tasks[0]["annotations"].insert(0, older)
    tasks[0]["annotations"].append(copy.deepcopy(older) | {"id": 198, "updated_at": "2024-05-01T00:00:00Z"})
    report = run_import(
        write_export(tmp_path, tasks),
        "--create",
        "edited",
        "--config",
        str(CONFIG),
        "--media-root",
        str(MEDIA),
    )
    study = Study.objects.get(pk=report["study"])
    assert report["superseded"] == 2
    assert answers(study)[("101", "labelstudio-user-1", "gender")] == "female"


def test_import_into_an_existing_study_maps_from_names_and_keeps_items(owner, tmp_path) -> None:
    _report, study = create("project_export.json")
    before = Annotation.objects.filter(study=study).count()
    report = run_import(
        LABELSTUDIO_FIXTURES / "snapshot_export.json", "--study", str(study.pk), "--media-root", str(MEDIA)
    )
    assert report["items"]["created"] == 1 and len(report["items"]["duplicates"]) == 3  # task 104 is new
    stand_ins = sorted(stand_in_name(study, email) for email in ("ada@example.org", "bo@example.org"))
    assert report["answers"]["annotators_created"] == [*stand_ins, "yolo-attrs 2024-05"]
    assert Annotation.objects.filter(study=study).count() == before + report["answers"]["created"]
    assert answers(study)[("101", stand_in_name(study, "ada@example.org"), "boxes")] == [
        {"option": "hat", "x": 160, "y": 48, "w": 80, "h": 96}
    ]


def test_a_study_whose_questions_do_not_fit_is_refused_by_from_name(study, tmp_path) -> None:
    before = row_counts()
    with pytest.raises(CommandError, match="from_name 'quality' matches no question of the study"):
        run_import(LABELSTUDIO_FIXTURES / "project_export.json", "--study", str(study.pk))
    assert row_counts() == before


def test_study_mode_reads_labels_and_choices_by_key_label_or_slug(study, tmp_path) -> None:
    tasks = project_tasks()[:2]
    for task in tasks:
        for annotation in task["annotations"]:
            annotation["result"] = [
                r for r in annotation["result"] if r["from_name"] in ("gender", "attributes", "boxes")
            ]
    report = run_import(write_export(tmp_path, tasks), "--study", str(study.pk), "--media-root", str(MEDIA))
    assert report["answers"]["created"] == 9
    assert answers(study)[("101", "labelstudio-user-1", "gender")] == "female"


BAD_CASES = [
    (
        "rotation",
        lambda t: t[0]["annotations"][0]["result"][0]["value"].update(rotation=15),
        "task 101, annotations[0].result[0] (boxes): value.rotation is 15; only unrotated rectangles are "
        "imported",
    ),
    (
        "label",
        lambda t: t[0]["annotations"][0]["result"][0]["value"].update(rectanglelabels=["Scarf"]),
        "task 101, annotations[0].result[0] (boxes): label 'Scarf' is not an option of 'attributes'",
    ),
    (
        "box-not-selected",
        lambda t: t[0]["annotations"][0]["result"][2]["value"].update(choices=["Glasses"]),
        "task 101, annotations[0].result[0] (boxes): boxes: box 1: option 'hat' is not selected in "
        "'attributes'",
    ),
    (
        "choice",
        lambda t: t[1]["annotations"][0]["result"][0]["value"].update(choices=["Robot"]),
        "task 102, annotations[0].result[0] (gender): choice 'Robot' is not an option of 'gender'",
    ),
    (
        "rating",
        lambda t: t[1]["annotations"][0]["result"][-1]["value"].update(rating=9),
        "task 102, annotations[0].result[4] (quality): rating 9 is outside 1..5 of 'quality'",
    ),
    (
        "type",
        lambda t: t[2]["annotations"][0]["result"][0].update(type="polygonlabels"),
        "task 103, annotations[0].result[0].type: 'polygonlabels' is not supported",
    ),
    (
        "from_name",
        lambda t: t[2]["annotations"][0]["result"][0].update(from_name="mood"),
        "task 103, annotations[0].result[0] (mood): from_name 'mood' is not a control of the labeling config",
    ),
    (
        "lead_time",
        lambda t: t[2]["annotations"][0].update(lead_time="slow"),
        "task 103, annotations[0].lead_time: must be a number of seconds",
    ),
    (
        "completed_by",
        lambda t: t[2]["annotations"][0].update(completed_by=None),
        "task 103, annotations[0].completed_by: needs a user id or an email",
    ),
    (
        "missing-file",
        lambda t: t[1]["data"].update(image="/data/local-files/?d=photos/nobody.png"),
        "task 102, data.image: '/data/local-files/?d=photos/nobody.png' is not under the media root",
    ),
    (
        "outside",
        lambda t: t[1]["data"].update(image="/data/local-files/?d=../../etc/passwd"),
        "task 102, data.image: '../../etc/passwd' is outside the target folder",
    ),
    (
        "condition",
        lambda t: t[2]["data"].update(condition="a/b"),
        "task 103: condition 'a/b' is not of the form",
    ),
]


@pytest.mark.parametrize("case,change,message", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_exports_are_refused_by_task_and_field_and_change_nothing(
    owner, tmp_path, _media_root, case, change, message
) -> None:
    tasks = project_tasks()
    change(tasks)
    path = write_export(tmp_path, tasks)
    before = row_counts(_media_root)
    with pytest.raises(CommandError) as caught:
        run_import(
            path, "--create", "bad", "--config", str(CONFIG), "--media-root", str(MEDIA), "--owner", "owner"
        )
    assert message in str(caught.value)
    assert row_counts(_media_root) == before


def test_a_bad_answer_after_stored_images_removes_the_files_too(
    owner, tmp_path, file_store: FileStore
) -> None:
    tasks = project_tasks()
    tasks[2]["annotations"][0]["result"][0]["value"]["choices"] = ["Robot"]
    before = row_counts()
    with pytest.raises(ImportRefused, match="task 103"):
        labelstudio_import(
            address=write_export(tmp_path, tasks),
            owner=owner,
            name="x",
            config_address=CONFIG,
            media_root=MEDIA,
        )
    # The images were stored before the items' transaction; the refusal removed them (and the study).
    assert row_counts() == before and file_store.names() == []


def test_the_images_of_a_label_studio_import_are_stored(owner, file_store: FileStore) -> None:
    _report, study = create("project_export.json")
    names = sorted(ItemImage.objects.filter(item__study=study).values_list("file", flat=True))
    assert len(names) == 2 and file_store.names() == names  # the third item is a reference (no file)
    assert all(name.startswith(f"items/{study.pk}/") for name in names)


def test_media_are_checked_as_any_upload(owner, tmp_path, _media_root) -> None:
    media = tmp_path / "media"
    (media / "photos").mkdir(parents=True)
    (media / "photos" / "person2.png").write_text("not an image at all")
    (media / "upload" / "3").mkdir(parents=True)
    (media / "upload" / "3" / "8f2c4a1e-person1.png").write_bytes(png_bytes(size=(640, 480)))
    before = row_counts(_media_root)
    with pytest.raises(CommandError, match=r"task 102, data.image: photos/person2.png: is not an image"):
        run_import(
            LABELSTUDIO_FIXTURES / "project_export.json",
            "--create",
            "x",
            "--config",
            str(CONFIG),
            "--media-root",
            str(media),
        )
    assert row_counts(_media_root) == before


@pytest.mark.parametrize(
    "config,message",
    [
        (
            '<View><Image name="i" value="$image"/><PolygonLabels name="p" toName="i"/></View>',
            "line 1: <PolygonLabels> is not supported",
        ),
        (
            '<View>\n  <Image name="i" value="$image"/>\n  <Choices name="c" toName="i">\n    <Choice '
            'value="a"/>\n'
            '    <Choice value="b"/>\n  </Choices>\n  <KeyPointLabels name="k" toName="i"/>\n</View>',
            "line 7: <KeyPointLabels> is not supported",
        ),
        (
            '<?xml version="1.0"?><!DOCTYPE View [<!ENTITY a "aaaa">]><View>&a;</View>',
            "refused: the config declares a DTD",
        ),
        (
            '<View><Image name="i" value="$image"/><Rating name="r" toName="other"/></View>',
            "point to 'other', which is no <Image> or <Text>",
        ),
        ('<View><Image name="i" value="$image"/>', "not well-formed XML"),
        (
            '<View><Image name="i" value="$image" valueList="$images"/>'
            '<TextArea name="t" toName="i"/></View>',
            "takes value or, on an <Image>, valueList",
        ),
    ],
)
def test_labeling_configs_outside_the_mapping_are_refused_with_their_line(
    owner, tmp_path, config, message
) -> None:
    path = tmp_path / "config.xml"
    path.write_text(config)
    before = row_counts()
    with pytest.raises(CommandError) as caught:
        run_import(LABELSTUDIO_FIXTURES / "project_export.json", "--create", "x", "--config", str(path))
    assert message in str(caught.value) and str(caught.value).startswith("labeling config, ")
    assert row_counts() == before


def test_new_study_needs_a_config(owner) -> None:
    with pytest.raises(CommandError, match="needs the labeling config"):
        run_import(LABELSTUDIO_FIXTURES / "project_export.json", "--create", "x")


def _zip(tmp_path: Path, *, with_config: bool = True) -> Path:
    path = tmp_path / "project.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.write(LABELSTUDIO_FIXTURES / "snapshot_export.json", "export.json")
        if with_config:
            archive.write(CONFIG, "config.xml")
        for file in MEDIA.rglob("*.png"):
            archive.write(file, file.relative_to(MEDIA).as_posix())
    return path


def test_api_creates_a_study_from_a_zip_and_imports_into_one(owner, other_researcher, tmp_path) -> None:
    path = _zip(tmp_path)
    response = client_for(owner).post(
        "/api/studies/labelstudio/",
        {"name": "LS project", "file": SimpleUploadedFile("project.zip", path.read_bytes())},
        format="multipart",
    )
    assert response.status_code == 201, response.content
    study = Study.objects.get(pk=response.json()["study"])
    assert (
        study.owner == owner
        and study.items.count() == 4
        and study.items.filter(is_reference=False).count() == 2
    )
    again = client_for(owner).post(
        f"/api/studies/{study.pk}/labelstudio/import/",
        {
            "file": SimpleUploadedFile(
                "export.json", (LABELSTUDIO_FIXTURES / "snapshot_export.json").read_bytes()
            )
        },
        format="multipart",
    )
    assert again.status_code == 201 and again.json()["answers"]["created"] == 0
    assert again.json()["answers"]["unchanged"] == response.json()["answers"]["created"]
    assert (
        client_for(other_researcher)
        .post(
            f"/api/studies/{study.pk}/labelstudio/import/",
            {"file": SimpleUploadedFile("export.json", b"[]")},
            format="multipart",
        )
        .status_code
        == 404
    )


def test_api_refusals_are_400s_that_name_the_task(owner, study, tmp_path) -> None:
    tasks = project_tasks()
    tasks[0]["annotations"][0]["result"][0]["value"]["rotation"] = 30
    before = row_counts()
    response = client_for(owner).post(
        "/api/studies/labelstudio/",
        {
            "name": "x",
            "file": SimpleUploadedFile("export.json", json.dumps(tasks).encode()),
            "config": SimpleUploadedFile("config.xml", CONFIG.read_bytes()),
        },
        format="multipart",
    )
    assert response.status_code == 400 and "task 101" in response.json()["detail"]
    for upload in (SimpleUploadedFile("export.txt", b"[]"), SimpleUploadedFile("export.json", b"{not json")):
        response = client_for(owner).post(
            f"/api/studies/{study.pk}/labelstudio/import/", {"file": upload}, format="multipart"
        )
        assert response.status_code == 400
    assert row_counts() == before


def test_study_page_imports_an_export_and_escapes_what_it_reports(owner, tmp_path) -> None:
    _report, study = create("project_export.json")
    client = Client()
    client.force_login(owner)
    tasks = project_tasks()
    tasks[0]["annotations"][0]["result"][1]["value"]["choices"] = ["<script>alert(1)</script>"]
    response = client.post(
        f"/studies/{study.pk}/import/labelstudio/",
        {"file": SimpleUploadedFile("export.json", json.dumps(tasks).encode())},
        follow=True,
    )
    page = response.content.decode()
    assert "Nothing was imported." in page and "task 101" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    response = client.post(
        f"/studies/{study.pk}/import/labelstudio/",
        {"file": SimpleUploadedFile("project.zip", _zip(tmp_path).read_bytes())},
        follow=True,
    )
    assert "Imported 4 Label Studio tasks (1 new items)" in response.content.decode()
    assert f'action="/studies/{study.pk}/import/labelstudio/"' in response.content.decode()


def test_the_new_study_page_creates_a_study_from_label_studio(owner, annotator_user, tmp_path) -> None:
    client = Client()
    client.force_login(owner)
    assert 'action="/studies/new/labelstudio/"' in client.get("/studies/new/").content.decode()
    before = row_counts()
    refused = client.post(
        "/studies/new/labelstudio/",
        {
            "name": "LS",
            "file": SimpleUploadedFile(
                "export.json", (LABELSTUDIO_FIXTURES / "project_export.json").read_bytes()
            ),
        },
        follow=True,
    )
    assert (
        "No study was created." in refused.content.decode()
        and "needs the labeling config" in refused.content.decode()
    )
    assert row_counts() == before
    response = client.post(
        "/studies/new/labelstudio/",
        {
            "name": "LS",
            "file": SimpleUploadedFile(
                "export.json", (LABELSTUDIO_FIXTURES / "project_export.json").read_bytes()
            ),
            "config": SimpleUploadedFile("config.xml", CONFIG.read_bytes()),
        },
        follow=True,
    )
    study = Study.objects.get(name="LS")
    assert response.redirect_chain[-1][0] == f"/studies/{study.pk}/"
    assert "created from 3 Label Studio tasks" in response.content.decode()
    assert study.items.count() == 3 and study.items.filter(is_reference=True).count() == 3  # no media given
    other = Client()
    other.force_login(annotator_user)
    assert other.post("/studies/new/labelstudio/", {"name": "x"}).status_code == 403


def test_a_selection_without_its_boxes_is_refused_when_the_protocol_requires_them(owner, tmp_path) -> None:
    """Issue 14's rule holds for this import too: each selected option needs a box (a person's)."""
    _report, study = create("project_export.json")
    study.protocol = {
        **study.protocol,
        "questions": [
            {**q, "boxes_required": "each_selected"} if q["key"] == "boxes" else q
            for q in study.protocol["questions"]
        ],
    }
    study.save(update_fields=["protocol"])
    Annotation.objects.filter(study=study, question_key="boxes").delete()
    before = answers(study)
    tasks = project_tasks()
    for task in tasks:
        for annotation in task.get("annotations", []):
            annotation["result"] = [r for r in annotation["result"] if r.get("from_name") != "boxes"]
    with pytest.raises(CommandError, match=r"task 101.*'boxes'.*no box: 'hat', 'glasses'"):
        run_import(write_export(tmp_path, tasks), "--study", str(study.pk), "--media-root", str(MEDIA))
    assert answers(study) == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"x": 150.0}, "lies outside the 1024x768 image"),
        ({"y": 90.0, "height": 30.0}, "lies outside the 1024x768 image"),
        ({"x": -20.0}, "lies outside the 1024x768 image"),
        ({"width": 0.0}, "lies outside the 1024x768 image"),
        ({"original_width": 10**9}, "must be at most 1000000 pixels"),
    ],
)
def test_a_box_outside_a_reference_items_declared_size_is_refused(owner, change, message) -> None:
    """Issue 24, L10: task 103 is a reference item (no file): its box is in the rectangle's declared
    original_width x original_height, which nothing held it to, so a box at x 150% was stored."""
    tasks = project_tasks()
    result = tasks[2]["annotations"][0]["result"][2]
    for key, value in change.items():
        (result if key.startswith("original_") else result["value"])[key] = value
    before = row_counts()
    response = client_for(owner).post(
        "/api/studies/labelstudio/",
        {
            "name": "x",
            "file": SimpleUploadedFile("export.json", json.dumps(tasks).encode()),
            "config": SimpleUploadedFile("config.xml", CONFIG.read_bytes()),
        },
        format="multipart",
    )
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert "task 103, annotations[0].result[2]" in detail and message in detail
    assert row_counts() == before


def _new_study(client: Any, name: str, path: Path, config: bytes | None = None) -> Any:
    files = {"name": name, "file": SimpleUploadedFile(path.name, path.read_bytes())}
    if config is not None:
        files["config"] = SimpleUploadedFile("config.xml", config)
    return client.post("/api/studies/labelstudio/", files, format="multipart")


def test_a_large_new_study_upload_makes_the_study_then_a_job_fills_it(
    owner, other_researcher, tmp_path, file_store: FileStore, settings, django_capture_on_commit_callbacks
) -> None:
    """Over ``WORKBENCH_IMPORT_INLINE_MB``: 202 and the job, the study made at once from the zip's
    config; the job imports what the request would have (same items and answers), and leaves nothing
    kept in storage."""
    inline = _new_study(client_for(owner), "inline", _zip(tmp_path))
    assert inline.status_code == 201, inline.content
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    with django_capture_on_commit_callbacks(execute=True):
        answer = _new_study(client_for(owner), "as a job", _zip(tmp_path))
    assert answer.status_code == 202, answer.content
    job = ImportJob.objects.get(pk=answer.json()["id"])
    study = Study.objects.get(pk=answer.json()["study"])
    assert (study.name, study.owner, job.status, job.kind) == ("as a job", owner, "done", "labelstudio")
    assert job.report["created_study"] is True and job.report["study"] == study.pk
    made = Study.objects.get(pk=inline.json()["study"])
    unnamed = {**study.protocol, "name": ""}  # the protocol is named as its study
    assert unnamed == {**made.protocol, "name": ""}

    def judged(of: Study) -> list[tuple[str, str, str]]:  # stand-in names are salted per study
        return sorted((item, key, json.dumps(value)) for (item, _who, key), value in answers(of).items())

    assert judged(study) == judged(made) and judged(study)
    assert study.items.count() == made.items.count() == 4
    counts = {key: value for key, value in job.report["answers"].items() if key != "annotators_created"}
    assert counts == {k: v for k, v in inline.json()["answers"].items() if k != "annotators_created"}
    assert len(job.report["answers"]["annotators_created"]) == 3
    assert file_store.names("uploads/") == []
    # The job's status is its owner's; another researcher finds neither it nor the study.
    assert client_for(owner).get(f"/api/imports/{job.pk}/").json()["status"] == "done"
    assert client_for(other_researcher).get(f"/api/imports/{job.pk}/").status_code == 404


def test_a_large_new_study_upload_with_a_bad_config_makes_nothing(
    owner, tmp_path, file_store: FileStore, settings
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    before = row_counts()
    no_config = _new_study(client_for(owner), "x", _zip(tmp_path, with_config=False))
    assert no_config.status_code == 400 and "needs the labeling config" in no_config.json()["detail"]
    bad = _new_study(client_for(owner), "x", _zip(tmp_path, with_config=False), config=b"<View><Choices")
    assert bad.status_code == 400 and "labeling config" in bad.json()["detail"]
    assert row_counts() == before and file_store.names() == []


def test_a_refused_task_fails_the_job_and_leaves_the_new_study_empty(
    owner, tmp_path, file_store: FileStore, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    tasks = project_tasks()
    tasks[0]["annotations"][0]["result"][0]["value"]["rotation"] = 30
    with django_capture_on_commit_callbacks(execute=True):
        answer = _new_study(client_for(owner), "refused", write_export(tmp_path, tasks), CONFIG.read_bytes())
    assert answer.status_code == 202, answer.content
    job = ImportJob.objects.get(pk=answer.json()["id"])
    assert job.status == "failed" and "task 101" in job.error
    study = Study.objects.get(pk=job.study_id)
    assert not study.items.exists() and not Annotation.objects.filter(study=study).exists()
    assert file_store.names() == []  # neither the kept upload nor any item file


def test_the_new_study_page_queues_a_large_upload(
    owner, tmp_path, settings, django_capture_on_commit_callbacks
) -> None:
    settings.WORKBENCH_IMPORT_INLINE_BYTES = 0
    client = Client()
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/studies/new/labelstudio/",
            {"name": "<b>paged</b>", "file": SimpleUploadedFile("project.zip", _zip(tmp_path).read_bytes())},
        )
    study = Study.objects.get(name="<b>paged</b>")
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/items/"
    page = client.get(response["Location"]).content.decode()
    assert "created from the labeling config" in page and "&lt;b&gt;paged&lt;/b&gt;" in page
    assert "<b>paged</b>" not in page
    assert study.items.count() == 4 and ImportJob.objects.get(study=study).status == "done"
