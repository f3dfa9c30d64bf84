"""A finished report job's file as the Report tab and the API answer it (composition point for
``reports.views`` and ``reports.api``)."""

from __future__ import annotations

from django.http.response import HttpResponseBase

from annotations.downloads import SANDBOX_CSP, stored_file_response
from common.errors import NotFoundError
from reports.jobs import report_supplement_filename
from reports.models import ReportJob


def report_file_response(job: ReportJob) -> HttpResponseBase:
    """The file of a finished job (the caller checked it is the user's and done): an attachment,
    sandboxed where the app streams it (an HTML report must not run in the app's origin), a presigned
    redirect on S3."""
    name = job.file.name
    if not name:  # the callers answer "not ready" first; a job row without its file is not found
        raise NotFoundError(f"report {job.pk} has no file")
    return stored_file_response(
        job.file.storage,
        name,
        content_type=job.content_type or "application/octet-stream",
        filename=job.filename or name.rsplit("/", 1)[-1],
        attachment=True,
        headers={"Content-Security-Policy": SANDBOX_CSP},
    )


def report_supplement_response(job: ReportJob) -> HttpResponseBase:
    """The supplement of a finished job (the caller checked it is the user's and done): the zip of every
    findings table as CSV, an attachment (a presigned redirect on S3); NotFoundError for a job without
    one (a datasheet, or a job made before supplements)."""
    name = job.supplement.name
    if not name:
        raise NotFoundError(f"report {job.pk} has no supplement")
    return stored_file_response(
        job.supplement.storage,
        name,
        content_type="application/zip",
        filename=report_supplement_filename(job),
        attachment=True,
        headers={"Content-Security-Policy": SANDBOX_CSP},
    )
