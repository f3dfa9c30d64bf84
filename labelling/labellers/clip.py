"""Zero-shot answers with a local CLIP model (transformers ``CLIPModel``), and image embeddings.

For a question with options o_1..o_K, each option becomes a text t_k = template.format(label=...,
key=..., question=...) (default ``"a photo of {label}"``; per-question templates in config
``templates: {question_key: "a photo of a {label} person"}``). With L2-normalised image embedding
v and text embeddings u_k, and CLIP's learned scale s = exp(logit_scale):

- single / likert: p_k = softmax_k(s · v·u_k) per image, averaged over an image set's images;
  the answer is argmax_k p_k (likert's "unsure" is never chosen: CLIP cannot abstain);
- multi: c_k = v·u_k (cosine, averaged over images); the answer is every option with
  c_k ≥ ``multi_threshold`` (default 0.25, about where matching image-text pairs of ViT-B/32 start),
  or, when ``multi_top_k`` is set, the k options with the largest c_k. When nothing passes and the
  question has a none option, the answer is that option alone; otherwise [].

Subgroup labels (the ``subgroup`` preset) are single questions. ``raw`` holds the per-option
numbers as JSON. :meth:`ClipLabeller.embed_images` gives L2-normalised embeddings (float32,
one row per image) for the stereotypical-pull metric.

Config: ``model`` (folder or hub id; required), ``device`` (auto), ``batch_size`` (32),
``template``, ``templates``, ``multi_threshold``, ``multi_top_k``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image

from labelling.labellers.answers import InvalidAnswer, validate_answer
from labelling.labellers.base import (
    LabelItem,
    Labeller,
    LabellerError,
    LabelOutcome,
    Question,
    failed_outcomes,
)
from labelling.labellers.local_models import as_features, batches, load_once, resolve_device

DEFAULT_TEMPLATE = "a photo of {label}"


def load_clip(source: str, device: str) -> tuple[Any, Any, Any]:
    """(model, image processor, tokenizer) for ``source``, loaded once per process and device."""

    def loader() -> tuple[Any, Any, Any]:
        from transformers import AutoTokenizer, CLIPImageProcessorPil, CLIPModel

        model: torch.nn.Module = CLIPModel.from_pretrained(source)
        model = model.to(device).eval()
        return model, CLIPImageProcessorPil.from_pretrained(source), AutoTokenizer.from_pretrained(source)

    return load_once(("clip", source, device), loader)


class ClipLabeller(Labeller):
    kind = "clip"

    def __init__(self, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, version=version, config=config)
        if not self.config.get("model"):
            raise LabellerError("a CLIP labeller needs 'model' (a folder or hub id) in its config")
        self.device = resolve_device(self.config.get("device", "auto"))
        self.batch_size = int(self.config.get("batch_size", 32))
        self.model, self.image_processor, self.tokenizer = load_clip(str(self.config["model"]), self.device)

    def supports(self, question: Question) -> bool:
        return question.get("kind") in ("single", "likert", "multi") and bool(question.get("options"))

    @torch.no_grad()
    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """L2-normalised image embeddings, shape (len(images), projection_dim), float32."""
        rows = []
        for chunk in batches(len(images), self.batch_size):
            pixels = self.image_processor(
                images=[images[i].convert("RGB") for i in chunk], return_tensors="pt"
            )
            features = as_features(
                self.model.get_image_features(pixel_values=pixels["pixel_values"].to(self.device))
            )
            rows.append(torch.nn.functional.normalize(features.float(), dim=-1).cpu())
        if not rows:
            return np.zeros((0, int(self.model.config.projection_dim)), dtype=np.float32)
        return torch.cat(rows).numpy().astype(np.float32)

    @torch.no_grad()
    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised text embeddings, one row per text, float32."""
        tokens = self.tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt").to(
            self.device
        )
        features = as_features(self.model.get_text_features(**tokens))
        return torch.nn.functional.normalize(features.float(), dim=-1).cpu().numpy().astype(np.float32)

    def option_texts(self, question: Question) -> list[str]:
        template = (self.config.get("templates") or {}).get(
            question["key"], self.config.get("template", DEFAULT_TEMPLATE)
        )
        return [
            template.format(
                label=option.get("label", option["key"]), key=option["key"], question=question["prompt"]
            )
            for option in question["options"]
        ]

    def label(self, items: Sequence[LabelItem], questions: Sequence[Question]) -> list[LabelOutcome]:
        asked = self.supported(questions)
        if not asked or not items:
            return []
        started = time.monotonic()
        with_images = [item for item in items if item.images]
        flat = [image for item in with_images for image in item.images]
        embeddings = self.embed_images(flat)
        per_item: dict[int, np.ndarray] = {}
        offset = 0
        for item in with_images:
            per_item[id(item)] = embeddings[offset : offset + len(item.images)]
            offset += len(item.images)
        texts = {question["key"]: self.embed_texts(self.option_texts(question)) for question in asked}
        scale = float(self.model.logit_scale.exp().item())
        latency = (time.monotonic() - started) / len(items)
        outcomes: list[LabelOutcome] = []
        for item in items:
            if id(item) not in per_item:
                outcomes.extend(failed_outcomes(item, asked, "item has no image", latency_s=latency))
                continue
            for question in asked:
                cosines = per_item[id(item)] @ texts[question["key"]].T  # (images, options)
                outcomes.append(self._answer(item, question, cosines, scale, latency))
        return outcomes

    def _answer(
        self, item: LabelItem, question: Question, cosines: np.ndarray, scale: float, latency: float
    ) -> LabelOutcome:
        keys = [option["key"] for option in question["options"]]
        if question["kind"] == "multi":
            scores = cosines.mean(axis=0)
            top_k = self.config.get("multi_top_k")
            if top_k:
                chosen = [keys[i] for i in np.argsort(-scores, kind="stable")[: int(top_k)]]
            else:
                threshold = float(self.config.get("multi_threshold", 0.25))
                chosen = [key for key, score in zip(keys, scores, strict=True) if score >= threshold]
            if not chosen and question.get("none_option"):
                chosen = [question["none_option"]["key"]]
            value: Any = chosen
        else:
            logits = scale * cosines
            probs = np.exp(logits - logits.max(axis=1, keepdims=True))
            probs /= probs.sum(axis=1, keepdims=True)
            scores = probs.mean(axis=0)
            value = keys[int(np.argmax(scores))]
        raw = json.dumps({key: round(float(score), 6) for key, score in zip(keys, scores, strict=True)})
        try:
            clean, _ = validate_answer(question, value)
        except InvalidAnswer as error:
            return LabelOutcome(item.item_id, question["key"], None, None, raw, str(error), latency, None)
        return LabelOutcome(item.item_id, question["key"], clean, None, raw, None, latency, None)
