"""Multiple choice with a local BLIP VQA model (transformers ``BlipForQuestionAnswering``).

Each option is scored as the answer to the question: with image I, question q and option text
a = (a_1..a_T) (its label, tokenised; the decoder starts from BLIP's ``[DEC]`` token), the score is
the log-likelihood log P(a | I, q) = Σ_t log P(a_t | a_<t, I, q) from the answer decoder, divided
by T when ``length_normalise`` is on (default; otherwise longer options lose for being longer).
For an image set the scores are averaged over its images. The answer is the best-scoring option.
Binary questions are scored with the answers "yes" (1) and "no" (0). ``raw`` holds the scores.

The image and question are encoded once per batch; every option of a question is decoded in one
batch against them. Config: ``model`` (folder or hub id; required), ``device`` (auto),
``batch_size`` (images per forward pass, 32), ``length_normalise`` (True).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from labelling.labellers.answers import InvalidAnswer, validate_answer
from labelling.labellers.base import (
    LabelItem,
    Labeller,
    LabellerError,
    LabelOutcome,
    Question,
    failed_outcomes,
)
from labelling.labellers.local_models import batches, load_once, resolve_device

BINARY_ANSWERS = (("yes", 1), ("no", 0))


def load_blip(model_class_name: str, source: str, device: str) -> tuple[Any, Any, Any]:
    """(model, image processor, tokenizer) for a BLIP model class, loaded once per process and device."""

    def loader() -> tuple[Any, Any, Any]:
        import transformers
        from transformers import AutoTokenizer, BlipImageProcessorPil

        model_class = getattr(transformers, model_class_name)
        model = model_class.from_pretrained(source).to(device).eval()
        return model, BlipImageProcessorPil.from_pretrained(source), AutoTokenizer.from_pretrained(source)

    return load_once((model_class_name, source, device), loader)


class BlipVqaLabeller(Labeller):
    kind = "blip_vqa"

    def __init__(self, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, version=version, config=config)
        if not self.config.get("model"):
            raise LabellerError("a BLIP VQA labeller needs 'model' (a folder or hub id) in its config")
        self.device = resolve_device(self.config.get("device", "auto"))
        self.batch_size = int(self.config.get("batch_size", 32))
        self.model, self.image_processor, self.tokenizer = load_blip(
            "BlipForQuestionAnswering", str(self.config["model"]), self.device
        )

    def supports(self, question: Question) -> bool:
        kind = question.get("kind")
        return kind == "binary" or (kind in ("single", "likert") and bool(question.get("options")))

    @staticmethod
    def answer_texts(question: Question) -> list[tuple[str, Any]]:
        """(text scored, value it stands for) per option; binary: yes -> 1, no -> 0."""
        if question["kind"] == "binary":
            return list(BINARY_ANSWERS)
        return [(str(option.get("label", option["key"])), option["key"]) for option in question["options"]]

    @torch.no_grad()
    def score_options(self, images: Sequence[Any], question_text: str, answers: Sequence[str]) -> np.ndarray:
        """Scores, shape (len(images), len(answers)): (mean) log P(answer | image, question)."""
        tokenizer, model = self.tokenizer, self.model
        answer_tokens = tokenizer(list(answers), padding=True, return_tensors="pt").to(self.device)
        answer_ids = answer_tokens.input_ids.clone()
        answer_ids[:, 0] = model.decoder_start_token_id  # BLIP decodes answers from [DEC], not [CLS]
        labels = answer_ids.masked_fill(answer_tokens.attention_mask == 0, -100)
        token_counts = (labels[:, 1:] != -100).sum(dim=1).clamp(min=1).float()
        normalise = bool(self.config.get("length_normalise", True))
        rows = []
        for chunk in batches(len(images), self.batch_size):
            pixels = self.image_processor(
                images=[images[i].convert("RGB") for i in chunk], return_tensors="pt"
            )
            image_embeds = model.vision_model(
                pixel_values=pixels["pixel_values"].to(self.device)
            ).last_hidden_state
            image_mask = torch.ones(image_embeds.shape[:-1], dtype=torch.long, device=self.device)
            question = tokenizer([question_text] * len(chunk), padding=True, return_tensors="pt").to(
                self.device
            )
            question_embeds = model.text_encoder(
                input_ids=question.input_ids,
                attention_mask=question.attention_mask,
                encoder_hidden_states=image_embeds,
                encoder_attention_mask=image_mask,
            ).last_hidden_state
            count = len(answers)
            decoded = model.text_decoder(
                input_ids=answer_ids.repeat(len(chunk), 1),
                attention_mask=answer_tokens.attention_mask.repeat(len(chunk), 1),
                encoder_hidden_states=question_embeds.repeat_interleave(count, dim=0),
                encoder_attention_mask=question.attention_mask.repeat_interleave(count, dim=0),
                labels=labels.repeat(len(chunk), 1),
                reduction="none",
            )
            # loss = Σ_t −log P(a_t | a_<t, I, q) per sequence (padding is ignored by the -100 labels)
            nll = decoded.loss.view(len(chunk), count)
            rows.append(-(nll / token_counts) if normalise else -nll)
        return torch.cat(rows).float().cpu().numpy()

    def label(self, items: Sequence[LabelItem], questions: Sequence[Question]) -> list[LabelOutcome]:
        asked = self.supported(questions)
        if not asked or not items:
            return []
        started = time.monotonic()
        with_images = [item for item in items if item.images]
        flat = [image for item in with_images for image in item.images]
        scores = (
            {
                question["key"]: self.score_options(
                    flat, question["prompt"], [t for t, _ in self.answer_texts(question)]
                )
                for question in asked
            }
            if flat
            else {}
        )
        latency = (time.monotonic() - started) / len(items)
        outcomes: list[LabelOutcome] = []
        offset = 0
        for item in items:
            if not item.images:
                outcomes.extend(failed_outcomes(item, asked, "item has no image", latency_s=latency))
                continue
            rows = slice(offset, offset + len(item.images))
            offset += len(item.images)
            for question in asked:
                answers = self.answer_texts(question)
                mean = scores[question["key"]][rows].mean(axis=0)
                raw = json.dumps(
                    {text: round(float(score), 6) for (text, _), score in zip(answers, mean, strict=True)}
                )
                value = answers[int(np.argmax(mean))][1]
                try:
                    clean, _ = validate_answer(question, value)
                except InvalidAnswer as error:
                    outcomes.append(
                        LabelOutcome(
                            item.item_id, question["key"], None, None, raw, str(error), latency, None
                        )
                    )
                else:
                    outcomes.append(
                        LabelOutcome(item.item_id, question["key"], clean, None, raw, None, latency, None)
                    )
        return outcomes
