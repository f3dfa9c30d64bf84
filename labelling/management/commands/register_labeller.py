from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotations.command_args import dump
from common.errors import WorkbenchError
from common.redaction import redact
from labelling.labellers.registry import LABELLER_CLASSES
from labelling.services import labeller_config_from_text, labeller_register


class Command(BaseCommand):
    help = (
        "Register a machine labeller (kind + configuration). Its version defaults to a digest of the "
        "configuration, so a new prompt or model is a new version. See docs/labellers.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--kind", required=True, help=f"One of {', '.join(LABELLER_CLASSES)} or a dotted path"
        )
        parser.add_argument("--config", type=Path, help="JSON or YAML file with the labeller's settings")
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="A setting (value read as JSON when it parses, else text); repeatable",
        )
        parser.add_argument("--labeller-version", help="Default: a digest of kind and configuration")

    def handle(self, *args: Any, **options: Any) -> None:
        config: dict[str, Any] = {}
        if options["config"] is not None:
            try:
                loaded = labeller_config_from_text(options["config"].read_text(encoding="utf-8"))
            except OSError as exc:
                raise CommandError(f"{options['config']}: {exc}") from exc
            except WorkbenchError as exc:
                raise CommandError(f"{options['config']}: {exc.message}") from exc
            config.update(loaded)
        for pair in options["set"]:
            key, sep, raw = pair.partition("=")
            if not sep or not key.strip():
                raise CommandError(f"--set {pair!r}: use KEY=VALUE")
            try:
                config[key.strip()] = json.loads(raw)
            except json.JSONDecodeError:
                config[key.strip()] = raw
        try:
            annotator = labeller_register(
                name=options["name"], kind=options["kind"], config=config, version=options["labeller_version"]
            )
        except WorkbenchError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(
            dump(
                {
                    "id": annotator.pk,
                    "name": annotator.name,
                    "version": annotator.version,
                    "config": redact(annotator.config),  # secrets are write-only (docs/security.md)
                }
            )
        )
