"""Invitation links from the command line: create one, list a study's links, revoke one (docs/crowd.md)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse
from django.utils import timezone

from annotations.command_args import dump, fail, study_arg, user_arg
from annotations.models import Annotator, Invitation
from annotations.selectors.invitations import invitation_state
from annotations.services.invitations import (
    demographics_from_text,
    invitation_create,
    invitation_revoke,
)
from common.errors import WorkbenchError


def _read(path: Path | None) -> str:
    if path is None:
        return ""
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: not UTF-8 text") from exc


class Command(BaseCommand):
    help = "Create an invitation link to a study (or --list / --revoke ID) and print it as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="Study id or exact name")
        parser.add_argument("--list", action="store_true", help="List the study's links instead")
        parser.add_argument("--revoke", type=int, metavar="ID", help="Withdraw the link with this id instead")
        parser.add_argument("--max-uses", type=int, default=50, help="Accounts the link may create (50)")
        parser.add_argument("--days", type=int, default=14, help="Days until the link expires (14)")
        parser.add_argument(
            "--platform", choices=Invitation.Platform.values, default=Invitation.Platform.NONE
        )
        parser.add_argument("--pool", choices=Annotator.Pool.values, default=Annotator.Pool.CROWD)
        parser.add_argument("--quota", type=int, help="Items per participant")
        parser.add_argument(
            "--min-answered",
            type=int,
            help="Answered items needed for the completion code (default: the quota, or 1)",
        )
        parser.add_argument("--completion-code", default="")
        parser.add_argument("--completion-url", default="", help="Default for Prolific: its completion URL")
        parser.add_argument("--consent", type=Path, help="A text file with the consent text")
        parser.add_argument("--demographics", type=Path, help="A YAML file with the demographic form")
        parser.add_argument(
            "--attribute",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="A fixed attribute everyone who joins gets, e.g. region=South Asia (the rater pool the link "
            "recruits; repeat for more)",
        )
        parser.add_argument("--label", default="")
        parser.add_argument("--owner", help="Username of the researcher creating it")
        parser.add_argument(
            "--base-url", default="", help="e.g. https://workbench.example.org, to print full links"
        )

    def _row(self, invitation: Invitation, base_url: str) -> dict[str, Any]:
        return {
            "id": invitation.pk,
            "label": invitation.label,
            "url": base_url.rstrip("/") + reverse("join", kwargs={"token": invitation.token}),
            "platform": invitation.platform,
            "pool": invitation.pool,
            "uses": invitation.uses,
            "max_uses": invitation.max_uses,
            "items_per_participant": invitation.items_per_participant,
            "expires_at": invitation.expires_at.isoformat(),
            "completion_code": invitation.completion_code,
            "completion_url": invitation.completion_url,
            "state": invitation_state(invitation),
            "attributes": invitation.attributes,
        }

    def handle(self, *args: Any, **options: Any) -> None:
        study = study_arg(options["study"])
        base_url = options["base_url"]
        if options["list"]:
            self.stdout.write(dump([self._row(i, base_url) for i in study.invitations.order_by("id")]))
            return
        if options["revoke"] is not None:
            invitation = study.invitations.filter(pk=options["revoke"]).first()
            if invitation is None:
                raise CommandError(f"study {study.pk} has no invitation {options['revoke']}")
            self.stdout.write(dump(self._row(invitation_revoke(invitation=invitation), base_url)))
            return
        if not 1 <= options["days"] <= 3650:
            raise CommandError("--days must be between 1 and 3650")
        attributes: dict[str, str] = {}
        for pair in options["attribute"]:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise CommandError(f"--attribute {pair!r}: write KEY=VALUE, e.g. region=South Asia")
            if key.strip() in attributes:
                raise CommandError(f"--attribute {key.strip()!r} is given twice; give each attribute once")
            attributes[key.strip()] = value.strip()
        try:
            invitation = invitation_create(
                study=study,
                created_by=user_arg(options["owner"]),
                max_uses=options["max_uses"],
                expires_at=timezone.now() + timedelta(days=options["days"]),
                platform=options["platform"],
                pool=options["pool"],
                items_per_participant=options["quota"],
                min_answered_items=options["min_answered"],
                completion_code=options["completion_code"],
                completion_url=options["completion_url"],
                consent_text=_read(options["consent"]),
                demographics=demographics_from_text(_read(options["demographics"])),
                label=options["label"],
                attributes=attributes or None,
            )
        except WorkbenchError as exc:
            raise fail(exc) from exc
        self.stdout.write(dump(self._row(invitation, base_url)))
