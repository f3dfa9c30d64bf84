"""The report's supplement: a zip that goes with the report (docs/reports.md, "Body and supplement").

The body of a report is for reading: a long findings table shows its top rows there. The supplement holds
every findings table whole, one CSV per table (every row and column, the header the findings' column
names, each cell through ``common.spreadsheet.csv_cell`` so a spreadsheet shows text as text: the same
cells as the findings page's CSV download), and a ``README.txt`` naming each file with the table's title,
rows and method, and the commands that recompute the report. Its bytes depend on the document alone:
files in a fixed order, each stamped 1980-01-01 00:00 with fixed permissions, so the same report gives
the same zip.

``manage.py report --out FILE`` writes it beside the report as ``<FILE's stem>-supplement.zip``; a report
job stores it with the report (``ReportJob.supplement``).
"""

from __future__ import annotations

import csv
import io
import zipfile

from common.spreadsheet import csv_cell
from reports.document import DocTable, ReportDocument

SUFFIX = "-supplement.zip"
README = "README.txt"
# Every entry's timestamp: the earliest a zip can hold, so the bytes do not depend on when it was made.
STAMP = (1980, 1, 1, 0, 0, 0)


def supplement_name(filename: str) -> str:
    """The supplement's name beside a report file: ``report.pdf`` -> ``report-supplement.zip``."""
    stem = filename.rsplit(".", 1)[0] if "." in filename.rsplit("/", 1)[-1] else filename
    return stem + SUFFIX


def table_csv(table: DocTable) -> bytes:
    """Every row of ``table`` as CSV (UTF-8): the findings' column names, then each row's cells."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([column.key for column in table.columns])
    writer.writerows([csv_cell(value) for value in row] for row in table.every_row)
    return out.getvalue().encode("utf-8")


def supplement_tables(document: ReportDocument) -> list[DocTable]:
    """The tables the supplement holds: every findings table of the document, in its order."""
    return [table for table in document.tables() if table.csv]


def readme(document: ReportDocument, tables: list[DocTable]) -> str:
    """What the supplement holds: each file with its table's title, size and method, then the commands."""
    lines = [
        f"Supplement to: {document.title}",
        f"Generated {document.generated_at} (UTC); labels from {document.source_label or document.source}.",
        "",
        "Each CSV file holds one findings table of the report, every row and every column. The first line",
        "names the columns; an empty cell is an undefined value; text that a spreadsheet would run as a",
        "formula starts with an apostrophe. Where the report's body shows a table's top rows only, it",
        "names the file that holds all of them.",
        "",
        "Files:",
    ]
    for table in tables:
        shown = "" if table.full_rows is None else f"; the body shows {len(table.rows):,}"
        lines.append(f"  {table.csv}: {table.title} ({len(table.every_row):,} rows{shown})")
        if table.method is not None:
            unit = f" One n counts {table.method.unit}." if table.method.unit else ""
            lines.append(f"      {table.method.estimator.rstrip('.')}.{unit}")
        if not table.every_row and table.empty_reason:
            lines.append(f"      No rows: {table.empty_reason}")
    if not tables:
        lines.append("  (none: this report has no findings table)")
    if document.commands:
        lines += ["", "Commands that recompute each part of the report (run in the workbench's folder):"]
        lines += [f"  {command}" for command in document.commands]
    return "\n".join(lines) + "\n"


def supplement_zip(document: ReportDocument) -> bytes:
    """The supplement of ``document`` as zip bytes (deterministic: see the module docstring)."""
    tables = supplement_tables(document)
    files = {README: readme(document, tables).encode("utf-8")}
    for table in tables:
        files[table.csv] = table_csv(table)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=STAMP)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            entry.create_system = 3  # unix: the permissions above, whatever machine made it
            archive.writestr(entry, data)
    return buffer.getvalue()
