"""Dominant object and background colours by rule (Pillow + numpy only; soda's product_color
and background_color).

For an image (shrunk so its longer side is ``max_side``, default 128, for speed):

1. background colour = the dominant colour of the border pixels (a frame ``border_fraction`` =
   5% of the shorter side wide);
2. object pixels = pixels farther than ``background_distance`` (ΔE*76 = Euclidean distance in
   CIELAB, default 25) from the background colour; when they are fewer than
   ``min_object_fraction`` (1%) of the image, the central region (middle half in each direction)
   is used instead;
3. "dominant colour" of a pixel set = quantise each channel to 8 levels (32-wide bins), take the
   most populated bin, and average the pixels in it (an average over all pixels would mix a
   red car and its black tyres into a colour that is in neither);
4. each colour is named by the nearest entry of the vocabulary in CIELAB (ΔE*76).

The vocabulary (config ``vocabulary``) is ``"css3"`` (default: the 147 CSS3 names of
``webcolors``), a list of CSS3 names (e.g. the study's basic terms: black, white, grey, red...,
which are all CSS3 names), or a mapping name -> ``#rrggbb``. The name then goes through the
question's normaliser like any human answer (``colour`` maps CSS3 names onto the basic terms).
``raw`` records the RGB, the vocabulary name and the pixel count behind each answer.

Config: ``object_questions`` (["product_color"]), ``background_questions``
(["background_color"]), ``vocabulary``, ``border_fraction``, ``background_distance``,
``min_object_fraction``, ``max_side``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import webcolors
from PIL import Image

from labelling.labellers.answers import InvalidAnswer, validate_answer
from labelling.labellers.base import LabelItem, Labeller, LabellerError, LabelOutcome, Question

# sRGB (D65) -> XYZ, and the D65 white point, for the CIELAB conversion (CIE 15:2004).
_RGB_TO_XYZ = np.array(
    [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
)
_WHITE = np.array([0.95047, 1.0, 1.08883])


def rgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB of sRGB values in 0..255 (any leading shape, last axis = 3)."""
    c = np.asarray(rgb, dtype=np.float64) / 255.0
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = linear @ _RGB_TO_XYZ.T / _WHITE
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack(
        [116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1
    )


def colour_vocabulary(spec: Any = "css3") -> dict[str, tuple[int, int, int]]:
    """Name -> RGB for ``"css3"``, a list of CSS3 names, or a mapping name -> ``#rrggbb``."""
    if spec == "css3":
        return {name: tuple(webcolors.name_to_rgb(name)) for name in webcolors.names("css3")}
    try:
        if isinstance(spec, Mapping):
            return {str(name): tuple(webcolors.hex_to_rgb(str(value))) for name, value in spec.items()}
        if isinstance(spec, list | tuple) and spec:
            return {str(name): tuple(webcolors.name_to_rgb(str(name))) for name in spec}
    except ValueError as error:
        raise LabellerError(f"colour vocabulary: {error}") from error
    raise LabellerError("colour vocabulary must be 'css3', a list of CSS3 names or a mapping name -> #rrggbb")


def dominant_rgb(pixels: np.ndarray) -> tuple[int, int, int]:
    """Mean RGB of the most populated 32-wide (8 levels per channel) bin of ``pixels`` (N, 3)."""
    bins = (pixels // 32).astype(np.int64)
    codes = bins[:, 0] * 64 + bins[:, 1] * 8 + bins[:, 2]
    winner = np.bincount(codes, minlength=512).argmax()
    mean = pixels[codes == winner].mean(axis=0)
    return (int(round(mean[0])), int(round(mean[1])), int(round(mean[2])))


@dataclass(frozen=True)
class ColourReading:
    rgb: tuple[int, int, int]
    name: str
    pixels: int


class ColourNamer:
    def __init__(self, vocabulary: Mapping[str, tuple[int, int, int]]) -> None:
        self.names = list(vocabulary)
        self.labs = rgb_to_lab(np.array([vocabulary[name] for name in self.names], dtype=np.float64))

    def name(self, rgb: Sequence[int]) -> str:
        """The vocabulary name nearest to ``rgb`` by ΔE*76."""
        distances = np.linalg.norm(self.labs - rgb_to_lab(np.array(rgb, dtype=np.float64)), axis=1)
        return self.names[int(distances.argmin())]


def read_colours(
    image: Image.Image,
    namer: ColourNamer,
    *,
    border_fraction: float = 0.05,
    background_distance: float = 25.0,
    min_object_fraction: float = 0.01,
    max_side: int = 128,
) -> tuple[ColourReading, ColourReading]:
    """(object colour, background colour) of an image, by the rule in the module docstring."""
    picture = image.convert("RGB")
    if max(picture.size) > max_side:
        picture = picture.copy()
        picture.thumbnail((max_side, max_side), Image.Resampling.NEAREST)  # NEAREST: no blended edge colours
    array = np.asarray(picture, dtype=np.int64)
    height, width = array.shape[:2]
    band = max(1, int(round(border_fraction * min(height, width))))
    border = np.zeros((height, width), dtype=bool)
    border[:band, :] = border[-band:, :] = border[:, :band] = border[:, -band:] = True
    background = dominant_rgb(array[border])
    distance = np.linalg.norm(rgb_to_lab(array) - rgb_to_lab(np.array(background)), axis=-1)
    foreground = distance > background_distance
    if foreground.sum() < min_object_fraction * height * width:
        foreground = np.zeros_like(foreground)
        foreground[height // 4 : height - height // 4, width // 4 : width - width // 4] = True
    object_rgb = dominant_rgb(array[foreground])
    return (
        ColourReading(object_rgb, namer.name(object_rgb), int(foreground.sum())),
        ColourReading(background, namer.name(background), int(border.sum())),
    )


class ColourLabeller(Labeller):
    kind = "colour"

    def __init__(self, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None) -> None:
        super().__init__(name=name, version=version, config=config)
        self.namer = ColourNamer(colour_vocabulary(self.config.get("vocabulary", "css3")))
        self.object_questions = list(self.config.get("object_questions", ["product_color"]))
        self.background_questions = list(self.config.get("background_questions", ["background_color"]))

    def supports(self, question: Question) -> bool:
        return (
            question.get("kind") == "text"
            and question.get("key") in self.object_questions + self.background_questions
        )

    def label(self, items: Sequence[LabelItem], questions: Sequence[Question]) -> list[LabelOutcome]:
        asked = self.supported(questions)
        outcomes: list[LabelOutcome] = []
        for item in items:
            if not asked:
                break
            started = time.monotonic()
            if len(item.images) != 1:
                error = "the colour rule answers items of exactly one image"
                outcomes.extend(
                    LabelOutcome(item.item_id, q["key"], None, None, "", error, 0.0, None) for q in asked
                )
                continue
            found_object, found_background = read_colours(
                item.images[0],
                self.namer,
                border_fraction=float(self.config.get("border_fraction", 0.05)),
                background_distance=float(self.config.get("background_distance", 25.0)),
                min_object_fraction=float(self.config.get("min_object_fraction", 0.01)),
                max_side=int(self.config.get("max_side", 128)),
            )
            latency = time.monotonic() - started
            for question in asked:
                reading = found_object if question["key"] in self.object_questions else found_background
                raw = json.dumps({"rgb": list(reading.rgb), "name": reading.name, "pixels": reading.pixels})
                try:
                    clean, _ = validate_answer(question, reading.name)
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
