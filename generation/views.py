"""Generation pages: a study's jobs with a form to start one, and a job's progress page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotations import access
from annotations.errors import NotAllowed, NotFoundError, WorkbenchError
from annotations.models import Annotator, Study
from generation.labelling import labelling_job_cancel, labelling_job_create
from generation.models import GenerationJob, LabelAttempt, LabellingJob
from generation.prompt_sets import PromptSetError, prompt_set_build
from generation.services import (
    generation_job_cancel,
    generation_job_create,
    generation_job_rerun,
    model_source_check,
    model_spec_from_dict,
)


class GenerationJobForm(forms.Form):
    design = forms.ChoiceField(choices=[("soda", "SODA: 5 objects x 9 conditions"), ("ssi", "SSI initial queries"),
                                        ("visage", "ViSAGe P1-P3 over identities"),
                                        ("biasconnect", "BiasConnect occupations x counterfactuals")])
    limit = forms.IntegerField(min_value=1, required=False, help_text="Only the first N prompts (try a design first)")
    images_per_prompt = forms.IntegerField(min_value=1, max_value=1000, required=False,
                                           help_text="Default: the paper's")
    source = forms.CharField(max_length=500, label="Model",
                             help_text="A diffusers folder under WORKBENCH_MODEL_DIRS, or a hub id")
    steps = forms.IntegerField(min_value=1, max_value=1000, initial=30)
    guidance = forms.FloatField(min_value=0, initial=7.5)
    width = forms.IntegerField(min_value=8, initial=512)
    height = forms.IntegerField(min_value=8, initial=512)
    batch_size = forms.IntegerField(min_value=1, max_value=256, initial=4)
    negative_prompt = forms.CharField(required=False)
    base_seed = forms.IntegerField(initial=0)


def _study(request: HttpRequest, pk: int, *, write: bool = False) -> Study:
    try:
        return access.study_get_for_user(user=request.user, id=pk, researcher=True, write=write)  # type: ignore[arg-type]
    except NotFoundError as exc:
        raise Http404(exc.message) from exc
    except NotAllowed as exc:
        raise PermissionDenied(exc.message) from exc


@login_required
def study_generation(request: HttpRequest, pk: int) -> HttpResponse:
    study = _study(request, pk)
    form = GenerationJobForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        study = _study(request, pk, write=True)
        data = form.cleaned_data
        try:
            prompt_set = prompt_set_build(data["design"], limit=data["limit"],
                                          images_per_prompt=data["images_per_prompt"])
            spec = model_spec_from_dict({
                "source": data["source"].strip(), "steps": data["steps"], "guidance": data["guidance"],
                "width": data["width"], "height": data["height"], "batch_size": data["batch_size"],
                "negative_prompt": data["negative_prompt"] or None,
            })
            model_source_check(spec.source)
            job = generation_job_create(study=study, prompt_set=prompt_set, spec=spec, user=request.user,  # type: ignore[arg-type]
                                        base_seed=data["base_seed"])
        except PromptSetError as exc:
            form.add_error("design", str(exc))
        except WorkbenchError as exc:
            form.add_error("source", exc.message)
        else:
            messages.success(request, f"Job {job.pk} queued: {job.total_images} images.")
            return redirect("generation-job", pk=job.pk)
    jobs = study.generation_jobs.all()[:50]
    return render(request, "generation/study_jobs.html", {"study": study, "form": form, "jobs": jobs})


def _job(request: HttpRequest, pk: int) -> GenerationJob:
    job = GenerationJob.objects.select_related("study").filter(pk=pk).first()
    if job is None:
        raise Http404("no such job")
    _study(request, job.study_id)
    return job


@login_required
def generation_job(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job(request, pk)
    return render(request, "generation/job.html", {"job": job, "study": job.study,
                                                   "failures": job.failures.all()[:200]})


@login_required
@require_POST
def generation_job_action(request: HttpRequest, pk: int, verb: str) -> HttpResponse:
    job = _job(request, pk)
    _study(request, job.study_id, write=True)
    try:
        if verb == "cancel":
            generation_job_cancel(job=job)
            messages.info(request, "The job stops after its current batch.")
        elif verb == "rerun":
            generation_job_rerun(job=job)
            messages.info(request, "Queued again: only missing images are made.")
        else:
            raise Http404("unknown action")
    except WorkbenchError as exc:
        messages.error(request, exc.message)
    return redirect("generation-job", pk=pk)


class LabellingJobForm(forms.Form):
    annotator = forms.ModelChoiceField(queryset=Annotator.objects.none(), label="Labeller")
    sample_size = forms.IntegerField(min_value=1, required=False, help_text="Empty: every item")
    seed = forms.IntegerField(initial=0)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["annotator"].queryset = Annotator.objects.filter(  # type: ignore[attr-defined]
            kind=Annotator.Kind.MACHINE).order_by("name", "-created_at")


@login_required
def study_labelling(request: HttpRequest, pk: int) -> HttpResponse:
    study = _study(request, pk)
    form = LabellingJobForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        study = _study(request, pk, write=True)
        try:
            job = labelling_job_create(study=study, annotator=form.cleaned_data["annotator"], user=request.user,  # type: ignore[arg-type]
                                       sample_size=form.cleaned_data["sample_size"], seed=form.cleaned_data["seed"])
        except WorkbenchError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Labelling job {job.pk} queued.")
            return redirect("study-labelling", pk=pk)
    jobs = study.labelling_jobs.select_related("annotator")[:50]
    active = any(job.is_active for job in jobs)
    attempts = LabelAttempt.objects.filter(job__study=study).select_related("item", "job__annotator").order_by("-id")[:50]
    return render(request, "generation/study_labelling.html",
                  {"study": study, "form": form, "jobs": jobs, "active": active, "attempts": attempts})


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
