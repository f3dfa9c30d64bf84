"""Files and folders the workbench creates are readable by its own account only (docs/security.md,
"File modes"): the SQLite database (API tokens, labeller secrets, sessions), the mail files (reset
links), exports, item files and the data folder.

``private_file_modes`` sets the process's umask (``WORKBENCH_UMASK``, default ``077``: files 0600,
folders 0700); ``workbench/__init__.py`` calls it, so it holds in every entry point (``manage.py``, the
WSGI app, the Celery worker), before anything creates the data folder or opens the database.
``private_folder`` makes a folder 0700 even when it existed before (an older install made it 0755),
so what an older install left inside is out of others' reach too; ``workbench/apps.py`` applies it to
the data folder at start-up (importing the settings creates no folder). Django's storage sets
its own file modes: ``FILE_UPLOAD_PERMISSIONS`` (0600) and ``FILE_UPLOAD_DIRECTORY_PERMISSIONS``
(0700) in the settings.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

DEFAULT_UMASK = "077"


def private_file_modes() -> int:
    """Set the umask from ``WORKBENCH_UMASK`` (octal, default 077); returns it."""
    raw = os.environ.get("WORKBENCH_UMASK", DEFAULT_UMASK).strip() or DEFAULT_UMASK
    try:
        mask = int(raw, 8)
    except ValueError as exc:
        raise ValueError(f"WORKBENCH_UMASK={raw!r} is not an octal umask such as 077") from exc
    os.umask(mask)
    return mask


def private_folder(path: Path) -> Path:
    """Create ``path`` (and its parents) if needed and make it 0700 when this account owns it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if path.stat().st_uid == os.getuid():
            path.chmod(0o700)
    return path
