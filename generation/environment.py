"""What this machine offers image generation, for the generation page to say before its form.

``model_folders`` lists the diffusers folders (those with a ``model_index.json``) under
``WORKBENCH_MODEL_DIRS``, one and two levels deep (``models/sd-turbo`` and ``models/org/sd-turbo``).
``cuda_status`` says whether torch sees a CUDA device *in this process*: generation runs in the Celery
workers on the ``gpu`` queue, which may sit on another machine, so the page says it is this server's
view (docs/generation.md). torch is imported on first use only and the answer is kept.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

MAX_FOLDERS_LISTED = 50


@dataclass(frozen=True)
class ModelDir:
    """One folder of ``WORKBENCH_MODEL_DIRS``: whether it exists and the diffusers folders in it."""

    path: str
    exists: bool
    models: tuple[str, ...]


def _diffusers_folders(root: Path) -> list[str]:
    found: list[str] = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith("."):
            continue
        if (child / "model_index.json").is_file():
            found.append(str(child))
            continue
        for grandchild in sorted(child.iterdir()) if os.access(child, os.R_OK) else []:
            if grandchild.is_dir() and (grandchild / "model_index.json").is_file():
                found.append(str(grandchild))
        if len(found) >= MAX_FOLDERS_LISTED:
            break
    return found[:MAX_FOLDERS_LISTED]


def model_folders() -> list[ModelDir]:
    """Each configured model folder, and the diffusers model folders found in it."""
    listed = []
    for folder in settings.WORKBENCH_MODEL_DIRS:
        root = Path(folder).expanduser()
        try:
            models = tuple(_diffusers_folders(root)) if root.is_dir() else ()
        except OSError:
            models = ()
        listed.append(ModelDir(path=str(root), exists=root.is_dir(), models=models))
    return listed


@dataclass(frozen=True)
class CudaStatus:
    available: bool
    device: str
    torch_version: str
    problem: str = ""


@functools.cache
def cuda_status() -> CudaStatus:
    """``torch.cuda.is_available()`` as this server process sees it (and the first device's name)."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in requirements.txt
        return CudaStatus(False, "", "", f"torch is not installed here: {exc}")
    try:
        available = bool(torch.cuda.is_available())
        device = torch.cuda.get_device_name(0) if available else ""
    except Exception as exc:  # noqa: BLE001 - a broken driver is reported, not raised
        return CudaStatus(False, "", str(torch.__version__), str(exc))
    return CudaStatus(available, device, str(torch.__version__))


def hub_offline() -> bool:
    """Whether hub ids can only come from the local cache (``HF_HUB_OFFLINE``, set by ``make run``)."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
