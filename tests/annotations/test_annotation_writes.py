"""One annotation write (``annotation_writes.annotations_save``) for task submits, labellers and imports.

The three paths used to be three copies that differed: an import's revision had no ``replaced_by`` and
kept the old ``time_spent_ms``, a task edit kept the first submit's time (and left ``replaced_by`` empty
when no user was passed), a labeller took the new time. Each test below checks a value the old copy of
its path got differently, and all three leave the same shape (``_shape``).
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import item_add_files
from annotations.models import Annotation, AnnotationRevision, Annotator, Item, Study
from annotations.services.annotation_writes import AnswerToSave, annotations_save
from annotations.services.assignment import assignment_claim_next, assignment_submit
from annotations.services.studies import enrollment_add
from labelling.services import labeller_register, labelling_job_create, labelling_job_run
from protocols.answers import CleanAnswer
from protocols.schema import load_protocol_text
from tests.factories import ItemFactory, StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

ANSWERS: dict[str, dict[str, Any]] = {
    "gender": {"value": "female"},
    "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard"]},
}


def _shape(annotation: Annotation) -> dict[str, Any]:
    """What an edit leaves: the kept old values, who replaced them, and the row's time and source."""
    annotation.refresh_from_db()
    return {
        "revisions": [(r.value, r.replaced_by_id) for r in annotation.revisions.all()],
        "time_spent_ms": annotation.time_spent_ms,
        "source": annotation.source,
    }


def test_a_task_edit_keeps_a_revision_by_the_annotator_and_takes_the_new_time(study) -> None:
    ItemFactory.create(study=study)
    user = UserFactory.create(username="a", role="annotator")
    enrollment_add(study=study, user=user)
    assignment = assignment_claim_next(study=study, annotator=user.annotator)
    assert assignment is not None
    assignment_submit(assignment=assignment, answers=ANSWERS, time_spent_ms=1200)
    # No user passed (a service caller): the revision is still the annotator's own.
    assignment_submit(
        assignment=assignment, answers={**ANSWERS, "gender": {"value": "male"}}, time_spent_ms=3400
    )
    gender = Annotation.objects.get(annotator=user.annotator, question_key="gender")
    # Old copy: time_spent_ms stayed 1200 and replaced_by was None.
    assert _shape(gender) == {"revisions": [("female", user.pk)], "time_spent_ms": 3400, "source": "ui"}
    # The unchanged answer is not rewritten: its time is the one it was given with.
    unchanged = Annotation.objects.get(annotator=user.annotator, question_key="attributes")
    assert _shape(unchanged) == {"revisions": [], "time_spent_ms": 1200, "source": "ui"}
    assignment.refresh_from_db()
    assert assignment.time_spent_ms == 1200  # the assignment keeps the first submit's time (payments)


def test_an_import_re_answer_keeps_a_revision_and_takes_the_files_time(study) -> None:
    ItemFactory.create(study=study, external_id="i1")

    def line(value: str, time_spent_ms: int | None) -> dict[str, Any]:
        return {
            "item": "i1",
            "annotator": "rater-1",
            "question": "gender",
            "value": value,
            "time_spent_ms": time_spent_ms,
        }

    annotations_import_records(study=study, records=[(1, line("female", 100))])
    report = annotations_import_records(study=study, records=[(1, line("male", 250))])
    assert (report.created, report.updated, report.unchanged) == (0, 1, 0)
    annotation = Annotation.objects.get(study=study, question_key="gender")
    # Old copy: time_spent_ms stayed 100.
    assert _shape(annotation) == {"revisions": [("female", None)], "time_spent_ms": 250, "source": "import"}
    # A re-answer without a time: the old time belonged to the old value.
    annotations_import_records(study=study, records=[(1, line("female", None))])
    assert _shape(annotation)["time_spent_ms"] is None
    # The same answer again writes nothing.
    report = annotations_import_records(study=study, records=[(1, line("female", 999))])
    assert (report.updated, report.unchanged) == (0, 1)
    assert _shape(annotation) == {
        "revisions": [("female", None), ("male", None)],
        "time_spent_ms": None,
        "source": "import",
    }


COLOURS = """
name: Cups
unit: image
questions:
  - {key: product_color, kind: text, prompt: 'Main colour of the product?', normaliser: colour}
  - {key: background_color, kind: text, prompt: 'Background colour?', normaliser: colour}
"""


def _red_cup() -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (96, 96), (250, 250, 250))
    ImageDraw.Draw(image).rectangle((24, 24, 72, 72), fill=(220, 20, 20))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_labeller_re_answer_keeps_a_revision_and_takes_the_new_time(owner) -> None:
    study = StudyFactory.create(owner=owner, protocol=load_protocol_text(COLOURS).to_dict())
    item_add_files(
        study=study, record={"external_id": "cup", "file": "cup.png"}, files={"cup.png": _red_cup()}
    )
    labeller = labeller_register(name="colour-rule", kind="colour", config={})

    def run() -> None:
        job = labelling_job_create(study=study, annotator=labeller, user=None, enqueue=False)
        labelling_job_run(job_id=job.pk, sleep=lambda seconds: None)

    run()
    product = Annotation.objects.get(annotator=labeller, question_key="product_color")
    assert product.value == "red"
    # Someone's earlier answer, with a time no labeller run takes.
    Annotation.objects.filter(pk=product.pk).update(value="green", time_spent_ms=999_999)
    Annotation.objects.filter(annotator=labeller, question_key="background_color").delete()
    run()  # a job asks only what is unanswered (docs/labellers.md): the background, not the product
    assert _shape(product) == {"revisions": [], "time_spent_ms": 999_999, "source": "labeller"}
    # The labeller's re-answer, stored through the write its jobs use.
    annotations_save(
        study_id=study.pk,
        answers=[
            AnswerToSave(
                item_id=product.item_id,
                annotator=labeller,
                answer=CleanAnswer("product_color", "red"),
                time_spent_ms=12,
            )
        ],
        source=Annotation.Source.LABELLER,
    )
    shape = _shape(product)
    assert shape["revisions"] == [("green", None)] and shape["source"] == "labeller"
    assert shape["time_spent_ms"] is not None and shape["time_spent_ms"] != 999_999


def test_a_whole_set_removes_answers_no_longer_given_and_repeats_are_refused(study) -> None:
    item = ItemFactory.create(study=study)
    rater = Annotator.objects.create(kind=Annotator.Kind.HUMAN, study=study, name="r")

    def save(*answers: CleanAnswer, whole: bool) -> Any:
        return annotations_save(
            study_id=study.pk,
            answers=[AnswerToSave(item_id=item.pk, annotator=rater, answer=answer) for answer in answers],
            source=Annotation.Source.API,
            whole_sets=[(item.pk, rater.pk)] if whole else (),
        )

    gender, hat = CleanAnswer("gender", "female"), CleanAnswer("attributes", ["hat"], ["hat", "beard"])
    assert save(gender, hat, whole=False).created == 2
    assert save(gender, whole=False).unchanged == 1  # not a whole set: the other answer stays
    assert Annotation.objects.filter(item=item).count() == 2
    counts = save(gender, whole=True)
    assert (counts.unchanged, counts.removed) == (1, 1)
    assert list(Annotation.objects.filter(item=item).values_list("question_key", flat=True)) == ["gender"]
    with pytest.raises(ValueError, match="given twice"):
        save(gender, CleanAnswer("gender", "male"), whole=False)
    assert not AnnotationRevision.objects.exists()


def test_an_import_of_many_answers_reads_and_writes_in_bulk(
    study: Study, django_assert_max_num_queries: Any
) -> None:
    items = Item.objects.bulk_create(
        [Item(study=study, external_id=f"i{n}", kind="image") for n in range(300)]
    )
    records = [
        (n, {"item": item.external_id, "annotator": f"r{n % 3}", "question": "gender", "value": "male"})
        for n, item in enumerate(items, start=1)
    ]
    annotations_import_records(study=study, records=records)
    changed = [(n, {**record, "value": "female"}) for n, record in records]
    # items, image sizes, annotators, the stored rows, revisions, the update, statistics: not per row
    with django_assert_max_num_queries(20):
        report = annotations_import_records(study=study, records=changed)
    assert report.updated == 300
    assert AnnotationRevision.objects.filter(annotation__study=study).count() == 300
