"""The study page (its tabs and setup checklist), its settings and the launch of a draft."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.interchange.bucket_addresses import bucket_entries
from annotations.interchange.exports import FORMATS
from annotations.models import Study
from annotations.selectors import studies as selectors
from annotations.selectors.overlap import (
    model_summary,
    policy_question,
    policy_questions,
    study_policy,
    study_replay,
)
from annotations.selectors.pool_quotas import pool_attribute_keys, pool_quota_progress
from annotations.selectors.progress import imported_answers
from annotations.services import studies as study_services
from annotations.services.rater_pools import pool_quotas_from_text, study_rater_pools_set
from annotations.views.forms import EnrollForm, ShareForm, StudySettingsForm, UploadForm
from annotations.views.pages import form_problems, study_for_page
from annotations.views.studies.shared import to_tab
from common.errors import WorkbenchError
from metrics.overlap_policy import CONFUSION_KINDS, POLICY_FORMS, PolicyError, PosteriorPolicy


class OverlapPolicyForm(forms.Form):
    """The Overlap tab's policy (shape only: ``study_overlap_set`` checks the rest)."""

    policy = forms.CharField(max_length=64, label="Overlap policy", help_text=POLICY_FORMS)
    question = forms.CharField(max_length=64, required=False, label="Question it reads")


class RaterPoolsForm(forms.Form):
    """The Overlap tab's rater pools (shape only: ``services.rater_pools`` checks the rest)."""

    attribute = forms.CharField(max_length=64, required=False, label="Pool attribute")
    quotas = forms.CharField(max_length=10_000, required=False, label="Quotas")


class OverlapReplayForm(forms.Form):
    """The Overlap tab's replay of a policy on the study's own answers (a GET: it changes nothing)."""

    replay_policy = forms.CharField(max_length=64, label="Policy to replay", help_text=POLICY_FORMS)
    replay_question = forms.CharField(max_length=64, required=False, label="Question")
    replay_confusion = forms.ChoiceField(
        choices=[(kind, kind) for kind in CONFUSION_KINDS], required=False, label="posterior: confusion"
    )


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def overlap_context(request: HttpRequest, study: Study) -> dict[str, Any]:
    """The Overlap tab: the study's policy, its model, and the replay the GET asks for (if any), through
    ``selectors.overlap.study_replay`` (``metrics.overlap_policy.overlap_replay``, as the command)."""
    policy = study_policy(study)
    question = policy_question(study)
    context: dict[str, Any] = {
        "policy": str(policy),
        "question": question.key if question is not None else "",
        "questions": [q.key for q in policy_questions(study.protocol_obj)],
        "posterior": isinstance(policy, PosteriorPolicy),
        "model": model_summary(study),
        "confusions": CONFUSION_KINDS,
        "replay": None,
        "replay_error": "",
        "pools": _pools_context(study, suggest=access.study_can_write(request_user(request), study)),
    }
    if "replay_policy" not in request.GET:
        return context
    form = OverlapReplayForm(request.GET)
    if not form.is_valid():
        context["replay_error"] = form_problems(form)
        return context
    data = form.cleaned_data
    try:
        report = study_replay(
            study,
            policy=data["replay_policy"],
            question_key=data["replay_question"] or "",
            confusion=data["replay_confusion"] or "full",
        )
    except (PolicyError, ValueError) as exc:
        context["replay_error"] = str(exc)
        return context
    report["saved_text"] = _share(report["saved_share"])
    report["same_text"] = _share(report["same_as_full_consensus"])
    for row in report["same_by_label"]:
        row["share_text"] = _share(row["share"])
    context["replay"] = report
    context["replay_asked"] = data
    return context


def _pools_context(study: Study, *, suggest: bool) -> dict[str, Any]:
    """The Overlap tab's rater pools: the attribute, the quotas as the form writes them, each pool's
    judgements so far, and (``suggest``: for the form, shown only to who may change the study) the
    attribute keys the study knows."""
    quotas = study.rater_pool_quotas or {}
    return {
        "attribute": study.rater_pool_attribute,
        "quotas_text": "\n".join(f"{pool}: {quota}" for pool, quota in sorted(quotas.items())),
        "quota_total": sum(quotas.values()),
        "progress": pool_quota_progress(study),
        "keys": pool_attribute_keys(study) if suggest else [],
    }


@login_required
def study_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The study page: tabs (sections without JavaScript) and the setup checklist on the Overview."""
    study = study_for_page(request, pk, researcher=True)
    can_write = access.study_can_write(request_user(request), study)
    context = {
        "study": study,
        "protocol": study.protocol_obj,
        "summary": selectors.study_summary(study),
        # The progress page's count, in its words: judgements given here, and those imported from files.
        "completion": selectors.studies_completion([study.pk]).get(
            study.pk, {"judgements": 0, "needed": 0, "percent": 0.0}
        ),
        "imported": imported_answers(study),
        "setup": selectors.study_setup(study),
        "launch_refusal": selectors.launch_refusal(study) if study.status == Study.Status.DRAFT else "",
        "can_write": can_write,
        "is_owner": request_user(request).is_admin or study.owner_id == request_user(request).pk,
        "enrollments": study.enrollments.select_related("user").order_by("user__username"),
        "export_jobs": study.export_jobs.filter(requested_by=request_user(request))[:5],
        # The bucket export form only where this study and account may write somewhere.
        "buckets": [
            str(entry)
            for entry in bucket_entries(study_id=study.pk, user_id=request_user(request).pk, write=True)
        ],
        # Invitation links are secrets: only those who may change the study see them (as on their page).
        "invitations": study.invitations.order_by("-created_at", "-id")[:20] if can_write else [],
        "upload_form": UploadForm(),
        "enroll_form": EnrollForm(),
        "share_form": ShareForm(),
        "settings_form": StudySettingsForm(
            initial={
                "name": study.name,
                "description": study.description,
                "overlap": study.overlap,
                "lease_minutes": study.lease_minutes,
                "status": study.status,
            }
        ),
        "formats": FORMATS,
        "overlap": overlap_context(request, study),
    }
    return render(request, "studies/detail.html", context)


@login_required
@require_POST
def study_launch(request: HttpRequest, pk: int) -> HttpResponse:
    """Launch a draft: refused, with the reason, until it has items and someone to judge them."""
    study = study_for_page(request, pk, researcher=True, write=True)
    try:
        study_services.study_launch(study=study)
    except WorkbenchError as exc:
        messages.error(request, f"Not launched: {exc.message}.")
    else:
        messages.success(request, "Study launched: annotators and invitation links now get items.")
    return to_tab(pk, "overview")


def _overlap_settings(request: HttpRequest, study: Study) -> HttpResponse:
    """The Overlap tab's form: save the policy (which refits a posterior model) or refit the model."""
    refit = request.POST.get("action") == "refit"
    form = OverlapPolicyForm(request.POST)
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        if refit:
            study_services.study_overlap_refit(study=study)
        elif not form.is_valid():
            raise WorkbenchError(form_problems(form))
        else:
            study_services.study_overlap_set(
                study=study, policy=form.cleaned_data["policy"], question=form.cleaned_data["question"]
            )
    except WorkbenchError as exc:
        messages.error(request, f"Overlap policy not saved: {exc.message}.")
    else:
        messages.success(request, "Model refitted." if refit else "Overlap policy saved.")
    return to_tab(study.pk, "overlap")


def _pool_settings(request: HttpRequest, study: Study) -> HttpResponse:
    """The Overlap tab's rater pools form: the pool attribute and each pool's quota."""
    form = RaterPoolsForm(request.POST)
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        if not form.is_valid():
            raise WorkbenchError(form_problems(form))
        study_rater_pools_set(
            study=study,
            attribute=form.cleaned_data["attribute"],
            quotas=pool_quotas_from_text(form.cleaned_data["quotas"]),
        )
    except WorkbenchError as exc:
        messages.error(request, f"Rater pools not saved: {exc.message}.")
    else:
        messages.success(request, "Rater pools saved.")
    return to_tab(study.pk, "overlap")


@login_required
@require_POST
def study_settings(request: HttpRequest, pk: int) -> HttpResponse:
    study = study_for_page(request, pk, researcher=True)
    if request.POST.get("section") == "overlap":
        return _overlap_settings(request, study)
    if request.POST.get("section") == "pools":
        return _pool_settings(request, study)
    form = StudySettingsForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            "Settings not saved: " + form_problems(form),
        )
        return to_tab(pk, "settings")
    try:
        if not access.study_can_write(request_user(request), study):
            raise WorkbenchError("you may read this study but not change it")
        study_services.study_update(study=study, **form.cleaned_data)
    except WorkbenchError as exc:
        messages.error(request, f"Settings not saved: {exc.message}.")
    else:
        messages.success(request, "Settings saved.")
    return to_tab(pk, "settings")
