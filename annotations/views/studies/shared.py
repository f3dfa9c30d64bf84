"""What the study's page modules share (not a page): the way back to a tab of the study page and an
import job as the items page shows and polls it."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from annotations.interchange.import_jobs import import_job_summary
from annotations.models import ImportJob


def tab_url(pk: int, tab: str) -> str:
    """The URL of one tab of the study page (its ``#fragment``)."""
    return reverse("study-detail", kwargs={"pk": pk}) + f"#{tab}"


def to_tab(pk: int, tab: str) -> HttpResponse:
    """Back to one tab of the study page (its ``#fragment``)."""
    return redirect(tab_url(pk, tab))


def import_job_json(job: ImportJob) -> dict[str, Any]:
    return {
        "id": job.pk,
        "kind": job.kind,
        "kind_label": job.get_kind_display(),
        "label": job.label,
        "summary": import_job_summary(job),
        "status": job.status,
        "error": job.error,
        "report": job.report,
        "worker_note": job.worker_note,
        "status_url": reverse("study-import-job", args=[job.study_id, job.pk]),
        "cancel_url": reverse("study-import-job-cancel", args=[job.study_id, job.pk]),
    }
