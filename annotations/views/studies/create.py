"""Researcher pages that create a study: from a preset or a protocol file (the create page, with each
preset's preview), or from a Label Studio export and its labeling config."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from annotations.access import request_user
from annotations.interchange.import_jobs import labelstudio_new_study
from annotations.models import Item, Study
from annotations.selectors import tasks as task_selectors
from annotations.services import studies as study_services
from annotations.views.forms import LabelStudioCreateForm, StudyCreateForm
from annotations.views.pages import form_problems
from common.errors import WorkbenchError
from protocols.manifests import example_items
from protocols.papers import paper_of, preset_label
from protocols.schema import ProtocolError, list_presets, load_preset


@login_required
def study_create(request: HttpRequest) -> HttpResponse:
    if not request_user(request).is_researcher:
        return render(
            request, "errors/forbidden.html", {"message": "Only researchers create studies."}, status=403
        )
    form = StudyCreateForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if data["preset"]:
                protocol = study_services.protocol_resolve(preset=data["preset"])
            else:
                upload = data["protocol_file"]
                text = upload.read().decode("utf-8", errors="strict")
                protocol = study_services.protocol_resolve(protocol_text=text, source=upload.name)
            study = study_services.study_create(
                owner=request_user(request),
                name=data["name"],
                description=data["description"],
                protocol=protocol,
                preset=data["preset"] or "",
                overlap=data["overlap"],
                lease_minutes=data["lease_minutes"],
                status=Study.Status.DRAFT,
            )
        except UnicodeDecodeError:
            form.add_error("protocol_file", "The protocol file is not UTF-8 text.")
        except (WorkbenchError, ProtocolError) as exc:
            form.add_error("protocol_file" if not data["preset"] else None, str(getattr(exc, "message", exc)))
        else:
            messages.success(request, f"Study “{study.name}” created.")
            return redirect("study-detail", pk=study.pk)
    return render(
        request,
        "studies/create.html",
        {"form": form, "previews": _preset_previews(), "selected": form["preset"].value()},
    )


def _preset_previews() -> list[dict[str, Any]]:
    """Each preset as the create page previews it: its questions for an example item (two when the
    item's metadata selects other questions), drawn from the task page's question views."""
    previews = []
    for key in list_presets():
        protocol = load_preset(key)
        study = Study(protocol=protocol.to_dict())
        examples = []
        for example in example_items(protocol):
            item = Item(study=study, text=example["text"] or "", metadata=example["metadata"])
            selecting = {
                q.applies_if["field"]: example["metadata"].get(q.applies_if["field"])
                for q in protocol.questions
                if q.applies_if
            }
            examples.append(
                {
                    "selecting": selecting,
                    "questions": task_selectors.question_views(
                        study=study, item=item, expert=True, answers={}
                    ),
                }
            )
        previews.append(
            {
                "key": key,
                "label": preset_label(protocol),
                "protocol": protocol,
                "paper": paper_of(protocol),
                "examples": examples,
                "n_questions": len(protocol.questions),
            }
        )
    return previews


@login_required
@require_POST
def study_create_labelstudio(request: HttpRequest) -> HttpResponse:
    """A new study from a Label Studio export and its labeling config (the protocol)."""
    if not request_user(request).is_researcher:
        return render(
            request, "errors/forbidden.html", {"message": "Only researchers create studies."}, status=403
        )
    form = LabelStudioCreateForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, f"No study was created. {form_problems(form)}")
        return redirect("study-create")
    try:
        outcome = labelstudio_new_study(
            user=request_user(request),
            name=form.cleaned_data["name"],
            upload=form.cleaned_data["file"],
            config=form.cleaned_data.get("config"),
        )
    except WorkbenchError as exc:
        messages.error(request, f"No study was created. {exc.message}")
        return redirect("study-create")
    if outcome.job is not None:
        job = outcome.job
        messages.info(
            request,
            f"Study “{job.study.name}” created from the labeling config; its Label Studio tasks are "
            f"imported in the background (import {job.pk}: its progress shows under Imports). It is a "
            "draft: launch it from its Overview once people are enrolled or invited.",
        )
        return redirect("study-items", pk=job.study_id)
    report = outcome.report or {}
    messages.success(
        request,
        f"Study “{report['study_name']}” created from {report['tasks']} Label Studio tasks: "
        f"{report['answers'].get('created', 0)} imported answers, {report['answers'].get('skips', 0)} skips. "
        "It is a draft: launch it from its Overview once people are enrolled or invited.",
    )
    return redirect("study-detail", pk=report["study"])
