"""Text in images with RapidOCR (``rapidocr_onnxruntime``; its ONNX weights ship in the package).

Detections with recognition score ≥ ``min_score`` (0.5) and at least ``min_chars`` (1)
non-space characters count. Answers soda's ``text_presence`` (config ``presence_questions``,
default ["text_presence"]: yes when any text is found) and a boxes question (``box_question``
with ``box_option``): the axis-aligned box around each detected quadrilateral. OCR cannot tell
the product's text from the background's; configure ``background_text_presence`` only for
images whose background is plain. The engine loads once per process.

Config: ``presence_questions``, ``yes_option``/``no_option``, ``box_question``, ``box_option``,
``min_score``, ``min_chars``.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from PIL import Image

from labelling.labellers.detections import Box, DetectorLabeller
from labelling.labellers.local_models import load_once

_ENGINE_LOCK = threading.Lock()


def load_rapidocr() -> Any:
    def loader() -> Any:
        from rapidocr_onnxruntime import RapidOCR

        return RapidOCR()

    return load_once(("rapidocr", "rapidocr_onnxruntime", "cpu"), loader)


class OcrLabeller(DetectorLabeller):
    kind = "ocr"
    default_presence_questions = ("text_presence",)

    def detect(self, image: Image.Image) -> list[Box]:
        engine = load_rapidocr()
        bgr = np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])  # OpenCV's channel order
        with _ENGINE_LOCK:  # one shared engine; onnxruntime sessions are used one call at a time here
            result, _timings = engine(bgr)
        boxes = []
        min_score = float(self.config.get("min_score", 0.5))
        min_chars = int(self.config.get("min_chars", 1))
        for quad, text, score in result or []:
            if float(score) < min_score or len(str(text).replace(" ", "")) < min_chars:
                continue
            xs = [point[0] for point in quad]
            ys = [point[1] for point in quad]
            x, y = max(0, int(np.floor(min(xs)))), max(0, int(np.floor(min(ys))))
            boxes.append(
                {
                    "x": x,
                    "y": y,
                    "w": max(1, int(np.ceil(max(xs))) - x),
                    "h": max(1, int(np.ceil(max(ys))) - y),
                    "text": str(text),
                    "score": round(float(score), 4),
                }
            )
        return boxes
