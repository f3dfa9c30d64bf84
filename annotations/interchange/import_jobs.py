"""Item imports run by a worker: an upload kept in storage, or a bucket address, imported through the
job lifecycle of ``common.jobs`` (claim, heartbeat, takeover of a lost worker's job, cancel).

The import itself is the item import's (one transaction, the same report and refusals as within a
request). A run that ends (done, failed, cancelled) deletes the kept upload, so a cancelled or
failed import leaves no object behind; a run whose worker died keeps it, and the run that takes the
job over imports it again from the start (the lost run's transaction never committed).
docs/import-export.md, "Imports as jobs".
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from annotations.interchange.item_import import items_import, items_import_opened
from annotations.interchange.sources import bucket_address_found, stored_delete, stored_open, uploads_store
from annotations.models import ImportJob, Study
from common.errors import WorkbenchError
from common.jobs import (
    Heartbeat,
    JobStopped,
    job_claim,
    job_enqueue,
    job_finish,
    job_heartbeat,
    job_keepalive,
    jobs_resume_stale,
)
from common.uploads import ITEM_SUFFIXES

logger = logging.getLogger(__name__)

IMPORT_TASK = "annotations.tasks.run_import_job_task"


def import_job_from_uploads(
    *, study: Study, user: Any, uploads: list[UploadedFile[bytes]], paths: list[str]
) -> ImportJob:
    """Keep the uploads in storage (checked as an import within the request checks them) and queue
    their import; the kept files are deleted if the job cannot be made."""
    stored = uploads_store(uploads, paths=paths, suffixes=ITEM_SUFFIXES)
    label = (uploads[0].name or "upload") if len(uploads) == 1 else f"{len(uploads)} files"
    try:
        return _job_create(study=study, user=user, upload=stored, label=label)
    except BaseException:
        stored_delete(stored)
        raise


def import_job_from_address(*, study: Study, user: Any, address: str) -> ImportJob:
    """Queue the import of a bucket address (checked now: the bucket must be allowed, and hold
    something under the prefix)."""
    bucket_address_found(address)
    return _job_create(study=study, user=user, address=address.strip(), label=address.strip())


@transaction.atomic
def _job_create(
    *, study: Study, user: Any, upload: str = "", address: str = "", label: str = ""
) -> ImportJob:
    job = ImportJob.objects.create(
        study=study, requested_by=user, upload=upload, address=address, label=label[:255]
    )
    job_enqueue(task_name=IMPORT_TASK, job_id=job.pk)
    return job


def import_job_cancel(*, job: ImportJob) -> ImportJob:
    """A pending job ends cancelled at once (its upload deleted); a running one is asked to stop and
    ends cancelled at its next heartbeat, nothing imported. A finished job is left as it is."""
    if ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.PENDING).update(
        status=ImportJob.Status.CANCELLED, cancel_requested=True
    ):
        stored_delete(job.upload)
        job_finish(ImportJob, job.pk, status=ImportJob.Status.CANCELLED)
    else:
        ImportJob.objects.filter(pk=job.pk, status=ImportJob.Status.RUNNING).update(cancel_requested=True)
    job.refresh_from_db()
    return job


def import_job_run(*, job_id: int) -> ImportJob:
    """Claim a pending import job, or take over a stale one (compare-and-set), and import it."""
    claim = job_claim(ImportJob, job_id)
    job = ImportJob.objects.select_related("study").get(pk=job_id)
    if claim is None:
        return job
    with job_keepalive(ImportJob, job.pk, claim.token):
        return _import_job_run_claimed(job, claim.token)


def _import_job_run_claimed(job: ImportJob, token: str) -> ImportJob:
    status, error, report = ImportJob.Status.DONE, "", {}
    try:
        if job_heartbeat(ImportJob, job.pk, token):
            raise JobStopped("cancelled before it started")
        tick = Heartbeat(ImportJob, job.pk, token)
        if job.upload:
            result = items_import_opened(study=job.study, opened=stored_open(job.upload), tick=tick)
        else:
            result = items_import(study=job.study, path=job.address, tick=tick)
        report = _stored_report(result.as_dict())
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
    stored_delete(job.upload)
    return job_finish(ImportJob, job.pk, status=status, error=error, report=report, token=token)


REPORT_EXAMPLES = 1_000  # entries kept of each list of a stored report (a million item ids are not)


def _stored_report(report: dict[str, Any]) -> dict[str, Any]:
    """The report as the job keeps it: each list cut to its first entries, its full length beside."""
    kept = {key: value for key, value in report.items() if key != "item_ids"}
    for key in ("duplicates", "identical", "blank"):
        kept[f"{key}_count"] = len(kept[key])
        kept[key] = kept[key][:REPORT_EXAMPLES]
    return kept


def import_jobs_resume_stale() -> list[int]:
    """Queue again every import job whose worker was lost (``common.jobs.jobs_resume_stale``)."""
    return jobs_resume_stale(ImportJob, task_name=IMPORT_TASK)
