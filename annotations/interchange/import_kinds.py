"""Which import an upload or an import job runs: each kind's service, the files it takes, and the
report it shows (docs/import-export.md, "Imports as jobs").

Each kind reads what it imports through ``annotations.interchange.sources`` (an upload kept in
storage, a bucket address or, from the command line, a local file), so an import gives the same
report and the same refusals within the request and on a worker. ``run`` answers the report as the
job keeps it (a JSON object); ``summary`` is the sentence a page shows for it, the same whether the
import finished in the request or in a job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.template.defaultfilters import pluralize

from annotations.interchange.annotation_import import annotations_import
from annotations.interchange.coco_import import coco_import
from annotations.interchange.control_import import controls_import
from annotations.interchange.feature_import import features_import
from annotations.interchange.item_import import ImportReport, items_import
from annotations.interchange.labelstudio.importer import labelstudio_import
from annotations.interchange.sources import Address
from annotations.interchange.visage_import import stereotype_table_import
from annotations.models import ImportJob, Study
from common.uploads import (
    ANNOTATION_SUFFIXES,
    COCO_SUFFIXES,
    CONFIG_SUFFIXES,
    CONTROL_SUFFIXES,
    ITEM_SUFFIXES,
    LABELSTUDIO_SUFFIXES,
)

REPORT_EXAMPLES = 1_000  # entries kept of each list of a stored report (a million item ids are not)
ID_EXAMPLES = 100  # new ids an import's answer (page, API, a job's report) lists: the first ones


def _nothing() -> None:
    return None


@dataclass
class ImportRun:
    """What one run of an import reads: the study, the main file, the other files by role (a
    labeling config, visual-attribute ratings), the options; ``tick`` is a job's heartbeat (raises
    ``common.jobs.JobStopped`` once the job is cancelled), ``before_commit`` its last check for a
    cancel, inside the import's transaction (raising rolls the whole import back)."""

    study: Study
    address: Address
    files: Mapping[str, Address] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    tick: Callable[[], None] = _nothing
    before_commit: Callable[[], None] = _nothing


@dataclass(frozen=True)
class ImportKind:
    key: str
    suffixes: tuple[str, ...]  # of the main file (an upload of another type is refused before it is kept)
    run: Callable[[ImportRun], dict[str, Any]]
    summary: Callable[[dict[str, Any]], str]
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)  # other files: role -> suffixes


def _atomic(run: ImportRun, write: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """An import that stores no file, in one transaction that a cancel rolls back."""
    with transaction.atomic():
        report = write()
        run.before_commit()
    return report


def ids_bounded(report: dict[str, Any], key: str = "item_ids") -> dict[str, Any]:
    """``report`` with its list of new ids ``key`` cut to the first :data:`ID_EXAMPLES`, with
    ``<key>_count`` (how many there are) and ``<key>_truncated`` (whether some were left out): no
    answer lists every id of a million-row import."""
    ids = list(report.get(key) or [])
    return {
        **report,
        key: ids[:ID_EXAMPLES],
        f"{key}_count": len(ids),
        f"{key}_truncated": len(ids) > ID_EXAMPLES,
    }


def items_report(report: ImportReport) -> dict[str, Any]:
    """An item import's report as every answer gives it (the API, the upload script, a job's stored
    report): the counts, at most :data:`REPORT_EXAMPLES` entries of each list (with ``<list>_count``)
    and at most :data:`ID_EXAMPLES` new item ids (:func:`ids_bounded`)."""
    kept = ids_bounded(report.as_dict())
    for key in ("duplicates", "identical", "blank"):
        kept[f"{key}_count"] = len(kept[key])
        kept[key] = kept[key][:REPORT_EXAMPLES]
    return kept


def _items(run: ImportRun) -> dict[str, Any]:
    return items_report(items_import(study=run.study, address=run.address, tick=run.tick))


def _items_summary(report: dict[str, Any]) -> str:
    created = report["created"]
    text = f"{created} item{pluralize(created)} imported ({report['references']} without image files)."
    duplicates = report.get("duplicates_count", len(report["duplicates"]))
    if duplicates:
        text += f" Skipped {duplicates} duplicates: " + ", ".join(
            f"{entry['external_id']} ({entry['reason']})" for entry in report["duplicates"][:10]
        )
    return text + "".join(f" Warning: {warning}." for warning in report.get("warnings", []))


def _labelstudio(run: ImportRun) -> dict[str, Any]:
    return labelstudio_import(
        address=run.address,
        study=run.study,
        config_address=run.files.get("config"),
        study_from_config=bool(run.options.get("study_from_config")),
        tick=run.tick,
        before_commit=run.before_commit,
    ).as_dict()


def _labelstudio_summary(report: dict[str, Any]) -> str:
    items, answers, notes = report["items"], report["answers"], report["notes"]
    return (
        f"Imported {report['tasks']} Label Studio tasks ({items.get('created', 0)} new items): "
        f"{answers.get('created', 0)} answers new, {answers.get('updated', 0)} changed, "
        f"{answers.get('skips', 0)} skips." + (f" {' '.join(notes)}." if notes else "")
    )


def _coco(run: ImportRun) -> dict[str, Any]:
    options = run.options
    return _atomic(
        run,
        lambda: coco_import(
            study=run.study,
            address=run.address,
            question=str(options.get("question") or ""),
            annotator=options.get("annotator") or None,
            kind=options.get("kind") or None,
        ),
    )


def _coco_summary(report: dict[str, Any]) -> str:
    return (
        f"Imported {report['boxes']} COCO boxes: {report['created']} answers new, "
        f"{report['updated']} changed, {report['unchanged']} unchanged."
    )


def _annotations(run: ImportRun) -> dict[str, Any]:
    return _atomic(run, lambda: annotations_import(study=run.study, address=run.address).as_dict())


def _annotations_summary(report: dict[str, Any]) -> str:
    return (
        f"Imported annotations: {report['created']} new, {report['updated']} changed, "
        f"{report['unchanged']} unchanged."
    )


def _features(run: ImportRun) -> dict[str, Any]:
    return _atomic(run, lambda: features_import(study=run.study, address=run.address).as_dict())


def _features_summary(report: dict[str, Any]) -> str:
    return (
        f"Imported {report['embeddings']} embeddings and {report['captions']} caption sets "
        f"({report['replaced']} replaced)."
    )


def _stereotypes(run: ImportRun) -> dict[str, Any]:
    ratings = run.files.get("ratings")

    def write() -> dict[str, Any]:
        rows = stereotype_table_import(
            study=run.study, address=run.address, visual_attributes_address=ratings
        )
        return {"rows": rows, "ratings": ratings is not None}

    return _atomic(run, write)


def _stereotypes_summary(report: dict[str, Any]) -> str:
    rows = report["rows"]
    flags = (
        " with visual flags from the ratings" if report["ratings"] else " (visual flags unknown: no ratings)"
    )
    return f"The stereotype table now holds {rows} row{pluralize(rows)}{flags}."


def _controls(run: ImportRun) -> dict[str, Any]:
    return _atomic(run, lambda: ids_bounded(controls_import(study=run.study, address=run.address).as_dict()))


def _controls_summary(report: dict[str, Any]) -> str:
    return f"Marked {report['marked']} new control items, replaced the answers of {report['replaced']}."


KINDS: dict[str, ImportKind] = {
    kind.key: kind
    for kind in (
        ImportKind(ImportJob.Kind.ITEMS, ITEM_SUFFIXES, _items, _items_summary),
        ImportKind(
            ImportJob.Kind.LABELSTUDIO,
            LABELSTUDIO_SUFFIXES,
            _labelstudio,
            _labelstudio_summary,
            files={"config": CONFIG_SUFFIXES},
        ),
        ImportKind(ImportJob.Kind.COCO, COCO_SUFFIXES, _coco, _coco_summary),
        ImportKind(ImportJob.Kind.ANNOTATIONS, ANNOTATION_SUFFIXES, _annotations, _annotations_summary),
        ImportKind(ImportJob.Kind.FEATURES, ANNOTATION_SUFFIXES, _features, _features_summary),
        ImportKind(
            ImportJob.Kind.STEREOTYPES,
            (".csv",),
            _stereotypes,
            _stereotypes_summary,
            files={"ratings": (".xlsx",)},
        ),
        ImportKind(ImportJob.Kind.CONTROLS, CONTROL_SUFFIXES, _controls, _controls_summary),
    )
}


def import_summary(kind: str, report: dict[str, Any]) -> str:
    """The sentence a page shows for a finished import of ``kind`` ("" without a report)."""
    return KINDS[kind].summary(report) if report else ""
