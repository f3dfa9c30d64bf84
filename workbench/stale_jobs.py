"""Jobs whose worker was lost: the sweep over every job kind, and the thread that runs it in workers.

A worker killed mid-job (SIGKILL, the out-of-memory killer, a lost machine) leaves its job RUNNING.
Redis gives the task to another worker after its visibility timeout; the embedded SQLite broker
never gives a task twice. So every worker also sweeps: every ``WORKBENCH_JOB_SWEEP_SECONDS`` it
queues again each job whose heartbeat is older than ``WORKBENCH_JOB_STALE_SECONDS``
(``common.jobs.jobs_resume_stale``; one sweeper wins each job). ``manage.py resume_stale_jobs`` runs
the same sweep once (cron, or with the sweep turned off). docs/deploy.md, "When a worker dies".

The same sweep refits the Dawid-Skene model of each active study under a ``posterior`` overlap policy
that has collected ``WORKBENCH_OVERLAP_REFIT_EVERY`` judgements since its last fit
(``annotations.services.overlap_refits``; docs/overlap.md).
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from kombu.exceptions import KombuError

logger = logging.getLogger(__name__)


def resume_stale_jobs() -> dict[str, list[int]]:
    """Queue again every stale export, import, generation, labelling and report job; the ids by kind."""
    from annotations.interchange.exports import export_jobs_resume_stale
    from annotations.interchange.import_jobs import import_jobs_resume_stale
    from generation.services import generation_jobs_resume_stale
    from labelling.services import labelling_jobs_resume_stale
    from reports.jobs import report_jobs_resume_stale

    return {
        "export": export_jobs_resume_stale(),
        "import": import_jobs_resume_stale(),
        "generation": generation_jobs_resume_stale(),
        "labelling": labelling_jobs_resume_stale(),
        "report": report_jobs_resume_stale(),
    }


def refit_overlap_models() -> list[int]:
    """Refit the posterior overlap models that are due; the studies refitted."""
    from annotations.services.overlap_refits import overlap_refits_run

    return overlap_refits_run(every=int(settings.WORKBENCH_OVERLAP_REFIT_EVERY))


class StaleJobSweeper(threading.Thread):
    """A daemon thread in a worker process that runs :func:`resume_stale_jobs` at once and then
    every ``interval`` seconds until :meth:`stop`. A failing sweep (database or broker away) is
    logged and tried again next time."""

    def __init__(self, interval: float) -> None:
        super().__init__(name="stale-job-sweeper", daemon=True)
        self.interval = interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            while True:
                try:
                    resumed = resume_stale_jobs()
                    if any(resumed.values()):
                        logger.warning("worker lost: jobs queued again %s", resumed)
                    refitted = refit_overlap_models()
                    if refitted:
                        logger.info("overlap models refitted for studies %s", refitted)
                except (DatabaseError, KombuError, OSError):
                    logger.exception("the stale-job sweep failed; trying again in %s s", self.interval)
                finally:
                    close_old_connections()
                if self._stop_event.wait(self.interval):
                    return
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop_event.set()


_sweeper: StaleJobSweeper | None = None


def sweeper_start() -> StaleJobSweeper | None:
    """Start this process's sweeper (none when ``WORKBENCH_JOB_SWEEP_SECONDS`` is 0)."""
    global _sweeper
    interval = int(settings.WORKBENCH_JOB_SWEEP_SECONDS)
    if interval <= 0 or _sweeper is not None:
        return _sweeper
    _sweeper = StaleJobSweeper(interval)
    _sweeper.start()
    return _sweeper


def sweeper_stop() -> None:
    """Stop this process's sweeper, if it runs."""
    global _sweeper
    if _sweeper is not None:
        _sweeper.stop()
        _sweeper = None
