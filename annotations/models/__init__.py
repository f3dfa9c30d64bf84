"""Studies, items, annotators, annotations and assignments.

Models hold fields, constraints and one-row rules only; every write goes through
``annotations/services/`` and every permission check through ``annotations/access.py``.

The models are split by domain (``users``, ``studies``, ``items``, ``annotators``, ``assignments``,
``answers``, ``jobs``, ``findings``); import them from here, ``annotations.models``, as before.
"""

from annotations.models.annotators import (
    Annotator,
    AnnotatorExclusion,
    Invitation,
    Participant,
    invitation_token,
    required_answers,
)
from annotations.models.answers import (
    Annotation,
    AnnotationRevision,
    ConsensusLabel,
    ItemFeature,
    RevealLog,
)
from annotations.models.assignments import Assignment, AssignmentDraft
from annotations.models.findings import (
    FindingsExclusion,
    FindingsReliability,
    ValidationSample,
    ValidationSampleItem,
)
from annotations.models.items import (
    ControlKind,
    Item,
    ItemImage,
    StereotypeEntry,
    random_shuffle_key,
)
from annotations.models.items import _item_file_name as _item_file_name  # migration 0001's upload_to
from annotations.models.jobs import ExportJob, ImportJob
from annotations.models.studies import (
    MAX_CONTROL_RATE,
    MAX_POOL_CHARS,
    QUALITY_SETTINGS,
    ConsensusRule,
    ConsensusRuleChoice,
    Enrollment,
    Pool,
    Study,
    StudyQualitySettings,
)
from annotations.models.users import User, WorkbenchUserManager, username_problem

__all__ = [
    "MAX_CONTROL_RATE",
    "MAX_POOL_CHARS",
    "QUALITY_SETTINGS",
    "Annotation",
    "AnnotationRevision",
    "Annotator",
    "AnnotatorExclusion",
    "Assignment",
    "AssignmentDraft",
    "ConsensusLabel",
    "ConsensusRule",
    "ConsensusRuleChoice",
    "ControlKind",
    "Enrollment",
    "ExportJob",
    "FindingsExclusion",
    "FindingsReliability",
    "ImportJob",
    "Invitation",
    "Item",
    "ItemFeature",
    "ItemImage",
    "Participant",
    "Pool",
    "RevealLog",
    "StereotypeEntry",
    "Study",
    "StudyQualitySettings",
    "User",
    "ValidationSample",
    "ValidationSampleItem",
    "WorkbenchUserManager",
    "invitation_token",
    "random_shuffle_key",
    "required_answers",
    "username_problem",
]
