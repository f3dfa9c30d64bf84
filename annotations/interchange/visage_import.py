"""Importing the released ViSAGe and SeeGULL files as workbench studies (docs/metrics.md, "Importer").

- ``visage_import`` reads ``image_annotations_full_set.csv`` (one row per showing of one attribute with
  one image to one anonymous rater) into a ``stereotype-markers`` study, optionally the visual-ness
  ratings (``Visual Attributes_.xlsx``) into a ``visualness`` study, and a SeeGULL table into the first
  study's stereotype table. One transaction: a bad row stops everything, with its line number.
- ``stereotype_table_import`` reads a SeeGULL-style CSV into any study's stereotype table on its own.

How the image annotations become annotations (the file has no rater ids):
a *screen* is a run of consecutive rows of one (task, image) that ends with the "none of the above" row
(in the released file every screen is 4 attributes + "none of the above"). The j-th screen of a
(task, image), in file order, is the answer of study-scoped annotator ``<task>-r<j>``: normally r1..r3
(three raters); a task that shows an image more than three times gets r4, r5, ... so that every row of
the file stays one showing (``shown`` = the screen's 5 option keys, ``value`` = those marked "yes").
Boxes (two "x,y" corners per selected attribute) become ``attribute_boxes`` in pixels, corners ordered
and clamped at 0 (a few corners are slightly negative in the file).

The study's protocol is the ``stereotype-markers`` preset without ``require_all_shown``: each screen
of the released file is one pseudo-rater who saw only that screen's attributes, so "every attribute
shown to each rater" cannot hold there (``released_markers_protocol``). ``boxes_required`` stays:
every attribute marked present in the release has a box, and a row that has none is refused.
"""

from __future__ import annotations

import ast
import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import transaction

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.interchange.sources import Address, address_name, file_read
from annotations.models import StereotypeEntry, Study, User
from annotations.services.studies import study_create
from common.errors import ImportRefused
from protocols.schema import (
    NONE_OPTION_KEY,
    Protocol,
    load_preset,
    protocol_from_dict,
    slugify_option,
)

NONE_LABEL = "none of the above"
ANNOTATION_COLUMNS = ("worker_id", "img", "identity", "attribute", "present", "coords")
REGIONS = (("asia", "score_asia"), ("emea", "score_emea"), ("na", "score_na"))
# Likert codes of the released ratings (SPEC 6): 1 Strongly Disagree .. 5 Strongly Agree.
LIKERT_CODES = {1: "strongly_disagree", 2: "disagree", 3: "unsure", 4: "agree", 5: "strongly_agree"}
VISUAL_KEYS = frozenset({"agree", "strongly_agree"})
OFFENSIVENESS_COLUMNS = ("mean offensiveness_score", "offensiveness_score", "offensiveness")


@dataclass
class VisageImportReport:
    studies: dict[str, int] = field(default_factory=dict)
    items: dict[str, int] = field(default_factory=dict)
    annotations: dict[str, int] = field(default_factory=dict)
    annotators: dict[str, int] = field(default_factory=dict)
    showings: int = 0
    screens: int = 0
    stereotype_rows: int = 0
    duplicate_terms: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "studies": self.studies,
            "items": self.items,
            "annotations": self.annotations,
            "annotators": self.annotators,
            "showings": self.showings,
            "screens": self.screens,
            "stereotype_rows": self.stereotype_rows,
            "duplicate_terms": self.duplicate_terms,
        }


@dataclass
class _Screen:
    line: int
    task: str
    image: str
    identity: str
    shown: list[str]
    selected: list[str]
    boxes: list[dict[str, Any]]


def _read_csv(address: Address) -> tuple[list[str], list[dict[str, str]]]:
    name, data = file_read(address)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{name}: is not UTF-8 text") from exc
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = list(reader)
    return [name.strip() for name in reader.fieldnames or []], rows


def _box(raw: str, line: int, option: str) -> dict[str, Any]:
    """Two "x,y" corner strings -> {option, x, y, w, h} in whole pixels (corners ordered, clamped at 0)."""
    try:
        corners = ast.literal_eval(raw)
        points = [tuple(float(v) for v in str(corner).split(",")) for corner in corners]
    except (ValueError, SyntaxError) as exc:
        raise ImportRefused(f"line {line}: coords {raw[:80]!r} are not two 'x,y' corners") from exc
    if len(points) != 2 or any(len(p) != 2 or not all(math.isfinite(v) for v in p) for p in points):
        raise ImportRefused(f"line {line}: coords {raw[:80]!r} are not two 'x,y' corners")
    (x1, y1), (x2, y2) = points
    left, right = max(0.0, min(x1, x2)), max(0.0, max(x1, x2))
    top, bottom = max(0.0, min(y1, y2)), max(0.0, max(y1, y2))
    x, y = round(left), round(top)
    return {"option": option, "x": x, "y": y, "w": max(1, round(right) - x), "h": max(1, round(bottom) - y)}


def _screens(rows: list[dict[str, str]]) -> list[_Screen]:
    """Cut the rows into screens (see the module docstring); refuse inconsistent rows."""
    screens: list[_Screen] = []
    current: _Screen | None = None
    for index, row in enumerate(rows):
        line = index + 2  # the header is line 1
        task, image = row["worker_id"].strip(), row["img"].strip()
        identity, attribute = row["identity"].strip(), row["attribute"].strip()
        present = row["present"].strip().lower()
        if not task or not image or not identity or not attribute:
            raise ImportRefused(f"line {line}: worker_id, img, identity and attribute must not be empty")
        if present not in ("yes", "no"):
            raise ImportRefused(f"line {line}: present must be 'yes' or 'no', not {row['present']!r}")
        if current is not None and (current.task, current.image) != (task, image):
            raise ImportRefused(f"line {line}: the screen of line {current.line} ends without '{NONE_LABEL}'")
        if current is None:
            current = _Screen(line, task, image, identity, [], [], [])
        if identity != current.identity:
            raise ImportRefused(
                f"line {line}: identity {identity!r} differs from {current.identity!r} of line "
                f"{current.line} (same image)"
            )
        key = NONE_OPTION_KEY if attribute == NONE_LABEL else slugify_option(attribute)
        if key in current.shown:
            raise ImportRefused(f"line {line}: {attribute!r} is shown twice on one screen")
        current.shown.append(key)
        coords = (row.get("coords") or "").strip()
        if present == "yes":
            current.selected.append(key)
        if coords not in ("", "[]"):
            if present != "yes":
                raise ImportRefused(f"line {line}: a box for an attribute that is not marked present")
            current.boxes.append(_box(coords, line, key))
        if attribute == NONE_LABEL:
            screens.append(current)
            current = None
    if current is not None:
        raise ImportRefused(f"line {current.line}: the last screen ends without '{NONE_LABEL}'")
    return screens


def _image_records(rows: list[dict[str, str]]) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """One reference item per image: metadata identity and every attribute shown with it (sorted)."""
    attributes: dict[str, set[str]] = {}
    identities: dict[str, str] = {}
    labels: dict[str, str] = {}
    for index, row in enumerate(rows):
        image, identity, attribute = row["img"].strip(), row["identity"].strip(), row["attribute"].strip()
        if identities.setdefault(image, identity) != identity:
            raise ImportRefused(
                f"line {index + 2}: image {image!r} belongs to {identities[image]!r}, not {identity!r}"
            )
        if attribute == NONE_LABEL:
            continue
        key = slugify_option(attribute)
        if labels.setdefault(key, attribute) != attribute:
            raise ImportRefused(
                f"line {index + 2}: {attribute!r} and {labels[key]!r} have the same option key {key!r}"
            )
        attributes.setdefault(image, set()).add(attribute)
    records = [
        (
            image,
            {
                "external_id": image,
                "metadata": {
                    "identity": identities[image],
                    "attributes": sorted(attributes.get(image, ())),
                    "source": "visage",
                },
            },
        )
        for image in sorted(identities)
    ]
    missing = [image for image in identities if not attributes.get(image)]
    if missing:
        raise ImportRefused(f"image {missing[0]!r} is shown with no attribute")
    return records, labels


def _annotation_records(screens: list[_Screen]) -> tuple[list[tuple[int, dict[str, Any]]], set[str]]:
    slots: dict[tuple[str, str], int] = {}
    records: list[tuple[int, dict[str, Any]]] = []
    annotators: set[str] = set()
    for screen in screens:
        slot = slots[(screen.task, screen.image)] = slots.get((screen.task, screen.image), 0) + 1
        name = f"{screen.task}-r{slot}"
        annotators.add(name)
        base = {
            "item": screen.image,
            "annotator": name,
            "annotator_attributes": {"task": screen.task, "slot": slot},
        }
        records.append(
            (screen.line, {**base, "question": "attributes", "value": screen.selected, "shown": screen.shown})
        )
        if screen.boxes:
            records.append((screen.line, {**base, "question": "attribute_boxes", "value": screen.boxes}))
    return records, annotators


def released_markers_protocol() -> Protocol:
    """The ``stereotype-markers`` preset as the released file can honour it (see the module docstring)."""
    data = load_preset("stereotype-markers").to_dict()
    for question in data["questions"]:
        question.pop("require_all_shown", None)
    return protocol_from_dict(data, source="stereotype-markers (released ViSAGe data)")


def read_visual_ratings(address: Address) -> list[tuple[str, dict[str, int]]]:
    """(attribute, {region: code 1..5}) per row of sheet ``all_visual_attr`` of the ratings workbook."""
    import openpyxl  # heavy; only the importer needs it

    _name, data = file_read(address)
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise ImportRefused(f"{address_name(address)}: not a readable .xlsx workbook ({exc})") from exc
    try:
        sheet = (
            workbook["all_visual_attr"]
            if "all_visual_attr" in workbook.sheetnames
            else workbook.worksheets[0]
        )
        rows = sheet.iter_rows(values_only=True)
        header = [str(h).strip() if h is not None else "" for h in next(rows, ())]
        missing = [name for name in ("attribute", *(col for _, col in REGIONS)) if name not in header]
        if missing:
            raise ImportRefused(f"{address_name(address)}: column {missing[0]!r} is missing")
        out = []
        for number, row in enumerate(rows, start=2):
            attribute = row[header.index("attribute")]
            if attribute is None or not str(attribute).strip():
                continue
            codes: dict[str, int] = {}
            for region, column in REGIONS:
                value = row[header.index(column)]
                try:
                    if not isinstance(value, int | float | Decimal | str):
                        raise TypeError(value)
                    as_float = float(value)
                    code = int(as_float)
                except (TypeError, ValueError) as exc:
                    raise ImportRefused(
                        f"{address_name(address)} row {number}: {column} {value!r} is not a number"
                    ) from exc
                if code not in LIKERT_CODES or code != as_float:
                    raise ImportRefused(
                        f"{address_name(address)} row {number}: {column} {value!r} is not one of 1..5"
                    )
                codes[region] = code
            out.append((str(attribute).strip(), codes))
    finally:
        workbook.close()
    if not out:
        raise ImportRefused(f"{address_name(address)}: has no rated attribute")
    return out


def visual_terms(ratings: Iterable[tuple[str, dict[str, int]]]) -> set[str]:
    """Attributes every region rated Agree (4) or Strongly Agree (5) (visage's all-agree rule)."""
    return {
        attr
        for attr, codes in ratings
        if codes and all(LIKERT_CODES[c] in VISUAL_KEYS for c in codes.values())
    }


def _visualness_records(
    ratings: list[tuple[str, dict[str, int]]],
) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[int, dict[str, Any]]], list[str]]:
    """Items and likert annotations; a term listed twice becomes a second item ``<term> #2`` (kept, so
    the shares are over the file's rows, as the paper's are)."""
    seen: dict[str, int] = {}
    items: list[tuple[str, dict[str, Any]]] = []
    annotations: list[tuple[int, dict[str, Any]]] = []
    duplicates: list[str] = []
    for row, (term, codes) in enumerate(ratings, start=2):
        seen[term] = seen.get(term, 0) + 1
        external_id = term if seen[term] == 1 else f"{term} #{seen[term]}"
        if seen[term] == 2:
            duplicates.append(term)
        metadata: dict[str, Any] = {"row": row}
        if seen[term] > 1:
            metadata["duplicate_of"] = term
        items.append((f"row {row}", {"external_id": external_id, "text": term, "metadata": metadata}))
        for region, code in codes.items():
            annotations.append(
                (
                    row,
                    {
                        "item": external_id,
                        "annotator": region,
                        "question": "visual",
                        "value": LIKERT_CODES[code],
                        "annotator_attributes": {"region": region},
                    },
                )
            )
    return items, annotations, duplicates


def _number(value: str | None, where: str, column: str) -> float | None:
    text = (value or "").strip()
    if not text or text.lower() == "nan":
        return None
    try:
        number = float(text)
    except ValueError as exc:
        raise ImportRefused(f"{where}: {column} {text!r} is not a number") from exc
    if not math.isfinite(number):
        raise ImportRefused(f"{where}: {column} {text!r} is not a number")
    return number


def _count(value: str | None, where: str, column: str) -> int | None:
    number = _number(value, where, column)
    if number is None:
        return None
    if number != int(number) or number < 0:
        raise ImportRefused(f"{where}: {column} {(value or '').strip()!r} is not a count")
    return int(number)


def _stereotype_entries(
    study: Study, address: Address, visual: set[str] | None, source: str
) -> list[StereotypeEntry]:
    header, rows = _read_csv(address)
    for name in ("identity", "attribute"):
        if name not in header:
            raise ImportRefused(f"{address_name(address)}: column {name!r} is missing")
    offensive_col = next((c for c in OFFENSIVENESS_COLUMNS if c in header), None)
    known = {"identity", "attribute", "NA_stereo", "region_stereo", *OFFENSIVENESS_COLUMNS}
    entries: list[StereotypeEntry] = []
    seen: dict[tuple[str, str], int] = {}
    for index, row in enumerate(rows):
        where = f"{address_name(address)} line {index + 2}"
        identity, attribute = (row.get("identity") or "").strip(), (row.get("attribute") or "").strip()
        if not identity or not attribute:
            raise ImportRefused(f"{where}: identity and attribute must not be empty")
        if len(identity) > 255 or len(attribute) > 255:
            raise ImportRefused(f"{where}: identity and attribute must be at most 255 characters")
        if (identity, attribute) in seen:
            raise ImportRefused(
                f"{where}: repeats ({identity}, {attribute}) of line {seen[(identity, attribute)]}"
            )
        seen[(identity, attribute)] = index + 2
        entries.append(
            StereotypeEntry(
                study=study,
                source=source[:64],
                identity=identity,
                attribute=attribute,
                na_stereo=_count(row.get("NA_stereo"), where, "NA_stereo"),
                region_stereo=_count(row.get("region_stereo"), where, "region_stereo"),
                offensiveness=_number(row.get(offensive_col), where, offensive_col)
                if offensive_col
                else None,
                visual=None if visual is None else attribute in visual,
                extra={
                    k: v for k, v in row.items() if k is not None and k not in known and v not in (None, "")
                },
            )
        )
    if not entries:
        raise ImportRefused(f"{address_name(address)}: has no rows")
    return entries


@transaction.atomic
def stereotype_table_import(
    *, study: Study, address: Address, visual_attributes_address: Address | None = None
) -> int:
    """Replace ``study``'s stereotype table with the rows of a SeeGULL-style CSV; returns the row count.

    Columns: identity, attribute (required); NA_stereo, region_stereo, ``mean offensiveness_score`` (or
    ``offensiveness_score`` / ``offensiveness``) when present; the rest is kept in ``extra``. With
    ``visual_attributes_path`` each row's ``visual`` flag comes from the ratings (all regions Agree or
    Strongly Agree); without it, ``visual`` stays unknown. All or nothing.
    """
    visual = (
        visual_terms(read_visual_ratings(visual_attributes_address)) if visual_attributes_address else None
    )
    entries = _stereotype_entries(study, address, visual, address_name(address))
    StereotypeEntry.objects.filter(study=study).delete()
    StereotypeEntry.objects.bulk_create(entries, batch_size=2000)
    return len(entries)


@transaction.atomic
def visage_import(
    *,
    owner: User,
    annotations_address: Address,
    seegull_address: Address,
    visual_attributes_address: Address | None = None,
    name: str = "ViSAGe",
) -> VisageImportReport:
    """Create the ViSAGe studies from the released files (see the module docstring); all or nothing.

    Items and annotations go through the foundation's services (``items_import_records``,
    ``annotations_import_records``: every answer is checked by ``clean_answer`` and written with
    ``bulk_create``); the stereotype table is bulk-created here.
    """
    header, rows = _read_csv(annotations_address)
    missing = [column for column in ANNOTATION_COLUMNS if column not in header]
    if missing:
        raise ImportRefused(f"{address_name(annotations_address)}: column {missing[0]!r} is missing")
    if not rows:
        raise ImportRefused(f"{address_name(annotations_address)}: has no rows")
    screens = _screens(rows)
    item_records, _labels = _image_records(rows)
    annotation_records, annotators = _annotation_records(screens)
    ratings = read_visual_ratings(visual_attributes_address) if visual_attributes_address else None
    report = VisageImportReport(showings=len(rows), screens=len(screens))

    markers = study_create(
        owner=owner,
        name=f"{name}: stereotype markers",
        protocol=released_markers_protocol(),
        description=(
            f"Imported from {address_name(annotations_address)} (every row one showing; items are "
            "references, the images were not released) and " + address_name(seegull_address) + "."
        ),
        imported_from=address_name(annotations_address),
        # The released data shows each image to 1 to 33 people and visage counts every judgement on its
        # own (L = k/n over showings), so an image one person judged is complete: overlap 1.
        overlap=1,
    )
    report.studies["stereotype-markers"] = markers.pk
    report.items["stereotype-markers"] = items_import_records(study=markers, records=item_records).created
    written = annotations_import_records(study=markers, records=annotation_records)
    report.annotations["stereotype-markers"] = written.created
    report.annotators["stereotype-markers"] = len(annotators)

    visual = visual_terms(ratings) if ratings is not None else None
    entries = _stereotype_entries(markers, seegull_address, visual, address_name(seegull_address))
    StereotypeEntry.objects.bulk_create(entries, batch_size=2000)
    report.stereotype_rows = len(entries)

    if ratings is not None:
        assert visual_attributes_address is not None
        visualness = study_create(
            owner=owner,
            name=f"{name}: visual-ness of attributes",
            protocol=load_preset("visualness"),
            description=(
                f"Imported from {address_name(visual_attributes_address)}: one rater per region "
                "(asia, emea, na)."
            ),
            imported_from=address_name(visual_attributes_address),
        )
        item_rows, likert_rows, duplicates = _visualness_records(ratings)
        report.studies["visualness"] = visualness.pk
        report.items["visualness"] = items_import_records(study=visualness, records=item_rows).created
        report.annotations["visualness"] = annotations_import_records(
            study=visualness, records=likert_rows
        ).created
        report.annotators["visualness"] = len(REGIONS)
        report.duplicate_terms = duplicates
        markers.visualness_study = visualness
        markers.save(update_fields=["visualness_study", "updated_at"])
    return report
