"""What this machine offers image generation, for the generation page to say before its form.

``model_folders`` lists the diffusers folders (those with a ``model_index.json``) under
``WORKBENCH_MODEL_DIRS``, one and two levels deep (``models/sd-turbo`` and ``models/org/sd-turbo``).
``cuda_status`` says whether torch sees a CUDA device *in this process*; it is called only in the
Celery workers of the ``gpu`` queue (where generation runs, maybe on another machine): each such worker
records what it sees (``worker_device_record``, a ``WorkerDevice`` row) when it starts and when it
runs a job, and the generation page reads those rows (``worker_devices_seen``). The web process never
imports torch for the page (importing it and probing CUDA took 3-5 s on a page's first hit; issue 25).
torch is imported on first use only and the answer is kept.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from generation.models import WorkerDevice

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


def worker_device_record(hostname: str) -> WorkerDevice:
    """Record what this worker process sees of CUDA (called in a ``gpu`` worker; imports torch)."""
    status = cuda_status()
    row, _created = WorkerDevice.objects.update_or_create(
        hostname=hostname[:255],
        defaults={
            "cuda_available": status.available,
            "device": status.device[:200],
            "torch_version": status.torch_version[:64],
            "problem": status.problem[:1000],
            "seen_at": timezone.now(),
        },
    )
    return row


MAX_WORKERS_SHOWN = 10


def worker_devices_seen() -> list[WorkerDevice]:
    """The ``gpu`` workers that recorded what they see of CUDA, the most recently seen first."""
    return list(WorkerDevice.objects.order_by("-seen_at")[:MAX_WORKERS_SHOWN])
