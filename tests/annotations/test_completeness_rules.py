"""Issue 14, points 1 and 2: a stereotype-markers submit needs a box for every selected attribute and
must have shown every attribute, whether it comes from the API, the task page's form or a JSONL import."""

from __future__ import annotations

import html
import io
import json
from typing import Any

import pytest
from django.test import Client

from annotations.models import Annotation, Assignment, Study
from annotations.services.studies import enrollment_add, study_create
from protocols.schema import ProtocolError, load_preset, load_protocol_text
from tests.annotations.builders import image_item
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

# 12 attributes, 5 to a page: three pages of options.
ATTRIBUTES = [
    "hat",
    "poncho",
    "sombrero",
    "moustache",
    "cactus",
    "guitar",
    "desert",
    "tequila",
    "donkey",
    "serape",
    "maracas",
    "taco",
]
EVERY_OPTION = [*ATTRIBUTES, "none_of_the_above"]
FIRST_PAGE = [*ATTRIBUTES[:5], "none_of_the_above"]


def box(option: str, x: int = 10) -> dict[str, Any]:
    return {"option": option, "x": x, "y": 10, "w": 50, "h": 40}


@pytest.fixture
def markers(owner, annotator_user) -> Study:
    study = study_create(owner=owner, name="Markers", protocol=load_preset("stereotype-markers"), overlap=2)
    for name in ("img-1", "img-2"):
        item = image_item(study, name, size=(400, 300))
        item.metadata = {"identity": "Xland", "attributes": ATTRIBUTES}
        item.save(update_fields=["metadata"])
    enrollment_add(study=study, user=annotator_user)
    return study


def upload(name: str, records: list[dict[str, Any]]) -> io.BytesIO:
    handle = io.BytesIO("".join(json.dumps(record) + "\n" for record in records).encode())
    handle.name = name
    return handle


# --- point 1: a box for every selected attribute ------------------------------------------------


def test_api_submit_names_the_selected_attributes_without_a_box(markers, annotator_user) -> None:
    api = client_for(annotator_user)
    pk = api.post(f"/api/studies/{markers.pk}/assignments/next/").json()["id"]
    url = f"/api/assignments/{pk}/submit/"
    selected = {"value": ["hat", "guitar", "taco"], "shown": EVERY_OPTION}

    partly = api.post(
        url, {"answers": {"attributes": selected, "attribute_boxes": {"value": [box("hat")]}}}, format="json"
    )
    assert partly.status_code == 400
    message = partly.json()["errors"]["attribute_boxes"]
    assert "2 selected options have no box: 'guitar', 'taco'" in message and "'hat'" not in message

    none_drawn = api.post(url, {"answers": {"attributes": selected}}, format="json")  # no boxes answer at all
    assert none_drawn.status_code == 400
    assert (
        "3 selected options have no box: 'hat', 'guitar', 'taco'"
        in none_drawn.json()["errors"]["attribute_boxes"]
    )
    assert not Annotation.objects.exists()

    boxes = {"value": [box("hat"), box("guitar", 100), box("taco", 200), box("taco", 300)]}
    done = api.post(url, {"answers": {"attributes": selected, "attribute_boxes": boxes}}, format="json")
    assert done.status_code == 200 and Annotation.objects.count() == 2

    # "None of the above" needs no box.
    second = api.post(f"/api/studies/{markers.pk}/assignments/next/").json()["id"]
    nothing = {"attributes": {"value": ["none_of_the_above"], "shown": EVERY_OPTION}}
    assert (
        api.post(f"/api/assignments/{second}/submit/", {"answers": nothing}, format="json").status_code == 200
    )


def test_page_form_post_names_the_selected_attributes_without_a_box(markers, annotator_user) -> None:
    client = Client()
    client.force_login(annotator_user)
    client.get(f"/annotate/studies/{markers.pk}/next/")
    pk = Assignment.objects.get(annotator__user=annotator_user).pk
    response = client.post(
        f"/annotate/assignments/{pk}/",
        {
            "q-attributes": ["hat", "guitar"],
            "shown-attributes": ",".join(EVERY_OPTION),
            "q-attribute_boxes": json.dumps([box("hat")]),
        },
    )
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "1 selected option has no box: 'guitar'" in page
    assert not Annotation.objects.exists()


def test_jsonl_import_checks_boxes_per_item_and_annotator(markers, owner) -> None:
    api = client_for(owner)
    url = f"/api/studies/{markers.pk}/annotations/import/"

    def post(records: list[dict[str, Any]]) -> Any:
        return api.post(url, {"file": upload("a.jsonl", records)}, format="multipart")

    def line(question: str, value: Any, who: str = "rater-1", **extra: Any) -> dict[str, Any]:
        return {"item": "img-1", "annotator": who, "question": question, "value": value, **extra}

    selection = line("attributes", ["hat", "guitar"], shown=EVERY_OPTION)
    without_boxes = post([selection])  # one line holds one question: the boxes would be on another
    assert without_boxes.status_code == 400
    detail = without_boxes.json()["detail"]
    assert detail.startswith("line 1: 'attribute_boxes': 2 selected options have no box: 'hat', 'guitar'")
    partly = post([selection, line("attribute_boxes", [box("guitar")])])
    assert partly.status_code == 400 and "1 selected option has no box: 'hat'" in partly.json()["detail"]
    assert not Annotation.objects.exists()

    # A machine labeller may answer the multi question alone (it is asked question by question).
    machine = line("attributes", ["hat"], who="vlm", annotator_kind="machine", annotator_version="1")
    assert post([machine]).status_code == 201

    assert post([selection, line("attribute_boxes", [box("hat"), box("guitar")])]).status_code == 201
    # Later: one more attribute selected, the stored boxes do not cover it.
    more = line("attributes", ["hat", "guitar", "taco"], shown=EVERY_OPTION)
    refused = post([more])
    assert refused.status_code == 400 and "1 selected option has no box: 'taco'" in refused.json()["detail"]
    assert post([more, line("attribute_boxes", [box("hat"), box("guitar"), box("taco")])]).status_code == 201


# --- point 2: every option shown ----------------------------------------------------------------


def test_api_submit_refuses_a_submit_that_never_showed_some_options(markers, annotator_user) -> None:
    api = client_for(annotator_user)
    pk = api.post(f"/api/studies/{markers.pk}/assignments/next/").json()["id"]
    url = f"/api/assignments/{pk}/submit/"
    first_page = {"attributes": {"value": ["none_of_the_above"], "shown": FIRST_PAGE}}
    response = api.post(url, {"answers": first_page}, format="json")
    assert response.status_code == 400
    message = response.json()["errors"]["attributes"]
    assert "every option must be shown" in message and "7 options never shown: 'guitar', 'desert'" in message
    assert not Annotation.objects.exists()
    # No ``shown`` says every option was shown (an API client that does not page them).
    unpaged = {"attributes": {"value": ["none_of_the_above"]}}
    assert api.post(url, {"answers": unpaged}, format="json").status_code == 200


def test_page_form_post_refuses_options_never_shown(markers, annotator_user) -> None:
    client = Client()
    client.force_login(annotator_user)
    client.get(f"/annotate/studies/{markers.pk}/next/")
    pk = Assignment.objects.get(annotator__user=annotator_user).pk
    response = client.post(
        f"/annotate/assignments/{pk}/",
        {"q-attributes": ["none_of_the_above"], "shown-attributes": ",".join(FIRST_PAGE)},
    )
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert "7 options never shown: 'guitar', 'desert', 'tequila'" in page
    # The page sent back remembers what was seen, so the script counts only the pages still unseen.
    assert f'data-seen="{",".join(FIRST_PAGE)}"' in page
    assert not Annotation.objects.exists()


def test_jsonl_import_refuses_a_showing_that_missed_options(markers, owner) -> None:
    record = {
        "item": "img-2",
        "annotator": "rater-1",
        "question": "attributes",
        "value": ["none_of_the_above"],
        "shown": FIRST_PAGE,
    }
    response = client_for(owner).post(
        f"/api/studies/{markers.pk}/annotations/import/",
        {"file": upload("a.jsonl", [record])},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["detail"].startswith("line 1: attributes: every option must be shown")
    assert not Annotation.objects.exists()


# --- the protocol fields ------------------------------------------------------------------------


def test_the_preset_turns_both_rules_on_and_the_fields_round_trip() -> None:
    preset = load_preset("stereotype-markers")
    assert preset.question("attributes").require_all_shown is True
    assert preset.question("attribute_boxes").boxes_required == "each_selected"
    again = load_protocol_text(json.dumps(preset.to_dict()))
    assert again.question("attributes").require_all_shown and again.question("attribute_boxes").boxes_required
    # Off by default, and then not written (stored protocols reload unchanged).
    plain = load_preset("subgroup").to_dict()
    assert all("require_all_shown" not in q and "boxes_required" not in q for q in plain["questions"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("    boxes_required: sometimes\n", "'sometimes' is not one of none, each_selected"),
        ("    require_all_shown: true\n", "'require_all_shown' applies only to multi questions, not boxes"),
    ],
)
def test_bad_rule_fields_are_refused_with_their_line(extra: str, message: str) -> None:
    text = (
        "name: x\nunit: image\nquestions:\n"
        "  - {key: a, kind: multi, prompt: p, options: [hat], require_all_shown: true}\n"
        "  - key: b\n    kind: boxes\n    prompt: p\n    linked_question: a\n" + extra
    )
    with pytest.raises(ProtocolError, match=message) as error:
        load_protocol_text(text)
    assert error.value.line == 9
