from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump
from common.chat_client import ChatClient, ChatConfigError, ChatSettings
from common.errors import WorkbenchError
from generation.models import GenerationJob
from generation.refinement import prompts_refine
from generation.services import generation_job_create, model_spec_from_dict


class Command(BaseCommand):
    help = (
        "SSI prompt refinement: ask an LLM (any OpenAI-compatible endpoint) for refined prompts from a "
        "generation job's images and the stereotypes judged present; print them, and with --generate "
        "queue a linked generation job for the refined set."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--job", type=int, required=True, help="The initial generation job")
        parser.add_argument("--base-url", required=True, help="e.g. https://api.openai.com/v1")
        parser.add_argument("--model", required=True)
        parser.add_argument(
            "--api-key-env",
            default="WORKBENCH_LABELLER_KEY_OPENAI",
            help="Variable holding the key, named WORKBENCH_LABELLER_KEY_... ('' for none)",
        )
        parser.add_argument(
            "--source", default="consensus", help="Where stereotype labels come from: consensus or a labeller"
        )
        parser.add_argument("--name", help="Name of the refined set (default: <initial>-refined)")
        parser.add_argument(
            "--generate", action="store_true", help="Queue a generation job for the refined set"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        job = GenerationJob.objects.select_related("study").filter(pk=options["job"]).first()
        if job is None:
            raise CommandError(f"no generation job {options['job']}")
        try:
            client = ChatClient(
                ChatSettings(
                    base_url=options["base_url"],
                    model=options["model"],
                    api_key_env=options["api_key_env"] or None,
                )
            )
        except ChatConfigError as exc:
            raise CommandError(str(exc)) from exc
        try:
            report = prompts_refine(job=job, client=client, source=options["source"], name=options["name"])
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        finally:
            client.close()
        result = report.as_dict()
        if options["generate"] and report.refined is not None:
            new_job = generation_job_create(
                study=job.study,
                prompt_set=report.refined,
                spec=model_spec_from_dict(job.model_spec),
                user=job.created_by,
                base_seed=job.base_seed,
                model_label=job.model_label,
            )
            result["generation_job"] = new_job.pk
        self.stdout.write(dump(result))
        if report.refined is None:
            raise CommandError("no prompt was refined")
