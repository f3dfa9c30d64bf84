"""The only way views, APIs and commands fetch studies, items and annotations for a user.

Rules: admins see everything; researchers see studies they own or that are shared with them
(only owners and admins change sharing or delete); annotators see studies they are enrolled in,
and never items' annotations other than their own. A study a user may not see is reported as
not found (its existence is not revealed); one they may see but not change is refused.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from annotations.errors import NotAllowed, NotFoundError
from annotations.models import Annotation, Assignment, Item, Study, User


def studies_for_user(user: User) -> QuerySet[Study]:
    """Studies the user may read."""
    if not user.is_authenticated:
        return Study.objects.none()
    if user.is_admin:
        return Study.objects.all()
    if user.is_researcher:
        return Study.objects.filter(Q(owner=user) | Q(shared_with=user)).distinct()
    return Study.objects.filter(enrollments__user=user).distinct()


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


def study_get_for_owner(*, user: User, id: int) -> Study:
    study = study_get_for_user(user=user, id=id, write=True)
    if not (user.is_admin or study.owner_id == user.pk):
        raise NotAllowed("only the study's owner may do this")
    return study


def items_for_user(user: User) -> QuerySet[Item]:
    """Items of studies whose data the user may see (researchers and admins)."""
    if not user.is_authenticated or not user.is_researcher:
        return Item.objects.none()
    return Item.objects.filter(study__in=studies_for_user(user))


def item_get_for_user(*, user: User, id: int) -> Item:
    """An item the user may look at: a researcher's study item, or an item the annotator was given."""
    item = Item.objects.select_related("study").filter(pk=id).first()
    if item is None:
        raise NotFoundError(f"item {id} does not exist")
    if user.is_researcher and studies_for_user(user).filter(pk=item.study_id).exists():
        return item
    annotator = getattr(user, "annotator", None)
    if annotator is not None and item.assignments.filter(annotator=annotator).exists():
        return item
    raise NotFoundError(f"item {id} does not exist")


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


def study_get_for_annotator(*, user: User, id: int) -> Study:
    """A study the user is enrolled in as an annotator (any role may be enrolled); else not found."""
    if not user.is_authenticated:
        raise NotFoundError(f"study {id} does not exist or you are not enrolled in it")
    study = Study.objects.filter(pk=id, enrollments__user=user).first()
    if study is None:
        raise NotFoundError(f"study {id} does not exist or you are not enrolled in it")
    return study


def assignment_get_for_user(*, user: User, id: int) -> Assignment:
    """One of the user's own assignments (with its study, item and annotator); anyone else's is not found."""
    assignment = None
    if user.is_authenticated:
        assignment = (
            Assignment.objects.select_related("study", "item", "annotator")
            .filter(pk=id, annotator__user=user).first()
        )
    if assignment is None:
        raise NotFoundError(f"assignment {id} does not exist or is not yours")
    return assignment


def assignments_for_user(user: User) -> QuerySet[Assignment]:
    """The user's own assignments (annotators see no one else's)."""
    if not user.is_authenticated:
        return Assignment.objects.none()
    return Assignment.objects.filter(annotator__user=user)


def study_get_for_adjudicator(*, user: User, id: int) -> Study:
    """A study whose adjudication queue the user may work: its researchers, or an enrolled expert."""
    study = studies_for_user(user).filter(pk=id).first()
    if study is None:
        raise NotFoundError(f"study {id} does not exist or is not yours")
    if user.is_researcher:
        return study
    annotator = getattr(user, "annotator", None)
    if annotator is not None and annotator.pool == "expert":
        return study
    raise NotAllowed("only experts and the study's researchers adjudicate")
