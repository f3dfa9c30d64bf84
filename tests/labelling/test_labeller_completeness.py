"""A machine labeller on a protocol with ``boxes_required: each_selected``: answers go through the
same validation as a person's, yet a labeller that answers only the multi question is not refused."""

from __future__ import annotations

import pytest

from annotations.models import Annotation
from annotations.services.studies import study_create
from labelling.models import LabelAttempt
from labelling.services import labeller_register, labelling_job_create, labelling_job_run
from protocols.schema import load_preset
from tests.annotations.builders import image_item

pytestmark = pytest.mark.django_db

SCRIPTED = "tests.fixtures.scripted_labeller.ScriptedLabeller"


@pytest.fixture
def markers(owner):
    study = study_create(owner=owner, name="Markers", protocol=load_preset("stereotype-markers"))
    item = image_item(study, "img-1", size=(400, 300))
    item.metadata = {"identity": "Xland", "attributes": ["hat", "guitar", "taco"]}
    item.save(update_fields=["metadata"])
    return study


def run(study, answers):
    labeller = labeller_register(name="scripted", kind=SCRIPTED, config={"answers": answers})
    job = labelling_job_create(study=study, annotator=labeller, user=None, enqueue=False)
    return labeller, labelling_job_run(job_id=job.pk, sleep=lambda seconds: None)


def stored(labeller) -> dict:
    return dict(Annotation.objects.filter(annotator=labeller).values_list("question_key", "value"))


def test_a_labeller_answering_only_the_multi_question_is_not_refused(markers) -> None:
    labeller, job = run(markers, {"attributes": ["hat", "guitar"]})
    assert (job.status, job.answered, job.failed) == ("done", 1, 0)
    assert stored(labeller) == {"attributes": ["hat", "guitar"]}
    assert not LabelAttempt.objects.filter(job=job).exists()


def test_a_labellers_boxes_must_cover_its_own_selection(markers) -> None:
    boxes = [{"option": "hat", "x": 1, "y": 1, "w": 20, "h": 20}]
    labeller, job = run(markers, {"attributes": ["hat", "guitar"], "attribute_boxes": boxes})
    assert stored(labeller) == {"attributes": ["hat", "guitar"]}  # the selection stands on its own
    errors = list(
        LabelAttempt.objects.filter(job=job, question_key="attribute_boxes").values_list("error", flat=True)
    )
    assert errors and all("1 selected option has no box: 'guitar'" in error for error in errors)
    assert job.failed == 1
