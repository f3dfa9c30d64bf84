"""Items (the things judged), their image files, and the stereotype tables attached to a study."""

from __future__ import annotations

import secrets
import uuid
from pathlib import PurePosixPath

from django.db import models
from django.db.models import Q

from annotations.models.studies import Study


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
    # The study's overlap policy, kept by the assignment service (annotations/services/assignment.md).
    policy_slots = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Judgements (submitted or leased) the overlap policy lets the item hold now; empty: the "
        "policy's opening (fixed:K: the overlap)",
    )
    policy_votes = models.JSONField(
        default=dict,
        blank=True,
        help_text="{annotator id: answer} to the policy's question (not under fixed:K)",
    )
    policy_stopped = models.BooleanField(
        default=False,
        help_text="The overlap policy wants no more judgements of this item (never under fixed:K)",
    )
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
            # Items an overlap policy stopped leave the claim's range scan (assignment.md, "Order").
            models.Index(
                fields=["study", "policy_stopped", "judgements", "shuffle_key"], name="item_claim_order"
            ),
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
        verbose_name_plural = "stereotype entries"  # not Django's "entrys"
        ordering = ["identity", "attribute"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "identity", "attribute"], name="stereotype_entry_unique"
            ),
        ]
        indexes = [models.Index(fields=["study", "identity"])]

    def __str__(self) -> str:
        return f"{self.identity} / {self.attribute}"
