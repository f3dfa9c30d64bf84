"""CLIP, BLIP VQA and BLIP captioning labellers on tiny random models saved to a folder.

The models are random, so the tests check the labellers against the models' own forward passes
(CLIP's ``logits_per_image``, BLIP's training loss), shapes, batching invariance and the rules
of each question kind, not against "correct" labels.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from labelling.labellers.base import LabelItem, LabellerError
from labelling.labellers.blip import BlipVqaLabeller
from labelling.labellers.captioner import CaptionLabeller
from labelling.labellers.clip import ClipLabeller
from labelling.labellers.registry import build_labeller
from tests.fixtures.tiny_vision_models import save_tiny_blip_captioner, save_tiny_blip_vqa, save_tiny_clip

GENDER: dict[str, Any] = {
    "key": "gender",
    "kind": "single",
    "prompt": "What is the gender of the person?",
    "options": [{"key": "male", "label": "male"}, {"key": "female", "label": "female"}],
    "unsure": None,
    "none_option": None,
    "reason": "none",
    "normaliser": "none",
    "linked_question": None,
}
AGE = {
    **GENDER,
    "key": "age",
    "prompt": "What is the age of the person?",
    "options": [
        {"key": "young", "label": "young"},
        {"key": "middle", "label": "middle"},
        {"key": "old", "label": "old"},
    ],
}
ATTRS = {
    **GENDER,
    "key": "attributes",
    "kind": "multi",
    "prompt": "Select the attributes.",
    "options": [{"key": k, "label": k} for k in ("red", "blue", "green", "black")],
    "none_option": {"key": "none_of_the_above", "label": "None of the above"},
}
RUBRIC = {**GENDER, "key": "rubric", "kind": "binary", "prompt": "Is there a doctor?", "options": []}
CAPTION = {**GENDER, "key": "caption", "kind": "text", "options": []}


def picture(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, size=(48, 40, 3), dtype=np.uint8))


def item(item_id: int, *seeds: int) -> LabelItem:
    return LabelItem(item_id=item_id, images=[picture(seed) for seed in seeds])


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny_models")
    return {
        "clip": save_tiny_clip(root / "clip"),
        "vqa": save_tiny_blip_vqa(root / "vqa"),
        "captioner": save_tiny_blip_captioner(root / "captioner"),
    }


def clip(folders: dict[str, Path], **config: object) -> ClipLabeller:
    return ClipLabeller(name="clip", config={"model": str(folders["clip"]), "device": "cpu", **config})


def test_clip_supports_choice_questions_only(folders: dict[str, Path]) -> None:
    labeller = clip(folders)
    assert [labeller.supports(q) for q in (GENDER, ATTRS, RUBRIC, CAPTION)] == [True, True, False, False]


def test_clip_single_answer_is_the_models_own_zero_shot_argmax(folders: dict[str, Path]) -> None:
    labeller = clip(folders)
    outcomes = labeller.label([item(1, 1), item(2, 2)], [GENDER, RUBRIC])
    assert [(o.item_id, o.question_key) for o in outcomes] == [(1, "gender"), (2, "gender")]
    texts = ["a photo of male", "a photo of female"]  # the default template over the labels
    for outcome, seed in zip(outcomes, (1, 2), strict=True):
        inputs = labeller.tokenizer(texts, padding=True, return_tensors="pt")
        pixels = labeller.image_processor(images=[picture(seed)], return_tensors="pt")["pixel_values"]
        with torch.no_grad():
            logits = labeller.model(
                input_ids=inputs.input_ids, attention_mask=inputs.attention_mask, pixel_values=pixels
            ).logits_per_image[0]
        expected = torch.softmax(logits, dim=-1).numpy()
        scores = json.loads(outcome.raw)
        assert [scores["male"], scores["female"]] == pytest.approx(expected.tolist(), abs=1e-5)
        assert outcome.value == ["male", "female"][int(expected.argmax())]
        assert outcome.error is None and outcome.cost_usd is None


def test_clip_image_set_averages_probabilities(folders: dict[str, Path]) -> None:
    labeller = clip(folders)
    (one,) = labeller.label([item(1, 1)], [AGE])
    (two,) = labeller.label([item(2, 2)], [AGE])
    (both,) = labeller.label([item(3, 1, 2)], [AGE])
    first, second, mean = (json.loads(o.raw) for o in (one, two, both))
    for key in ("young", "middle", "old"):
        assert mean[key] == pytest.approx((first[key] + second[key]) / 2, abs=1e-5)
    assert both.value == max(mean, key=mean.get)


def test_clip_multi_threshold_top_k_and_none_option(folders: dict[str, Path]) -> None:
    (everything,) = clip(folders, multi_threshold=-1.0).label([item(1, 1)], [ATTRS])
    assert everything.value == ["red", "blue", "green", "black"]
    (nothing,) = clip(folders, multi_threshold=1.01).label([item(1, 1)], [ATTRS])
    assert nothing.value == ["none_of_the_above"]
    (top,) = clip(folders, multi_top_k=2).label([item(1, 1)], [ATTRS])
    cosines = json.loads(top.raw)
    assert top.value == sorted(cosines, key=cosines.get, reverse=True)[:2]
    without_none = {**ATTRS, "none_option": None}
    (empty,) = clip(folders, multi_threshold=1.01).label([item(1, 1)], [without_none])
    assert empty.value == [] and empty.error is None


def test_clip_embeddings_are_normalised_and_batch_independent(folders: dict[str, Path]) -> None:
    images = [picture(seed) for seed in range(5)] + [picture(0)]
    one_by_one = clip(folders, batch_size=1).embed_images(images)
    batched = clip(folders, batch_size=32).embed_images(images)
    assert one_by_one.shape == (6, 16) and one_by_one.dtype == np.float32
    assert np.linalg.norm(batched, axis=1) == pytest.approx(np.ones(6), abs=1e-5)
    assert np.allclose(one_by_one, batched, atol=1e-5)
    assert np.allclose(batched[0], batched[5])  # the same picture twice
    assert clip(folders).embed_images([]).shape == (0, 16)


def test_clip_model_loads_once_per_process(folders: dict[str, Path]) -> None:
    assert clip(folders).model is clip(folders).model
    built = build_labeller("clip", name="clip", config={"model": str(folders["clip"]), "device": "cpu"})
    assert isinstance(built, ClipLabeller) and built.model is clip(folders).model


def test_text_items_fail_with_a_reason(folders: dict[str, Path]) -> None:
    (outcome,) = clip(folders).label([LabelItem(item_id=9, text="wearing a turban")], [GENDER])
    assert outcome.value is None and outcome.error == "item has no image"


def test_missing_model_folder_is_a_labeller_error(tmp_path: Path) -> None:
    with pytest.raises(LabellerError, match="cannot load clip"):
        ClipLabeller(name="clip", config={"model": str(tmp_path / "absent"), "device": "cpu"})


def vqa(folders: dict[str, Path], **config: object) -> BlipVqaLabeller:
    return BlipVqaLabeller(name="blip", config={"model": str(folders["vqa"]), "device": "cpu", **config})


def test_blip_option_score_is_the_models_answer_likelihood(folders: dict[str, Path]) -> None:
    labeller = vqa(folders)
    scores = labeller.score_options([picture(1)], GENDER["prompt"], ["male", "female"])
    assert scores.shape == (1, 2)
    tok = labeller.tokenizer
    question = tok([GENDER["prompt"]], return_tensors="pt")
    pixels = labeller.image_processor(images=[picture(1)], return_tensors="pt")["pixel_values"]
    for column, answer in enumerate(["male", "female"]):
        labels = tok([answer], return_tensors="pt").input_ids
        labels[:, 0] = labeller.model.decoder_start_token_id
        with torch.no_grad():
            loss = labeller.model(
                input_ids=question.input_ids,
                attention_mask=question.attention_mask,
                pixel_values=pixels,
                labels=labels,
            ).loss
        # the model's loss is the mean per-token negative log-likelihood of the answer
        assert scores[0, column] == pytest.approx(-loss.item(), abs=1e-4)


def test_blip_picks_the_best_option_and_answers_binary(folders: dict[str, Path]) -> None:
    labeller = vqa(folders)
    outcomes = labeller.label([item(1, 1), item(2, 1, 2)], [AGE, RUBRIC])
    assert [(o.item_id, o.question_key) for o in outcomes] == [
        (1, "age"),
        (1, "rubric"),
        (2, "age"),
        (2, "rubric"),
    ]
    for outcome in outcomes:
        scores = json.loads(outcome.raw)
        best = max(scores, key=scores.get)
        assert outcome.value == ({"yes": 1, "no": 0}[best] if outcome.question_key == "rubric" else best)
    one = json.loads(outcomes[0].raw)
    alone = json.loads(labeller.label([item(3, 2)], [AGE])[0].raw)
    pair = json.loads(outcomes[2].raw)
    assert pair["old"] == pytest.approx((one["old"] + alone["old"]) / 2, abs=1e-4)  # image-set mean


def test_blip_batching_does_not_change_scores(folders: dict[str, Path]) -> None:
    images = [picture(seed) for seed in range(4)]
    assert np.allclose(
        vqa(folders, batch_size=1).score_options(images, "what?", ["young", "old"]),
        vqa(folders, batch_size=4).score_options(images, "what?", ["young", "old"]),
        atol=1e-4,
    )


def test_captioner_gives_k_captions_best_first(folders: dict[str, Path]) -> None:
    labeller = CaptionLabeller(
        name="cap",
        config={"model": str(folders["captioner"]), "device": "cpu", "num_captions": 3, "max_new_tokens": 6},
    )
    captions = labeller.caption_images([picture(1), picture(2)])
    assert len(captions) == 2 and all(len(c) == 3 and all(isinstance(t, str) for t in c) for c in captions)
    assert labeller.supports(CAPTION) and not labeller.supports({**CAPTION, "key": "product_color"})
    outcomes = labeller.label([item(1, 1), item(2, 1, 2)], [CAPTION])
    assert json.loads(outcomes[0].raw) == captions[0]
    if captions[0][0]:
        assert outcomes[0].value == captions[0][0]
    else:  # a random model may say nothing: that is refused, not filled in
        assert outcomes[0].error == "is empty"
    assert outcomes[1].error == "the captioner answers items of exactly one image"
