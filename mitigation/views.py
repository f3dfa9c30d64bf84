"""InterMit pages: a study's plan (choose B*, p, epsilon: tau and the next axis with its gamma) and loops;
a loop's page (plan, steps, report, validation) with its actions (label the initial images, run the
next step, advance or close a step)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.models import Annotator, Study
from annotations.selectors.labels import CONSENSUS, machine_labellers
from common.errors import ValidationFailed, WorkbenchError
from generation.services import model_source_check, model_spec_from_dict
from mitigation.models import MitigationLoop, MitigationStep
from mitigation.selectors import (
    DEFAULT_EPSILON,
    intermit_params_parse,
    intermit_plan,
    mitigable_axes,
    mitigation_loop_get_for_user,
    mitigation_loop_report,
    prompt_groups,
)
from mitigation.services import (
    MAX_BASE_SEED,
    MIN_BASE_SEED,
    mitigation_loop_create,
    mitigation_loop_label_initial,
    mitigation_step_advance,
    mitigation_step_start,
)


def _study(request: HttpRequest, pk: int, *, write: bool = False) -> Study:
    return access.study_get_for_user(user=request_user(request), id=pk, researcher=True, write=write)


class PlanForm(forms.Form):
    group = forms.ChoiceField(label="Prompt group (occupation)")
    axes = forms.MultipleChoiceField(label="Axes to debias (B*)", widget=forms.CheckboxSelectMultiple)
    weights = forms.CharField(
        required=False, help_text="Priorities p, comma-separated in the order of the axes (empty: equal)"
    )
    epsilon = forms.FloatField(
        initial=DEFAULT_EPSILON, min_value=0, max_value=1, help_text="Stop when tau <= epsilon"
    )
    targets = forms.CharField(
        required=False,
        max_length=2000,
        label="Target distribution D* (optional)",
        help_text="AXIS=SHARE,SHARE,...; one share per option in the axis's order, axes separated by ';' "
        "(e.g. gender=0.5,0.5); an axis left out aims at uniform",
    )
    source = forms.ChoiceField(label="Labels from", required=False)

    def __init__(self, *args: Any, study: Study, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["group"].choices = [(g, g) for g in prompt_groups(study)]  # type: ignore[attr-defined]
        self.fields["axes"].choices = [(a, a) for a in mitigable_axes(study)]  # type: ignore[attr-defined]
        self.fields["source"].choices = [(s, s) for s in [CONSENSUS, *machine_labellers(study)]]  # type: ignore[attr-defined]


class LoopForm(forms.Form):
    labeller = forms.ModelChoiceField(
        queryset=Annotator.objects.none(),
        required=False,
        empty_label="People (the study's annotators)",
        help_text="Who labels each step's images",
    )
    source = forms.CharField(
        max_length=500, label="Model", help_text="A diffusers folder under WORKBENCH_MODEL_DIRS, or a hub id"
    )
    steps = forms.IntegerField(min_value=1, max_value=1000, initial=30)
    guidance = forms.FloatField(min_value=0, initial=7.5)
    width = forms.IntegerField(min_value=8, initial=512)
    height = forms.IntegerField(min_value=8, initial=512)
    batch_size = forms.IntegerField(min_value=1, max_value=256, initial=4)
    images_per_step = forms.IntegerField(min_value=1, max_value=10_000, initial=48)
    base_seed = forms.IntegerField(initial=0, min_value=MIN_BASE_SEED, max_value=MAX_BASE_SEED)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["labeller"].queryset = Annotator.objects.filter(  # type: ignore[attr-defined]
            kind=Annotator.Kind.MACHINE, study__isnull=True
        ).order_by("name", "-created_at")


@login_required
def study_intermit(request: HttpRequest, pk: int) -> HttpResponse:
    """GET with a choice: the plan (tau, next axis, gammas); POST: start a loop with that choice."""
    study = _study(request, pk)
    data = request.POST if request.method == "POST" else (request.GET if "axes" in request.GET else None)
    form = PlanForm(data, study=study, initial={"epsilon": DEFAULT_EPSILON})
    loop_form = LoopForm(request.POST if request.method == "POST" else None)
    plan = error = None
    status = 200
    if data is not None and form.is_valid():
        try:
            params = intermit_params_parse(
                study,
                axes=form.cleaned_data["axes"],
                weights=form.cleaned_data["weights"],
                epsilon=form.cleaned_data["epsilon"],
                group=form.cleaned_data["group"],
                targets=form.cleaned_data["targets"],
            )
            if request.method == "POST":
                study = _study(request, pk, write=True)
                if not loop_form.is_valid():
                    raise ValidationFailed("check the loop's settings below")
                values = loop_form.cleaned_data
                spec = model_spec_from_dict(
                    {
                        "source": values["source"].strip(),
                        "steps": values["steps"],
                        "guidance": values["guidance"],
                        "width": values["width"],
                        "height": values["height"],
                        "batch_size": values["batch_size"],
                    }
                )
                model_source_check(spec.source)
                loop = mitigation_loop_create(
                    study=study,
                    params=params,
                    spec=spec,
                    user=request_user(request),
                    annotator=values["labeller"],
                    images_per_step=values["images_per_step"],
                    base_seed=values["base_seed"],
                )
                messages.success(request, f"InterMit loop {loop.pk} created.")
                return redirect("intermit-loop", pk=loop.pk)
            plan = intermit_plan(study, params, form.cleaned_data["source"] or CONSENSUS)
        except WorkbenchError as exc:
            error, status = exc.message, 400
    elif data is not None:
        error, status = (
            "Check the choice: "
            + "; ".join(f"{k}: {' '.join(str(m) for m in v)}" for k, v in form.errors.items()),
            400,
        )
    loops = study.mitigation_loops.select_related("annotator")[:50]
    return render(
        request,
        "mitigation/study.html",
        {"study": study, "form": form, "loop_form": loop_form, "plan": plan, "error": error, "loops": loops},
        status=status,
    )


def _loop(request: HttpRequest, pk: int, *, write: bool = False) -> MitigationLoop:
    return mitigation_loop_get_for_user(user=request_user(request), id=pk, write=write)


@login_required
def intermit_loop(request: HttpRequest, pk: int) -> HttpResponse:
    loop = _loop(request, pk)
    report = mitigation_loop_report(loop)
    return render(
        request,
        "mitigation/loop.html",
        {"loop": loop, "study": loop.study, "report": report, "running": report["status"] == "running"},
    )


@login_required
@require_POST
def intermit_loop_action(request: HttpRequest, pk: int, verb: str) -> HttpResponse:
    """``step``: start the next step; ``advance``: check the open step's jobs; ``close``: record the open
    step with the labels given so far; ``label-initial``: queue the labeller over the initial images."""
    loop = _loop(request, pk, write=True)
    user = request_user(request)
    open_step = loop.steps.exclude(status=MitigationStep.Status.DONE).first()
    try:
        if verb == "step":
            step = mitigation_step_start(loop=loop, user=user)
            messages.success(request, f"Step {step.index}: generating the mitigation set for {step.axis}.")
        elif verb in ("advance", "close"):
            if open_step is None:
                raise ValidationFailed("no step is open")
            step = mitigation_step_advance(step=open_step, user=user, close=verb == "close")
            messages.info(request, f"Step {step.index}: {step.get_status_display()}.")
        elif verb == "label-initial":
            job = mitigation_loop_label_initial(loop=loop, user=user)
            messages.success(request, f"Labelling job {job.pk} queued over the initial images.")
        else:
            raise Http404("unknown action")
    except WorkbenchError as exc:
        messages.error(request, exc.message)
    return redirect("intermit-loop", pk=pk)
