"""Annotator pages: dashboard, task page (submit, skip, edit), own history, reveal after submit.

Thin views: ``access`` finds what the user may touch, ``services.assignment`` does the work,
``task_selectors`` shapes what the page shows. The page works without JavaScript (plain form
posts); ``static/js/annotate.js`` adds boxes, paging, keyboard and ``show_if``; ``static/js/flow.js``
drafts, the Previous/Next keys and the lease ahead (``ahead``). docs/annotating.md describes the flow.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from annotations import access
from annotations.access import request_user
from annotations.models import Annotation, Annotator, Assignment, RevealLog, Study
from annotations.presenters import image_display_url, image_views
from annotations.selectors import drafts as draft_selectors
from annotations.selectors import flow as flow_selectors
from annotations.selectors import tasks as task_selectors
from annotations.selectors.pools import sees_expert_questions
from annotations.selectors.quality import claim_refusal
from annotations.selectors.reveals import reveal_enabled
from annotations.services.assignment import (
    assignment_claim_next,
    assignment_skip,
    assignment_submit,
)
from annotations.services.drafts import draft_drop, draft_fields_from_json, draft_save
from annotations.services.invitations import participant_complete
from annotations.services.reveals import reveal_log_create, reveal_record_agreement
from annotations.services.skip_undo import assignment_skip_undo
from annotations.services.studies import annotator_for_user
from annotations.views.pages import item_image_page
from annotations.views.task_form import answers_from_form
from common.checked_input import id_from_text, whole_number_from_text
from common.errors import Conflict, NotAllowed, QuotaReached, ValidationFailed, WorkbenchError
from protocols.answers import SubmissionError
from protocols.colours import BASIC_COLOURS

MAX_TIME_MS = 24 * 3600 * 1000


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    """The annotator's own studies: what to do, how much is done, skipped and left, time spent."""
    return render(
        request, "annotate/dashboard.html", {"rows": task_selectors.flow_progress(request_user(request))}
    )


@login_required
def study_next(request: HttpRequest, pk: int) -> HttpResponse:
    """Lease the annotator's next item in a study (or resume the one they hold) and show it."""
    study = access.study_get_for_annotator(user=request_user(request), id=pk)
    annotator = annotator_for_user(user=request_user(request))
    try:
        assignment = assignment_claim_next(study=study, annotator=annotator)
    except QuotaReached:
        return _participant_finished(request, study, quota_reached=True)
    except (Conflict, NotAllowed) as exc:
        return render(request, "annotate/done.html", {"study": study, "message": exc.message}, status=409)
    if assignment is None:
        refusal = claim_refusal(study=study, annotator=annotator)
        if refusal is not None:  # the study's qualification: failed (for good), or waiting for gold items
            return render(
                request,
                "annotate/done.html",
                {"study": study, "message": refusal.message, "not_qualified": refusal.final},
                status=403 if refusal.final else 200,
            )
        if access.participant_for_user(request_user(request)) is not None:
            return _participant_finished(request, study, quota_reached=False)
        return render(request, "annotate/done.html", {"study": study, "message": "", **_undo(request, study)})
    return _to_task(assignment.pk, skipped=_skipped_id(request))


def _to_task(pk: int, *, skipped: int | None = None) -> HttpResponse:
    """Redirect to a task page; ``skipped``: the assignment just skipped, offered for an undo there."""
    url = reverse("annotate-task", args=[pk])
    return redirect(f"{url}?skipped={skipped}" if skipped else url)


def _skipped_id(request: HttpRequest) -> int | None:
    return id_from_text(request.GET.get("skipped", ""))


def _undo(request: HttpRequest, study: Study) -> dict[str, Any]:
    """The undo offer after a skip: only for the user's own assignment in this study that is skipped."""
    pk = _skipped_id(request)
    if pk is None:
        return {}
    mine = Assignment.objects.filter(
        pk=pk, study=study, annotator__user=request_user(request), status=Assignment.Status.SKIPPED
    )
    return {"undo_skip": pk} if mine.exists() else {}


def _participant_finished(request: HttpRequest, study: Study, *, quota_reached: bool) -> HttpResponse:
    """An invited participant reached their quota or there is nothing left: when they answered the items
    their invitation requires, record it and show the code; otherwise say how many are missing."""
    participant = access.participant_for_user(request_user(request))
    if participant is None:  # a quota belongs to an invitation, so this does not happen; be plain about it
        return render(request, "annotate/done.html", {"study": study, "message": ""})
    progress = participant_complete(participant=participant)
    if progress.reached:
        return redirect("annotate-complete", pk=study.pk)
    return render(
        request,
        "annotate/unfinished.html",
        {"study": study, "progress": progress, "quota_reached": quota_reached},
    )


def _assignment_or_404(request: HttpRequest, pk: int) -> Assignment:
    return access.assignment_get_for_user(user=request_user(request), id=pk)


def _time_spent(request: HttpRequest) -> int | None:
    """The time the page measured, capped at a day; None when absent or not plain digits."""
    spent = whole_number_from_text(request.POST.get("time_spent_ms", ""), high=10**30)
    return None if spent is None else min(spent, MAX_TIME_MS)


@login_required
def task(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the task page. POST: submit (or edit) the answers; errors come back next to each question."""
    assignment = _assignment_or_404(request, pk)
    if assignment.status in (Assignment.Status.SKIPPED, Assignment.Status.EXPIRED):
        messages.info(request, "That item is no longer yours; here is your next one.")
        return redirect("annotate-next", pk=assignment.study_id)
    study, annotator = assignment.study, assignment.annotator
    expert = sees_expert_questions(study=study, annotator=annotator)
    item = task_selectors.item_with_images(assignment.item_id)
    errors: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        answers = {}
        was_submitted = assignment.status == Assignment.Status.SUBMITTED
        try:
            answers = answers_from_form(study=study, item=item, expert=expert, data=request.POST)
            assignment = assignment_submit(
                assignment=assignment,
                answers=answers,
                source=Annotation.Source.UI,
                time_spent_ms=_time_spent(request),
                user=request_user(request),
            )
        except SubmissionError as exc:
            errors, status = exc.errors, 400
        except WorkbenchError as exc:
            messages.error(request, exc.message)
            return redirect("annotate-next", pk=study.pk)
        else:
            if reveal_enabled(assignment) and task_selectors.machine_labels(item):
                return redirect("annotate-reveal", pk=assignment.pk)
            if was_submitted:
                messages.success(request, "Your changes are saved.")
                return redirect("annotate-mine", pk=study.pk)
            return _after_submit(study=study, annotator=annotator)
    else:
        answers = task_selectors.stored_answers(item=item, annotator=annotator)
    context = {
        "assignment": assignment,
        "study": study,
        "protocol": study.protocol_obj,
        "item": item,
        "images": image_views(item),
        "questions": task_selectors.question_views(
            study=study, item=item, expert=expert, answers=answers, errors=errors
        ),
        "errors": errors,
        "editing": assignment.status == Assignment.Status.SUBMITTED,
        # The next item is leased ahead after the page has loaded (``ahead``, called by static/js/flow.js),
        # off the path from a submit to this page.
        "next_image_url": "",
        "progress": task_selectors.study_progress_for(request_user(request), study.pk, annotator),
        "colours": BASIC_COLOURS,
        # The draft kept on the server (static/js/flow.js puts it back in the form); not after a refusal.
        "server_draft": None if errors else draft_selectors.draft_fields_for(assignment),
        "draft_on_server": not errors and draft_selectors.lease_is_live(assignment),
        **_walk(assignment),
        **_undo(request, study),
    }
    return render(request, "annotate/task.html", context, status=status)


def _after_submit(*, study: Study, annotator: Annotator) -> HttpResponse:
    """After a first submit: claim the next item in this request and go straight to its page (one
    redirect, not two); the claim page answers when nothing is left or the claim is refused."""
    try:
        following = assignment_claim_next(study=study, annotator=annotator)
    except WorkbenchError:
        following = None
    if following is None:
        return redirect("annotate-next", pk=study.pk)
    return _to_task(following.pk)


@login_required
@require_POST
def ahead(request: HttpRequest, pk: int) -> JsonResponse:
    """Lease the item after this one ahead of time (or find the one already held), for the task page
    to prefetch its image and offer it as Next: {"task": its page, "image": its display image}. Called
    by static/js/flow.js once the page is shown, so the claim is not on the way from a submit to a page."""
    assignment = _assignment_or_404(request, pk)
    following = None
    if assignment.status == Assignment.Status.LEASED:
        try:
            following = assignment_claim_next(
                study=assignment.study, annotator=assignment.annotator, exclude=[assignment.pk]
            )
        except WorkbenchError:
            following = None
    if following is None:
        return JsonResponse({"task": "", "image": ""})
    image = task_selectors.first_image(following.item_id)
    return JsonResponse(
        {
            "task": reverse("annotate-task", args=[following.pk]),
            "image": image_display_url(image.item_id, image.position) if image else "",
        }
    )


@login_required
def draft(request: HttpRequest, pk: int) -> HttpResponse:
    """The draft of the annotator's own leased item, kept on the server (static/js/flow.js).

    GET: ``{"fields": [[name, value], ...]}`` (``null`` without one). PUT (or POST) a body
    ``{"fields": [...]}``: kept, answered ``{"saved": true}``; 400 for bad JSON or answers (with
    ``errors`` per question), 413 when too large, 409 once the lease is not theirs. DELETE: dropped.
    Another annotator's assignment is not found (404)."""
    assignment = _assignment_or_404(request, pk)
    user = request_user(request)
    try:
        if request.method == "GET":
            return JsonResponse({"fields": draft_selectors.draft_fields_for(assignment)})
        if request.method == "DELETE":
            draft_drop(assignment=assignment, user=user)
            return HttpResponse(status=204)
        if request.method not in ("PUT", "POST"):
            return JsonResponse({"error": "use GET, PUT or DELETE"}, status=405)
        fields = draft_fields_from_json(request.body)
        data = QueryDict(mutable=True)
        for name, value in fields:
            data.appendlist(name, value)
        expert = sees_expert_questions(study=assignment.study, annotator=assignment.annotator)
        answers = answers_from_form(study=assignment.study, item=assignment.item, expert=expert, data=data)
        draft_save(assignment=assignment, fields=fields, answers=answers, user=user)
    except SubmissionError as exc:
        return JsonResponse(
            {"error": "some answers of the draft are not valid", "errors": exc.errors}, status=400
        )
    except (Conflict, ValidationFailed) as exc:
        return JsonResponse({"error": exc.message}, status=exc.status_code)
    return JsonResponse({"saved": True})


def _walk(assignment: Assignment) -> dict[str, str]:
    """Previous / Next among the annotator's own items (selectors/flow.py): Previous is the one handed
    out before; Next the one after, or, from a submitted item with none after, the claim page (the held
    item or a new one). A live lease with none after gets its Next from ``ahead`` once the page is shown."""
    before, after = flow_selectors.neighbours(assignment)
    if after is not None:
        next_url = reverse("annotate-task", args=[after])
    elif assignment.status == Assignment.Status.SUBMITTED and assignment.study.status == Study.Status.ACTIVE:
        next_url = reverse("annotate-next", args=[assignment.study_id])
    else:
        next_url = ""
    return {
        "previous_url": reverse("annotate-task", args=[before]) if before is not None else "",
        "next_url": next_url,
    }


@login_required
@require_POST
def skip(request: HttpRequest, pk: int) -> HttpResponse:
    """Skip with a reason, then the next item, whose page offers to undo the skip."""
    assignment = _assignment_or_404(request, pk)
    try:
        assignment_skip(
            assignment=assignment, reason=request.POST.get("reason", ""), user=request_user(request)
        )
    except WorkbenchError as exc:
        messages.error(request, f"Not skipped: {exc.message}")
        return redirect("annotate-task", pk=assignment.pk)
    return redirect(f"{reverse('annotate-next', args=[assignment.study_id])}?skipped={assignment.pk}")


@login_required
@require_POST
def skip_undo(request: HttpRequest, pk: int) -> HttpResponse:
    """Undo one's own skip (services/skip_undo.py): the item comes back when it still can, else why not."""
    assignment = _assignment_or_404(request, pk)
    try:
        assignment_skip_undo(assignment=assignment, user=request_user(request))
    except WorkbenchError as exc:
        messages.error(request, f"The skip cannot be undone: {exc.message}.")
        return redirect("annotate-mine", pk=assignment.study_id)
    messages.success(request, "Skip undone: the item is yours again.")
    return redirect("annotate-task", pk=assignment.pk)


@login_required
def mine(request: HttpRequest, pk: int) -> HttpResponse:
    """The annotator's own items in a study, newest first: thumbnails, readable answers, change a
    submitted one, undo a skip."""
    study = access.study_get_for_annotator(user=request_user(request), id=pk)
    annotator = annotator_for_user(user=request_user(request))
    page, rows = flow_selectors.answer_rows(
        study=study, annotator=annotator, page_number=request.GET.get("page")
    )
    thumbnails = {
        row.assignment.pk: image_display_url(row.assignment.item_id, row.thumbnail_position)
        for row in rows
        if row.thumbnail_position is not None
    }
    return render(
        request,
        "annotate/mine.html",
        {
            "study": study,
            "page": page,
            "rows": [(row, thumbnails.get(row.assignment.pk, "")) for row in rows],
            "progress": task_selectors.study_progress_for(request_user(request), study.pk, annotator),
        },
    )


@login_required
def reveal(request: HttpRequest, pk: int) -> HttpResponse:
    """After a submit: the machine labels for this item; each showing is logged; agree or disagree."""
    assignment = _assignment_or_404(request, pk)
    if request.method == "POST":
        log = RevealLog.objects.filter(
            pk=id_from_text(request.POST.get("reveal")) or 0, assignment=assignment
        ).first()
        if log is None:
            raise Http404("no such reveal")
        agreement = {
            key[len("agree-") :]: value
            for key, value in request.POST.dict().items()
            if key.startswith("agree-") and value
        }
        try:
            reveal_record_agreement(reveal=log, user=request_user(request), agreement=agreement)
        except WorkbenchError as exc:
            messages.error(request, exc.message)
            return redirect("annotate-reveal", pk=assignment.pk)
        return redirect("annotate-next", pk=assignment.study_id)
    labels = task_selectors.machine_labels(assignment.item)
    try:
        log = reveal_log_create(assignment=assignment, shown=labels)
    except (NotAllowed, Conflict) as exc:
        messages.error(request, exc.message)
        return redirect("annotate-task", pk=assignment.pk)
    own = task_selectors.stored_answers(item=assignment.item, annotator=assignment.annotator)
    questions = sorted({entry["question"] for entry in labels})
    rows = [
        {
            "question": key,
            "mine": own.get(key, {}).get("value"),
            "labels": [entry for entry in labels if entry["question"] == key],
        }
        for key in questions
    ]
    return render(
        request,
        "annotate/reveal.html",
        {"assignment": assignment, "study": assignment.study, "rows": rows, "log": log},
    )


@login_required
def item_image_display(request: HttpRequest, pk: int, position: int) -> HttpResponseBase:
    """The resized display version of an item image (same access rule as the original)."""
    return item_image_page(request, pk, position, display=True)
