"""Accounts: the user model and its manager, which refuse look-alike usernames (docs/security.md,
"Usernames")."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractUser, UserManager
from django.core.exceptions import ValidationError
from django.db import models

from common.usernames import username_mixes_lookalikes, username_normalize, username_skeleton


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
