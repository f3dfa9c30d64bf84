"""Imports run by a worker: an upload kept in storage, or a bucket address, imported through the
job lifecycle of ``common.jobs`` (claim, heartbeat, takeover of a lost worker's job, cancel).

Every kind of import (``annotations.interchange.import_kinds``: items, Label Studio, COCO,
annotations, features, stereotype table, controls) is one: :func:`import_upload` keeps the upload in
storage and imports it within the request when it is small (``WORKBENCH_IMPORT_INLINE_MB`` and
``WORKBENCH_IMPORT_INLINE_ROWS``: :func:`uploads_inline`), else queues a job. The import itself is
the kind's service (one transaction, the same report and refusals as within a request). A run that
ends (done, failed, cancelled) deletes the kept files, so a cancelled or failed import leaves no
object behind; a run whose worker died keeps them, and the run that takes the job over imports them
again from the start (the lost run's transaction never committed). docs/import-export.md, "Imports as jobs".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from annotations.interchange.bucket_addresses import BucketAddress, bucket_address_check
from annotations.interchange.import_kinds import KINDS, ImportRun, import_summary
from annotations.interchange.item_import import ImportReport, items_import
from annotations.interchange.labelstudio.importer import labelstudio_import, labelstudio_study_protocol
from annotations.interchange.sources import (
    Address,
    Stored,
    address_name,
    bucket_address_found,
    stored_delete,
    upload_keep,
    uploads_store,
)
from annotations.models import ImportJob, Study
from annotations.services.studies import study_create
from common.errors import WorkbenchError
from common.jobs import (
    Heartbeat,
    JobStopped,
    job_enqueue,
    job_finish,
    job_heartbeat,
    job_run,
    jobs_resume_stale,
)
from common.uploads import ITEM_SUFFIXES, upload_rows

logger = logging.getLogger(__name__)

IMPORT_TASK = "annotations.tasks.run_import_job_task"


@dataclass(frozen=True)
class ImportOutcome:
    """An upload's import: finished within the request (``report``, and its ``summary``), or queued
    as ``job``."""

    job: ImportJob | None = None
    report: dict[str, Any] | None = None
    summary: str = ""


def uploads_inline(uploads: Sequence[UploadedFile[bytes]]) -> bool:
    """Whether uploads (all files of one request) are imported within the request: together within
    ``WORKBENCH_IMPORT_INLINE_MB`` and within ``WORKBENCH_IMPORT_INLINE_ROWS`` rows, counted without
    parsing and only up to the limit (``common.uploads.upload_rows``: lines, JSON objects, a zip's
    members, unpacked at most the inline size); else an import job imports them on a worker."""
    inline_bytes = settings.WORKBENCH_IMPORT_INLINE_BYTES
    if sum(upload.size or 0 for upload in uploads) > inline_bytes:
        return False
    limit = settings.WORKBENCH_IMPORT_INLINE_ROWS
    rows = 0
    for upload in uploads:
        rows += upload_rows(upload, limit=limit - rows, unpacked_limit=inline_bytes)
        if rows > limit:
            return False
    return True


def import_upload(
    *,
    study: Study,
    user: Any,
    kind: str,
    upload: UploadedFile[bytes],
    files: dict[str, UploadedFile[bytes] | None] | None = None,
    options: dict[str, Any] | None = None,
) -> ImportOutcome:
    """Keep an upload of an import of ``kind`` (and its other ``files`` by role: a Label Studio
    labeling config, stereotype ratings) in storage, checked as before (type, size); import it now
    when all of it is within the inline limits (:func:`uploads_inline`), else queue an import job.
    Within the request the kept files are deleted once the import ends; a refusal raises as it did."""
    spec = KINDS[kind]
    uploads = {role: given for role, given in (files or {}).items() if given is not None}
    inline = uploads_inline([upload, *uploads.values()])  # counted before storage takes the files
    kept: dict[str, Stored] = {}
    try:
        main = upload_keep(upload, suffixes=spec.suffixes)
        kept[""] = main
        for role, given in uploads.items():
            kept[role] = upload_keep(given, suffixes=spec.files[role], stem=role)
        if not inline:
            job = _job_create(
                study=study,
                user=user,
                kind=kind,
                upload=main.name,
                options={**(options or {}), "files": {r: s.name for r, s in kept.items() if r}},
                label=upload.name or "upload",
            )
            return ImportOutcome(job=job)
    except BaseException:
        _stored_delete_all(kept)
        raise
    try:
        others: dict[str, Address] = {role: stored for role, stored in kept.items() if role}
        report = spec.run(ImportRun(study=study, address=main, files=others, options=dict(options or {})))
    finally:
        _stored_delete_all(kept)
    return ImportOutcome(report=report, summary=import_summary(kind, report))


def labelstudio_new_study(
    *, user: Any, name: str, upload: UploadedFile[bytes], config: UploadedFile[bytes] | None
) -> ImportOutcome:
    """A new study from a Label Studio export (and its labeling config). Within the inline limits
    (:func:`uploads_inline`) it is imported in the request: the study and its tasks together,
    nothing left on a refusal. A larger upload is kept in storage, the study is made at once from the
    labeling config (a refused config refuses the upload, nothing made) and a job imports the tasks
    into it; a refusal of the tasks then leaves the new study empty, with the job's message on its
    Items tab (docs/import-export.md, "Label Studio")."""
    kind = ImportJob.Kind.LABELSTUDIO
    spec = KINDS[kind]
    inline = uploads_inline([given for given in (upload, config) if given is not None])
    kept: dict[str, Stored] = {}
    try:
        main = kept[""] = upload_keep(upload, suffixes=spec.suffixes)
        if config is not None:
            kept["config"] = upload_keep(config, suffixes=spec.files["config"], stem="config")
        name = name or PurePosixPath(upload.name or "labelstudio").stem
        if not inline:
            # The config is read (and refused) before anything is written; the study and its job are
            # then made together.
            protocol = labelstudio_study_protocol(address=main, config_address=kept.get("config"), name=name)
            with transaction.atomic():
                study = study_create(
                    owner=user,
                    name=name,
                    protocol=protocol,
                    imported_from=upload.name or address_name(main),
                    status=Study.Status.DRAFT,  # launched by its researcher, as an inline import's
                )
                job = _job_create(
                    study=study,
                    user=user,
                    kind=kind,
                    upload=main.name,
                    options={"study_from_config": True, "files": {r: s.name for r, s in kept.items() if r}},
                    label=upload.name or "upload",
                )
            return ImportOutcome(job=job)
    except BaseException:
        _stored_delete_all(kept)
        raise
    try:
        report = labelstudio_import(
            address=main, owner=user, name=name, config_address=kept.get("config")
        ).as_dict()
    finally:
        _stored_delete_all(kept)
    return ImportOutcome(report=report, summary=import_summary(kind, report))


def _stored_delete_all(kept: dict[str, Stored]) -> None:
    for stored in kept.values():
        stored_delete(stored.name)


def items_import_uploads(
    *, study: Study, uploads: list[UploadedFile[bytes]], paths: list[str], images: bool = False
) -> ImportReport:
    """Items from uploads within the request: kept in storage as a job would keep them (checked the
    same way; ``images``: the form's images field, read as a folder), imported from there, and
    deleted once the import ends."""
    stored = uploads_store(uploads, paths=paths, suffixes=ITEM_SUFFIXES, images=images)
    try:
        return items_import(study=study, address=Stored(stored))
    finally:
        stored_delete(stored)


def import_job_from_uploads(
    *, study: Study, user: Any, uploads: list[UploadedFile[bytes]], paths: list[str], images: bool = False
) -> ImportJob:
    """Keep the uploads in storage (checked as an import within the request checks them) and queue
    their import; the kept files are deleted if the job cannot be made."""
    stored = uploads_store(uploads, paths=paths, suffixes=ITEM_SUFFIXES, images=images)
    label = (uploads[0].name or "upload") if len(uploads) == 1 else f"{len(uploads)} files"
    try:
        return _job_create(study=study, user=user, upload=stored, label=label)
    except BaseException:
        stored_delete(stored)
        raise


def import_job_from_address(*, study: Study, user: Any, address: str) -> ImportJob:
    """Queue the import of a bucket address (checked now: it must lie where this study and account
    may read, and hold something; the job checks it again when it runs)."""
    checked = bucket_address_found(bucket_address_check(address, study_id=study.pk, user_id=user.pk))
    return _job_create(study=study, user=user, address=checked.url, label=checked.url)


@transaction.atomic
def _job_create(
    *,
    study: Study,
    user: Any,
    kind: str = ImportJob.Kind.ITEMS,
    upload: str = "",
    address: str = "",
    label: str = "",
    options: dict[str, Any] | None = None,
) -> ImportJob:
    job = ImportJob.objects.create(
        study=study,
        requested_by=user,
        kind=kind,
        upload=upload,
        address=address,
        label=label[:255],
        options=options or {},
    )
    job_enqueue(task_name=IMPORT_TASK, job_id=job.pk)
    return job


def import_job_cancel(*, job: ImportJob) -> ImportJob:
    """A pending job ends cancelled at once (its upload deleted); a running one is asked to stop and
    ends cancelled at its next heartbeat, nothing imported. A finished job is left as it is."""
    if ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.PENDING).update(
        status=ImportJob.Status.CANCELLED, cancel_requested=True
    ):
        _kept_delete(job)
        job_finish(ImportJob, job.pk, status=ImportJob.Status.CANCELLED)
    else:
        ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.RUNNING).update(cancel_requested=True)
    job.refresh_from_db()
    return job


def import_job_run(*, job_id: int) -> ImportJob:
    """Claim a pending import job, or take over a stale one (compare-and-set), and import it."""
    return job_run(ImportJob, job_id, _import_job_run_claimed)


def _import_job_run_claimed(job: ImportJob, token: str) -> ImportJob:
    status, error, report = ImportJob.Status.DONE, "", {}

    def before_commit() -> None:  # the last check for a cancel, inside the import's transaction
        if job_heartbeat(ImportJob, job.pk, token):
            raise JobStopped("cancelled")

    try:
        if job_heartbeat(ImportJob, job.pk, token):
            raise JobStopped("cancelled before it started")
        files: dict[str, Address] = {
            role: Stored(name) for role, name in job.options.get("files", {}).items()
        }
        report = KINDS[job.kind].run(
            ImportRun(
                study=job.study,
                address=Stored(job.upload) if job.upload else job_address(job),
                files=files,
                options={key: value for key, value in job.options.items() if key != "files"},
                tick=Heartbeat(ImportJob, job.pk, token),
                before_commit=before_commit,
            )
        )
    except JobStopped:
        if ImportJob.objects.filter(pk=job.pk, claim_token=token).exists():
            status = ImportJob.Status.CANCELLED
        else:  # taken over by another run: that run owns the job and its upload now
            return ImportJob.objects.get(pk=job.pk)
    except WorkbenchError as exc:
        status, error = ImportJob.Status.FAILED, exc.message
    except Exception as exc:  # an error of the store or the database: the job says so, not the broker
        logger.exception("import job %s failed", job.pk)
        status, error = ImportJob.Status.FAILED, f"the import stopped: {type(exc).__name__}"
    _kept_delete(job)
    return job_finish(ImportJob, job.pk, status=status, error=error, report=report, token=token)


def job_address(job: ImportJob) -> BucketAddress:
    """A job's bucket address, checked again for its study and the account that asked: entries the
    deployment withdrew since the job was queued are not read."""
    return bucket_address_check(job.address, study_id=job.study_id, user_id=job.requested_by_id)


def _kept_delete(job: ImportJob) -> None:
    """Delete what the job kept in storage: its upload and its other files."""
    for name in (job.upload, *job.options.get("files", {}).values()):
        if name:
            stored_delete(name)


def import_job_summary(job: ImportJob) -> str:
    """The sentence a page shows for a finished job's report (as for an import within a request)."""
    return import_summary(job.kind, job.report) if job.status == ImportJob.Status.DONE else ""


def import_jobs_resume_stale() -> list[int]:
    """Queue again every import job whose worker was lost (``common.jobs.jobs_resume_stale``)."""
    return jobs_resume_stale(ImportJob, task_name=IMPORT_TASK)
