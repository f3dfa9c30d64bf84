"""Which model a generation job loads: the one rule for a model name, used by the web node before a
job is queued and by the worker before it loads anything (docs/generation.md, "Which model").

A name is one of:

- a **folder path**: it starts with ``/``, ``~``, ``./`` or ``../``. Outside the command line's own run
  (``manage.py generate`` without ``--background``) it must lie under one of ``WORKBENCH_MODEL_DIRS``
  once ``..`` and symbolic links are resolved;
- a **name under WORKBENCH_MODEL_DIRS** or a **hub id**: one or two segments of letters, digits,
  ``.``, ``_`` and ``-`` (``sd-turbo``, ``stabilityai/sd-turbo``). The worker looks for a folder of
  that name in each of ``WORKBENCH_MODEL_DIRS`` in order (``DIR/NAME``); the first that holds a
  ``model_index.json`` is loaded, else the name is a Hugging Face hub id. The current directory is
  never consulted, so a name means the same on every machine that has the same folders.

Anything else is refused with the reason. The web node, which may hold no models at all, applies the
same function: a refusal that depends only on the name (its form, a folder outside the allowed ones)
comes before the job is queued; the worker, where the folders are, decides folder or hub and
refuses a folder that is not a diffusers pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from django.conf import settings

from common.errors import NotAllowed, ValidationFailed

PATH_PREFIXES = ("/", "~", "./", "../")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


class ModelSourceRefused(ValidationFailed):
    """A model name the rule refuses; ``message`` says why (pages and the API answer 400)."""


class ModelFolderNotAllowed(NotAllowed):
    """A folder outside ``WORKBENCH_MODEL_DIRS`` (pages and the API answer 403)."""


@dataclass(frozen=True)
class ModelSource:
    """What a model name resolved to: a local folder (``location`` its absolute path) or a hub id."""

    kind: Literal["local", "hub"]
    location: str


def _under(folder: Path, roots: Sequence[Path]) -> bool:
    return any(folder == root or folder.is_relative_to(root) for root in roots)


def model_source_resolve(
    source: str,
    *,
    any_folder: bool = False,
    on_worker: bool = False,
    model_dirs: Sequence[str] | None = None,
) -> ModelSource:
    """Resolve ``source`` by the rule above. ``any_folder``: a folder path may lie anywhere (the
    command line's own run). ``on_worker``: this machine is the one that loads the model, so a
    folder must be a diffusers pipeline (``model_index.json``). ``model_dirs``: default
    ``settings.WORKBENCH_MODEL_DIRS``. Raises :class:`ModelSourceRefused` (the name) or
    :class:`ModelFolderNotAllowed` (a folder outside the allowed ones)."""
    dirs = list(settings.WORKBENCH_MODEL_DIRS if model_dirs is None else model_dirs)
    roots = [Path(folder).expanduser().resolve() for folder in dirs]
    allowed = ", ".join(map(str, roots)) or "WORKBENCH_MODEL_DIRS (none is set)"
    name = source.strip()
    if not name or name != source:
        raise ModelSourceRefused("the model name is empty or has spaces around it")
    if name.startswith(PATH_PREFIXES) or name in (".", "..", "~"):
        folder = Path(name).expanduser().resolve()
        if not any_folder and not _under(folder, roots):
            raise ModelFolderNotAllowed(f"local models must be under {allowed}: {name!r} is not")
        if on_worker and not (folder / "model_index.json").is_file():
            raise ModelSourceRefused(f"{folder} is not a diffusers pipeline folder (no model_index.json)")
        return ModelSource(kind="local", location=str(folder))
    if not NAME_RE.match(name) or ".." in name.split("/"):
        raise ModelSourceRefused(
            f"{name!r} is neither a folder path (starting with / ./ ../ or ~) nor a model name: a folder "
            "under WORKBENCH_MODEL_DIRS or a hub id, one or two parts of letters, digits, '.', '_' and "
            "'-' (e.g. stabilityai/sd-turbo)"
        )
    for root in roots:
        candidate = (root / name).resolve()
        if (candidate / "model_index.json").is_file():
            if not _under(candidate, roots):  # a symbolic link out of the allowed folders
                raise ModelFolderNotAllowed(f"local models must be under {allowed}: {root / name} is not")
            return ModelSource(kind="local", location=str(candidate))
    return ModelSource(kind="hub", location=name)
