"""Studies, items, annotators, annotations and assignments.

Models hold fields, constraints and one-row rules only; every write goes through
``annotations/services/`` and every permission check through ``annotations/access.py``.
"""

from __future__ import annotations

import secrets
import uuid
from functools import cached_property
from pathlib import PurePosixPath
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractUser, UserManager
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from annotations.protocols.schema import Protocol, protocol_stored
from common.jobs import BackgroundJob
from common.usernames import username_mixes_lookalikes, username_normalize, username_skeleton
from metrics.quality import DEFAULT_THRESHOLDS


def username_problem(username: str, *, exclude_pk: int | None = None) -> str:
    """Why ``username`` may not be given to a new (or renamed) account, or ``""`` (docs/security.md,
    "Usernames"): it must be NFKC-normalised already, must not mix scripts with look-alike letters, and
    its skeleton (``common.usernames.username_skeleton``: case folded, look-alikes made Latin) must not
    be another account's. Two indexed queries: the names equal to the skeleton in any case, and the
    few names that are not plain ASCII (whose skeletons are computed here)."""
    if username != username_normalize(username):
        return "is not NFKC-normalised"
    if username_mixes_lookalikes(username):
        return "mixes scripts with look-alike letters (e.g. a Cyrillic a in a Latin name)"
    skeleton = username_skeleton(username)
    others = User.objects.exclude(pk=exclude_pk) if exclude_pk is not None else User.objects.all()
    if others.filter(username__iexact=skeleton).exists() or others.filter(username__iexact=username).exists():
        return "looks like an existing username"
    for other in others.filter(username__regex=r"[^ -~]").values_list("username", flat=True).iterator():
        if username_skeleton(other) == skeleton:
            return "looks like an existing username"
    return ""


class WorkbenchUserManager(UserManager["User"]):
    """Django's manager, refusing look-alike usernames wherever it creates an account (``create_user``,
    ``createsuperuser``, the demo)."""

    def _create_user_object(
        self, username: str, email: str | None, password: str | None, **extra: Any
    ) -> User:
        # Django's own step (not in django-stubs): the NFKC-normalised name, email and hashed password.
        user: User = super()._create_user_object(username, email, password, **extra)  # type: ignore[misc]
        problem = username_problem(user.username)
        if problem:
            raise ValidationError({"username": f"The username {user.username!r} {problem}."})
        return user


class User(AbstractUser):
    """An account. Admins are superusers; researchers own studies; annotators judge items."""

    objects = WorkbenchUserManager()  # type: ignore[misc]

    def clean(self) -> None:
        """Django's (the username NFKC-normalised), then ``username_problem``: the admin's add and change
        forms show it on the username field."""
        super().clean()
        if not isinstance(self.username, str) or not self.username:
            return  # the field's own checks say what is wrong
        problem = username_problem(self.username, exclude_pk=self.pk)
        if problem:
            raise ValidationError({"username": f"This username {problem}."})

    class Role(models.TextChoices):
        ADMIN = "admin", "Admin"
        RESEARCHER = "researcher", "Researcher"
        ANNOTATOR = "annotator", "Annotator"

    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANNOTATOR)

    @property
    def is_admin(self) -> bool:
        return self.is_superuser or self.role == self.Role.ADMIN

    @property
    def is_researcher(self) -> bool:
        return self.is_admin or self.role == self.Role.RESEARCHER


class Study(models.Model):
    """One audit: a protocol, its items, its annotators and the overlap each item needs."""

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        ACTIVE = "active", "Active"
        PAUSED = "paused", "Paused"
        CLOSED = "closed", "Closed"

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_studies"
    )
    shared_with = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="shared_studies", blank=True)
    preset = models.CharField(
        max_length=64, blank=True, help_text="Preset key the protocol came from, if any"
    )
    protocol = models.JSONField(help_text="The validated protocol (see docs/protocols.md)")
    overlap = models.PositiveSmallIntegerField(default=3, validators=[MinValueValidator(1)])
    lease_minutes = models.PositiveIntegerField(default=30, validators=[MinValueValidator(1)])
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    # Settings (were one JSON bag, ``options``, until migration 0009; the export and the API still
    # show them as that bag: annotations/selectors/study_options.py). Quality settings, the
    # validation sample and per-question consensus rules are tables: StudyQualitySettings,
    # ValidationSample and ConsensusRuleChoice below.
    reveal_after_submit = models.BooleanField(
        default=False, help_text="Show machine labels to a person once they have answered (anchoring study)"
    )
    seed = models.BigIntegerField(
        null=True, blank=True, help_text="Seed of the study's random analyses (SODA permutations); empty: 0"
    )
    imported_from = models.CharField(
        max_length=255, blank=True, help_text="The file the study was imported from (visage import)"
    )
    visualness_study = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="marker_studies",
        help_text="The visual-ness study imported with this stereotype-markers study",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=1), name="study_overlap_positive"),
            models.CheckConstraint(condition=Q(lease_minutes__gte=1), name="study_lease_positive"),
            models.CheckConstraint(condition=Q(seed__gte=0), name="study_seed_not_negative"),
            models.CheckConstraint(
                condition=~Q(visualness_study=F("id")), name="study_visualness_not_itself"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @cached_property
    def protocol_obj(self) -> Protocol:
        return protocol_stored(self.protocol, source=f"study {self.pk}")


class Pool(models.TextChoices):
    """Which annotators of a study are experts (expert-only items and questions, adjudication)."""

    CROWD = "crowd", "Crowd"
    EXPERT = "expert", "Expert"


class Enrollment(models.Model):
    """An annotator account enrolled in a study (it sees only studies it is enrolled in).

    ``pool`` and ``attributes`` (demographic answers, e.g. given on an invitation's form) belong to
    this enrolment: what a person is in one study, and what they told one study, never reaches
    another (docs/security.md, "Tenancy").
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="enrollments")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="enrollments")
    pool = models.CharField(max_length=8, choices=Pool.choices, default=Pool.CROWD)
    attributes = models.JSONField(
        default=dict, blank=True, help_text="Demographic answers given to this study, for breakdowns"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "user"], name="enrollment_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} in study {self.study_id}"


def random_shuffle_key() -> int:
    """A random position in a study's item ring (see annotations/services/assignment.md)."""
    return secrets.randbelow(2**31)


class ControlKind(models.TextChoices):
    """A control item scores annotators: gold (known answers) or an attention check (an instruction)."""

    GOLD = "gold", "Gold"
    ATTENTION = "attention", "Attention check"


class Item(models.Model):
    """The thing judged: one image, an image set, or a text term; with its provenance.

    A *control* item (``control_kind`` set) has known answers and is mixed into annotators' queues to
    score them (``annotations/services/controls.py``); it never counts in consensus, agreement or metrics.
    """

    class Kind(models.TextChoices):
        IMAGE = "image", "Image"
        IMAGE_SET = "image_set", "Image set"
        TEXT = "text", "Text"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    external_id = models.CharField(max_length=255)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    text = models.TextField(blank=True)
    prompt = models.TextField(blank=True)
    model_name = models.CharField(max_length=255, blank=True)
    condition = models.CharField(max_length=128, blank=True, default="base")
    seed = models.BigIntegerField(null=True, blank=True)
    generation_settings = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    sha256 = models.CharField(
        max_length=64,
        blank=True,
        help_text="Of the file, or of the set's file hashes; items with distinct ids may share it (kept, "
        "reported as identical content at import)",
    )
    is_reference = models.BooleanField(
        default=False, help_text="Imported without its file (image unavailable)"
    )
    expert_only = models.BooleanField(
        default=False, help_text="Assigned only to annotators of the expert pool (see assignment.md)"
    )
    judgements = models.PositiveIntegerField(
        default=0, help_text="Submitted human assignments; kept by the assignment service, read by claims"
    )
    shuffle_key = models.PositiveIntegerField(default=random_shuffle_key, help_text="Random order of items")
    note = models.TextField(
        blank=True, help_text="Shown with the item on the task page (e.g. an attention check's instruction)"
    )
    control_kind = models.CharField(
        max_length=16,
        choices=ControlKind.choices,
        blank=True,
        default="",
        help_text="gold or attention: a control item (see docs/crowd.md); blank for a real item",
    )
    control_answers = models.JSONField(
        default=dict, blank=True, help_text="A control's expected answers, {question_key: value}, validated"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(control_kind__in=["", "gold", "attention"]), name="item_control_kind_valid"
            ),
            models.UniqueConstraint(fields=["study", "external_id"], name="item_external_id_unique"),
        ]
        indexes = [
            models.Index(fields=["study", "condition"]),
            models.Index(fields=["study", "sha256"], name="item_sha256"),
            models.Index(fields=["study", "judgements", "shuffle_key"], name="item_claim_order"),
            # Controls by kind (controls.control_candidate) and the task page's count of the items open
            # to an annotator (control_kind "", expert_only by pool): an index-only count (issue 17).
            models.Index(fields=["study", "control_kind", "expert_only"], name="item_control_expert"),
        ]

    def __str__(self) -> str:
        return self.external_id


def _item_file_name(instance: ItemImage, filename: str) -> str:
    # Files are stored under generated names: a user's file name never reaches the file system.
    suffix = PurePosixPath(filename).suffix.lower()[:8]
    return f"items/{instance.item.study_id}/{uuid.uuid4().hex}{suffix}"


class ItemImage(models.Model):
    """One image file of an item (an image set has several, in order)."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="images")
    position = models.PositiveSmallIntegerField(default=0)
    file = models.FileField(upload_to=_item_file_name, max_length=255, blank=True)
    original_name = models.CharField(max_length=255, blank=True)
    sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=64, blank=True)
    is_blank = models.BooleanField(
        null=True,
        help_text="Every pixel (nearly) one colour (common.files.single_colour_of), set at import; "
        "None: no file, or stored before the check existed and not readable since",
    )
    blank_colour = models.CharField(max_length=7, blank=True, help_text="#rrggbb of a blank image")
    display_name = models.CharField(
        max_length=255,
        blank=True,
        help_text="Storage name of the resized display version (annotations.services.stored_files), "
        "set when it is first made; blank: not made yet, or the file is small enough to show as it is",
    )

    class Meta:
        ordering = ["item_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["item", "position"], name="item_image_position_unique")
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} image {self.position}"


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


class Annotation(models.Model):
    """One annotator's current answer to one question on one item. Edits keep revisions."""

    class Source(models.TextChoices):
        UI = "ui", "Task page"
        API = "api", "API"
        IMPORT = "import", "Import"
        LABELLER = "labeller", "Machine labeller"
        ADJUDICATION = "adjudication", "Adjudication"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="annotations")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(Annotator, on_delete=models.PROTECT, related_name="annotations")
    question_key = models.CharField(max_length=64)
    value = models.JSONField()
    shown = models.JSONField(null=True, blank=True, help_text="multi: option keys shown to this annotator")
    reason = models.TextField(blank=True)
    time_spent_ms = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.API)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator", "question_key"], name="annotation_unique"),
        ]
        indexes = [
            models.Index(fields=["study", "question_key"]),
            models.Index(fields=["annotator", "study"]),
        ]

    def __str__(self) -> str:
        return f"{self.question_key} on item {self.item_id} by {self.annotator_id}"

    def snapshot(self) -> dict[str, Any]:
        return {"value": self.value, "shown": self.shown, "reason": self.reason}


class ItemFeature(models.Model):
    """What a machine computed about an item besides answers: image embeddings (stereotypical pull) and
    captions (salience), by one machine annotator (a labeller, or one named in an imported file).

    It lives here, beside ``Annotation``, because findings read it and ``annotations`` reads only its own
    rows; labellers (``labelling``) and the feature import write it. The table kept the name it had when
    the model lived in ``generation`` and then ``labelling`` (moved by state-only migrations).
    """

    class Kind(models.TextChoices):
        EMBEDDING = "embedding", "Image embedding"
        CAPTIONS = "captions", "Captions"

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="features")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    vector = models.BinaryField(null=True, blank=True, help_text="float32 little-endian, one row per image")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "generation_itemfeature"
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator", "kind"], name="item_feature_unique")
        ]

    def __str__(self) -> str:
        return f"{self.kind} of item {self.item_id}"


class AnnotationRevision(models.Model):
    """An earlier state of an annotation, kept when it is changed."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    value = models.JSONField()
    shown = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True)
    replaced_at = models.DateTimeField(auto_now_add=True)
    replaced_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["annotation_id", "id"]

    def __str__(self) -> str:
        return f"revision of annotation {self.annotation_id}"


class Assignment(models.Model):
    """An item leased to one annotator; an annotator never gets the same item twice."""

    class Status(models.TextChoices):
        LEASED = "leased", "Leased"
        SUBMITTED = "submitted", "Submitted"
        SKIPPED = "skipped", "Skipped"
        EXPIRED = "expired", "Expired"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="assignments")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.LEASED)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    skip_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    time_spent_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="Time on the task, as measured"
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "annotator"], name="assignment_unique")]
        indexes = [
            models.Index(fields=["study", "status"]),
            models.Index(fields=["annotator", "status"]),
            models.Index(fields=["item", "status"], name="assignment_item_status"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} for annotator {self.annotator_id} ({self.status})"


class AssignmentDraft(models.Model):
    """Answers to a leased item not yet submitted, kept on the server so the task page restores them on
    any device (docs/annotating.md, "Drafts"). ``fields`` is the task form as ``[name, value]`` pairs
    (``q-KEY``, ``shown-KEY``, ``reason-KEY``), checked like answers but possibly incomplete
    (``services/drafts.py``). Only the assignment's annotator writes or reads it, while the lease is
    theirs; it goes on submit, skip, release and expiry, and with the assignment."""

    assignment = models.OneToOneField(
        Assignment, on_delete=models.CASCADE, primary_key=True, related_name="draft"
    )
    fields = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"draft of assignment {self.assignment_id}"


class RevealLog(models.Model):
    """One showing of the machine labels to an annotator after they submitted ("reveal after submit").

    ``shown`` is exactly what was displayed; ``agreement`` maps question key to "agree" or
    "disagree" once the annotator says so. Rows are never updated except to record that answer,
    so a researcher can measure anchoring (did later answers move towards the machine's?).
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="reveals")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="reveals")
    annotator = models.ForeignKey(Annotator, on_delete=models.CASCADE, related_name="reveals")
    assignment = models.ForeignKey(Assignment, on_delete=models.CASCADE, related_name="reveals")
    shown = models.JSONField(default=list)
    agreement = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["study", "annotator"])]

    def __str__(self) -> str:
        return f"reveal of item {self.item_id} to annotator {self.annotator_id}"


class ExportJob(BackgroundJob):
    """A study export written to a file by a background task (large studies); its lifecycle is
    ``common.jobs``'s."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="export_jobs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    format = models.CharField(max_length=16)
    target = models.CharField(
        max_length=1024, blank=True, help_text="A bucket prefix the file is written to (s3://bucket/prefix/)"
    )
    raw = models.BooleanField(
        default=False, help_text="CSV: text cells as stored (no apostrophe before formula-like text)"
    )
    file = models.FileField(upload_to="exports/", max_length=255, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"export {self.pk} of study {self.study_id} ({self.format}, {self.status})"


class ImportJob(BackgroundJob):
    """An import run by a worker (an upload kept in storage, or a bucket address): items, or another
    kind of import (``kind``, with its ``options``); its lifecycle is ``common.jobs``'s, and a job
    that ends (done, failed or cancelled) deletes its kept upload and files."""

    class Kind(models.TextChoices):
        ITEMS = "items", "Items"
        LABELSTUDIO = "labelstudio", "Label Studio export"
        COCO = "coco", "COCO boxes"
        ANNOTATIONS = "annotations", "Annotations"
        FEATURES = "features", "Embeddings and captions"
        STEREOTYPES = "stereotypes", "Stereotype table"
        CONTROLS = "controls", "Control items"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="import_jobs")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.ITEMS)
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="The import's options (a COCO import's question, annotator, kind) and the other files "
        "it keeps in storage (files: a labeling config, visual-attribute ratings)",
    )
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    upload = models.CharField(
        max_length=255, blank=True, help_text="The upload kept in storage (a file, or a folder ending in /)"
    )
    address = models.CharField(max_length=1024, blank=True, help_text="A bucket address, s3://bucket/prefix/")
    label = models.CharField(max_length=255, blank=True, help_text="What the researcher sent, as shown")
    report = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import {self.pk} into study {self.study_id} ({self.status})"


class StereotypeEntry(models.Model):
    """One (identity, attribute) row of a stereotype table attached to a study (e.g. SeeGULL).

    The visage metrics read it: a pair is stereotypical when ``na_stereo`` >= 2 and the attribute
    is visual (``visual`` None = not rated, treated as visual); ``offensiveness`` is SeeGULL's
    ``mean offensiveness_score`` (None when blank). ``extra`` keeps the file's other columns.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="stereotype_entries")
    source = models.CharField(max_length=64, blank=True, help_text="Which table, e.g. the file name")
    identity = models.CharField(max_length=255)
    attribute = models.CharField(max_length=255)
    na_stereo = models.PositiveSmallIntegerField(null=True, blank=True)
    region_stereo = models.PositiveSmallIntegerField(null=True, blank=True)
    offensiveness = models.FloatField(null=True, blank=True)
    visual = models.BooleanField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["identity", "attribute"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "identity", "attribute"], name="stereotype_entry_unique"
            ),
        ]
        indexes = [models.Index(fields=["study", "identity"])]

    def __str__(self) -> str:
        return f"{self.identity} / {self.attribute}"


class ConsensusLabel(models.Model):
    """The label the study adopts for (item, question), with the rule and the annotations behind it.

    Rules are those of ``metrics/consensus.py`` (see ``metrics/consensus.md``); ``adjudicated`` rows
    are an expert's decision and are never overwritten by a recomputation.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="consensus_labels")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="consensus_labels")
    question_key = models.CharField(max_length=64)
    value = models.JSONField(null=True, blank=True, help_text="None when unresolved")
    resolved = models.BooleanField(default=False)
    rule = models.CharField(max_length=32)
    params = models.JSONField(default=dict, blank=True)
    support = models.JSONField(default=list, blank=True, help_text="Ids of the annotations that agree")
    confidence = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True, help_text="Why it is unresolved (e.g. a tie)")
    n_votes = models.PositiveIntegerField(default=0)
    pending = models.BooleanField(
        default=False,
        help_text="The item has fewer judgements than the study's overlap: no label yet (docs/agreement.md)",
    )
    adjudicated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "question_key"], name="consensus_unique")]
        indexes = [models.Index(fields=["study", "question_key", "resolved"])]

    def __str__(self) -> str:
        return f"{self.question_key} of item {self.item_id}: {self.value!r} ({self.rule})"


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
    ``services/invitations.py``; answers go to the enrolment's ``attributes``.
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


# --- Study settings held in tables ---------------------------------------------------------------------

MAX_CONTROL_RATE = 0.5

# The quality settings of a study (docs/crowd.md, "Settings"), stated once: the model's fields and
# constraints below, ``services.controls`` (reading, checking) and the settings form are built from it.
# name: (default, lowest, highest, whole number)
QUALITY_SETTINGS: dict[str, tuple[float, float, float, bool]] = {
    "control_rate": (0.0, 0.0, MAX_CONTROL_RATE, False),
    "qualification_items": (0, 0, 100, True),
    "qualification_min_accuracy": (0.7, 0.0, 1.0, False),
    "min_gold_accuracy": (DEFAULT_THRESHOLDS["min_gold_accuracy"], 0.0, 1.0, False),
    "max_attention_failures": (DEFAULT_THRESHOLDS["max_attention_failures"], 0, 1000, True),
    "loo_margin": (DEFAULT_THRESHOLDS["loo_margin"], 0.0, 1.0, False),
    "loo_min_n": (DEFAULT_THRESHOLDS["loo_min_n"], 1, 100000, True),
    "min_median_seconds": (DEFAULT_THRESHOLDS["min_median_seconds"], 0.0, 3600.0, False),
    "max_straight_run": (DEFAULT_THRESHOLDS["max_straight_run"], 0, 100000, True),
    "straight_margin": (DEFAULT_THRESHOLDS["straight_margin"], 0.0, 1.0, False),
    "straight_dominant_share": (DEFAULT_THRESHOLDS["straight_dominant_share"], 0.0, 1.0, False),
}


def _quality_field(name: str) -> models.Field[Any, Any]:
    """The column of one quality setting: its type and range from ``QUALITY_SETTINGS``; empty = default."""
    default, low, high, whole = QUALITY_SETTINGS[name]
    field_class = models.IntegerField if whole else models.FloatField
    return field_class(
        null=True,
        blank=True,
        validators=[MinValueValidator(low), MaxValueValidator(high)],
        help_text=f"{low:g} to {high:g}; empty: the default, {default:g}",
    )


class StudyQualitySettings(models.Model):
    """The quality settings a researcher chose for a study (``services/controls.py``).

    A column left empty was never chosen and reads as its default; that matters: marking a study's first
    control sets ``control_rate`` to 10% only when no rate was chosen (even 0). No row: nothing chosen.
    """

    study = models.OneToOneField(Study, primary_key=True, on_delete=models.CASCADE, related_name="quality")
    control_rate = _quality_field("control_rate")
    qualification_items = _quality_field("qualification_items")
    qualification_min_accuracy = _quality_field("qualification_min_accuracy")
    min_gold_accuracy = _quality_field("min_gold_accuracy")
    max_attention_failures = _quality_field("max_attention_failures")
    loo_margin = _quality_field("loo_margin")
    loo_min_n = _quality_field("loo_min_n")
    min_median_seconds = _quality_field("min_median_seconds")
    max_straight_run = _quality_field("max_straight_run")
    straight_margin = _quality_field("straight_margin")
    straight_dominant_share = _quality_field("straight_dominant_share")

    class Meta:
        verbose_name_plural = "study quality settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(**{f"{name}__isnull": True}) | Q(**{f"{name}__gte": low, f"{name}__lte": high}),
                name=f"quality_{name}_range",
            )
            for name, (_default, low, high, _whole) in QUALITY_SETTINGS.items()
        ]

    def __str__(self) -> str:
        return f"quality settings of study {self.study_id}"

    def chosen(self) -> dict[str, float | int]:
        """The settings that were chosen (non-empty columns), by name."""
        return {name: value for name in QUALITY_SETTINGS if (value := getattr(self, name)) is not None}


class ValidationSample(models.Model):
    """The items humans validate a machine labeller on (``services/validation_sample.py``).

    While a study has one, claims hand out only its items (``ValidationSampleItem``, joined by the claim
    query); a sample whose items were all deleted therefore hands out nothing, as before.
    """

    study = models.OneToOneField(
        Study, primary_key=True, on_delete=models.CASCADE, related_name="validation_sample"
    )
    labeller = models.ForeignKey(
        Annotator,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The machine labeller the sample was drawn for",
    )
    labeller_name = models.CharField(max_length=150, blank=True)
    seed = models.BigIntegerField(default=0)
    stratify_by = models.CharField(max_length=200, blank=True)
    design = models.CharField(
        max_length=16,
        blank=True,
        help_text="uniform, stratified or active; blank: drawn without stored inclusion probabilities "
        "(before designs, or restored from an export), which PPI refuses",
    )
    design_params = models.JSONField(default=dict, blank=True, help_text="e.g. active: against, mix")
    frame_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="How many items the sample was drawn from (the labeller's items)"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"validation sample of study {self.study_id}"


class FindingsReliability(models.Model):
    """A study's own thresholds for the reliability gate of its findings (docs/metrics.md, "Reliability
    gate"); without a row Krippendorff's (2004) 0.800 / 0.667 and 10 pairable items apply."""

    study = models.OneToOneField(
        Study, primary_key=True, on_delete=models.CASCADE, related_name="findings_reliability"
    )
    reliable_at = models.FloatField(default=0.8)
    tentative_at = models.FloatField(default=0.667)
    min_items = models.PositiveIntegerField(default=10)
    chosen_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(tentative_at__lte=F("reliable_at")), name="findings_reliability_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"reliability thresholds of study {self.study_id}"


class FindingsExclusion(models.Model):
    """A question a researcher left out of a study's findings (its labels feed no table), who and why;
    the report states it (docs/metrics.md, "Reliability gate")."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="findings_exclusions")
    question_key = models.CharField(max_length=64)
    reason = models.TextField(blank=True)
    excluded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["question_key"]
        constraints = [
            models.UniqueConstraint(fields=["study", "question_key"], name="findings_exclusion_unique")
        ]

    def __str__(self) -> str:
        return f"{self.question_key} left out of study {self.study_id}'s findings"


class ValidationSampleItem(models.Model):
    """One item of a study's validation sample (an item of that study: the service checks it)."""

    sample = models.ForeignKey(ValidationSample, on_delete=models.CASCADE, related_name="items")
    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="+")
    inclusion_probability = models.FloatField(
        null=True,
        blank=True,
        help_text="The chance the design gave this item of being drawn (PPI weights by 1/pi); blank: unknown",
    )

    class Meta:
        ordering = ["item_id"]
        constraints = [
            models.UniqueConstraint(fields=["sample", "item"], name="validation_sample_item_unique")
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} in the validation sample of study {self.sample_id}"


class ConsensusRule(models.TextChoices):
    """The consensus rules of ``metrics/consensus.py`` that a study may choose for a question."""

    MAJORITY = "majority", "Majority"
    UNANIMOUS = "unanimous", "Unanimous"
    AT_LEAST_K = "at-least-k", "At least k"
    ALL_AGREE_SET = "all-agree-set", "All agree within a set"
    DAWID_SKENE = "dawid-skene", "Dawid-Skene"


class ConsensusRuleChoice(models.Model):
    """The consensus rule a study chose for one question (``services/consensus.py``); without one, the
    preset's default or majority."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="consensus_rules")
    question_key = models.CharField(max_length=64)
    rule = models.CharField(max_length=32, choices=ConsensusRule.choices)
    params = models.JSONField(
        default=dict, blank=True, help_text="The rule's parameters: k, agree_values, absolute"
    )

    class Meta:
        ordering = ["study_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "question_key"], name="consensus_rule_one_per_question"),
            models.CheckConstraint(condition=Q(rule__in=ConsensusRule.values), name="consensus_rule_known"),
        ]

    def __str__(self) -> str:
        return f"{self.rule} for {self.question_key} in study {self.study_id}"

    def as_dict(self) -> dict[str, Any]:
        """The rule as ``services.consensus`` takes it: ``{"rule": name, **params}``."""
        return {"rule": self.rule, **self.params}
