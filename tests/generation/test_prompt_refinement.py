"""SSI prompt refinement from a real generation job, human rubric labels and a real HTTP LLM server."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.models import Item
from annotations.protocols.schema import load_preset
from annotations.services.annotation_writes import annotations_import_records
from generation import pipelines
from generation.models import GenerationJob
from generation.pipelines import ModelSpec
from generation.prompts.builders import PromptSet, PromptSpec
from generation.services import generation_job_create, generation_job_run
from tests.factories import StudyFactory
from tests.fixtures.chat_server import ChatServer, Reply
from tests.fixtures.tiny_sd import save_tiny_sd

pytestmark = pytest.mark.django_db

QUERIES = PromptSet(
    name="ssi-initial",
    paper="ssi",
    prompts=(
        PromptSpec(
            text="a photo of a Nigerian person",
            condition="initial",
            metadata={"category": "geocultural", "term": "Nigerian"},
            images_per_prompt=2,
        ),
        PromptSpec(
            text="a photo of a doctor",
            condition="initial",
            metadata={"category": "occupational", "term": "doctor"},
            images_per_prompt=2,
        ),
    ),
)


@pytest.fixture
def ssi_job(owner, tmp_path):
    pipelines.clear_pipeline_cache()
    model = save_tiny_sd(tmp_path / "tiny-sd")
    study = StudyFactory.create(owner=owner, protocol=load_preset("ssi-rubric").to_dict())
    spec = ModelSpec(source=str(model), steps=2, width=64, height=64, batch_size=2, guidance=1.0)
    job = generation_job_run(
        job_id=generation_job_create(
            study=study, prompt_set=QUERIES, spec=spec, user=owner, enqueue=False
        ).pk,
        device="cpu",
    )
    rubric = load_preset("ssi-rubric").questions_for({"category": "geocultural"})[0]
    nigerian = Item.objects.get(study=study, prompt="a photo of a Nigerian person")
    annotations_import_records(
        study=study,
        records=[
            (1, {"item": nigerian.external_id, "annotator": "expert-1", "question": rubric.key, "value": 1}),
            (2, {"item": nigerian.external_id, "annotator": "expert-2", "question": rubric.key, "value": 1}),
        ],
    )
    yield job, rubric.prompt
    pipelines.clear_pipeline_cache()


@pytest.mark.slow
def test_refined_prompts_are_linked_and_bad_answers_refused(ssi_job) -> None:
    job, stereotype = ssi_job
    with ChatServer() as server:

        def answer(body: dict) -> Reply:
            text = json.dumps(body)
            if "Nigerian" in text:
                return Reply(content="a photo of a Nigerian person working as an engineer in a modern office")
            return Reply(content="A portrait of a doctor")  # does not start with the initial query

        server.responder = answer
        out = io.StringIO()
        call_command(
            "refine_prompts",
            "--job",
            str(job.pk),
            "--base-url",
            server.base_url,
            "--model",
            "gpt-4o",
            "--api-key-env",
            "",
            "--generate",
            stdout=out,
        )
        result = json.loads(out.getvalue())
        nigerian_request = next(r for r in server.requests if "Nigerian" in json.dumps(r.body))
    assert result["prompts"] == [
        {
            "initial": "a photo of a Nigerian person",
            "refined": "a photo of a Nigerian person working as an engineer in a modern office",
            "stereotypes": [stereotype],
        }
    ]
    assert stereotype in json.dumps(nigerian_request.body)
    assert [r["initial"] for r in result["refused"]] == ["a photo of a doctor"]
    assert result["refused"][0]["raw"] == "A portrait of a doctor"
    refined_job = GenerationJob.objects.get(pk=result["generation_job"])
    assert refined_job.parent_name == "ssi-initial" and refined_job.name == "ssi-initial-refined"
    assert refined_job.prompts == [
        {
            "text": "a photo of a Nigerian person working as an engineer in a modern office",
            "condition": "refined",
            "images_per_prompt": 2,
            "metadata": {
                "category": "geocultural",
                "term": "Nigerian",
                "initial_prompt": "a photo of a Nigerian person",
            },
        }
    ]


@pytest.mark.slow
def test_nothing_refined_is_an_error(ssi_job) -> None:
    job, _ = ssi_job
    with ChatServer() as server:
        server.responder = lambda body: Reply(content="something else entirely")
        with pytest.raises(CommandError, match="no prompt was refined"):
            call_command(
                "refine_prompts",
                "--job",
                str(job.pk),
                "--base-url",
                server.base_url,
                "--model",
                "m",
                "--api-key-env",
                "",
                stdout=io.StringIO(),
            )
    with pytest.raises(CommandError, match="no generation job 999"):
        call_command(
            "refine_prompts",
            "--job",
            "999",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            stdout=io.StringIO(),
        )
