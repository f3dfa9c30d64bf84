from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump, fail, file_arg, source_arg, study_arg
from annotations.interchange.annotation_import import annotations_import
from annotations.interchange.coco_import import coco_import
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = (
        "Import human or machine annotations from a JSONL file, or the boxes of a COCO instances.json "
        "into one boxes question (--format coco --question KEY); all or nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("file", type=file_arg)
        parser.add_argument("--format", choices=["jsonl", "coco"], default="jsonl")
        parser.add_argument("--question", help="coco: the boxes question (or its linked multi question)")
        parser.add_argument("--annotator", help="coco: who drew the boxes (default: the file's, else 'coco')")
        parser.add_argument(
            "--kind", choices=["human", "machine"], help="coco: default from the file (a score: machine)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        coco_only = [name for name in ("question", "annotator", "kind") if options[name]]
        try:
            if options["format"] == "coco":
                if not options["question"]:
                    raise CommandError("--format coco needs --question BOXES_QUESTION")
                report = coco_import(
                    study=study,
                    address=source_arg(options["file"], study=study),
                    question=options["question"],
                    annotator=options["annotator"],
                    kind=options["kind"],
                )
            else:
                if coco_only:
                    raise CommandError(f"--{coco_only[0]} goes with --format coco")
                report = annotations_import(
                    study=study, address=source_arg(options["file"], study=study)
                ).as_dict()
        except WorkbenchError as exc:
            raise fail(exc) from exc
        self.stdout.write(dump(report | {"study": study.pk}))
