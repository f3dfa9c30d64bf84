"""Prompt refinement (ssi Table A2): the LLM call against a real chat-completions server on 127.0.0.1, and
the study-level flow from a real generation job, human rubric labels and a real HTTP LLM server."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from PIL import Image

from annotations.interchange.annotation_import import annotations_import_records
from annotations.models import Item
from common.chat_client import ChatClient, ChatError, ChatSettings
from generation import pipelines
from generation.models import GenerationJob
from generation.pipelines import ModelSpec
from generation.prompts.base import PromptSet, PromptSpec
from generation.refinement import RefinementError, parse_refined_prompt, refine_prompt
from generation.services import generation_job_create, generation_job_run
from protocols.schema import load_preset
from tests.factories import StudyFactory
from tests.fixtures.chat_server import ChatServer, Reply
from tests.fixtures.tiny_sd import save_tiny_sd

QUERY = "a photo of a doctor"
IMAGES = [Image.new("RGB", (16, 16), (10, 20, 30)), Image.new("RGB", (16, 16), (200, 200, 200))]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as running:
        yield running


def client_for(server: ChatServer, **overrides: Any) -> ChatClient:
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "test-llm",
        "api_key_env": None,
        "max_retries": 0,
        "read_timeout_s": 5.0,
        **overrides,
    }
    return ChatClient(ChatSettings(**settings))


def test_refined_prompt_keeps_the_initial_query(server: ChatServer) -> None:
    answer = f'"{QUERY}, a woman of South Asian descent reviewing charts in a modern clinic"'
    server.queue([Reply(content=answer)])
    with client_for(server) as client:
        result = refine_prompt(
            client,
            initial_prompt=QUERY,
            images=IMAGES,
            stereotypes=["gender: all four doctors are older white men"],
        )
    assert result.refined == f"{QUERY}, a woman of South Asian descent reviewing charts in a modern clinic"
    assert result.added_context == "a woman of South Asian descent reviewing charts in a modern clinic"
    assert result.raw == answer and result.model == "test-llm"
    content = server.requests[0].body["messages"][0]["content"]
    assert f"Given the initial query: {QUERY}" in content[0]["text"]
    assert "gender: all four doctors are older white men" in content[0]["text"]
    assert "Format the final prompt as: a photo of a doctor [additional refined context" in content[0]["text"]
    assert [part["type"] for part in content[1:]] == ["image_url", "image_url"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("A diverse team of doctors in a hospital", "does not start with the initial query"),
        ("Final prompt: a photo of a doctor, in a clinic", "does not start with the initial query"),
        ("a photo of a doctor", "adds no context"),
        ("a photo of a doctors in a clinic", "changes the initial query's last word"),
        ("a photo of a doctor, smiling\nThis prompt removes the gender stereotype.", "more than one line"),
    ],
)
def test_answers_of_the_wrong_form_are_refused(server: ChatServer, answer: str, message: str) -> None:
    server.queue([Reply(content=answer)])
    with client_for(server) as client, pytest.raises(RefinementError, match=message) as caught:
        refine_prompt(client, initial_prompt=QUERY, images=IMAGES, stereotypes=[])
    assert caught.value.raw == answer


def test_whitespace_runs_compare_equal() -> None:
    assert parse_refined_prompt("a photo  of a doctor", "a photo of a doctor at work") == (
        "a photo of a doctor at work",
        "at work",
    )


def test_slow_answer_is_a_chat_error(server: ChatServer) -> None:
    server.queue([Reply(content=f"{QUERY} at work", delay_s=1.0)])
    with client_for(server, read_timeout_s=0.2) as client, pytest.raises(ChatError, match="timed out"):
        refine_prompt(client, initial_prompt=QUERY, images=IMAGES, stereotypes=[])


def test_malformed_server_answer_is_a_chat_error(server: ChatServer) -> None:
    server.queue([Reply(body='{"choices": []}')])
    with client_for(server) as client, pytest.raises(ChatError, match="malformed"):
        refine_prompt(client, initial_prompt=QUERY, images=IMAGES, stereotypes=[])


# --- the study-level flow: prompts_refine through the refine_prompts command --------------------------

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
    study = StudyFactory.create(owner=owner, overlap=2, protocol=load_preset("ssi-rubric").to_dict())
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


@pytest.mark.django_db
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


@pytest.mark.django_db
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


@pytest.mark.django_db
def test_the_refined_sets_generate_makes_are_paired_with_their_initial_sets(owner, tmp_path) -> None:
    """generate -> label -> refine_prompts --generate -> generate -> label -> metrics: the paired t-test
    pairs each refined set with its initial query through metadata initial_prompt (issue 14 point 4)."""
    pipelines.clear_pipeline_cache()
    model = save_tiny_sd(tmp_path / "tiny-sd")
    study = StudyFactory.create(owner=owner, overlap=1, protocol=load_preset("ssi-rubric").to_dict())
    queries = PromptSet(
        name="ssi-occupations",
        paper="ssi",
        prompts=tuple(
            PromptSpec(
                text=f"a photo of a {term}",
                condition="initial",
                metadata={"category": "occupational", "term": term},
                images_per_prompt=2,
            )
            for term in ("doctor", "nurse")
        ),
    )
    spec = ModelSpec(source=str(model), steps=2, width=64, height=64, batch_size=2, guidance=1.0)
    job = generation_job_create(study=study, prompt_set=queries, spec=spec, user=owner, enqueue=False)
    generation_job_run(job_id=job.pk, device="cpu")
    with ChatServer() as server:
        server.responder = lambda body: Reply(
            content=("a photo of a doctor" if "doctor" in json.dumps(body) else "a photo of a nurse")
            + " of any gender, at work in a city hospital"
        )
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
    generation_job_run(job_id=json.loads(out.getvalue())["generation_job"], device="cpu")
    pipelines.clear_pipeline_cache()
    keys = [q.key for q in load_preset("ssi-rubric").questions if q.applies_to({"category": "occupational"})]
    marked = {
        ("doctor", "initial"): 3,
        ("doctor", "refined"): 0,
        ("nurse", "initial"): 6,
        ("nurse", "refined"): 2,
    }
    records = []
    for (term, condition), n in marked.items():
        item = Item.objects.get(study=study, condition=condition, metadata__term=term)
        records += [
            {"item": item.external_id, "annotator": "h1", "question": k, "value": int(pos < n)}
            for pos, k in enumerate(keys)
        ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    report = io.StringIO()
    call_command("metrics", str(study.pk), "--json", stdout=report)
    tables = {t["key"]: t for t in json.loads(report.getvalue())["tables"]}
    rows = [
        dict(zip(tables["ssi_comparisons"]["columns"], r, strict=True))
        for r in tables["ssi_comparisons"]["rows"]
    ]
    row = next(r for r in rows if r["model"] != "all")
    # differences 3/9 and 4/9: mean 7/18, standard error 1/18 -> t = 7 (df 1), p = 1 - (2/pi) atan(7)
    assert row["n_pairs"] == 2 and row["t"] == pytest.approx(7.0)
    assert row["p_value"] == pytest.approx(1 - 2 / math.pi * math.atan(7))
    assert tables["ssi_unpaired"]["rows"] == []
