from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump, fail, user_arg
from annotations.services.studies import protocol_resolve, study_create
from common.errors import WorkbenchError


class Command(BaseCommand):
    help = "Create a study from a preset or a protocol file and print it as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--preset", help="A shipped preset key (see docs/protocols.md)")
        group.add_argument("--protocol", type=Path, help="A protocol YAML file")
        parser.add_argument("--overlap", type=int, default=3)
        parser.add_argument("--lease-minutes", type=int, default=30)
        parser.add_argument("--description", default="")
        parser.add_argument("--owner", help="Username of the owning researcher")

    def handle(self, *args: Any, **options: Any) -> None:
        owner = user_arg(options["owner"])
        try:
            if options["protocol"] is not None:
                path: Path = options["protocol"]
                if not path.is_file():
                    raise CommandError(f"{path}: no such file")
                protocol = protocol_resolve(protocol_text=path.read_text(encoding="utf-8"), source=path.name)
            else:
                protocol = protocol_resolve(preset=options["preset"])
            study = study_create(
                owner=owner,
                name=options["name"],
                protocol=protocol,
                preset=options["preset"] or "",
                overlap=options["overlap"],
                lease_minutes=options["lease_minutes"],
                description=options["description"],
            )
        except WorkbenchError as exc:
            raise fail(exc) from exc
        except UnicodeDecodeError as exc:
            raise CommandError("the protocol file is not UTF-8 text") from exc
        self.stdout.write(
            dump(
                {
                    "id": study.pk,
                    "name": study.name,
                    "owner": owner.username,
                    "preset": study.preset,
                    "unit": study.protocol_obj.unit,
                    "questions": [q.key for q in study.protocol_obj.questions],
                    "overlap": study.overlap,
                    "lease_minutes": study.lease_minutes,
                    "status": study.status,
                }
            )
        )
