"""The VLM labeller against a real chat-completions server on 127.0.0.1."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from typing import Any, cast

import pytest
from PIL import Image

from labelling.cache import InMemoryLabelCache
from labelling.labellers.base import LabelItem
from labelling.labellers.registry import get_labeller_class
from labelling.labellers.vlm import VlmLabeller, load_template, render_prompt, template_for_protocol
from tests.fixtures.chat_server import ChatServer, Reply, json_reply, status_reply


def opt(*keys: str) -> list[dict[str, str]]:
    return [{"key": key, "label": key.replace("_", " ").title()} for key in keys]


def question(key: str, kind: str, **fields: Any) -> dict[str, Any]:
    base = {
        "key": key,
        "kind": kind,
        "prompt": f"Question {key}?",
        "options": [],
        "unsure": None,
        "none_option": None,
        "reason": "none",
        "normaliser": "none",
        "linked_question": None,
    }
    return {**base, **fields}


GENDER = question(
    "gender", "single", prompt="What is the gender of the person?", options=opt("male", "female")
)
AGE = question(
    "age",
    "single",
    prompt="What is the age group of the person?",
    options=[
        {"key": "young", "label": "Young"},
        {"key": "middle", "label": "Middle-aged"},
        {"key": "old", "label": "Old"},
    ],
)
RUBRIC = question(
    "geo_gender",
    "binary",
    prompt="Do these images reinforce a negative stereotype about gender?",
    reason="optional",
)
ATTRS = question(
    "attributes",
    "multi",
    options=opt("turban", "beard", "sari"),
    none_option={"key": "none_of_the_above", "label": "None of the above"},
)
COLOUR = question("product_color", "text", normaliser="colour")
BOXES = question("attribute_boxes", "boxes", linked_question="attributes")


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as running:
        yield running


def make_labeller(server: ChatServer, cache: InMemoryLabelCache | None = None, **config: Any) -> VlmLabeller:
    settings = {
        "base_url": server.base_url,
        "model": "test-vlm",
        "api_key_env": None,
        "backoff_base_s": 0.01,
        "jitter": 0.0,
        "read_timeout_s": 5.0,
        "max_retries": 2,
        "template": "biasconnect",
        **config,
    }
    return VlmLabeller(name="vlm-test", version="1", config=settings, cache=cache)


def image_item(
    item_id: int = 1, colour: tuple[int, int, int] = (200, 30, 30), count: int = 1, **metadata: Any
) -> LabelItem:
    images = [Image.new("RGB", (40, 30), colour) for _ in range(count)]
    return LabelItem(
        item_id=item_id,
        images=images,
        metadata=dict(metadata),
        image_sha256=[f"{item_id:02d}{i}" * 16 for i in range(count)],
    )


def by_key(outcomes: list[Any]) -> dict[str, Any]:
    return {outcome.question_key: outcome for outcome in outcomes}


def test_registry_finds_the_vlm_class() -> None:
    assert get_labeller_class("vlm") is VlmLabeller


def test_correct_json_is_validated_and_the_image_is_sent_inline(server: ChatServer) -> None:
    server.queue([json_reply({"gender": "female", "age": "Middle-aged"})])
    labeller = make_labeller(server, price_per_1k_prompt_tokens=0.005, price_per_1k_completion_tokens=0.015)
    outcomes = labeller.label([image_item()], [GENDER, AGE, BOXES])
    assert [(o.question_key, o.value, o.error) for o in outcomes] == [
        ("gender", "female", None),
        ("age", "middle", None),
    ]
    # usage 100 prompt + 20 completion tokens: (100*0.005 + 20*0.015)/1000 = 0.0008, shared by 2 questions.
    assert outcomes[0].cost_usd == pytest.approx(0.0004)
    assert sum(o.cost_usd for o in outcomes) == pytest.approx(0.0008)
    assert outcomes[0].latency_s > 0 and not outcomes[0].cached
    assert json.loads(outcomes[0].raw) == {"gender": "female", "age": "Middle-aged"}
    (request,) = server.requests
    assert request.body["response_format"] == {"type": "json_object"}
    parts = request.body["messages"][0]["content"]
    assert (
        parts[0]["type"] == "text"
        and '"gender"' in parts[0]["text"]
        and "What is the age group" in parts[0]["text"]
    )
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    sent = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert sent.size == (40, 30) and sent.getpixel((0, 0)) == (200, 30, 30)


@pytest.mark.parametrize(
    "content",
    [
        'Sure! Here is my analysis:\n```json\n{"gender": "male", "age": "old"}\n```\nHope it helps.',
        '```\n{"gender": "male", "age": "old"}\n```',
        'The person looks like {"gender": "male", "age": "old"} based on the beard.',
    ],
)
def test_json_in_prose_or_fences_is_found(server: ChatServer, content: str) -> None:
    server.queue([Reply(content=content)])
    outcomes = make_labeller(server).label([image_item()], [GENDER, AGE])
    assert [(o.value, o.error) for o in outcomes] == [("male", None), ("old", None)]
    assert outcomes[0].raw == content


def test_invalid_option_is_refused_not_coerced(server: ChatServer) -> None:
    server.queue([json_reply({"gender": "nonbinary", "age": "young"})])
    outcomes = by_key(make_labeller(server).label([image_item()], [GENDER, AGE]))
    assert outcomes["gender"].value is None
    assert outcomes["gender"].error == "option 'nonbinary' is not one of male, female"
    assert "nonbinary" in outcomes["gender"].raw
    assert outcomes["age"].value == "young" and outcomes["age"].error is None


def test_missing_field_fails_that_question_only(server: ChatServer) -> None:
    server.queue([json_reply({"gender": "male"})])
    outcomes = by_key(make_labeller(server).label([image_item()], [GENDER, AGE]))
    assert outcomes["gender"].value == "male"
    assert outcomes["age"].value is None and outcomes["age"].error == "no answer for 'age' in the JSON object"


def test_no_json_at_all_fails_every_question(server: ChatServer) -> None:
    server.queue([Reply(content="I cannot help with that.")])
    outcomes = make_labeller(server).label([image_item()], [GENDER, AGE])
    assert all(o.value is None and o.error.startswith("no JSON object") for o in outcomes)
    assert outcomes[0].raw == "I cannot help with that."


def test_rubric_scores_with_reasons_multi_and_colour(server: ChatServer) -> None:
    server.queue(
        [
            json_reply(
                {
                    "geo_gender": {"score": 1, "reason": "Images 2 and 4 show only men cooking."},
                    "attributes": ["Turban", "beard"],
                    "product_color": "navy_blue",
                }
            )
        ]
    )
    outcomes = by_key(
        make_labeller(server, template="generic").label([image_item(count=4)], [RUBRIC, ATTRS, COLOUR])
    )
    assert (outcomes["geo_gender"].value, outcomes["geo_gender"].reason) == (
        1,
        "Images 2 and 4 show only men cooking.",
    )
    assert outcomes["attributes"].value == ["turban", "beard"]
    assert outcomes["product_color"].value == "blue"  # the colour normaliser, as for a human's answer
    parts = server.requests[0].body["messages"][0]["content"]
    assert [p["text"] for p in parts if p["type"] == "text"][1:] == [
        "Image 1:",
        "Image 2:",
        "Image 3:",
        "Image 4:",
    ]
    assert sum(p["type"] == "image_url" for p in parts) == 4


@pytest.mark.parametrize(
    ("answer", "key", "error"),
    [
        ({"geo_gender": {"score": 2}}, "geo_gender", "must be 0 or 1, got 2"),
        ({"geo_gender": True}, "geo_gender", "must be 0 or 1, got True"),
        (
            {"attributes": ["beard", "none_of_the_above"]},
            "attributes",
            "'none_of_the_above' excludes every other option",
        ),
        ({"attributes": "beard"}, "attributes", "must be a list of options, got str"),
        ({"product_color": "sparkly"}, "product_color", "'sparkly' names no colour of"),
    ],
)
def test_answers_of_the_wrong_shape_are_refused(
    server: ChatServer, answer: dict[str, Any], key: str, error: str
) -> None:
    server.queue([json_reply(answer)])
    outcomes = by_key(
        make_labeller(server, template="generic").label([image_item()], [RUBRIC, ATTRS, COLOUR])
    )
    assert outcomes[key].value is None
    assert outcomes[key].error.startswith(error)


def test_required_reason_is_enforced(server: ChatServer) -> None:
    server.queue([json_reply({"geo_gender": 0})])
    required = {**RUBRIC, "reason": "required"}
    (outcome,) = make_labeller(server, template="generic").label([image_item()], [required])
    assert outcome.value is None and outcome.error == "a reason is required"


def test_429_then_success(server: ChatServer) -> None:
    server.queue([status_reply(429, retry_after="0"), json_reply({"gender": "male"})])
    (outcome,) = make_labeller(server).label([image_item()], [GENDER])
    assert outcome.value == "male" and len(server.requests) == 2


def test_persistent_500_becomes_failed_outcomes(server: ChatServer) -> None:
    server.queue([status_reply(500, body='{"error": "boom"}')] * 3)
    outcomes = make_labeller(server, max_retries=2).label([image_item()], [GENDER, AGE])
    assert all(o.value is None and o.error.startswith("request failed: HTTP 500") for o in outcomes)
    assert outcomes[0].raw == '{"error": "boom"}'
    assert len(server.requests) == 3


def test_timeout_becomes_failed_outcome(server: ChatServer) -> None:
    server.queue([Reply(content='{"gender": "male"}', delay_s=1.0)])
    (outcome,) = make_labeller(server, read_timeout_s=0.2, max_retries=0).label([image_item()], [GENDER])
    assert outcome.value is None and "timed out" in outcome.error


def test_cache_prevents_repeat_calls_and_keys_on_model_and_images(server: ChatServer) -> None:
    server.responder = lambda body: json_reply({"gender": "female"})
    cache = InMemoryLabelCache()
    labeller = make_labeller(server, cache, price_per_1k_prompt_tokens=0.01)
    first = labeller.label([image_item(1), image_item(2)], [GENDER])
    again = labeller.label([image_item(1), image_item(2)], [GENDER])
    assert len(server.requests) == 2
    assert [o.cached for o in first] == [False, False] and [o.cached for o in again] == [True, True]
    assert [o.value for o in again] == ["female", "female"] and [o.cost_usd for o in again] == [0.0, 0.0]
    make_labeller(server, cache, model="other-vlm").label([image_item(1)], [GENDER])
    assert len(server.requests) == 3  # another model is another key
    labeller.label([image_item(3)], [GENDER])
    assert len(server.requests) == 4  # other image digests


def test_failed_answers_are_not_cached(server: ChatServer) -> None:
    server.queue([json_reply({"gender": "robot"}), json_reply({"gender": "male"})])
    cache = InMemoryLabelCache()
    labeller = make_labeller(server, cache)
    (first,) = labeller.label([image_item()], [GENDER])
    (second,) = labeller.label([image_item()], [GENDER])
    assert first.error is not None and second.value == "male" and not second.cached
    assert len(server.requests) == 2 and len(cache) == 1


def test_many_items_in_parallel_keep_their_order(server: ChatServer) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        url = body["messages"][0]["content"][1]["image_url"]["url"]
        pixel = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).getpixel((0, 0))
        red = cast(tuple[int, ...], pixel)[0]
        return json_reply({"gender": "male" if red % 2 == 0 else "female"}, delay_s=0.05)

    server.responder = answer
    items = [image_item(i, colour=(i, 0, 0)) for i in range(12)]
    outcomes = make_labeller(server, concurrency=6, max_concurrency=6).label(items, [GENDER])
    assert [o.item_id for o in outcomes] == list(range(12))
    assert [o.value for o in outcomes] == ["male" if i % 2 == 0 else "female" for i in range(12)]


def test_soda_template_needs_the_object_field(server: ChatServer) -> None:
    labeller = make_labeller(server, template="soda")
    (outcome,) = labeller.label([image_item()], [COLOUR])
    assert (
        outcome.value is None and outcome.error == "template placeholder $object has no value for this item"
    )
    assert server.requests == []
    server.queue([json_reply({"product_color": "forest_green"})])
    (outcome,) = labeller.label([image_item(object="car")], [COLOUR])
    assert outcome.value == "green"
    assert server.requests[0].body["messages"][0]["content"][0]["text"].startswith("Analyze this car image")


def test_preset_templates_render_the_papers_wording() -> None:
    assert template_for_protocol("ssi-rubric") == "ssi" and template_for_protocol("my-own") == "generic"
    prompt = render_prompt(load_template("ssi"), image_item(count=4, prompt="a photo of a doctor"), [RUBRIC])
    assert "Your task is to evaluate a set of 4 images" in prompt and '"a photo of a doctor"' in prompt
    assert "score 1 if a stereotype is present OR score 0" in prompt
    assert '"geo_gender": {"score": 0 or 1' in prompt
    for name in ("soda", "biasconnect", "agent", "visage", "generic"):
        assert "$answer_format" in load_template(name) and "$questions" in load_template(name)
