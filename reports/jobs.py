"""Making a report: the options checked, the document built (``reports.gather``) and rendered
(``reports.formats``), in the request (small formats of a small study) or as a :class:`ReportJob`
run by a worker with the job lifecycle of ``common.jobs`` (claim, heartbeat, takeover, re-run), its
file stored through ``annotations.services.stored_files`` (docs/reports.md, "Formats, downloads and
the API").
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from annotations import access
from annotations.models import Annotation, Item, Study, User
from annotations.services.stored_files import file_bytes_store
from common.checked_input import id_from_text
from common.errors import NotAllowed, NotFoundError, ValidationFailed
from common.jobs import job_enqueue, job_finish, job_heartbeat, job_run, jobs_resume_stale
from reports.formats import FORMATS, Rendered, renderer
from reports.gather import report_build
from reports.models import ReportJob
from reports.supplement import SUFFIX, supplement_name, supplement_zip

REPORT_TASK = "reports.tasks.run_report_job_task"
CORRECTIONS = tuple(ReportJob.Correction.values)
# Formats made in the request for a small study; the others always on a worker.
INLINE_FORMATS = ("md", "html", "heds")
MAX_COMPARE = 5
# The formats whose report goes with a supplement (the datasheet is no report body).
SUPPLEMENTED_FORMATS = ("md", "html", "tex", "pdf")


@dataclass(frozen=True)
class ReportOptions:
    """What a report is asked with, checked: the format, the source (None: the protocol's), the
    multiple-comparison correction and the studies compared with the study, in order."""

    fmt: str
    source: str | None
    correction: str
    compare: list[Study]


def report_study_get(*, user: User, id: int) -> Study:
    """A study whose report ``user`` may make: one of the study's researchers. Anyone else gets
    NotFoundError, annotators enrolled in it too (a report is the researchers' data)."""
    try:
        return access.study_get_for_user(user=user, id=id, researcher=True)
    except NotAllowed as exc:
        raise NotFoundError(f"study {id} does not exist or is not yours") from exc


def report_options_check(
    *,
    user: User,
    study: Study,
    fmt: str,
    source: str | None = None,
    correction: str | None = None,
    compare: Sequence[Any] = (),
) -> ReportOptions:
    """The options, or ValidationFailed saying what is wrong: an unknown format or correction, or a
    compare id that is not a whole number, is the study itself or names a study ``user`` may not see as
    a researcher (told apart from one that does not exist by nothing)."""
    if fmt not in FORMATS:
        raise ValidationFailed(f"unknown report format {fmt!r}: choose one of {', '.join(FORMATS)}")
    correction = correction or ReportJob.Correction.HOLM
    if correction not in CORRECTIONS:
        raise ValidationFailed(f"unknown correction {correction!r}: choose holm or bh")
    source = (source or "").strip() or None
    if source is not None and len(source) > 200:
        raise ValidationFailed("source: at most 200 characters")
    if len(compare) > MAX_COMPARE:
        raise ValidationFailed(f"compare: at most {MAX_COMPARE} studies")
    ids: list[int] = []
    for value in compare:
        # ASCII digits only, at most a database id (``str.isdigit`` takes '²' and Arabic-Indic digits,
        # and ``int`` of 4,301 digits raises): anything else is not a study id.
        pk = None if isinstance(value, bool) or not isinstance(value, int | str) else id_from_text(value)
        if pk is None or pk < 1:
            raise ValidationFailed(f"compare: {str(value)[:40]!r} is not a study id")
        if pk == study.pk:
            raise ValidationFailed("compare: a study is not compared with itself")
        if pk in ids:
            raise ValidationFailed(f"compare: study {pk} is named twice")
        ids.append(pk)
    try:
        others = access.studies_get_for_user(user=user, ids=ids, researcher=True) if ids else []
    except (NotFoundError, NotAllowed) as exc:
        raise ValidationFailed(f"compare: {exc.message}") from exc
    return ReportOptions(fmt=fmt, source=source, correction=correction, compare=others)


def report_is_large(study: Study) -> bool:
    """Whether every format of this study's report is made on a worker: more items and annotations
    than ``WORKBENCH_EXPORT_INLINE_LIMIT`` (the limit a study export streams under)."""
    size = Item.objects.filter(study=study).count() + Annotation.objects.filter(study=study).count()
    return size > settings.WORKBENCH_EXPORT_INLINE_LIMIT


def report_inline_allowed(study: Study, fmt: str) -> bool:
    return fmt in INLINE_FORMATS and not report_is_large(study)


def report_render(study: Study, options: ReportOptions) -> Rendered:
    """Build the study's report document and render it in the asked format (ValidationFailed when
    this build has no renderer for it), with its supplement (every findings table as CSV, in a zip:
    ``reports.supplement``) for every format but the datasheet."""
    try:
        render = renderer(options.fmt)
    except ModuleNotFoundError as exc:
        if exc.name != FORMATS[options.fmt]:
            raise
        raise ValidationFailed(f"the {options.fmt} format is not available in this build") from exc
    document = report_build(
        study, compare=options.compare, source=options.source, correction=options.correction
    )
    rendered = render(document)
    if options.fmt in SUPPLEMENTED_FORMATS:
        rendered.supplement = supplement_zip(document)
    return rendered


def report_bundle(rendered: Rendered, stem: str) -> tuple[str, str, bytes]:
    """What a download holds: the main file alone (its name, type and bytes), or, when it refers to
    attachments (figures), a zip named ``<stem>.zip`` of the main file and them under their names."""
    if not rendered.attachments:
        return rendered.filename, rendered.content_type, rendered.body
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(rendered.filename, rendered.body)
        for name, data in sorted(rendered.attachments.items()):
            archive.writestr(name, data)
    return f"{stem}.zip", "application/zip", buffer.getvalue()


@transaction.atomic
def report_job_create(*, study: Study, user: User, options: ReportOptions) -> ReportJob:
    """Queue a report job; its task runs after this transaction commits."""
    job = ReportJob.objects.create(
        study=study,
        requested_by=user,
        format=options.fmt,
        source=options.source or "",
        correction=options.correction,
        compare=[other.pk for other in options.compare],
    )
    job_enqueue(task_name=REPORT_TASK, job_id=job.pk)
    return job


def report_jobs_for_user(*, user: User, study: Study) -> QuerySet[ReportJob]:
    """The user's own report jobs of a study, newest first (another researcher's report may compare
    studies this user may not see)."""
    return ReportJob.objects.filter(study=study, requested_by=user)


def report_job_get_for_user(*, user: User, study: Study, id: int) -> ReportJob:
    job = report_jobs_for_user(user=user, study=study).filter(pk=id).first()
    if job is None:
        raise NotFoundError(f"report {id} does not exist")
    return job


def report_job_file_name(job: ReportJob, filename: str) -> str:
    """The storage name of a job's file: one per job, the same on every run of it."""
    suffix = filename.rsplit(".", 1)[-1]
    return f"{ReportJob.file.field.upload_to}study-{job.study_id}-report-{job.pk}.{suffix}"


def report_job_supplement_name(job: ReportJob) -> str:
    """The storage name of a job's supplement: beside its file, the same on every run of it."""
    return f"{ReportJob.supplement.field.upload_to}study-{job.study_id}-report-{job.pk}{SUFFIX}"


def report_supplement_filename(job: ReportJob) -> str:
    """The name a job's supplement downloads with: the report's name, ``-supplement.zip`` for its suffix
    (``report-study-3.pdf`` -> ``report-study-3-supplement.zip``)."""
    return supplement_name(job.filename or f"report-study-{job.study_id}")


def report_job_run(*, job_id: int) -> ReportJob:
    """Claim a pending report job, or take over a stale one (compare-and-set), and make its file.

    The report is built anew on every run (nothing of a lost run is kept but its stored file, which
    this run replaces under the same name). A job whose cancellation was asked for before the run ends
    cancelled; a run that was taken over changes nothing. The studies compared are read again as the
    requester sees them now: one they may no longer see fails the job with the reason."""
    return job_run(ReportJob, job_id, _report_job_run_claimed, related=("study", "requested_by"))


def _report_job_run_claimed(job: ReportJob, token: str) -> ReportJob:
    """The run of a claimed report job (see ``report_job_run``)."""
    if job_heartbeat(ReportJob, job.pk, token):
        return job_finish(ReportJob, job.pk, status=ReportJob.Status.CANCELLED, token=token)
    try:
        options = report_options_check(
            user=job.requested_by,
            study=job.study,
            fmt=job.format,
            source=job.source,
            correction=job.correction,
            compare=job.compare,
        )
        rendered = report_render(job.study, options)
    except ValidationFailed as exc:
        return job_finish(ReportJob, job.pk, status=ReportJob.Status.FAILED, error=exc.message, token=token)
    if job_heartbeat(ReportJob, job.pk, token):
        return job_finish(ReportJob, job.pk, status=ReportJob.Status.CANCELLED, token=token)
    stem = rendered.filename.rsplit(".", 1)[0] if "." in rendered.filename else rendered.filename
    if stem == "report":  # LaTeX's main file is report.tex: the zip names the study
        stem = f"report-study-{job.study_id}"
    filename, content_type, data = report_bundle(rendered, stem)
    stored = file_bytes_store(
        storage=ReportJob.file.field.storage, name=report_job_file_name(job, filename), data=data
    )
    supplement = ""
    if rendered.supplement is not None:
        supplement = file_bytes_store(
            storage=ReportJob.supplement.field.storage,
            name=report_job_supplement_name(job),
            data=rendered.supplement,
        )
    return job_finish(
        ReportJob,
        job.pk,
        status=ReportJob.Status.DONE,
        token=token,
        file=stored,
        filename=filename,
        content_type=content_type,
        supplement=supplement,
    )


def report_jobs_resume_stale() -> list[int]:
    """Queue again every report job whose worker was lost (``common.jobs.jobs_resume_stale``)."""
    return jobs_resume_stale(ReportJob, task_name=REPORT_TASK)
