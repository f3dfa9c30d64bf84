"""Refitting ``posterior`` overlap models in the background, as judgements come in (docs/overlap.md).

A ``posterior:P/MAX`` policy decides from a Dawid-Skene model fitted on the study's answers when the
policy is saved or a researcher presses Refit. Between those, every worker's sweep
(``workbench/stale_jobs.py``, every ``WORKBENCH_JOB_SWEEP_SECONDS``) refits the model of each active
study that has collected at least ``WORKBENCH_OVERLAP_REFIT_EVERY`` submitted judgements since its last
fit: the replay's honest ``--fit used`` (each batch stopped by a model of the judgements before it),
run by the workbench itself. A refit decides again the items still open (``study_overlap_refit``).

"Since its last fit" counts submitted judgements of real items (``Item.judgements``); the model keeps
that count as ``study_judgements`` when this module fitted it (a researcher's Refit or a saved policy
leaves the model's own ``judgements``, the answers it was fitted on, to compare with). Each refit runs
under the study's lock and checks again that it is still due, so two workers sweeping at once refit
once.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q, Sum

from annotations.locks import study_lock
from annotations.models import Item, Study
from annotations.services.studies import study_overlap_refit

POSTERIOR_PREFIX = "posterior:"


def _judgements_now(study_id: int) -> int:
    """Submitted judgements of the study's real items (control items judge annotators, not the item)."""
    done = Item.objects.filter(study_id=study_id, control_kind="").aggregate(n=Sum("judgements"))["n"]
    return int(done or 0)


def _fitted_on(model: dict[str, Any] | None) -> int:
    model = model or {}
    return int(model.get("study_judgements", model.get("judgements", 0)) or 0)


def overlap_refits_due(*, every: int) -> list[int]:
    """Ids of the active studies under a ``posterior`` policy with ``every`` or more submitted judgements
    beyond what their model was fitted on (none when ``every`` is 0 or less). One query."""
    if every <= 0:
        return []
    studies = (
        Study.objects.filter(status=Study.Status.ACTIVE, overlap_policy__startswith=POSTERIOR_PREFIX)
        .annotate(done=Sum("items__judgements", filter=Q(items__control_kind="")))
        .values_list("id", "done", "overlap_model")
    )
    return [pk for pk, done, model in studies if int(done or 0) - _fitted_on(model) >= every]


def overlap_refit_if_due(*, study_id: int, every: int) -> bool:
    """Refit one study's model when it is still due (checked under the study's lock); whether it was."""
    with transaction.atomic():
        locked = study_lock(study_id)
        done = _judgements_now(study_id)
        due = (
            locked.status == Study.Status.ACTIVE
            and locked.overlap_policy.startswith(POSTERIOR_PREFIX)
            and done - _fitted_on(locked.overlap_model) >= every > 0
        )
        if not due:
            return False
        refitted = study_overlap_refit(study=locked)
        refitted.overlap_model = {**(refitted.overlap_model or {}), "study_judgements": done}
        refitted.save(update_fields=["overlap_model", "updated_at"])
    return True


def overlap_refits_run(*, every: int) -> list[int]:
    """Refit every study that is due; the ids refitted."""
    return [pk for pk in overlap_refits_due(every=every) if overlap_refit_if_due(study_id=pk, every=every)]
