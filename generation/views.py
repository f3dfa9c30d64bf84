"""Generation pages: a study's jobs with a form to start one, and a job's progress page."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.models import Study
from common.checked_input import MAX_ID, MAX_POSITIVE_INT, MIN_BIG_INT
from common.errors import WorkbenchError
from generation.environment import hub_offline, model_folders, worker_devices_seen
from generation.forms import PULL_PREFIX, PullSetForm
from generation.models import GenerationJob
from generation.prompts.sets import PromptSetError, prompt_set_build
from generation.services import (
    generation_job_cancel,
    generation_job_create,
    generation_job_rerun,
    model_source_check,
    model_spec_from_dict,
    visage_pull_job_create,
)


class GenerationJobForm(forms.Form):
    design = forms.ChoiceField(
        choices=[
            ("soda", "SODA: 5 objects x 9 conditions"),
            ("ssi", "SSI initial queries"),
            ("visage", "ViSAGe P1-P3 over identities"),
            ("biasconnect", "BiasConnect occupations x counterfactuals"),
        ]
    )
    limit = forms.IntegerField(
        min_value=1,
        max_value=MAX_POSITIVE_INT,
        required=False,
        help_text="Only the first N prompts (try a design first)",
    )
    images_per_prompt = forms.IntegerField(
        min_value=1, max_value=1000, required=False, help_text="Default: the paper's"
    )
    source = forms.CharField(
        max_length=500, label="Model", help_text="A diffusers folder under WORKBENCH_MODEL_DIRS, or a hub id"
    )
    steps = forms.IntegerField(min_value=1, max_value=1000, initial=30)
    guidance = forms.FloatField(min_value=0, initial=7.5)
    width = forms.IntegerField(min_value=8, initial=512)
    height = forms.IntegerField(min_value=8, initial=512)
    batch_size = forms.IntegerField(min_value=1, max_value=256, initial=4)
    negative_prompt = forms.CharField(required=False)
    base_seed = forms.IntegerField(initial=0, min_value=MIN_BIG_INT, max_value=MAX_ID)


def _study(request: HttpRequest, pk: int, *, write: bool = False) -> Study:
    return access.study_get_for_user(user=request_user(request), id=pk, researcher=True, write=write)


@login_required
def study_generation(request: HttpRequest, pk: int) -> HttpResponse:
    study = _study(request, pk)
    form = GenerationJobForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        study = _study(request, pk, write=True)
        data = form.cleaned_data
        try:
            prompt_set = prompt_set_build(
                data["design"], limit=data["limit"], images_per_prompt=data["images_per_prompt"]
            )
            spec = model_spec_from_dict(
                {
                    "source": data["source"].strip(),
                    "steps": data["steps"],
                    "guidance": data["guidance"],
                    "width": data["width"],
                    "height": data["height"],
                    "batch_size": data["batch_size"],
                    "negative_prompt": data["negative_prompt"] or None,
                }
            )
            model_source_check(spec.source)
            job = generation_job_create(
                study=study,
                prompt_set=prompt_set,
                spec=spec,
                user=request_user(request),
                base_seed=data["base_seed"],
            )
        except PromptSetError as exc:
            form.add_error("design", str(exc))
        except WorkbenchError as exc:
            form.add_error("source", exc.message)
        else:
            messages.success(request, f"Job {job.pk} queued: {job.total_images} images.")
            return redirect("generation-job", pk=job.pk)
    jobs = study.generation_jobs.all()[:50]
    folders = model_folders()
    models = [model for folder in folders for model in folder.models]
    form.fields["source"].widget.attrs["list"] = "model-folders"
    return render(
        request,
        "generation/study_jobs.html",
        {
            "study": study,
            "form": form,
            "jobs": jobs,
            "folders": folders,
            "models": models,
            "workers": worker_devices_seen(),
            "offline": hub_offline(),
            # No folder and no way to download: nothing could run; the form is shown disabled.
            "blocked": not models and hub_offline(),
        },
    )


@login_required
@require_POST
def study_generation_pull(request: HttpRequest, pk: int) -> HttpResponse:
    """Make the visage pull prompt set from the study's stereotype table and queue its images (the
    findings page's button); a refusal goes back to the findings page with the reason."""
    study = _study(request, pk, write=True)
    back = reverse("study-findings", args=[pk]) + "#pull-set"
    form = PullSetForm(request.POST, prefix=PULL_PREFIX)
    if not form.is_valid():
        problems = "; ".join(
            f"{form.fields[name].label or name}: {' '.join(str(e) for e in errors)}"
            for name, errors in form.errors.items()
        )
        messages.error(request, f"No prompt set was made. {problems}")
        return redirect(back)
    data = form.cleaned_data
    try:
        spec = model_spec_from_dict({"source": data["source"].strip()})
        job = visage_pull_job_create(
            study=study,
            spec=spec,
            user=request_user(request),
            seed=data["seed"],
            images_per_prompt=data["images_per_prompt"],
            limit=data["limit"],
        )
    except WorkbenchError as exc:
        messages.error(request, f"No prompt set was made: {exc.message}")
        return redirect(back)
    messages.success(
        request,
        f"The visage pull prompt set is queued as generation job {job.pk}: {job.total_images} images "
        "(default, stereotypical, non-stereotypical); they join the study as they are made.",
    )
    return redirect("generation-job", pk=job.pk)


def _job(request: HttpRequest, pk: int) -> GenerationJob:
    job = GenerationJob.objects.select_related("study").filter(pk=pk).first()
    if job is None:
        raise Http404("no such job")
    _study(request, job.study_id)
    return job


@login_required
def generation_job(request: HttpRequest, pk: int) -> HttpResponse:
    job = _job(request, pk)
    return render(
        request, "generation/job.html", {"job": job, "study": job.study, "failures": job.failures.all()[:200]}
    )


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
