"""Creating and changing studies, sharing them, enrolling annotators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet

from annotations.models import Annotator, Enrollment, Participant, Study, User
from annotations.protocols.schema import (
    Protocol,
    ProtocolError,
    load_preset,
    load_protocol_text,
    protocol_from_dict,
)
from annotations.services.study_options import study_options_replace
from common.errors import NotAllowed, ValidationFailed

MAX_OVERLAP = 100


def protocol_resolve(
    *,
    preset: str | None = None,
    protocol_text: str | None = None,
    protocol: dict[str, Any] | None = None,
    source: str = "",
) -> Protocol:
    """Exactly one of a preset key, protocol YAML/JSON text or a protocol dict; validated."""
    given = [value is not None and value != "" for value in (preset, protocol_text, protocol)]
    if sum(given) != 1:
        raise ValidationFailed("give exactly one of a preset or a protocol")
    try:
        if preset:
            return load_preset(preset)
        if protocol_text:
            return load_protocol_text(protocol_text, source=source)
        return protocol_from_dict(protocol, source=source)
    except ProtocolError as exc:
        raise ValidationFailed(str(exc), {"protocol": str(exc)}) from exc


def _check_numbers(*, overlap: int, lease_minutes: int) -> None:
    if not 1 <= overlap <= MAX_OVERLAP:
        raise ValidationFailed(f"overlap must be between 1 and {MAX_OVERLAP}", {"overlap": "out of range"})
    if not 1 <= lease_minutes <= 7 * 24 * 60:
        raise ValidationFailed("lease_minutes must be between 1 and 10080", {"lease_minutes": "out of range"})


@transaction.atomic
def study_create(
    *,
    owner: User,
    name: str,
    protocol: Protocol,
    preset: str = "",
    overlap: int = 3,
    lease_minutes: int = 30,
    description: str = "",
    imported_from: str = "",
) -> Study:
    """Create a study owned by a researcher (or admin); ``imported_from``: the file it came from, if any."""
    if not owner.is_researcher:
        raise NotAllowed("only researchers and admins create studies")
    name = name.strip()
    if not name:
        raise ValidationFailed("a study needs a name", {"name": "required"})
    _check_numbers(overlap=overlap, lease_minutes=lease_minutes)
    study = Study(
        owner=owner,
        name=name[:200],
        description=description,
        preset=preset or protocol.key,
        protocol=protocol.to_dict(),
        overlap=overlap,
        lease_minutes=lease_minutes,
        imported_from=imported_from[:255],
    )
    study.full_clean()
    study.save()
    return study


UPDATABLE_FIELDS = ("name", "description", "overlap", "lease_minutes", "status")


@transaction.atomic
def study_update(
    *,
    study: Study,
    options: Mapping[str, Any] | None = None,
    linkable: QuerySet[Study] | None = None,
    **changes: Any,
) -> Study:
    """Change a study's editable fields (not its protocol once annotations exist).

    ``options``, the settings as one object (the API's shape, see ``services/study_options.py``), replaces
    them all; ``linkable`` are the studies the caller may read (a visual-ness study must be one).
    """
    unknown = sorted(set(changes) - set(UPDATABLE_FIELDS))
    if unknown:
        raise ValidationFailed(f"'{unknown[0]}' cannot be changed here")
    if options is not None:
        study = study_options_replace(
            study=study, options=options, linkable=linkable if linkable is not None else Study.objects.none()
        )
    if not changes:
        return study
    study = Study.objects.select_for_update().get(pk=study.pk)
    for field, value in changes.items():
        setattr(study, field, value)
    _check_numbers(overlap=study.overlap, lease_minutes=study.lease_minutes)
    if study.status not in Study.Status.values:
        raise ValidationFailed(
            f"status must be one of {', '.join(Study.Status.values)}", {"status": "invalid"}
        )
    if not study.name.strip():
        raise ValidationFailed("a study needs a name", {"name": "required"})
    study.save(update_fields=[*changes, "updated_at"])
    return study


@transaction.atomic
def study_share(*, study: Study, user: User) -> None:
    """Let another researcher see and change the study."""
    if not user.is_researcher:
        raise ValidationFailed(f"{user.username} is not a researcher")
    if user.pk == study.owner_id:
        raise ValidationFailed("the owner already has the study")
    study.shared_with.add(user)


def annotator_for_user(*, user: User, pool: str | None = None) -> Annotator:
    """The human annotator record of an account, created on first use. Free when the account was
    loaded with its annotator (``select_related``, as the API's token authentication does)."""
    if pool is None:
        try:
            return user.annotator
        except Annotator.DoesNotExist:
            pass
    annotator, created = Annotator.objects.get_or_create(
        user=user,
        defaults={"kind": Annotator.Kind.HUMAN, "name": user.username, "pool": pool or Annotator.Pool.CROWD},
    )
    if not created and pool and annotator.pool != pool:
        annotator.pool = pool
        annotator.save(update_fields=["pool"])
    return annotator


@transaction.atomic
def enrollment_add(*, study: Study, user: User, pool: str | None = None) -> Enrollment:
    """Enrol an account in a study (idempotent) and make sure it has an annotator record.

    An account made by an invitation (a participant) belongs to its study only and is refused elsewhere.
    """
    if pool is not None and pool not in Annotator.Pool.values:
        raise ValidationFailed(f"pool must be one of {', '.join(Annotator.Pool.values)}")
    if Participant.objects.filter(user=user).exclude(study=study).exists():
        raise NotAllowed(f"{user.username} joined another study through an invitation and is limited to it")
    annotator_for_user(user=user, pool=pool)
    enrollment, _ = Enrollment.objects.get_or_create(study=study, user=user)
    return enrollment


@transaction.atomic
def enrollment_add_pool(*, study: Study, pool: str) -> list[Enrollment]:
    """Enrol every annotator account of a pool (accounts never given a pool count as crowd); idempotent.

    Accounts made by invitations (participants) are left out: each belongs to its own study only.
    """
    if pool not in Annotator.Pool.values:
        raise ValidationFailed(f"pool must be one of {', '.join(Annotator.Pool.values)}")
    users = User.objects.filter(role=User.Role.ANNOTATOR, is_active=True, participant__isnull=True)
    if pool == Annotator.Pool.CROWD:
        users = users.filter(Q(annotator__pool=pool) | Q(annotator__isnull=True))
    else:
        users = users.filter(annotator__pool=pool)
    return [enrollment_add(study=study, user=user) for user in users.order_by("username")]


def study_set_running(*, study: Study, running: bool) -> Study:
    """Pause (no new items are handed out; leases held can still be submitted) or resume a study."""
    if study.status == Study.Status.CLOSED:
        raise ValidationFailed("a closed study cannot be paused or resumed; change its status in settings")
    return study_update(study=study, status=Study.Status.ACTIVE if running else Study.Status.PAUSED)


@transaction.atomic
def study_set_reveal(*, study: Study, reveal: bool) -> Study:
    """Switch reveal after submit: show machine labels to a person once they have answered (and log it)."""
    if not isinstance(reveal, bool):
        raise ValidationFailed("reveal_after_submit must be true or false")
    locked = Study.objects.select_for_update().get(pk=study.pk)
    locked.reveal_after_submit = reveal
    locked.save(update_fields=["reveal_after_submit", "updated_at"])
    study.reveal_after_submit = reveal
    return locked
