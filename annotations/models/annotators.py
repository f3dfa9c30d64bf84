"""Who judges (people and machine labellers), the invitations strangers join a study by, the
participants who joined, and annotators excluded from a study."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q

from annotations.models.studies import Pool, Study


class Annotator(models.Model):
    """Who judges: a person (crowd or expert) or a machine labeller (name, version, configuration).

    Human annotators with an account are global (one per user); their pool and demographic
    answers are per study, on their ``Enrollment``. Humans imported from a file without an account
    (e.g. a published dataset's anonymous raters) belong to one study, so their pool and
    attributes in it are kept here (``study_pool``, ``study_attributes``; constraints keep both at
    their defaults for every other annotator). Machine labellers registered by an admin are global
    and identified by (name, version); a change of prompt or model is a new version. Their
    ``config`` may hold secrets: it is shown only through ``common.redaction`` (docs/security.md).
    Machine annotators named by an imported file (answers, predictions, embeddings) belong to the
    importing study (``study`` set, no configuration), so one researcher's names never reach or
    block another's (docs/security.md, "Imported people and labellers stay in their study").
    """

    class Kind(models.TextChoices):
        HUMAN = "human", "Human"
        MACHINE = "machine", "Machine"

    Pool = Pool

    kind = models.CharField(max_length=8, choices=Kind.choices)
    name = models.CharField(max_length=150)
    version = models.CharField(max_length=64, blank=True)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="annotator"
    )
    study = models.ForeignKey(
        Study,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="external_annotators",
        help_text="Set for imported annotators (people without an account, machines named by a file)",
    )
    study_pool = models.CharField(
        max_length=8,
        choices=Pool.choices,
        default=Pool.CROWD,
        help_text="Imported annotators only (study set): their pool in that study",
    )
    config = models.JSONField(default=dict, blank=True, help_text="Machine labeller configuration")
    disabled = models.BooleanField(
        default=False,
        help_text="A disabled machine labeller is offered for no new labelling job (its answers stay)",
    )
    study_attributes = models.JSONField(
        default=dict,
        blank=True,
        help_text="Imported annotators only (study set): e.g. region, for breakdowns",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "name", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["name", "version"],
                condition=Q(kind="machine", study__isnull=True),
                name="machine_annotator_unique",
            ),
            models.UniqueConstraint(
                fields=["study", "kind", "name", "version"],
                condition=Q(study__isnull=False),
                name="external_annotator_unique",
            ),
            models.CheckConstraint(
                condition=Q(kind="machine", user__isnull=True)
                | Q(kind="human", user__isnull=False, study__isnull=True)
                | Q(kind="human", user__isnull=True, study__isnull=False),
                name="annotator_kind_consistent",
            ),
            # An account's pool and answers are per study (Enrollment); only imported annotators,
            # who belong to one study, keep theirs on this row.
            models.CheckConstraint(
                condition=Q(study__isnull=False) | Q(study_pool="crowd"), name="annotator_pool_only_imported"
            ),
            models.CheckConstraint(
                condition=Q(study__isnull=False) | Q(study_attributes={}),
                name="annotator_attributes_only_imported",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.version}".strip()

    @property
    def is_machine(self) -> bool:
        return self.kind == self.Kind.MACHINE


def invitation_token() -> str:
    """The secret part of an invitation link: 32 random bytes, URL-safe (43 characters)."""
    return secrets.token_urlsafe(32)


class Invitation(models.Model):
    """A link that lets strangers join one study without registering (see docs/crowd.md).

    Opening it (``/join/<token>/``) creates an annotator account scoped to ``study``: after the
    consent text (if any) and the demographic form (``demographics``, if any), the person is enrolled
    in the invitation's ``pool`` (on that enrolment) and sent to the study's task page. ``uses`` is
    raised by the service that creates the account, under the row's lock, never beyond ``max_uses``.
    ``demographics`` is a list of
    ``{"key", "label", "kind": "choice"|"number"|"text", "choices", "required"}``, validated by
    ``services/invitations.py``; answers go to the enrolment's ``attributes``, with the link's own
    ``attributes`` (fixed, the same for everyone who joins by it: a rater pool recruited by this link).
    """

    class Platform(models.TextChoices):
        NONE = "none", "None (a plain link)"
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "Amazon Mechanical Turk"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invitations")
    token = models.CharField(max_length=64, unique=True, default=invitation_token)
    label = models.CharField(
        max_length=200, blank=True, help_text="For the researcher, e.g. 'Prolific batch 1'"
    )
    pool = models.CharField(max_length=8, choices=Pool.choices, default=Pool.CROWD)
    platform = models.CharField(max_length=16, choices=Platform.choices, default=Platform.NONE)
    expires_at = models.DateTimeField()
    max_uses = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    uses = models.PositiveIntegerField(default=0, help_text="Accounts created through this link")
    items_per_participant = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Quota: a participant is done after this many submitted items (empty: no quota)",
    )
    min_answered_items = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=(
            "Answered items a participant needs for the completion code (skips and failed attention "
            "checks do not count); empty: the quota (or every item they were given, if fewer), or 1"
        ),
    )
    consent_text = models.TextField(blank=True)
    estimated_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="How long the study takes, as the consent page tells participants"
    )
    demographics = models.JSONField(default=list, blank=True)
    attributes = models.JSONField(
        default=dict,
        blank=True,
        help_text="Attributes every person who joins by this link gets in the study (e.g. "
        '{"region": "South Asia"}, a rater pool), besides their demographic answers',
    )
    completion_code = models.CharField(max_length=64, blank=True)
    completion_url = models.URLField(
        max_length=500, blank=True, help_text="Where the completion page sends people"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(max_uses__gte=1), name="invitation_max_uses_positive"),
            models.CheckConstraint(condition=Q(uses__lte=F("max_uses")), name="invitation_uses_within_max"),
            models.CheckConstraint(
                condition=Q(items_per_participant__isnull=True) | Q(items_per_participant__gte=1),
                name="invitation_quota_positive",
            ),
            models.CheckConstraint(
                condition=Q(min_answered_items__isnull=True) | Q(min_answered_items__gte=1),
                name="invitation_min_answered_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.label or f"invitation {self.pk} to study {self.study_id}"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


def required_answers(
    min_answered_items: int | None, items_per_participant: int | None, *, handed: int
) -> int:
    """Answered items a participant needs for the completion code (never fewer than 1: no code for no
    work): the invitation's ``min_answered_items`` when set; else its quota, but no more than the
    ``handed`` items the participant was given (submitted or skipped), for a study that ran out of items
    before the quota; else 1."""
    if min_answered_items:
        return min_answered_items
    if items_per_participant:
        return max(1, min(items_per_participant, handed))
    return 1


class Participant(models.Model):
    """A person who joined a study through an invitation: their scoped account and platform ids.

    One account per (study, platform, participant id): a second visit with the same id signs back
    into the same account. ``participant_id`` is empty for plain links (no platform).
    """

    invitation = models.ForeignKey(Invitation, on_delete=models.PROTECT, related_name="participants")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="participant"
    )
    platform = models.CharField(max_length=16, choices=Invitation.Platform.choices)
    participant_id = models.CharField(max_length=64, blank=True, help_text="PROLIFIC_PID or MTurk workerId")
    platform_study_id = models.CharField(
        max_length=64, blank=True, help_text="Prolific STUDY_ID or MTurk hitId"
    )
    session_id = models.CharField(max_length=64, blank=True, help_text="Prolific SESSION_ID")
    assignment_id = models.CharField(max_length=64, blank=True, help_text="MTurk assignmentId")
    consented_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resume_secret_hash = models.CharField(
        max_length=64,
        blank=True,
        help_text="SHA-256 of the resume cookie of the browser that joined (docs/crowd.md, resuming)",
    )

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "platform", "participant_id"],
                condition=~Q(participant_id=""),
                name="participant_unique_platform_id",
            ),
        ]

    def __str__(self) -> str:
        return f"participant {self.participant_id or self.user_id} in study {self.study_id}"


class AnnotatorExclusion(models.Model):
    """A researcher's decision that an annotator's judgements do not count in a study.

    One row per exclusion; reinstating fills ``reinstated_at``/``reinstated_by`` instead of deleting it,
    so the history stays. While a row has no ``reinstated_at`` the annotator is excluded: consensus,
    agreement and metrics ignore their annotations and they are given no new items.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="exclusions")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="exclusions")
    reason = models.TextField()
    excluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    excluded_at = models.DateTimeField()
    reinstated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reinstated_at = models.DateTimeField(null=True, blank=True)
    reinstate_note = models.TextField(blank=True)

    class Meta:
        ordering = ["study_id", "-excluded_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "annotator"],
                condition=Q(reinstated_at__isnull=True),
                name="exclusion_one_active",
            ),
            models.CheckConstraint(condition=~Q(reason=""), name="exclusion_reason_required"),
        ]

    def __str__(self) -> str:
        state = "reinstated" if self.reinstated_at else "excluded"
        return f"annotator {self.annotator_id} {state} in study {self.study_id}"

    @property
    def active(self) -> bool:
        return self.reinstated_at is None
