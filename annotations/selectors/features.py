"""Reading what machines computed about a study's items (``ItemFeature``): image embeddings and captions.

A *feature source* is one machine annotator (a labeller that stored features while it ran, or one named
in an imported file), written ``name`` or ``name@version`` like a label source. Findings read one source
per kind (``feature_source_parse``: the one asked for, else the only one, else the first by name with a
note); the export writes a study's features as the JSONL the import reads (docs/import-export.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from django.db.models import Count, Max

from annotations.models import Annotator, ItemFeature, Study
from common.errors import ValidationFailed

EMBEDDING = ItemFeature.Kind.EMBEDDING.value
CAPTIONS = ItemFeature.Kind.CAPTIONS.value
KINDS = (EMBEDDING, CAPTIONS)


@dataclass(frozen=True)
class FeatureSource:
    """The machine annotator whose features of ``kind`` a metric reads; ``note`` says why it was chosen."""

    name: str
    annotator_id: int
    kind: str
    note: str | None = None


def _label(name: str, version: str) -> str:
    return f"{name}@{version}" if version else name


def feature_sources(study: Study, kind: str) -> list[str]:
    """The machine annotators that stored features of ``kind`` for this study's items, ``name[@version]``."""
    rows = (
        Annotator.objects.filter(
            kind=Annotator.Kind.MACHINE,
            id__in=ItemFeature.objects.filter(item__study=study, kind=kind).values("annotator_id"),
        )
        .order_by("name", "version")
        .values_list("name", "version")
    )
    return [_label(name, version) for name, version in rows]


def feature_source_parse(study: Study, kind: str, name: str | None) -> FeatureSource | None:
    """The source of ``kind`` named ``name`` (``name`` or ``name@version``); without a name the only one,
    or the first by name when there are several (with a note naming the others); None when the study
    has no features of this kind. An unknown name is refused with the known ones."""
    if kind not in KINDS:
        raise ValidationFailed(f"unknown feature kind {kind!r}; use {' or '.join(KINDS)}")
    rows = list(
        Annotator.objects.filter(
            kind=Annotator.Kind.MACHINE,
            id__in=ItemFeature.objects.filter(item__study=study, kind=kind).values("annotator_id"),
        )
        .order_by("name", "version")
        .values_list("id", "name", "version")
    )
    known = [_label(n, v) for _i, n, v in rows]
    field = "embeddings" if kind == EMBEDDING else "captions"
    if not name:
        if not rows:
            return None
        pk, first, version = rows[0]
        note = None
        if len(rows) > 1:
            note = (
                f"{field} from {_label(first, version)} (the first of {', '.join(known)}; "
                f"choose another with {field}=NAME)"
            )
        return FeatureSource(_label(first, version), pk, kind, note)
    wanted, _, version = name.strip().partition("@")
    matches = [(pk, n, v) for pk, n, v in rows if n == wanted and (not version or v == version)]
    if len(matches) != 1:
        problem = "has several versions here; name one as name@version" if matches else "stored none here"
        raise ValidationFailed(
            f"{field} source {name!r} {problem} (sources of {field}: {', '.join(known) or 'none yet'})",
            {field: problem},
        )
    pk, found, found_version = matches[0]
    return FeatureSource(_label(found, found_version), pk, kind)


def _as_matrix(feature: ItemFeature) -> np.ndarray:
    shape = tuple(feature.data.get("shape", (1, -1)))
    return np.frombuffer(bytes(feature.vector or b""), dtype="<f4").reshape(shape)


def embeddings_by_item(study: Study, annotator_id: int) -> dict[int, np.ndarray]:
    """Stored embeddings of one annotator by item id: a float32 matrix, one row per image of the item."""
    return {
        f.item_id: _as_matrix(f)
        for f in ItemFeature.objects.filter(item__study=study, annotator_id=annotator_id, kind=EMBEDDING)
    }


def captions_by_item(study: Study, annotator_id: int) -> dict[int, list[str]]:
    """Stored captions of one annotator by item id (every caption of every image of the item)."""
    rows = ItemFeature.objects.filter(item__study=study, annotator_id=annotator_id, kind=CAPTIONS)
    return {f.item_id: [str(c) for c in f.data.get("captions", [])] for f in rows}


def features_fingerprint(study: Study) -> str:
    """Changes whenever a feature of the study is stored or replaced (the import replaces rows, so a
    changed vector is a new id): for the findings cache."""
    agg = ItemFeature.objects.filter(item__study=study).aggregate(n=Count("id"), last=Max("id"))
    return f"{agg['n']}:{agg['last']}"


def _short(value: float) -> float:
    """A float32 value written with 9 significant digits: exactly the same float32 when read back."""
    return float(f"{value:.9g}")


def features_export_lines(
    study: Study, *, labeller: str | None = None, kind: str | None = None
) -> Iterator[str]:
    """The study's features as JSONL lines (each ends with a newline), the format the import reads:
    ``{"item", "labeller", "version", "embedding": [...]}`` (one list of floats per image: a flat list
    for a one-image item, a list of lists otherwise) or ``{..., "captions": [...]}``. ``labeller`` narrows
    to ``name`` or ``name@version``; ``kind`` to ``embedding`` or ``captions``."""
    rows = ItemFeature.objects.filter(item__study=study).select_related("item", "annotator")
    if kind:
        if kind not in KINDS:
            raise ValidationFailed(
                f"unknown feature kind {kind!r}; use {' or '.join(KINDS)}", {"kind": "unknown"}
            )
        rows = rows.filter(kind=kind)
    if labeller:
        name, _, version = labeller.strip().partition("@")
        rows = rows.filter(annotator__name=name)
        if version:
            rows = rows.filter(annotator__version=version)
    for feature in rows.order_by("item__external_id", "annotator__name", "annotator__version", "kind"):
        record: dict[str, object] = {
            "item": feature.item.external_id,
            "labeller": feature.annotator.name,
            "version": feature.annotator.version,
        }
        if feature.kind == EMBEDDING:
            matrix = _as_matrix(feature)
            values = [[_short(float(v)) for v in row] for row in matrix]
            record["embedding"] = values[0] if len(values) == 1 else values
        else:
            record["captions"] = [str(c) for c in feature.data.get("captions", [])]
        yield json.dumps(record, ensure_ascii=False) + "\n"
