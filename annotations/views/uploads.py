"""The routine every page shares that imports one uploaded ``file`` into a study (not a page).

A page builds its form from ``request.POST`` and ``request.FILES`` and hands it here with its own words
and the way back; the checks of the file itself (type, size, content) are the import's
(``annotations.interchange.import_jobs.import_upload``), which runs it within the request or queues a job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from annotations import access
from annotations.access import request_user
from annotations.interchange.import_jobs import import_upload
from annotations.models import Study
from annotations.views.pages import form_problems, import_outcome_message
from common.errors import WorkbenchError


@dataclass(frozen=True)
class UploadImport:
    """What a page imports from its form's ``file``: the import's kind, its options, its other files by
    role (a Label Studio labeling config...)."""

    kind: str
    options: dict[str, Any] | None = None
    files: dict[str, UploadedFile[bytes] | None] | None = None


def upload_import_page(
    request: HttpRequest,
    study: Study,
    form: forms.Form,
    upload: UploadImport | Callable[[dict[str, Any]], UploadImport],
    *,
    back: str,
    refused: str = "Nothing was imported.",
    choose: str = "Choose a file to import.",
    invalid: str | None = None,
    write_checked: bool = False,
) -> HttpResponse:
    """Import the ``file`` of a bound upload ``form`` into ``study`` and answer the page's redirect.

    - A refused form goes ``back`` with ``refused`` and the file field's problem (``choose`` when it has
      none), or with the whole ``invalid`` message when the page gives one.
    - An account that may only read the study (unless the page got the study with ``write=True``:
      ``write_checked``), a refusal of ``upload`` (a callable of the form's cleaned data that may
      raise ``WorkbenchError``) or of the import goes ``back`` with ``refused`` and the reason.
    - Otherwise ``import_outcome_message`` tells how the import went: back to ``back``, or to the
      items page when it was queued as a job.
    """
    if not form.is_valid():
        messages.error(request, invalid or f"{refused} {form_problems(form, 'file', choose)}")
        return redirect(back)
    user = request_user(request)
    try:
        if not write_checked and not access.study_can_write(user, study):
            raise WorkbenchError("you may read this study but not change it")
        chosen = upload(form.cleaned_data) if callable(upload) else upload
        outcome = import_upload(
            study=study,
            user=user,
            kind=chosen.kind,
            upload=form.cleaned_data["file"],
            options=chosen.options,
            files=chosen.files,
        )
    except WorkbenchError as exc:
        messages.error(request, f"{refused} {exc.message}")
        return redirect(back)
    if import_outcome_message(request, outcome):
        return redirect("study-items", pk=study.pk)
    return redirect(back)
