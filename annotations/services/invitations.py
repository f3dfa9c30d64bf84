"""Invitations and participants: joining a study without self-registration (see docs/crowd.md).

A researcher creates an invitation (a secret link with an expiry, a number of uses, a pool, an
optional quota, consent text and demographic form, and a crowd platform). Opening it creates an
annotator account scoped to that one study (``participant_join``); a second visit with the same
platform participant id signs back into the same account (``participant_resume``).

Concurrency: ``participant_join`` locks the invitation row (``SELECT ... FOR UPDATE``; on SQLite the
transaction is IMMEDIATE, which serialises writers) and raises ``uses`` with a compare-and-set
(``uses < max_uses``), so a link is never used more than ``max_uses`` times. The unique constraint
on (study, platform, participant id) is the last guard against two accounts for one participant.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from annotations.models import Annotator, Invitation, Participant, Study, User, username_problem
from annotations.selectors.invitations import InvitationRefused, invitation_check
from annotations.selectors.payments import CompletionProgress, completion_progress
from annotations.services.annotator_attributes import attributes_clean
from annotations.services.studies import enrollment_add
from common.checked_input import InputRefused, MalformedJSON, yaml_loads
from common.errors import NotAllowed, ValidationFailed, WorkbenchError

MAX_USES = 100_000
MAX_QUOTA = 100_000
MAX_CONSENT_CHARS = 20_000
MAX_DEMOGRAPHIC_FIELDS = 20
MAX_CHOICES = 50
MAX_LABEL_CHARS = 200
MAX_CHOICE_CHARS = 100
MAX_TEXT_ANSWER_CHARS = 200
MAX_DEMOGRAPHICS_TEXT = 20_000
MAX_ESTIMATED_MINUTES = 24 * 60
DEMOGRAPHIC_KINDS = ("choice", "number", "text")
NUMBER_ANSWER = re.compile(r"-?[0-9]{1,12}(\.[0-9]{1,6})?")
FIELD_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")
# Platform ids go into the database, pages and CSV files: letters, digits, '_' and '-' only.
PLATFORM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
COMPLETION_CODE = re.compile(r"[A-Za-z0-9_-]{1,64}")
PROLIFIC_COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"

# URL parameter names each platform appends to the study link, mapped to our fields.
PLATFORM_PARAMETERS: dict[str, dict[str, str]] = {
    Invitation.Platform.PROLIFIC: {
        "participant_id": "PROLIFIC_PID",
        "platform_study_id": "STUDY_ID",
        "session_id": "SESSION_ID",
    },
    Invitation.Platform.MTURK: {
        "participant_id": "workerId",
        "platform_study_id": "hitId",
        "assignment_id": "assignmentId",
    },
}


RESUME_REFUSED = (
    "This participant id has already started this study in another browser. Open the study again "
    "from the platform (Prolific, MTurk) in the browser you started it in; if that is not possible, "
    "write to the researcher."
)


class ResumeRefused(WorkbenchError):
    """A participant id that already joined, opened without that participant's resume secret (the
    cookie of the browser that joined) or the platform's session id: someone else's session."""

    status_code = 403
    reason = "resume_refused"


def resume_secret_new() -> str:
    """A browser's resume secret (the value of its resume cookie): 256 random bits."""
    return secrets.token_urlsafe(32)


def resume_secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest() if secret else ""


def participant_may_resume(participant: Participant, *, ids: PlatformIds, resume_secret: str) -> bool:
    """Whether a returning visit proves it is this participant: the resume cookie of the browser that
    joined (its hash matches), or the platform's own per-session id where the platform sends one and
    it was stored on joining (Prolific ``SESSION_ID``, MTurk ``assignmentId``). The public participant
    id alone never does (docs/crowd.md, "One account per participant id, and resuming")."""
    stored = participant.resume_secret_hash
    if stored and resume_secret and hmac.compare_digest(stored, resume_secret_hash(resume_secret)):
        return True
    for field in ("session_id", "assignment_id"):
        kept, given = getattr(participant, field), getattr(ids, field)
        if kept and given and kept != MTURK_PREVIEW and hmac.compare_digest(kept, given):
            return True
    return False


class PreviewOnly(WorkbenchError):
    """MTurk shows the task before a worker accepts it (``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``)."""


@dataclass(frozen=True)
class PlatformIds:
    """The ids a crowd platform passed in the link (empty strings when absent)."""

    participant_id: str = ""
    platform_study_id: str = ""
    session_id: str = ""
    assignment_id: str = ""

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


# --- Checking what a researcher writes --------------------------------------------------------------


def demographics_from_text(text: str) -> list[dict[str, Any]]:
    """A demographic form written as YAML (or JSON): a list of fields; validated."""
    text = (text or "").strip()
    if not text:
        return []
    if len(text) > MAX_DEMOGRAPHICS_TEXT:
        raise ValidationFailed("the demographic form is too long", {"demographics": "too long"})
    try:  # nesting and integers bounded, text a database can store (common.checked_input)
        value = yaml_loads(text)
    except MalformedJSON as exc:
        raise ValidationFailed(f"the demographic form: {exc.message}", {"demographics": "not YAML"}) from exc
    except InputRefused as exc:
        raise ValidationFailed(f"the demographic form: {exc.message}", {"demographics": "invalid"}) from exc
    return demographics_clean(value)


def demographics_clean(value: Any) -> list[dict[str, Any]]:
    """Validate a demographic form: ``[{key, label, kind: choice|number|text, choices, required}]``.

    Keys are lower-case identifiers (they become ``Enrollment.attributes`` keys, the names a
    breakdown uses); ``choices`` is required for ``choice`` and not allowed for ``text``;
    ``required`` defaults to true.
    """
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationFailed(
            "the demographic form must be a list of fields", {"demographics": "not a list"}
        )
    if len(value) > MAX_DEMOGRAPHIC_FIELDS:
        raise ValidationFailed(
            f"at most {MAX_DEMOGRAPHIC_FIELDS} demographic fields", {"demographics": "too many"}
        )
    fields: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(value, start=1):
        where = f"demographic field {number}"
        if not isinstance(raw, dict):
            raise ValidationFailed(
                f"{where} must be a mapping with key, label and kind", {"demographics": where}
            )
        unknown = sorted(set(raw) - {"key", "label", "kind", "choices", "required"})
        if unknown:
            raise ValidationFailed(f"{where}: unknown setting {unknown[0]!r}", {"demographics": where})
        key = raw.get("key")
        if not isinstance(key, str) or not FIELD_KEY.fullmatch(key):
            raise ValidationFailed(
                f"{where}: key must be a lower-case identifier (a-z, 0-9, _), up to 40 characters",
                {"demographics": where},
            )
        if key in seen:
            raise ValidationFailed(f"{where}: key {key!r} is used twice", {"demographics": where})
        seen.add(key)
        label = raw.get("label")
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL_CHARS:
            raise ValidationFailed(
                f"{where}: label must be text of 1 to {MAX_LABEL_CHARS} characters", {"demographics": where}
            )
        kind = raw.get("kind", "text")
        if kind not in DEMOGRAPHIC_KINDS:
            raise ValidationFailed(
                f"{where}: kind must be 'choice', 'number' or 'text'", {"demographics": where}
            )
        required = raw.get("required", True)
        if not isinstance(required, bool):
            raise ValidationFailed(f"{where}: required must be true or false", {"demographics": where})
        field: dict[str, Any] = {"key": key, "label": label.strip(), "kind": kind, "required": required}
        choices = raw.get("choices")
        if kind == "choice":
            if (
                not isinstance(choices, list)
                or not 1 <= len(choices) <= MAX_CHOICES
                or not all(isinstance(c, str | int | float) and not isinstance(c, bool) for c in choices)
            ):
                raise ValidationFailed(
                    f"{where}: a choice field needs a list of 1 to {MAX_CHOICES} choices",
                    {"demographics": where},
                )
            texts = [str(choice).strip() for choice in choices]
            if any(not text or len(text) > MAX_CHOICE_CHARS for text in texts) or len(set(texts)) != len(
                texts
            ):
                raise ValidationFailed(
                    f"{where}: choices must be distinct, non-empty, up to {MAX_CHOICE_CHARS} characters",
                    {"demographics": where},
                )
            field["choices"] = texts
        elif choices is not None:
            raise ValidationFailed(f"{where}: a {kind} field has no choices", {"demographics": where})
        fields.append(field)
    return fields


def demographic_answers_clean(*, fields: list[dict[str, Any]], data: Mapping[str, Any]) -> dict[str, str]:
    """A participant's answers to the demographic form, checked against it; errors per field key.

    Choice answers must be one of the choices exactly; text answers are stripped and at most
    200 characters. Optional fields left empty are not stored.
    """
    answers: dict[str, str] = {}
    errors: dict[str, str] = {}
    for field in fields:
        raw = data.get(field["key"], "")
        value = raw.strip() if isinstance(raw, str) else ""
        if not value:
            if field["required"]:
                errors[field["key"]] = "Please answer this question."
            continue
        if field["kind"] == "choice" and value not in field["choices"]:
            errors[field["key"]] = "Choose one of the options."
        elif field["kind"] == "number" and not NUMBER_ANSWER.fullmatch(value):
            errors[field["key"]] = "Write a number (digits, optionally a decimal point)."
        elif len(value) > MAX_TEXT_ANSWER_CHARS:
            errors[field["key"]] = f"Use at most {MAX_TEXT_ANSWER_CHARS} characters."
        else:
            answers[field["key"]] = value
    if errors:
        raise ValidationFailed("some answers are missing or not valid", errors)
    return answers


def attributes_from_text(text: str) -> Any:
    """An invitation's fixed attributes written as YAML (or JSON), e.g. ``region: South Asia``, every value
    read as the text written (``region: NO`` is Norway's code, not False); checked by
    ``invitation_attributes_clean`` when the invitation is made."""
    if len(text or "") > MAX_DEMOGRAPHICS_TEXT:
        raise ValidationFailed("the fixed attributes are too long", {"attributes": "too long"})
    try:
        return yaml_loads(text, text_values=True) if (text or "").strip() else {}
    except (MalformedJSON, InputRefused) as exc:
        raise ValidationFailed(f"the fixed attributes: {exc.message}", {"attributes": "not YAML"}) from exc


def invitation_attributes_clean(value: Any, *, demographics: list[dict[str, Any]]) -> dict[str, Any]:
    """What everyone who joins by a link gets (``annotator_attributes.attributes_clean``): at most 20 with
    the form's questions, and none a question of the form too (answer and fixed value would disagree)."""
    attributes = attributes_clean(value, where="the fixed attributes")
    asked = sorted(set(attributes) & {field["key"] for field in demographics})
    if asked or len(attributes) + len(demographics) > MAX_DEMOGRAPHIC_FIELDS:
        raise ValidationFailed(
            f"the fixed attribute {asked[0]!r} is also a question of the demographic form; keep one of them"
            if asked
            else f"a link gives at most {MAX_DEMOGRAPHIC_FIELDS} attributes, fixed and asked together",
            {"attributes": "conflicts with the demographic form" if asked else "too many"},
        )
    return attributes


def _completion(*, platform: str, code: str, url: str) -> tuple[str, str]:
    code = (code or "").strip()
    url = (url or "").strip()
    if code and not COMPLETION_CODE.fullmatch(code):
        raise ValidationFailed(
            "the completion code may hold letters, digits, '_' and '-' (up to 64)",
            {"completion_code": "invalid"},
        )
    if platform != Invitation.Platform.NONE and not code:
        raise ValidationFailed(
            f"a {Invitation.Platform(platform).label} link needs a completion code",
            {"completion_code": "required"},
        )
    if url:
        try:
            URLValidator(schemes=["https", "http"])(url)
        except ValidationError as exc:
            raise ValidationFailed(
                "the completion URL must be an http(s) address", {"completion_url": "invalid"}
            ) from exc
        if len(url) > 500:
            raise ValidationFailed(
                "the completion URL is longer than 500 characters", {"completion_url": "too long"}
            )
    elif platform == Invitation.Platform.PROLIFIC:
        url = PROLIFIC_COMPLETION_URL.format(code=quote(code, safe=""))
    return code, url


# --- Writes ------------------------------------------------------------------------------------------


@transaction.atomic
def invitation_create(
    *,
    study: Study,
    created_by: User,
    expires_at: datetime,
    max_uses: int,
    pool: str = Annotator.Pool.CROWD,
    platform: str = Invitation.Platform.NONE,
    items_per_participant: int | None = None,
    min_answered_items: int | None = None,
    consent_text: str = "",
    demographics: Any = None,
    completion_code: str = "",
    completion_url: str = "",
    label: str = "",
    estimated_minutes: int | None = None,
    attributes: Any = None,
    now: datetime | None = None,
) -> Invitation:
    """Create an invitation link to a study. The caller checked that ``created_by`` may write the study.

    A Prolific link without a completion URL gets Prolific's (``.../submissions/complete?cc=CODE``).
    ``min_answered_items``: answered items a participant needs for the completion code (None: the
    quota, or 1); at most the quota, which could otherwise never be met. ``attributes``: what every
    person who joins by the link gets in the study besides their answers (e.g. ``{"region": "South
    Asia"}``, a rater pool); a key that is also a demographic question is refused.
    """
    now = now or timezone.now()
    if not created_by.is_researcher:
        raise NotAllowed("only researchers invite participants")
    if pool not in Annotator.Pool.values:
        raise ValidationFailed(f"pool must be one of {', '.join(Annotator.Pool.values)}", {"pool": "invalid"})
    if platform not in Invitation.Platform.values:
        raise ValidationFailed(
            f"platform must be one of {', '.join(Invitation.Platform.values)}", {"platform": "invalid"}
        )
    if timezone.is_naive(expires_at) or expires_at <= now:
        raise ValidationFailed("the link must expire in the future", {"expires_at": "in the past"})
    if isinstance(max_uses, bool) or not isinstance(max_uses, int) or not 1 <= max_uses <= MAX_USES:
        raise ValidationFailed(f"max_uses must be between 1 and {MAX_USES}", {"max_uses": "out of range"})
    if items_per_participant is not None and (
        isinstance(items_per_participant, bool)
        or not isinstance(items_per_participant, int)
        or not 1 <= items_per_participant <= MAX_QUOTA
    ):
        raise ValidationFailed(
            f"items per participant must be between 1 and {MAX_QUOTA}",
            {"items_per_participant": "out of range"},
        )
    if min_answered_items is not None and (
        isinstance(min_answered_items, bool)
        or not isinstance(min_answered_items, int)
        or not 1 <= min_answered_items <= (items_per_participant or MAX_QUOTA)
    ):
        raise ValidationFailed(
            "the items needed for the completion code must be between 1 and "
            + ("the quota" if items_per_participant else str(MAX_QUOTA)),
            {"min_answered_items": "out of range"},
        )
    consent_text = (consent_text or "").strip()
    if len(consent_text) > MAX_CONSENT_CHARS:
        raise ValidationFailed(
            f"the consent text is longer than {MAX_CONSENT_CHARS} characters", {"consent_text": "too long"}
        )
    label = (label or "").strip()
    if len(label) > MAX_LABEL_CHARS:
        raise ValidationFailed(
            f"the label is longer than {MAX_LABEL_CHARS} characters", {"label": "too long"}
        )
    if estimated_minutes is not None and (
        isinstance(estimated_minutes, bool)
        or not isinstance(estimated_minutes, int)
        or not 1 <= estimated_minutes <= MAX_ESTIMATED_MINUTES
    ):
        raise ValidationFailed(
            f"the estimated time must be between 1 and {MAX_ESTIMATED_MINUTES} minutes",
            {"estimated_minutes": "out of range"},
        )
    code, url = _completion(platform=platform, code=completion_code, url=completion_url)
    fields = demographics_clean(demographics)
    fixed = invitation_attributes_clean(attributes, demographics=fields)
    return Invitation.objects.create(
        estimated_minutes=estimated_minutes,
        study=study,
        created_by=created_by,
        expires_at=expires_at,
        max_uses=max_uses,
        pool=pool,
        platform=platform,
        items_per_participant=items_per_participant,
        min_answered_items=min_answered_items,
        consent_text=consent_text,
        demographics=fields,
        attributes=fixed,
        completion_code=code,
        completion_url=url,
        label=label,
    )


@transaction.atomic
def invitation_revoke(*, invitation: Invitation, now: datetime | None = None) -> Invitation:
    """Withdraw a link: nobody can join or come back through it. Idempotent; accounts are kept."""
    Invitation.objects.filter(pk=invitation.pk, revoked_at__isnull=True).update(
        revoked_at=now or timezone.now()
    )
    invitation.refresh_from_db(fields=["revoked_at"])
    return invitation


def platform_ids_from_query(*, platform: str, query: Mapping[str, str]) -> PlatformIds:
    """The platform's ids from the link's URL parameters, validated (letters, digits, '_', '-', ≤ 64).

    The participant id is required for Prolific (``PROLIFIC_PID``) and MTurk (``workerId``); the
    others are kept when present. MTurk's preview (``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``)
    raises ``PreviewOnly``. A plain link ignores every parameter.
    """
    names = PLATFORM_PARAMETERS.get(platform)
    if not names:
        return PlatformIds()
    if platform == Invitation.Platform.MTURK and query.get("assignmentId") == MTURK_PREVIEW:
        raise PreviewOnly("Accept the HIT on Mechanical Turk to start.")
    values: dict[str, str] = {}
    for field, parameter in names.items():
        value = query.get(parameter, "")
        if value and not PLATFORM_ID.fullmatch(value):
            raise ValidationFailed(
                f"The link's {parameter} is not a valid id (letters, digits, '_' and '-', "
                "up to 64 characters).",
                {parameter: "invalid"},
            )
        values[field] = value
    if not values["participant_id"]:
        label = Invitation.Platform(platform).label
        raise ValidationFailed(
            f"This link must be opened from {label}: its {names['participant_id']} parameter is missing.",
            {names["participant_id"]: "required"},
        )
    return PlatformIds(**values)


def participant_find(*, study_id: int, platform: str, participant_id: str) -> Participant | None:
    if not participant_id:
        return None
    return (
        Participant.objects.select_related("user", "invitation")
        .filter(study_id=study_id, platform=platform, participant_id=participant_id)
        .first()
    )


def participant_resume(
    *,
    invitation: Invitation,
    ids: PlatformIds,
    resume_secret: str | None = None,
    now: datetime | None = None,
) -> Participant | None:
    """The participant who already joined the study with these platform ids, if any.

    A returning participant is let back in while the link is neither revoked nor expired, even
    when it is used up (they used it already); no use is counted. ``resume_secret`` is what the
    browser presents (its resume cookie, ``""`` when it has none): a visit that does not prove it is
    that participant (``participant_may_resume``) raises ``ResumeRefused``. ``None`` is for callers
    that are not a browser (commands, tests): no proof is asked.
    """
    invitation_check(invitation, now=now, joining=False)
    participant = participant_find(
        study_id=invitation.study_id, platform=invitation.platform, participant_id=ids.participant_id
    )
    if (
        participant is not None
        and resume_secret is not None
        and not participant_may_resume(participant, ids=ids, resume_secret=resume_secret)
    ):
        raise ResumeRefused(RESUME_REFUSED)
    return participant


def _username(study_id: int) -> str:
    # Random, not the platform id: usernames show up in pages and exports; platform ids are personal.
    # Plain ASCII, and never one that looks like an existing name (docs/security.md, "Usernames").
    for _attempt in range(5):
        name = f"p{study_id}-{secrets.token_hex(6)}"
        if not username_problem(name):
            return name
    raise ValidationFailed("could not make a username for the participant; try again")


@transaction.atomic
def participant_join(
    *,
    invitation: Invitation,
    ids: PlatformIds,
    answers: Mapping[str, Any] | None = None,
    consented_at: datetime | None = None,
    resume_secret: str | None = None,
    now: datetime | None = None,
) -> tuple[Participant, bool]:
    """Create the participant's scoped account (or find it again); returns ``(participant, created)``.

    Locks the invitation row, then: refuses a revoked or expired link; returns the existing
    participant for the same (study, platform, participant id) without counting a use; refuses a
    used-up link; checks consent and the demographic answers; raises ``uses`` by compare-and-set;
    creates an annotator account with an unusable password, enrolled in this study only with the
    link's pool, the enrolment holding the demographic answers and the link's fixed attributes (they
    belong to this study); and the
    ``Participant`` row. Nothing is written when any check fails.

    ``resume_secret`` (the browser's resume cookie) is stored hashed on a new participant and must
    match to return an existing one (``participant_resume``; ``None``: not a browser, no check).
    """
    now = now or timezone.now()
    invitation = (
        Invitation.objects.select_for_update(of=("self",)).select_related("study").get(pk=invitation.pk)
    )
    existing = participant_resume(invitation=invitation, ids=ids, resume_secret=resume_secret, now=now)
    if existing is not None:
        return existing, False
    invitation_check(invitation, now=now)
    if invitation.platform != Invitation.Platform.NONE and not ids.participant_id:
        raise ValidationFailed("this link needs the platform's participant id")
    if invitation.consent_text and consented_at is None:
        raise ValidationFailed("the participant has not consented", {"consent": "required"})
    cleaned = demographic_answers_clean(fields=invitation.demographics, data=answers or {})
    try:
        with transaction.atomic():  # a savepoint: a concurrent join with the same id through another link
            taken = Invitation.objects.filter(pk=invitation.pk, uses__lt=F("max_uses")).update(
                uses=F("uses") + 1
            )
            if taken != 1:
                raise InvitationRefused(
                    "used_up", "This link has already been used by as many participants as the study needs."
                )
            user = User(username=_username(invitation.study_id), role=User.Role.ANNOTATOR)
            user.set_unusable_password()
            user.save()
            participant = Participant.objects.create(
                invitation=invitation,
                study=invitation.study,
                user=user,
                platform=invitation.platform,
                consented_at=consented_at if invitation.consent_text else None,
                resume_secret_hash=resume_secret_hash(resume_secret or ""),
                **ids.as_dict(),
            )
    except IntegrityError:
        again = participant_find(
            study_id=invitation.study_id, platform=invitation.platform, participant_id=ids.participant_id
        )
        if again is None:
            raise
        if resume_secret is not None and not participant_may_resume(
            again, ids=ids, resume_secret=resume_secret
        ):
            raise ResumeRefused(RESUME_REFUSED) from None
        return again, False
    # The link's fixed attributes (a rater pool recruited by this link) with the answers: no key is both.
    attributes = {**cleaned, **(invitation.attributes or {})}
    enrollment_add(study=invitation.study, user=user, pool=invitation.pool, attributes=attributes)
    user.annotator = Annotator.objects.get(user=user)
    return participant, True


@transaction.atomic
def participant_complete(*, participant: Participant, now: datetime | None = None) -> CompletionProgress:
    """The participant stopped (quota reached or nothing left): record the completion when they answered
    the items their invitation requires (``models.required_answers``; skips and failed attention
    checks do not count), the first time only. Returns where they stand, so that the page can say what
    is left when they fall short (then nothing is recorded and no completion code is shown)."""
    progress = completion_progress(participant)
    if progress.reached:
        Participant.objects.filter(pk=participant.pk, completed_at__isnull=True).update(
            completed_at=now or timezone.now()
        )
        participant.refresh_from_db(fields=["completed_at"])
    return progress
