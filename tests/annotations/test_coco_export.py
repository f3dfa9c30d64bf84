"""COCO export of boxes: categories are the linked options; bboxes in original pixels."""

from __future__ import annotations

import json

import pytest

from annotations.interchange.exports import export_coco
from annotations.models import Annotation
from annotations.services.studies import enrollment_add
from tests.annotations.builders import image_item
from tests.factories import MachineAnnotatorFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def boxed(study):
    item = image_item(study, "a")
    machine = MachineAnnotatorFactory.create(name="detector")
    Annotation.objects.create(
        study=study, item=item, annotator=machine, question_key="attributes", value=["hat", "beard"]
    )
    Annotation.objects.create(
        study=study,
        item=item,
        annotator=machine,
        question_key="boxes",
        value=[
            {"option": "hat", "x": 10, "y": 20, "w": 30, "h": 40},
            {"option": "beard", "x": 0, "y": 0, "w": 5, "h": 2},
        ],
    )
    return study, item


def test_coco_document(boxed) -> None:
    study, item = boxed
    coco = export_coco(study)
    assert [(c["id"], c["name"], c["supercategory"]) for c in coco["categories"]] == [
        (1, "hat", "attributes"),
        (2, "glasses", "attributes"),
        (3, "beard", "attributes"),
    ]
    image = item.images.get()
    assert coco["images"] == [
        {
            "id": image.pk,
            "file_name": f"files/{image.sha256}.png",
            "width": 2000,
            "height": 1000,
            "item": "a",
            "position": 0,
        }
    ]
    assert [(a["category_id"], a["bbox"], a["area"], a["image_id"]) for a in coco["annotations"]] == [
        (1, [10, 20, 30, 40], 1200, image.pk),
        (3, [0, 0, 5, 2], 10, image.pk),
    ]
    assert {a["annotator"] for a in coco["annotations"]} == {"detector"}


@pytest.mark.parametrize(
    "who,expected", [("owner", 200), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_coco_api_permission_matrix(boxed, owner, other_researcher, annotator_user, who, expected) -> None:
    study, _item = boxed
    enrollment_add(study=study, user=annotator_user)
    user = {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}[who]
    response = client_for(user).get(f"/api/studies/{study.pk}/export/coco/")
    assert response.status_code in ((401, 403) if expected == 401 else (expected,))
    if expected == 200:
        assert response["Content-Type"].startswith("application/json")
        assert (
            'filename="study-' in response["Content-Disposition"]
            and ".coco.json" in response["Content-Disposition"]
        )
        assert len(json.loads(response.getvalue())["annotations"]) == 2
