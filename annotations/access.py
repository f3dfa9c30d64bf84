"""The only way views, APIs and commands fetch studies, items and annotations for a user.

Rules: admins see everything; researchers see studies they own or that are shared with them
(only owners and admins change sharing or delete); annotators see studies they are enrolled in,
and never items' annotations other than their own. A study a user may not see is reported as
not found (its existence is not revealed); one they may see but not change is refused.

Participants (accounts made by an invitation, ``Participant``) are scoped to their one study: the
annotate pages of any other study are not found for them, whatever enrolments exist, and
``workbench.middleware.ParticipantScopeMiddleware`` refuses every page outside the annotate flow.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, cast

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from annotations.models import (
    Annotation,
    Annotator,
    AnnotatorExclusion,
    Assignment,
    Enrollment,
    Invitation,
    Item,
    ItemImage,
    Participant,
    Pool,
    Study,
    User,
)
from common.checked_input import MAX_ID
from common.errors import NotAllowed, NotFoundError, ValidationFailed


class _Request(Protocol):
    user: Any


def request_user(request: _Request) -> User:
    """The account a page or API request is made by (Django's ``HttpRequest`` or DRF's ``Request``)."""
    return cast(User, request.user)


TOKEN_KEY_LENGTH = 40  # rest_framework.authtoken.models.Token.key


def studies_for_user(user: User) -> QuerySet[Study]:
    """Studies the user may read."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_admin:
        return Study.objects.all()
    if user.is_researcher:
        return Study.objects.filter(Q(owner=user) | Q(shared_with=user)).distinct()
    return Study.objects.filter(enrollments__user=user).distinct()


def studies_writable_by(user: User) -> QuerySet[Study]:
    """Studies the user may change (``study_can_write`` for many): admins all, researchers their own
    and those shared with them, everyone else none."""
    if not user.is_authenticated or not user.is_researcher:
        return Study.objects.none()
    if user.is_admin:
        return Study.objects.all()
    return Study.objects.filter(Q(owner=user) | Q(shared_with=user)).distinct()


def study_can_write(user: User, study: Study) -> bool:
    if user.is_admin or study.owner_id == user.pk:
        return True
    return user.is_researcher and study.shared_with.filter(pk=user.pk).exists()


def study_get_for_user(*, user: User, id: int, write: bool = False, researcher: bool = False) -> Study:
    """A study the user may read (``write``: may change; ``researcher``: may see its data)."""
    study = studies_for_user(user).select_related("owner").filter(pk=id).first()
    if study is None:
        raise NotFoundError(f"study {id} does not exist or is not yours")
    if (write or researcher) and not user.is_researcher:
        raise NotAllowed("only the study's researchers may do this")
    if write and not study_can_write(user, study):
        raise NotAllowed("you may read this study but not change it")
    return study


def studies_get_for_user(*, user: User, ids: Sequence[int], researcher: bool = False) -> list[Study]:
    """Several studies the user may read, in the order of ``ids`` (repeats allowed), in one query.

    The first id the user may not see stops with NotFoundError naming it; ``researcher`` as above.
    """
    found = {s.pk: s for s in studies_for_user(user).select_related("owner").filter(pk__in=set(ids))}
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFoundError(f"study {missing[0]} does not exist or is not yours")
    if researcher and not user.is_researcher:
        raise NotAllowed("only the study's researchers may do this")
    return [found[i] for i in ids]


def study_get_for_owner(*, user: User, id: int) -> Study:
    study = study_get_for_user(user=user, id=id, write=True)
    if not (user.is_admin or study.owner_id == user.pk):
        raise NotAllowed("only the study's owner may do this")
    return study


def invitation_get_for_user(*, user: User, study_id: int, id: int) -> Invitation:
    """An invitation of a study the user may change (invitation links are secrets: writers only)."""
    study = study_get_for_user(user=user, id=study_id, write=True)
    invitation = Invitation.objects.select_related("study").filter(pk=id, study=study).first()
    if invitation is None:
        raise NotFoundError(f"invitation {id} does not exist in study {study_id}")
    return invitation


def items_for_user(user: User) -> QuerySet[Item]:
    """Items of studies whose data the user may see (researchers and admins)."""
    if not user.is_authenticated or not user.is_researcher:
        return Item.objects.none()
    return Item.objects.filter(study__in=studies_for_user(user))


def item_get_for_user(*, user: User, id: int) -> Item:
    """An item the user may look at: a researcher's study item, or an item whose images the annotator
    may see (``image_assignments``: leased or submitted to them, in a study they are still in)."""
    item = Item.objects.select_related("study").filter(pk=id).first()
    if item is None:
        raise NotFoundError(f"item {id} does not exist")
    if user.is_researcher and studies_for_user(user).filter(pk=item.study_id).exists():
        return item
    if user.is_authenticated and image_assignments(user.pk).filter(item=item).exists():
        return item
    raise NotFoundError(f"item {id} does not exist")


# The assignments that show their item to their annotator: a lease (their current task, or a lapsed one
# not yet taken back) and a submitted item (changeable, on "Your answers"). Expired or released leases
# and skipped items show nothing: the item is no longer theirs.
IMAGE_ASSIGNMENT_STATUSES = (Assignment.Status.LEASED, Assignment.Status.SUBMITTED)


def image_assignments(user_id: int) -> QuerySet[Assignment]:
    """The account's assignments whose item (and its images) it may see: leased or submitted, in a
    study it is enrolled in now and not excluded from, so unenrolment or exclusion ends the sight of
    every item of that study at once (docs/security.md). Subqueries only: the image pages' one query."""
    enrolled = Enrollment.objects.filter(study_id=OuterRef("study_id"), user_id=user_id)
    excluded = AnnotatorExclusion.objects.filter(
        study_id=OuterRef("study_id"), annotator_id=OuterRef("annotator_id"), reinstated_at__isnull=True
    )
    return Assignment.objects.filter(
        Exists(enrolled), ~Exists(excluded), annotator__user_id=user_id, status__in=IMAGE_ASSIGNMENT_STATUSES
    )


def item_image_get_for_user(*, user: User, item_id: int, position: int) -> ItemImage:
    """The image at ``position`` of an item the user may look at (``item_get_for_user``'s rule). An
    annotator's own item (``image_assignments``) is found in one query (every image request of the
    annotate pages); anyone else, and every refusal, takes ``item_get_for_user``'s path and messages."""
    if user.is_authenticated and item_id <= MAX_ID:  # a foreign key's lookup does not absorb a larger one
        given = image_assignments(user.pk).filter(item_id=OuterRef("item_id"))
        image = ItemImage.objects.filter(item_id=item_id, position=position).filter(Exists(given)).first()
        if image is not None:
            return image
    item = item_get_for_user(user=user, id=item_id)
    image = item.images.filter(position=position).first()
    if image is None:
        raise NotFoundError("this item has no image there")
    return image


def assignment_gives_direct_urls(assignment: Assignment, *, now: datetime | None = None) -> bool:
    """Whether a task answer may carry presigned ``direct_url``s of its item's images (the API): only
    for its annotator's current lease (leased, the lease not run out) in a study they are still in
    (enrolled, not excluded). The caller has fetched ``assignment`` as the user's own; one query, to be
    asked only when there is a URL to give (the claim asks it inside its images' query instead:
    ``selectors.tasks.task_images_load``)."""
    if not lease_is_current(assignment, now=now):
        return False
    user_id = assignment.annotator.user_id
    return user_id is not None and image_assignments(user_id).filter(pk=assignment.pk).exists()


def lease_is_current(assignment: Assignment, *, now: datetime | None = None) -> bool:
    """Leased, and the lease has not run out (no query)."""
    if assignment.status != Assignment.Status.LEASED or assignment.lease_expires_at is None:
        return False
    return assignment.lease_expires_at > (now or timezone.now())


def item_get_for_researcher(*, user: User, id: int, write: bool = False) -> Item:
    """An item of a study whose data the user may see (``write``: may change); annotators never."""
    item = items_for_user(user).select_related("study").filter(pk=id).first()
    if item is None:
        raise NotFoundError(f"item {id} does not exist")
    study_get_for_user(user=user, id=item.study_id, researcher=True, write=write)
    return item


def annotations_for_user(user: User) -> QuerySet[Annotation]:
    """Researchers: every annotation of their studies. Annotators: only their own."""
    if not user.is_authenticated:
        return Annotation.objects.none()
    if user.is_researcher:
        return Annotation.objects.filter(study__in=studies_for_user(user))
    annotator = getattr(user, "annotator", None)
    if annotator is None:
        return Annotation.objects.none()
    return Annotation.objects.filter(annotator=annotator)


def annotator_studies(*, user_id: Any) -> QuerySet[Study]:
    """The studies account ``user_id`` may annotate: those it is enrolled in (any role may be enrolled),
    and for a participant's account its own study only. The one statement of that rule: the pages and
    the claim's prepared query (``services/assignment.py``, whose ``user_id`` is a parameter) build on it.
    The enrolment is joined, so ``enrollments__...`` lookups on the result read the account's own."""
    participant = Participant.objects.filter(user_id=user_id)
    return Study.objects.filter(enrollments__user_id=user_id).filter(
        Exists(participant.filter(study=OuterRef("pk"))) | ~Exists(participant)
    )


def own_assignments(*, user_id: Any) -> QuerySet[Assignment]:
    """Account ``user_id``'s own assignments: the one statement of "an annotator sees only theirs" (the
    pages, the API and the submit's prepared query build on it)."""
    return Assignment.objects.filter(annotator__user_id=user_id)


def study_get_for_annotator(*, user: User, id: int) -> Study:
    """A study the user is enrolled in as an annotator (any role may be enrolled); else not found."""
    if not user.is_authenticated:
        raise NotFoundError(f"study {id} does not exist or you are not enrolled in it")
    study = (
        annotator_studies(user_id=user.pk)
        .filter(pk=id)
        .select_related("quality")  # read by every claim (services.controls.control_plan)
        .first()
    )
    if study is None:
        raise NotFoundError(f"study {id} does not exist or you are not enrolled in it")
    return study


def participant_for_user(user: User) -> Participant | None:
    """The invitation participant behind an account (with its invitation), or None for everyone else."""
    if not user.is_authenticated:
        return None
    return Participant.objects.select_related("invitation").filter(user=user).first()


def participant_quota(*, user: User, study_id: int) -> int | None:
    """How many items the participant's invitation asks of them in this study (None: no quota)."""
    return (
        Participant.objects.filter(user=user, study_id=study_id)
        .values_list("invitation__items_per_participant", flat=True)
        .first()
    )


def participant_study_id(user_id: int) -> int | None:
    """The one study a participant account is limited to; None when the account is not a participant."""
    return Participant.objects.filter(user_id=user_id).values_list("study_id", flat=True).first()


def assignment_get_for_user(*, user: User, id: int) -> Assignment:
    """One of the user's own assignments (with its study, item and annotator); anyone else's is not found."""
    assignment = None
    if user.is_authenticated:
        assignment = (
            # The study's quality settings too: leasing the next item ahead reads them (control_plan).
            # Its draft too (one join): the task page restores it (selectors/drafts.py).
            own_assignments(user_id=user.pk)
            .select_related("study__quality", "item", "annotator", "draft")
            .filter(pk=id)
            .first()
        )
    if assignment is None:
        raise NotFoundError(f"assignment {id} does not exist or is not yours")
    return assignment


def assignments_for_user(user: User) -> QuerySet[Assignment]:
    """The user's own assignments (annotators see no one else's)."""
    if not user.is_authenticated:
        return Assignment.objects.none()
    return own_assignments(user_id=user.pk)


def study_get_for_adjudicator(*, user: User, id: int) -> Study:
    """A study whose adjudication queue the user may work: its researchers, or someone enrolled in
    *this* study in its expert pool (the pool is per enrolment: being an expert elsewhere gives nothing)."""
    study = studies_for_user(user).filter(pk=id).first()
    if study is None:
        raise NotFoundError(f"study {id} does not exist or is not yours")
    if user.is_researcher:
        return study
    if Enrollment.objects.filter(study=study, user=user, pool=Pool.EXPERT).exists():
        return study
    raise NotAllowed("only experts and the study's researchers adjudicate")


def annotator_get_in_study(*, study: Study, id: int) -> Annotator:
    """A human annotator with work in ``study`` (enrolled, handed an item, answered, or imported into
    it). Anyone else is not found, with the same message as an unknown id: a study's researchers
    learn nothing about other studies' people (not even a name)."""
    in_study = (
        Q(study=study)
        | Q(user__enrollments__study=study)
        | Q(assignments__study=study)
        | Q(annotations__study=study)
    )
    annotator = Annotator.objects.filter(in_study, pk=id, kind=Annotator.Kind.HUMAN).distinct().first()
    if annotator is None:
        raise NotFoundError(f"annotator {id} does not exist in this study")
    return annotator


# --- Enrolment --------------------------------------------------------------------------------------

NOT_ENROLLABLE = "no account named {username!r} that you may enrol (an annotator of one of your studies)"


def accounts_enrollable_by(user: User) -> QuerySet[User]:
    """The accounts ``user`` may enrol in a study they may change (docs/security.md, "Tenancy").

    Only annotator accounts, never staff, researchers or admins. Admins may enrol any of them. A
    researcher may enrol those already enrolled in a study the researcher may change (which
    includes the participants their own invitation links created): never another researcher's
    annotators, whom they could otherwise list, profile or pull into their study.
    """
    if not user.is_authenticated or not user.is_researcher:
        return User.objects.none()
    annotators = User.objects.filter(role=User.Role.ANNOTATOR, is_staff=False, is_superuser=False)
    if user.is_admin:
        return annotators
    mine = Enrollment.objects.filter(study__in=studies_writable_by(user)).values("user_id")
    return annotators.filter(pk__in=mine)


def enrollable_account_get(*, by: User, username: str) -> User:
    """The account named ``username`` if ``by`` may enrol it; an unknown name and an account they
    may not enrol are refused with the same message (no one learns which accounts exist)."""
    account = accounts_enrollable_by(by).filter(username=username).first()
    if account is None:
        raise ValidationFailed(NOT_ENROLLABLE.format(username=username), {"username": "not enrollable"})
    return account


ENROLL_SUGGESTIONS = 20


def enroll_candidates(*, by: User, study: Study, prefix: str) -> list[dict[str, str]]:
    """At most ``ENROLL_SUGGESTIONS`` accounts ``by`` may enrol (``accounts_enrollable_by``), not yet in
    ``study``, whose username or first or last name starts with ``prefix`` (case-insensitive): username
    and name only, for the study page's autocomplete. An empty prefix suggests nothing."""
    if not prefix:
        return []
    rows = (
        accounts_enrollable_by(by)
        .filter(
            Q(username__istartswith=prefix)
            | Q(first_name__istartswith=prefix)
            | Q(last_name__istartswith=prefix)
        )
        .exclude(pk__in=Enrollment.objects.filter(study=study).values("user_id"))
        .order_by("username")
        .values_list("username", "first_name", "last_name")[:ENROLL_SUGGESTIONS]
    )
    return [{"username": username, "name": f"{first} {last}".strip()} for username, first, last in rows]


def enrollment_check(*, by: User, study: Study, user: User) -> None:
    """Refuse an enrolment ``by`` may not make: a study they may not change, or an account outside
    ``accounts_enrollable_by(by)``."""
    if not study_can_write(by, study):
        raise NotAllowed("you may read this study but not change it")
    if not accounts_enrollable_by(by).filter(pk=user.pk).exists():
        raise ValidationFailed(NOT_ENROLLABLE.format(username=user.username), {"username": "not enrollable"})


def token_signs_in(authorization: str) -> bool:
    """Whether an ``Authorization`` header holds the unexpired token of an active account that may use
    the API (``Token KEY``; not a participant's), as ``annotations.api.authentication`` would find it: one
    indexed query, no body read. Asked from the headers alone by
    ``workbench.middleware.RequestLimitsMiddleware`` for a body over the anonymous limit: any other
    header (``Basic``, a made-up token) leaves the client anonymous, and its body limit too
    (docs/security.md, "Request and upload size")."""
    from rest_framework.authtoken.models import Token

    parts = authorization.split()
    if len(parts) != 2 or parts[0].lower() != "token":
        return False
    key = parts[1]
    if not (key.isascii() and key.isalnum() and len(key) <= TOKEN_KEY_LENGTH):
        return False  # no such key can exist: no query
    from annotations.selectors.api_tokens import api_token_lifetime

    return Token.objects.filter(
        key=key,
        user__is_active=True,
        user__participant__isnull=True,
        created__gt=timezone.now() - api_token_lifetime(),  # an expired token signs no one in
    ).exists()
