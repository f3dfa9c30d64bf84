"""Loading local models once per process, on the best device, for the local labellers.

Models load from a local folder or a hub id through ``from_pretrained`` (set ``HF_HUB_OFFLINE=1``
where the hub cannot be reached, so a missing model fails at once). Loaded objects are kept in a
process-wide cache keyed by (what, source, device): a Celery worker loads each model once, not
once per task. transformers 5 without torchvision needs the PIL image processors
(``CLIPImageProcessorPil``, ``BlipImageProcessorPil``), which read the same preprocessor config.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch

from labelling.labellers.base import LabellerError

T = TypeVar("T")
_LOADED: dict[tuple[str, ...], Any] = {}
_LOCK = threading.Lock()


def resolve_device(name: str | None = "auto") -> str:
    """``auto`` picks cuda, then mps, then cpu; an explicit device that is missing is an error."""
    if name in (None, "", "auto"):
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise LabellerError(f"device '{name}' asked for, but CUDA is not available")
    if name == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise LabellerError("device 'mps' asked for, but MPS is not available")
    return name


def load_once(key: tuple[str, ...], loader: Callable[[], T]) -> T:
    """Return the object cached under ``key``, calling ``loader`` the first time (one load per process)."""
    with _LOCK:
        if key not in _LOADED:
            try:
                _LOADED[key] = loader()
            except OSError as error:  # from_pretrained: folder or hub id not found, offline
                raise LabellerError(f"cannot load {key[0]} from '{key[1]}': {error}") from error
        return cast(T, _LOADED[key])


def forget_loaded() -> None:
    """Drop every cached model (tests; freeing GPU memory)."""
    with _LOCK:
        _LOADED.clear()


def as_features(output: Any) -> torch.Tensor:
    """CLIP's ``get_*_features`` return a tensor in transformers 4 and an output object (projected
    ``pooler_output``) in transformers 5; give the tensor either way."""
    if isinstance(output, torch.Tensor):
        return output
    features: torch.Tensor = output.pooler_output
    return features


def batches(count: int, size: int) -> list[range]:
    """Index ranges of at most ``size`` covering ``range(count)``."""
    size = max(1, int(size))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]
