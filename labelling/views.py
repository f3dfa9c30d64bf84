"""Machine labelling pages: a study's labelling jobs with a form to start one, cancelling a job, and
the labellers page where admins register, re-configure (a new version) and disable labellers."""

from __future__ import annotations

from typing import Any, cast

import yaml
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.models import Annotator, Study
from annotations.presenters import labeller_summary
from common.checked_input import MAX_ID, MAX_POSITIVE_INT, MIN_BIG_INT
from common.errors import NotAllowed, ValidationFailed, WorkbenchError
from common.redaction import redact
from labelling.feature_labellers import FEATURE_KINDS, WHAT, feature_labelling_job_create
from labelling.labellers.registry import LABELLER_CLASSES
from labelling.models import LabelAttempt, LabellingJob
from labelling.services import (
    labeller_config_edited,
    labeller_config_from_text,
    labeller_register,
    labeller_set_disabled,
    labelling_job_cancel,
    labelling_job_create,
)


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
        annotator.queryset = Annotator.objects.filter(
            kind=Annotator.Kind.MACHINE, study__isnull=True, disabled=False
        ).order_by("name", "-created_at")


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
def study_feature_labelling(request: HttpRequest, pk: int) -> HttpResponse:
    """Start a registered embedding labeller or captioner over the study (the findings page's buttons);
    its progress shows on the study's machine labels page, a refusal on the findings page."""
    study = _study(request, pk, write=True)
    kind = request.POST.get("kind", "")
    raw = request.POST.get("annotator", "")
    try:
        if kind not in FEATURE_KINDS:
            raise ValidationFailed(f"unknown feature kind {kind[:40]!r}; use {' or '.join(FEATURE_KINDS)}")
        if not raw.isdigit() or int(raw) > MAX_ID:
            raise ValidationFailed("choose a labeller")
        job = feature_labelling_job_create(
            study=study, annotator_id=int(raw), kind=kind, user=request_user(request)
        )
    except WorkbenchError as exc:
        messages.error(request, f"No labeller was started: {exc.message}.")
        return redirect(reverse("study-findings", args=[pk]) + "#features")
    messages.success(
        request,
        f"Labelling job {job.pk} queued: {job.annotator.name} stores {WHAT[kind]} for every item of the "
        "study; the findings use them once it is done.",
    )
    return redirect("study-labelling", pk=pk)


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


# --- Labellers (admins) -----------------------------------------------------------------------------


class LabellerForm(forms.Form):
    """What ``manage.py register_labeller`` takes; ``labeller_register`` checks it the same way."""

    name = forms.CharField(max_length=150)
    kind = forms.ChoiceField(
        choices=[(kind, kind) for kind in LABELLER_CLASSES],
        help_text="A labeller class of the registry (docs/labellers.md); a dotted path of your own class "
        "is registered on the command line only",
    )
    config = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}),
        label="Configuration (YAML or JSON)",
        help_text="e.g. model: openai/clip-vit-base-patch32. Secrets show masked; leave a masked value as it "
        "is to keep it. Give API keys by environment variable (api_key_env) where you can.",
    )
    version = forms.CharField(
        max_length=64, required=False, help_text="Empty: a digest of kind and configuration"
    )


def _labeller_admin(request: HttpRequest) -> None:
    """App admins only (role admin or superuser): a labeller's configuration decides where the
    worker sends a study's images and which key it sends; ``is_staff`` alone is not enough."""
    if not request_user(request).is_admin:
        raise NotAllowed("only admins register and change labellers")


def _machine(pk: int) -> Annotator:
    annotator = Annotator.objects.filter(pk=pk, kind=Annotator.Kind.MACHINE, study__isnull=True).first()
    if annotator is None:
        raise Http404("no such labeller")
    return annotator


def _shown_config(annotator: Annotator) -> str:
    config = {key: value for key, value in annotator.config.items() if key != "kind"}
    return yaml.safe_dump(redact(config), sort_keys=True, allow_unicode=True) if config else ""


@login_required
def labellers(request: HttpRequest) -> HttpResponse:
    """Every machine labeller with its kind, model, jobs and state; the form registers a new one."""
    _labeller_admin(request)
    form = LabellerForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        return _register(request, form, original=None) or _labellers_page(request, form)
    return _labellers_page(request, form)


def _register(request: HttpRequest, form: LabellerForm, original: Annotator | None) -> HttpResponse | None:
    data = form.cleaned_data
    try:
        config = labeller_config_from_text(data["config"])
        if original is not None:
            config = labeller_config_edited(original=original, kind=data["kind"], edited=config)
        annotator = labeller_register(
            name=data["name"], kind=data["kind"], config=config, version=data["version"].strip() or None
        )
    except WorkbenchError as exc:
        form.add_error("config" if "config" in getattr(exc, "details", {}) else None, exc.message)
        return None
    if original is not None and annotator.pk == original.pk:
        messages.info(
            request, f"Nothing changed: {annotator.name} {annotator.version} has this configuration."
        )
    else:
        messages.success(request, f"Registered {annotator.name} version {annotator.version}.")
    return redirect("labellers")


def _labellers_page(request: HttpRequest, form: LabellerForm) -> HttpResponse:
    machines = (
        Annotator.objects.filter(kind=Annotator.Kind.MACHINE, study__isnull=True)
        .annotate(jobs=Count("labelling_jobs", distinct=True))
        .order_by("disabled", "name", "-created_at")
    )
    rows = [
        {"annotator": a, "summary": labeller_summary(a), "kind": a.config.get("kind", "")} for a in machines
    ]
    return render(request, "labelling/labellers.html", {"form": form, "rows": rows})


@login_required
def labeller_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """A labeller's configuration (secrets masked), saved as a new version: answers keep the version
    that made them."""
    _labeller_admin(request)
    annotator = _machine(pk)
    initial = {
        "name": annotator.name,
        "kind": annotator.config.get("kind", ""),
        "config": _shown_config(annotator),
    }
    form = LabellerForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        done = _register(request, form, original=annotator)
        if done is not None:
            return done
    return render(request, "labelling/labeller_edit.html", {"form": form, "annotator": annotator})


@login_required
@require_POST
def labeller_toggle(request: HttpRequest, pk: int) -> HttpResponse:
    _labeller_admin(request)
    annotator = _machine(pk)
    disabled = request.POST.get("disabled") == "1"
    labeller_set_disabled(annotator=annotator, disabled=disabled)
    state = "disabled: it is offered for no new job" if disabled else "enabled"
    messages.success(request, f"{annotator.name} {annotator.version} {state}.")
    return redirect("labellers")
