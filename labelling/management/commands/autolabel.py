from __future__ import annotations

from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from annotations.command_args import dump, study_arg
from annotations.models import Annotator
from common.errors import WorkbenchError
from labelling.models import LabellingJob
from labelling.services import labelling_job_create, labelling_job_run


class Command(BaseCommand):
    help = "Run a registered machine labeller over a study's items (or a seeded sample), with a progress bar."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--labeller", required=True, help="The labeller's name (see register_labeller)")
        parser.add_argument("--labeller-version", help="Default: the most recently registered version")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--sample", type=int, help="Label a seeded random sample of N items")
        group.add_argument("--all", action="store_true", help="Label every item (the default)")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        labellers = Annotator.objects.filter(
            kind=Annotator.Kind.MACHINE, study__isnull=True, name=options["labeller"]
        )
        if options["labeller_version"]:
            labellers = labellers.filter(version=options["labeller_version"])
        annotator = labellers.order_by("-created_at", "-id").first()
        if annotator is None:
            raise CommandError(
                f"no labeller {options['labeller']!r} registered (manage.py register_labeller)"
            )
        try:
            job = labelling_job_create(
                study=study,
                annotator=annotator,
                user=None,
                sample_size=options["sample"],
                seed=options["seed"],
                enqueue=False,
            )
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        # The wrapped stream: OutputWrapper.write would end each of tqdm's "\r" refreshes with a newline.
        stream = cast("TextIO", self.stderr._out)
        bar = tqdm(total=0, unit="item", desc=f"{annotator.name} {annotator.version}", file=stream)

        def show(current: LabellingJob) -> None:
            bar.total = current.total_items
            bar.n = current.done_items
            bar.set_postfix(answered=current.answered, failed=current.failed, cached=current.cached)
            bar.refresh()

        try:
            job = labelling_job_run(job_id=job.pk, progress=show)
        except KeyboardInterrupt:
            LabellingJob.objects.filter(pk=job.pk).update(cancel_requested=True)
            raise CommandError(
                f"interrupted; job {job.pk} stopped (run again: answered items are skipped)"
            ) from None
        finally:
            bar.close()
        self.stdout.write(
            dump(
                {
                    "job": job.pk,
                    "status": job.status,
                    "labeller": f"{annotator.name} {annotator.version}",
                    "items": job.total_items,
                    "skipped_already_answered": job.skipped,
                    "answered": job.answered,
                    "failed": job.failed,
                    "cached": job.cached,
                    "cost_usd": round(job.cost_usd, 6),
                    "error": job.error,
                }
            )
        )
        if job.status == LabellingJob.Status.FAILED:
            raise CommandError(job.error)
