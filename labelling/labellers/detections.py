"""What the detector labellers (faces, OCR) share: turning detections into answers.

A detector finds boxes in each image of an item. A "presence" question is answered from whether
any image has at least one box: a ``single`` question names its option keys in config
(``yes_option``/``no_option``, default "yes"/"no"; they are validated against the question's
options, never invented), a ``binary`` question gets 1/0. A ``boxes`` question gets every box as
``{"option": box_option, "x", "y", "w", "h"}`` in pixels of the original image, plus
``"image": index`` for an image set.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image

from labelling.labellers.answers import InvalidAnswer, validate_answer
from labelling.labellers.base import LabelItem, Labeller, LabellerError, LabelOutcome, Question

Box = dict[str, Any]  # {"x", "y", "w", "h"} in pixels, plus detector extras ("text", "score")


class DetectorLabeller(Labeller):
    """Base of detector labellers: subclasses implement :meth:`detect` for one image."""

    default_presence_questions: tuple[str, ...] = ()

    def __init__(self, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, version=version, config=config)
        self.presence_questions = list(self.config.get("presence_questions", self.default_presence_questions))
        self.box_question = self.config.get("box_question")
        self.box_option = self.config.get("box_option")
        if self.box_question and not self.box_option:
            raise LabellerError("'box_question' needs 'box_option': the option every box is linked to")

    def detect(self, image: Image.Image) -> list[Box]:
        raise NotImplementedError

    def supports(self, question: Question) -> bool:
        key, kind = question.get("key"), question.get("kind")
        if key in self.presence_questions:
            return kind in ("single", "binary")
        return bool(self.box_question) and key == self.box_question and kind == "boxes"

    def presence_value(self, question: Question, present: bool) -> Any:
        if question["kind"] == "binary":
            return 1 if present else 0
        return self.config.get("yes_option", "yes") if present else self.config.get("no_option", "no")

    def label(self, items: Sequence[LabelItem], questions: Sequence[Question]) -> list[LabelOutcome]:
        asked = self.supported(questions)
        outcomes: list[LabelOutcome] = []
        for item in items:
            if not asked:
                break
            if not item.images:
                outcomes.extend(
                    LabelOutcome(item.item_id, q["key"], None, None, "", "item has no image", 0.0, None)
                    for q in asked
                )
                continue
            started = time.monotonic()
            found = [self.detect(image) for image in item.images]
            latency = time.monotonic() - started
            raw = json.dumps(found)
            for question in asked:
                outcomes.append(self._outcome(item, question, found, raw, latency))
        return outcomes

    def _outcome(
        self, item: LabelItem, question: Question, found: list[list[Box]], raw: str, latency: float
    ) -> LabelOutcome:
        if question["kind"] == "boxes":
            several = len(item.images) > 1
            value: Any = [
                {
                    "option": self.box_option,
                    **{k: box[k] for k in ("x", "y", "w", "h")},
                    **({"image": i} if several else {}),
                }
                for i, boxes in enumerate(found)
                for box in boxes
            ]
        else:
            value = self.presence_value(question, any(found))
        try:
            clean, _ = validate_answer(question, value)
        except InvalidAnswer as error:
            return LabelOutcome(item.item_id, question["key"], None, None, raw, str(error), latency, None)
        return LabelOutcome(item.item_id, question["key"], clean, None, raw, None, latency, None)
