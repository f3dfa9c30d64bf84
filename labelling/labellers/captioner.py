"""Top-k captions per image with a local BLIP captioner (``BlipForConditionalGeneration``).

Beam search with ``num_beams = max(num_captions, beams)`` and ``num_return_sequences =
num_captions`` gives the k most likely captions, best first, for visage's salience metric
(tf-idf of attribute words over captions). :meth:`CaptionLabeller.caption_images` is the main
call. As a labeller it answers ``text`` questions whose key is in ``caption_questions`` (default
``["caption"]``) for single images: the value is the best caption, ``raw`` the k captions as JSON.

Config: ``model`` (folder or hub id; required), ``device`` (auto), ``batch_size`` (32),
``num_captions`` (3), ``beams`` (k), ``max_new_tokens`` (30), ``prompt`` (optional text the
caption continues, e.g. "a picture of"), ``caption_questions``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from PIL import Image

from labelling.labellers.answers import InvalidAnswer, validate_answer
from labelling.labellers.base import LabelItem, Labeller, LabellerError, LabelOutcome, Question
from labelling.labellers.blip import load_blip
from labelling.labellers.local_models import batches, resolve_device


class CaptionLabeller(Labeller):
    kind = "captioner"

    def __init__(self, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, version=version, config=config)
        if not self.config.get("model"):
            raise LabellerError("a captioner needs 'model' (a folder or hub id) in its config")
        self.device = resolve_device(self.config.get("device", "auto"))
        self.batch_size = int(self.config.get("batch_size", 32))
        self.num_captions = int(self.config.get("num_captions", 3))
        self.model, self.image_processor, self.tokenizer = load_blip(
            "BlipForConditionalGeneration", str(self.config["model"]), self.device
        )

    def supports(self, question: Question) -> bool:
        return question.get("kind") == "text" and question.get("key") in self.config.get(
            "caption_questions", ["caption"]
        )

    @torch.no_grad()
    def caption_images(self, images: Sequence[Image.Image]) -> list[list[str]]:
        """``num_captions`` captions per image, best (highest beam score) first."""
        k = self.num_captions
        beams = max(k, int(self.config.get("beams", k)))
        prompt = self.config.get("prompt")
        captions: list[list[str]] = []
        for chunk in batches(len(images), self.batch_size):
            pixels = self.image_processor(
                images=[images[i].convert("RGB") for i in chunk], return_tensors="pt"
            )
            inputs: dict[str, Any] = {"pixel_values": pixels["pixel_values"].to(self.device)}
            if prompt:
                tokens = self.tokenizer([prompt] * len(chunk), return_tensors="pt").to(self.device)
                inputs.update(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask)
            output = self.model.generate(
                **inputs,
                num_beams=beams,
                num_return_sequences=k,
                max_new_tokens=int(self.config.get("max_new_tokens", 30)),
                do_sample=False,
            )
            texts = [text.strip() for text in self.tokenizer.batch_decode(output, skip_special_tokens=True)]
            captions.extend(texts[i * k : (i + 1) * k] for i in range(len(chunk)))
        return captions

    def label(self, items: Sequence[LabelItem], questions: Sequence[Question]) -> list[LabelOutcome]:
        asked = self.supported(questions)
        if not asked or not items:
            return []
        started = time.monotonic()
        single = [item for item in items if len(item.images) == 1]
        captions = dict(
            zip(
                [id(item) for item in single], self.caption_images([i.images[0] for i in single]), strict=True
            )
        )
        latency = (time.monotonic() - started) / len(items)
        outcomes = []
        for item in items:
            for question in asked:
                if id(item) not in captions:
                    outcomes.append(
                        LabelOutcome(
                            item.item_id,
                            question["key"],
                            None,
                            None,
                            "",
                            "the captioner answers items of exactly one image",
                            latency,
                            None,
                        )
                    )
                    continue
                found = captions[id(item)]
                raw = json.dumps(found)
                try:
                    clean, _ = validate_answer(question, found[0] if found else "")
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
