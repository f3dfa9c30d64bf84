"""The Design section's provenance and machine labellers, from generation and labelling rows."""

from __future__ import annotations

import pytest

from annotations.models import Annotation, Annotator, Study, User
from generation.models import GenerationJob
from labelling.models import LabellingJob
from reports.gather import report_build
from tests.factories import ItemFactory, StudyFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def made_study(owner: User) -> Study:
    study = StudyFactory.create(owner=owner, name="Made")
    items = [
        ItemFactory.create(
            study=study, is_reference=False, condition=c, model_name="sd", metadata={"prompt_set": "p1"}
        )
        for c in ("base", "base", "women")
    ]
    GenerationJob.objects.create(
        study=study,
        created_by=owner,
        name="visage-default",
        prompts=[
            {"text": "a photo of a nurse", "condition": "base"},
            {"text": "a photo of a doctor", "condition": "base"},
        ],
        model_spec={"source": "/models/sd-tiny", "steps": 20, "guidance": 5.0},
        model_label="sd",
        base_seed=42,
        generated=3,
        provenance={"folder_sha256": "f" * 64},
        status=GenerationJob.Status.DONE,
    )
    machine = Annotator.objects.create(
        kind=Annotator.Kind.MACHINE,
        name="vlm",
        version="2",
        config={"kind": "vlm", "model": "qwen", "template": "generic"},
    )
    for item in items:
        Annotation.objects.create(
            study=study, item=item, annotator=machine, question_key="gender", value="male"
        )
    LabellingJob.objects.create(study=study, annotator=machine, answered=3, failed=1, cached=2, cost_usd=0.25)
    return study


def test_design_gives_items_provenance_and_labeller_calls_and_cost(made_study: Study) -> None:
    document = report_build(made_study)
    tables = {t.key: t for t in document.tables()}
    assert tables["design_items"].rows == [["base", "sd", "p1", 2], ["women", "sd", "p1", 1]]
    (job,) = tables["design_generation"].rows
    row = dict(zip([c.key for c in tables["design_generation"].columns], job, strict=True))
    assert row["model"] == "/models/sd-tiny" and row["fingerprint"] == "f" * 64
    assert (row["seed"], row["steps"], row["guidance"], row["generated"]) == (42, 20, 5.0, 3)
    assert row["prompts"] == "a photo of a doctor; a photo of a nurse"
    (labeller,) = tables["design_labellers"].rows
    row = dict(zip([c.key for c in tables["design_labellers"].columns], labeller, strict=True))
    assert (row["labeller"], row["version"], row["kind"], row["model"], row["template"]) == (
        "vlm",
        "2",
        "vlm",
        "qwen",
        "generic",
    )
    # 3 answers stored + 1 failed - 2 from the cache = 2 model calls
    assert (row["answers"], row["jobs"], row["calls"], row["cost_usd"]) == (3, 1, 2, 0.25)
