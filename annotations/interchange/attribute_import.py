"""Annotator attributes from a CSV file (``manage.py import_annotator_attributes STUDY FILE.csv``;
docs/import-export.md, "Annotator attributes").

The column ``annotator`` names an imported annotator of the study (a person without an account, as an
annotation import named them) or the username of an account enrolled in it; every other column is an
attribute (e.g. ``region``). A blank cell leaves that attribute as it is; a value is merged into what the
study holds (``services/annotator_attributes.py``: an imported annotator's ``study_attributes``, an
account's enrolment). All or nothing: unknown annotators are listed in the refusal, a name that is both
an imported annotator and an enrolled account is refused as ambiguous, and two rows that give one
annotator different values of one attribute are refused with their line numbers.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from annotations.interchange.item_import import csv_records
from annotations.interchange.records import utf8_text
from annotations.interchange.sources import Address, file_read
from annotations.models import Annotator, Enrollment, Study
from annotations.services.annotator_attributes import annotator_attributes_merge, attribute_problem
from common.errors import ImportRefused, ValidationFailed

MAX_ROWS = 100_000
MAX_LISTED = 20
NAME_COLUMN = "annotator"


@dataclass
class AttributeImportReport:
    rows: int = 0
    updated: int = 0
    unchanged: int = 0


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:MAX_LISTED])
    return shown + (f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")


def _columns(name: str, text: str) -> list[str]:
    """The header's attribute columns (every one but ``annotator``), checked."""
    try:
        header = next(csv.reader(io.StringIO(text, newline="")), None) or []
    except csv.Error as exc:
        raise ImportRefused(f"{name}: the header row cannot be read ({exc})") from exc
    columns = [column.strip() for column in header]
    if NAME_COLUMN not in columns:
        raise ImportRefused(f"the file needs a column {NAME_COLUMN!r} (and one column per attribute)")
    keys = [column for column in columns if column != NAME_COLUMN]
    if not keys or len(set(columns)) != len(columns):
        raise ImportRefused("the file needs one column per attribute besides 'annotator', each named once")
    for key in keys:
        if problem := attribute_problem(key, ""):
            raise ImportRefused(f"column {key!r}: {problem}")
    return keys


def _read_rows(name: str, text: str) -> tuple[dict[str, dict[str, str]], int]:
    """{annotator: {attribute: value}} of the non-blank cells (checked), and the number of rows. The rows
    are read by ``item_import.csv_records`` (a cell the csv module cannot read, or one a database cannot
    store, is refused with its row)."""
    keys = _columns(name, text)
    given: dict[str, dict[str, str]] = {}
    lines: dict[tuple[str, str], int] = {}
    rows = 0
    for number, raw in csv_records(name, io.StringIO(text, newline=""), check_cells=True):
        rows += 1
        if rows > MAX_ROWS:
            raise ImportRefused(f"more than {MAX_ROWS} rows; split the file")
        if None in raw:
            raise ImportRefused(f"line {number}: more cells than columns")
        row = {(column or "").strip(): cell for column, cell in raw.items()}
        who = (row.get(NAME_COLUMN) or "").strip()
        if not who:
            raise ImportRefused(f"line {number}: the annotator is missing")
        taken = given.setdefault(who, {})
        for key in keys:
            value = (row.get(key) or "").strip()
            if not value:
                continue  # a blank cell leaves the attribute alone
            if problem := attribute_problem(key, value):
                raise ImportRefused(f"line {number}: {problem}")
            if key in taken and taken[key] != value:
                raise ImportRefused(
                    f"line {number}: gives {who!r} {key} {value!r}, but line {lines[(who, key)]} gave "
                    f"{taken[key]!r}"
                )
            taken[key] = value
            lines.setdefault((who, key), number)
    if not rows:
        raise ImportRefused("the file has no rows")
    return given, rows


def annotator_attributes_import(*, study: Study, address: Address) -> AttributeImportReport:
    """Merge the CSV file's attributes into the study's annotators; all or nothing (see the module)."""
    name, data = file_read(address)
    given, rows = _read_rows(name, utf8_text(data, name))
    names = sorted(given)
    imported = {
        annotator.name: annotator
        for annotator in Annotator.objects.filter(study=study, kind=Annotator.Kind.HUMAN, name__in=names)
    }
    enrolled = {
        enrollment.user.username: enrollment
        for enrollment in Enrollment.objects.filter(study=study, user__username__in=names).select_related(
            "user"
        )
    }
    both = [who for who in names if who in imported and who in enrolled]
    if both:
        raise ImportRefused(
            "these names are both an imported annotator and an enrolled account of the study: "
            + _listed(both)
        )
    unknown = [who for who in names if who not in imported and who not in enrolled]
    if unknown:
        raise ImportRefused(
            f"{len(unknown)} annotator{'s are' if len(unknown) != 1 else ' is'} not in this study (neither "
            f"imported nor enrolled), nothing was written: {_listed(unknown)}"
        )
    return _write(given, imported, enrolled, rows)


def _write(
    given: dict[str, dict[str, str]],
    imported: dict[str, Annotator],
    enrolled: dict[str, Enrollment],
    rows: int,
) -> AttributeImportReport:
    try:
        updated, unchanged = annotator_attributes_merge(given, imported=imported, enrolled=enrolled)
    except ValidationFailed as exc:
        raise ImportRefused(exc.message) from exc
    return AttributeImportReport(rows=rows, updated=updated, unchanged=unchanged)
