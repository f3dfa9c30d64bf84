"""Labeller kinds by name: a dotted path per kind, imported only when asked for.

Importing lazily keeps ``torch``/``transformers``/``cv2`` out of processes that only use the VLM
or the colour rule. A new labeller is one module plus one line here; a dotted path
(``package.module.Class``) that is not a registered kind is accepted too, so a researcher's own
labeller class needs no change to this file.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from generation.labellers.base import Labeller, LabellerError

LABELLER_CLASSES: dict[str, str] = {
    "vlm": "generation.labellers.vlm.VlmLabeller",
    "clip": "generation.labellers.clip.ClipLabeller",
    "blip_vqa": "generation.labellers.blip.BlipVqaLabeller",
    "captioner": "generation.labellers.captioner.CaptionLabeller",
    "colour": "generation.labellers.colour.ColourLabeller",
    "faces": "generation.labellers.faces.FaceLabeller",
    "ocr": "generation.labellers.ocr.OcrLabeller",
}


def get_labeller_class(kind: str) -> type[Labeller]:
    """The class registered for ``kind`` (or named by a dotted path); :class:`LabellerError` if none."""
    path = LABELLER_CLASSES.get(kind, kind)
    module_name, _, class_name = path.rpartition(".")
    if not module_name:
        raise LabellerError(f"unknown labeller kind '{kind}'; known: {', '.join(sorted(LABELLER_CLASSES))}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise LabellerError(f"labeller '{kind}': cannot import {module_name}: {error}") from error
    found = getattr(module, class_name, None)
    if not (isinstance(found, type) and issubclass(found, Labeller)):
        raise LabellerError(f"labeller '{kind}': {path} is not a Labeller class")
    return found


def build_labeller(kind: str, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None) -> Labeller:
    """Instantiate the labeller of ``kind`` (the Django layer calls this from a labeller row)."""
    return get_labeller_class(kind)(name=name, version=version, config=config)
