"""Accounts an admin makes in bulk: annotators imported from a CSV file, and password-reset links.

``accounts_import_csv`` reads ``username,email,name[,pool]`` (a header row; ``name`` is split into
first and last name at the first space), checks every row on its own and creates the valid ones as
annotators with an *unusable* password (a CSV never carries passwords): each gets a password-reset
link instead. A row with a pool enrols the account in the chosen study in that pool (a pool needs a
study). The report says, row by row, what was created and what was refused and why.

``password_reset_links`` makes Django's one-time reset link (``default_token_generator``) for each
account and mails it to the accounts that have an address (``EMAIL_BACKEND``: by default a file per
message under the data dir, docs/deploy.md); the links come back so the admin can pass them on.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field

from celery import current_app
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from annotations.models import Pool, Study, User, username_problem
from annotations.services.studies import enrollment_add
from common.checked_input import text_problem
from common.errors import WorkbenchError
from common.usernames import username_normalize, username_skeleton

CSV_COLUMNS = ("username", "email", "name", "pool")
MAX_ROWS = 5000


@dataclass(frozen=True)
class ResetLink:
    username: str
    email: str
    link: str
    mailed: bool


@dataclass
class ImportReport:
    created: list[tuple[int, str]] = field(default_factory=list)  # (line, username)
    refused: list[tuple[int, str, str]] = field(default_factory=list)  # (line, username, reason)
    enrolled: list[str] = field(default_factory=list)
    links: list[ResetLink] = field(default_factory=list)
    problem: str = ""  # the whole file refused (no header, not text)


def _username_problem(username: str) -> str:
    field_ = User._meta.get_field("username")
    try:
        field_.run_validators(username)
    except ValidationError as exc:
        return " ".join(exc.messages)
    if len(username) > 150:
        return "a username has at most 150 characters"
    return ""


def accounts_import_csv(
    *, data: bytes, study: Study | None, by: User, base_url: str, mail: bool = True
) -> ImportReport:
    """Create annotator accounts from a CSV file, row by row (see the module docstring)."""
    report = ImportReport()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        report.problem = "the file is not UTF-8 text"
        return report
    reader = csv.DictReader(io.StringIO(text))
    header = [(name or "").strip().lower() for name in (reader.fieldnames or [])]
    missing = [name for name in CSV_COLUMNS[:3] if name not in header]
    if missing:
        needed = "the header needs the columns username, email, name (optional: pool)"
        report.problem = f"{needed}; missing: {', '.join(missing)}"
        return report
    unknown = [name for name in header if name not in CSV_COLUMNS]
    if unknown:
        report.problem = (
            f"unknown column {unknown[0]!r}: the columns are {', '.join(CSV_COLUMNS)} (no passwords)"
        )
        return report
    reader.fieldnames = header
    seen: dict[str, int] = {}
    created_users: list[User] = []
    for number, row in enumerate(reader, start=2):
        if number - 1 > MAX_ROWS:
            report.refused.append((number, "", f"more than {MAX_ROWS} rows; import the rest in another file"))
            break
        if None in row:
            report.refused.append((number, "", "more cells than columns"))
            continue
        username = username_normalize((row.get("username") or "").strip())
        email = (row.get("email") or "").strip()
        name = " ".join((row.get("name") or "").split())
        pool = (row.get("pool") or "").strip().lower()
        if not username and not email and not name and not pool:
            continue  # a blank line
        reason = _row_problem(username, email, name, pool, study, seen)
        if reason:
            report.refused.append((number, username, reason))
            continue
        seen[username_skeleton(username)] = number
        first, _, last = name.partition(" ")
        try:
            with transaction.atomic():
                user = User(username=username, email=email, first_name=first[:150], last_name=last[:150])
                user.role = User.Role.ANNOTATOR
                user.set_unusable_password()
                user.save()
                if pool and study is not None:
                    enrollment_add(study=study, user=user, pool=pool, by=by)
        except WorkbenchError as exc:
            report.refused.append((number, username, exc.message))
            continue
        report.created.append((number, username))
        if pool and study is not None:
            report.enrolled.append(username)
        created_users.append(user)
    report.links = password_reset_links(users=created_users, base_url=base_url, mail=mail)
    return report


def _row_problem(
    username: str, email: str, name: str, pool: str, study: Study | None, seen: dict[str, int]
) -> str:
    if not username:
        return "no username"
    for column, value in (("username", username), ("email", email), ("name", name), ("pool", pool)):
        stored = text_problem(value)  # PostgreSQL cannot store these (a 500 before)
        if stored is not None:
            return f"the {column} {stored}"
    problem = _username_problem(username)
    if problem:
        return problem
    if username_skeleton(username) in seen:
        return f"repeats the username of line {seen[username_skeleton(username)]}"
    if User.objects.filter(username__iexact=username).exists():
        return "an account with this username exists already"
    problem = username_problem(username)
    if problem:
        return f"the username {problem}"
    if not email:
        return "no email (the reset link goes there)"
    try:
        validate_email(email)
    except ValidationError:
        return f"{email!r} is not an email address"
    if User.objects.filter(email__iexact=email).exists():
        return "an account with this email exists already"
    if len(name) > 300:
        return "the name is longer than 300 characters"
    if pool and pool not in Pool.values:
        return f"pool {pool!r} is not one of {', '.join(Pool.values)}"
    if pool and study is None:
        return "a pool needs a study to enrol in: choose the study above the file"
    return ""


def password_reset_links(*, users: Iterable[User], base_url: str, mail: bool = True) -> list[ResetLink]:
    """One password-reset link per account (valid until used or the password changes), mailed to
    those with an email address when ``mail``; returned for the admin to see."""
    links = []
    for user in users:
        uid = urlsafe_base64_encode(force_bytes(user.pk))
        token = default_token_generator.make_token(user)
        link = base_url.rstrip("/") + reverse("password_reset_confirm", args=[uid, token])
        mailed = False
        if mail and user.email:
            body = render_to_string(
                "registration/admin_reset_email.txt", {"user": user, "link": link, "base_url": base_url}
            )
            send_mail("Set your Stereotype Audit Workbench password", body, None, [user.email])
            mailed = True
        links.append(ResetLink(username=user.username, email=user.email, link=link, mailed=mailed))
    return links


PASSWORD_RESET_TASK = "annotations.tasks.send_password_reset_mail_task"


def password_reset_mail_request(*, email: str, base_url: str) -> None:
    """Someone asked for a reset link for ``email`` on the sign-in page's "Forgot your password?".

    Only queues ``password_reset_mail_send`` (a Celery task, sent once the transaction commits): the
    request does the same work whether or not an account has that address, so neither its answer nor
    its time tells (docs/security.md, "Password reset")."""
    task = current_app.tasks[PASSWORD_RESET_TASK]
    transaction.on_commit(lambda: task.apply_async((email, base_url)))


def password_reset_mail_send(*, email: str, base_url: str) -> int:
    """Mail a reset link to each active account with this email address (any case) that has a usable
    password, as Django's own password-reset form does (participants, who sign in only through their
    link, have none); returns how many were mailed."""
    users = [
        user
        for user in User.objects.filter(email__iexact=email.strip(), is_active=True).order_by("pk")
        if user.has_usable_password()
    ]
    return sum(link.mailed for link in password_reset_links(users=users, base_url=base_url))
