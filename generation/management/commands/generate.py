from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from annotations.command_args import dump, study_arg, user_arg
from common.errors import WorkbenchError
from generation.models import GenerationJob
from generation.prompts.sets import DESIGNS, PromptSetError, prompt_set_build
from generation.services import generation_job_create, generation_job_run, model_spec_from_dict


class Command(BaseCommand):
    help = (
        "Generate a prompt set's images into a study with a diffusers model (local folder or hub id), "
        "with a progress bar. Runs here by default; --background queues it for a gpu worker."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--prompt-set", required=True, choices=DESIGNS)
        parser.add_argument(
            "--prompts",
            type=Path,
            help="CSV/JSONL of prompts (file), instruction pairs (agent) or a SeeGULL CSV (visage-pull)",
        )
        parser.add_argument("--subject", help="biasconnect-mitigation: the occupation, e.g. nurse")
        parser.add_argument("--mitigate", help="biasconnect-mitigation: axes to mitigate, comma-separated")
        parser.add_argument(
            "--total-images", type=int, default=48, help="biasconnect-mitigation: images per set"
        )
        parser.add_argument("--model", required=True, help="A diffusers folder or a hub id")
        parser.add_argument("--revision")
        parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "float16", "bfloat16"])
        parser.add_argument(
            "--scheduler", help="A diffusers scheduler class name, e.g. EulerDiscreteScheduler"
        )
        parser.add_argument("--steps", type=int, default=30)
        parser.add_argument("--guidance", type=float, default=7.5)
        parser.add_argument("--width", type=int, default=512)
        parser.add_argument("--height", type=int, default=512)
        parser.add_argument("--negative-prompt")
        parser.add_argument("--batch-size", type=int, default=4)
        parser.add_argument("--images-per-prompt", type=int, help="Override the design's images per prompt")
        parser.add_argument("--limit", type=int, help="Only the first N prompts")
        parser.add_argument("--seed", type=int, default=0, help="Base seed")
        parser.add_argument("--label", help="Model name stored on items (default: the folder or hub name)")
        parser.add_argument("--name", help="Prompt set name (default: the design's)")
        parser.add_argument("--device", choices=["cuda", "mps", "cpu"])
        parser.add_argument(
            "--background", action="store_true", help="Queue for a worker and follow its progress"
        )
        parser.add_argument("--owner")

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        user = user_arg(options["owner"]) if options["owner"] else study.owner
        try:
            prompt_set = prompt_set_build(
                options["prompt_set"],
                path=options["prompts"],
                images_per_prompt=options["images_per_prompt"],
                limit=options["limit"],
                name=options["name"],
                subject=options["subject"],
                mitigate=[a.strip() for a in (options["mitigate"] or "").split(",") if a.strip()],
                total_images=options["total_images"],
                seed=options["seed"],
            )
            spec = model_spec_from_dict(
                {
                    "source": options["model"],
                    "revision": options["revision"],
                    "dtype": options["dtype"],
                    "scheduler": options["scheduler"],
                    "steps": options["steps"],
                    "guidance": options["guidance"],
                    "width": options["width"],
                    "height": options["height"],
                    "negative_prompt": options["negative_prompt"],
                    "batch_size": options["batch_size"],
                }
            )
            job = generation_job_create(
                study=study,
                prompt_set=prompt_set,
                spec=spec,
                user=user,
                base_seed=options["seed"],
                model_label=options["label"],
                enqueue=options["background"],
            )
        except PromptSetError as exc:
            raise CommandError(str(exc)) from exc
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        # The wrapped stream: OutputWrapper.write would end each of tqdm's "\r" refreshes with a newline.
        stream = cast("TextIO", self.stderr._out)
        bar = tqdm(total=job.total_images, unit="img", desc=f"job {job.pk}", file=stream)

        def show(current: GenerationJob) -> None:
            bar.total = current.total_images
            bar.n = current.done_images
            bar.set_postfix(made=current.generated, had=current.skipped, failed=current.failed)
            bar.refresh()

        try:
            if options["background"]:
                job.refresh_from_db()
                while job.is_active:
                    show(job)
                    time.sleep(1)
                    job.refresh_from_db()
            else:
                # The command's own run may load any folder; a job for the workers (--background) may not.
                job = generation_job_run(
                    job_id=job.pk, progress=show, device=options["device"], any_folder=True
                )
            show(job)
        except KeyboardInterrupt:
            GenerationJob.objects.filter(pk=job.pk).update(cancel_requested=True)
            raise CommandError(
                f"interrupted; job {job.pk} asked to stop (re-run it to fill in the rest)"
            ) from None
        finally:
            bar.close()
        job.refresh_from_db()
        self.stdout.write(
            dump(
                {
                    "job": job.pk,
                    "status": job.status,
                    "total": job.total_images,
                    "generated": job.generated,
                    "already_there": job.skipped,
                    "failed": job.failed,
                    "error": job.error,
                    "failures": list(job.failures.values("external_id", "reason")[:20]),
                }
            )
        )
        if job.status == GenerationJob.Status.FAILED:
            raise CommandError(job.error)
