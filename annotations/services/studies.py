"""Creating and changing studies, sharing them, enrolling annotators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from annotations.access import (
    accounts_enrollable_by,
    enrollable_account_get,
    enrollment_check,
    studies_writable_by,
    study_can_write,
)
from annotations.locks import study_lock
from annotations.models import Annotator, Assignment, Enrollment, Participant, Pool, Study, User
from annotations.protocols.schema import (
    Protocol,
    ProtocolError,
    load_preset,
    load_protocol_text,
    protocol_from_dict,
)
from annotations.selectors.studies import launch_refusal
from annotations.services.drafts import drafts_drop
from annotations.services.study_options import study_options_replace
from common.errors import Conflict, NotAllowed, NotFoundError, ValidationFailed, WorkbenchError

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
    status: str = Study.Status.ACTIVE,
) -> Study:
    """Create a study owned by a researcher (or admin); ``imported_from``: the file it came from, if any.

    ``status``: the study page and the REST API create a ``draft`` (launched later by ``study_launch``);
    imports and commands, which bring their items with them, create it ``active``.
    """
    if status not in Study.Status.values:
        raise ValidationFailed(
            f"status must be one of {', '.join(Study.Status.values)}", {"status": "invalid"}
        )
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
        status=status,
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
    study = study_lock(study.pk)
    if study.status == Study.Status.DRAFT and changes.get("status") == Study.Status.ACTIVE:
        refusal = launch_refusal(study)
        if refusal:
            raise ValidationFailed(f"the study cannot be launched: {refusal}", {"status": "not ready"})
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


NOT_SHAREABLE = "no researcher named {username!r} with whom this study can be shared"


@transaction.atomic
def study_share(*, study: Study, username: str) -> User:
    """Let the researcher named ``username`` see and change the study.

    Every refusal (no such account, an account that is not a researcher's, the owner) is the same
    ValidationFailed with the same message, so sharing tells no one which usernames exist or what
    role they have (docs/security.md, "Sharing a study")."""
    other = User.objects.filter(username=username).exclude(pk=study.owner_id).first()
    if other is None or not other.is_researcher:
        raise ValidationFailed(NOT_SHAREABLE.format(username=username), {"username": "not shareable"})
    study.shared_with.add(other)
    return other


def annotator_for_user(*, user: User) -> Annotator:
    """The human annotator record of an account, created on first use. Free when the account was
    loaded with its annotator (``select_related``, as the API's token authentication does).

    It holds no pool and no demographic answers: those belong to each enrolment (per study)."""
    try:
        return user.annotator
    except Annotator.DoesNotExist:
        pass
    annotator, _created = Annotator.objects.get_or_create(
        user=user, defaults={"kind": Annotator.Kind.HUMAN, "name": user.username}
    )
    return annotator


def _check_pool(pool: str | None) -> None:
    if pool is not None and pool not in Pool.values:
        raise ValidationFailed(f"pool must be one of {', '.join(Pool.values)}", {"pool": "invalid"})


@transaction.atomic
def enrollment_add(
    *,
    study: Study,
    user: User,
    pool: str | None = None,
    by: User | None = None,
    attributes: dict[str, Any] | None = None,
) -> Enrollment:
    """Enrol an account in a study (idempotent) and make sure it has an annotator record.

    ``pool`` is the account's pool *in this study* (default crowd for a new enrolment; an existing
    enrolment keeps its pool unless one is given); ``attributes`` its demographic answers to this
    study. Nothing of another study changes. ``by``: the person asking, held to the enrolment rule
    (``access.enrollment_check``); None only for the workbench's own steps (an invitation's join,
    the demo, tests). An account made by an invitation (a participant) belongs to its study only and
    is refused elsewhere.
    """
    _check_pool(pool)
    if by is not None:
        enrollment_check(by=by, study=study, user=user)
    if Participant.objects.filter(user=user).exclude(study=study).exists():
        raise NotAllowed(f"{user.username} joined another study through an invitation and is limited to it")
    annotator_for_user(user=user)
    enrollment, created = Enrollment.objects.select_for_update().get_or_create(
        study=study,
        user=user,
        defaults={"pool": pool or Pool.CROWD, "attributes": attributes or {}},
    )
    changed = []
    if not created and pool is not None and enrollment.pool != pool:
        enrollment.pool = pool
        changed.append("pool")
    if not created and attributes is not None and enrollment.attributes != attributes:
        enrollment.attributes = attributes
        changed.append("attributes")
    if changed:
        enrollment.save(update_fields=changed)
    return enrollment


MAX_ENROLLED_AT_ONCE = 500


@transaction.atomic
def enrollments_add_many(*, study: Study, usernames: list[str], pool: str, by: User) -> list[Enrollment]:
    """Enrol several accounts at once in ``pool``, all or none: each name is held to the same rule as
    one enrolment (``enrollable_account_get``, ``enrollment_add``); when any is refused nobody is
    enrolled and the error names every refused account."""
    names = list(dict.fromkeys(name.strip() for name in usernames if name.strip()))
    if not names:
        raise ValidationFailed("name at least one account", {"usernames": "empty"})
    if len(names) > MAX_ENROLLED_AT_ONCE:
        raise ValidationFailed(
            f"at most {MAX_ENROLLED_AT_ONCE} accounts at once ({len(names)} given)", {"usernames": "too many"}
        )
    enrolled, problems = [], []
    for name in names:
        try:
            user = enrollable_account_get(by=by, username=name)
            with transaction.atomic():
                enrolled.append(enrollment_add(study=study, user=user, pool=pool, by=by))
        except WorkbenchError as exc:
            problems.append(exc.message)
    if problems:
        raise ValidationFailed(
            f"nobody was enrolled: {'; '.join(problems)}", {"usernames": "; ".join(problems)}
        )
    return enrolled


@transaction.atomic
def enrollment_remove(*, study: Study, user: User, by: User) -> int:
    """Unenrol an account: it gets no more items of the study and its live leases go back (returns how
    many). Its answers stay and keep counting (exclude it to stop that: ``services/quality.py``).
    Refused for an account that joined through an invitation (it belongs to this study) and for an
    enrolment holding demographic answers (removing it would lose them)."""
    if not study_can_write(by, study):
        raise NotAllowed("you may read this study but not change it")
    enrollment = Enrollment.objects.select_for_update().filter(study=study, user=user).first()
    if enrollment is None:
        raise NotFoundError(f"{user.username} is not enrolled in this study")
    if Participant.objects.filter(user=user, study=study).exists():
        raise Conflict(
            f"{user.username} joined through an invitation link and belongs to this study: exclude them "
            "on the progress page instead"
        )
    if enrollment.attributes:
        raise Conflict(
            f"{user.username} gave demographic answers to this study; unenrolling would lose them: "
            "exclude them on the progress page instead"
        )
    leases = Assignment.objects.filter(study=study, annotator__user=user, status=Assignment.Status.LEASED)
    drafts_drop(leases)
    released = leases.update(status=Assignment.Status.EXPIRED, lease_expires_at=timezone.now())
    enrollment.delete()
    return released


@transaction.atomic
def enrollment_add_pool(*, study: Study, pool: str, by: User) -> list[Enrollment]:
    """Enrol, in ``pool``, every account ``by`` may enrol that is of that pool in another study ``by``
    may change (admins: in any study; for the crowd pool, admins also take annotator accounts never
    enrolled anywhere). Idempotent: an account already enrolled here keeps its pool here.

    The candidates are ``access.accounts_enrollable_by(by)``: never staff, researchers or admins,
    never another researcher's annotators, never participants (each belongs to its own study).
    """
    if pool not in Pool.values:
        raise ValidationFailed(f"pool must be one of {', '.join(Pool.values)}", {"pool": "invalid"})
    candidates = (
        accounts_enrollable_by(by)
        .filter(is_active=True, participant__isnull=True)
        .exclude(enrollments__study=study)
    )
    source = Enrollment.objects.filter(pool=pool)
    if not by.is_admin:
        source = source.filter(study__in=studies_writable_by(by))
    of_pool = Q(pk__in=source.values("user_id"))
    if pool == Pool.CROWD and by.is_admin:
        of_pool |= ~Q(pk__in=Enrollment.objects.values("user_id"))
    users = candidates.filter(of_pool).distinct().order_by("username")
    return [enrollment_add(study=study, user=user, pool=pool) for user in users]


@transaction.atomic
def study_launch(*, study: Study) -> Study:
    """Launch a draft study: it becomes active and hands out items (refused with the reason when it has
    no items or no one to judge them; see ``launch_refusal``)."""
    locked = study_lock(study.pk)
    if locked.status != Study.Status.DRAFT:
        raise ValidationFailed(
            f"the study is already {locked.get_status_display().lower()}; only a draft is launched",
            {"status": "not a draft"},
        )
    return study_update(study=locked, status=Study.Status.ACTIVE)


def study_set_running(*, study: Study, running: bool) -> Study:
    """Pause (no new items are handed out; leases held can still be submitted) or resume a study."""
    if study.status == Study.Status.CLOSED:
        raise ValidationFailed("a closed study cannot be paused or resumed; change its status in settings")
    if study.status == Study.Status.DRAFT:
        raise ValidationFailed("the study is a draft: launch it from its study page first")
    return study_update(study=study, status=Study.Status.ACTIVE if running else Study.Status.PAUSED)


@transaction.atomic
def study_set_reveal(*, study: Study, reveal: bool) -> Study:
    """Switch reveal after submit: show machine labels to a person once they have answered (and log it)."""
    if not isinstance(reveal, bool):
        raise ValidationFailed("reveal_after_submit must be true or false")
    locked = study_lock(study.pk)
    locked.reveal_after_submit = reveal
    locked.save(update_fields=["reveal_after_submit", "updated_at"])
    study.reveal_after_submit = reveal
    return locked
