"""CPU seconds the PostgreSQL backend of this process's connection has used, read from ``/proc`` (the
benchmarks run the database on the same machine). None on SQLite, whose work is the process's own,
or when the backend's process cannot be read (a server elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path


def backend_cpu() -> float | None:
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
