"""Machine labelling pages: a study's labelling jobs with a form to start one, and cancelling a job."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.models import Annotator, Study
from common.checked_input import MAX_ID, MAX_POSITIVE_INT, MIN_BIG_INT
from common.errors import WorkbenchError
from labelling.models import LabelAttempt, LabellingJob
from labelling.services import labelling_job_cancel, labelling_job_create


def _study(request: HttpRequest, pk: int, *, write: bool = False) -> Study:
    return access.study_get_for_user(user=request_user(request), id=pk, researcher=True, write=write)


class LabellingJobForm(forms.Form):
    annotator = forms.ModelChoiceField(queryset=Annotator.objects.none(), label="Labeller")
    sample_size = forms.IntegerField(
        min_value=1, max_value=MAX_POSITIVE_INT, required=False, help_text="Empty: every item"
    )
    seed = forms.IntegerField(initial=0, min_value=MIN_BIG_INT, max_value=MAX_ID)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        annotator = cast("forms.ModelChoiceField[Annotator]", self.fields["annotator"])
        annotator.queryset = Annotator.objects.filter(kind=Annotator.Kind.MACHINE).order_by(
            "name", "-created_at"
        )


@login_required
def study_labelling(request: HttpRequest, pk: int) -> HttpResponse:
    study = _study(request, pk)
    form = LabellingJobForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        study = _study(request, pk, write=True)
        try:
            job = labelling_job_create(
                study=study,
                annotator=form.cleaned_data["annotator"],
                user=request_user(request),
                sample_size=form.cleaned_data["sample_size"],
                seed=form.cleaned_data["seed"],
            )
        except WorkbenchError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Labelling job {job.pk} queued.")
            return redirect("study-labelling", pk=pk)
    jobs = study.labelling_jobs.select_related("annotator")[:50]
    active = any(job.is_active for job in jobs)
    attempts = (
        LabelAttempt.objects.filter(job__study=study)
        .select_related("item", "job__annotator")
        .order_by("-id")[:50]
    )
    return render(
        request,
        "labelling/study.html",
        {"study": study, "form": form, "jobs": jobs, "active": active, "attempts": attempts},
    )


@login_required
@require_POST
def labelling_job_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    job = LabellingJob.objects.filter(pk=pk).first()
    if job is None:
        raise Http404("no such job")
    _study(request, job.study_id, write=True)
    labelling_job_cancel(job=job)
    messages.info(request, "The labelling job stops after its current batch.")
    return redirect("study-labelling", pk=job.study_id)
