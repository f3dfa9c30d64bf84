"""CSV cells that a spreadsheet shows as text (CSV injection, OWASP).

Prompts, labels, item ids and platform ids are untrusted text. A cell that starts with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return is run as a formula by Excel and LibreOffice, so the
report-style downloads (progress, agreement, findings, comparisons, payments) and the CSV data export
(``annotations/interchange/exports.py``) prefix such text with an apostrophe. Numbers stay numbers. The
data export's ``raw`` option (``?raw=1``, ``manage.py export --raw``) writes text as stored, for
programs; docs/import-export.md says so.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` as a safe CSV cell: None empty, datetimes ISO 8601, lists joined with "; ",
    text starting like a formula prefixed with an apostrophe, anything else unchanged."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        value = "; ".join(str(item) for item in value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_lines(rows: Iterable[Mapping[str, Any]], columns: list[str]) -> Iterator[str]:
    """A header line, then one line per row (the ``columns`` of each, through ``csv_cell``), as text
    chunks for a ``StreamingHttpResponse`` or a file: constant memory whatever the number of rows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell(row[column]) for column in columns])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()
