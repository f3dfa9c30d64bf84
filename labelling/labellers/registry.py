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

from labelling.labellers.base import Labeller, LabellerError

LABELLER_CLASSES: dict[str, str] = {
    "vlm": "labelling.labellers.vlm.VlmLabeller",
    "clip": "labelling.labellers.clip.ClipLabeller",
    "blip_vqa": "labelling.labellers.blip.BlipVqaLabeller",
    "captioner": "labelling.labellers.captioner.CaptionLabeller",
    "colour": "labelling.labellers.colour.ColourLabeller",
    "faces": "labelling.labellers.faces.FaceLabeller",
    "ocr": "labelling.labellers.ocr.OcrLabeller",
}
# Labellers lived in ``generation.labellers`` before the ``labelling`` app existed; a machine
# annotator registered then by dotted path still resolves.
MOVED_FROM = "generation.labellers."


def get_labeller_class(kind: str) -> type[Labeller]:
    """The class registered for ``kind`` (or named by a dotted path); :class:`LabellerError` if none."""
    path = LABELLER_CLASSES.get(kind, kind)
    if path.startswith(MOVED_FROM):
        path = "labelling.labellers." + path[len(MOVED_FROM) :]
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


def build_labeller(
    kind: str, *, name: str, version: str = "1", config: Mapping[str, Any] | None = None
) -> Labeller:
    """Instantiate the labeller of ``kind`` (the Django layer calls this from a labeller row)."""
    return get_labeller_class(kind)(name=name, version=version, config=config)
