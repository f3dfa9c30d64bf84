"""Celery side of InterMit: advancing a step, and the hook that does it when a step's job finishes.

A step is a generation job and then a labelling job (``mitigation.services``). When either task
finishes (``task_postrun``, in workers and in eager mode alike), the hook queues ``advance_step_task``
for the open steps of that job, so a step moves on by itself. A job resumed or re-run later finishes
through the same task, so the hook fires again; ``mitigation_step_advance`` is idempotent, so an extra
call is harmless.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import task_postrun

from generation.services import GENERATION_TASK
from labelling.services import LABELLING_TASK
from mitigation.models import MitigationStep
from mitigation.services import mitigation_step_advance, mitigation_steps_after_job


@shared_task(name="mitigation.tasks.advance_step_task", acks_late=True)
def advance_step_task(step_id: int) -> str:
    """Advance one step from what its jobs have done (idempotent)."""
    step = MitigationStep.objects.filter(pk=step_id).first()
    if step is None:
        return "gone"
    return mitigation_step_advance(step=step).status


@task_postrun.connect
def advance_after_job(sender: Any = None, args: Any = None, **_kwargs: Any) -> None:
    """After a generation or labelling task: queue the advance of the steps waiting on that job."""
    name = getattr(sender, "name", "")
    if name not in (GENERATION_TASK, LABELLING_TASK) or not args:
        return
    job_id = int(args[0])
    if name == GENERATION_TASK:
        mitigation_steps_after_job(generation_job_id=job_id)
    else:
        mitigation_steps_after_job(labelling_job_id=job_id)
