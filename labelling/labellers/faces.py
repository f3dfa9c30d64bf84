"""Faces with OpenCV's Haar cascade (weights ship inside ``opencv-python-headless`` < 5).

``haarcascade_frontalface_default.xml`` from ``cv2.data.haarcascades`` on the grey image,
``detectMultiScale(scaleFactor, minNeighbors, minSize)``; defaults 1.1, 5 and 24 px. Answers
"is there a person" (config ``presence_questions``, default ["person"]: yes when any face is
found) and a boxes question (``box_question`` with ``box_option``): one box per face. A person
seen from behind or far away has no frontal face, so "no" means "no frontal face found";
compare with human labels before trusting it (the agreement report does exactly that).

Config: ``presence_questions``, ``yes_option``/``no_option``, ``box_question``, ``box_option``,
``scale_factor``, ``min_neighbors``, ``min_size``, ``cascade`` (another file of cv2.data).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import cv2
import cv2.data
import numpy as np
from PIL import Image

from labelling.labellers.base import LabellerError
from labelling.labellers.detections import Box, DetectorLabeller


class FaceLabeller(DetectorLabeller):
    kind = "faces"
    default_presence_questions = ("person",)

    def __init__(self, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, version=version, config=config)
        path = cv2.data.haarcascades + str(self.config.get("cascade", "haarcascade_frontalface_default.xml"))
        self.cascade = cv2.CascadeClassifier(path)
        if self.cascade.empty():
            raise LabellerError(
                f"cannot load the Haar cascade {path} (opencv-python-headless 5.x ships none)"
            )
        # One CascadeClassifier is not documented as safe to share between threads.
        self._lock = threading.Lock()

    def detect(self, image: Image.Image) -> list[Box]:
        grey = np.asarray(image.convert("L"))
        size = int(self.config.get("min_size", 24))
        with self._lock:
            faces = self.cascade.detectMultiScale(
                grey,
                scaleFactor=float(self.config.get("scale_factor", 1.1)),
                minNeighbors=int(self.config.get("min_neighbors", 5)),
                minSize=(size, size),
            )
        return [{"x": int(x), "y": int(y), "w": int(w), "h": int(h)} for x, y, w, h in faces]
