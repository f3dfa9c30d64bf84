"""Every URL the resolver serves, with placeholder ids filled in, for tests that walk them all."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.contrib.admindocs.views import extract_views_from_urlpatterns, simplify_regex
from django.urls import get_resolver

INT_PARAMETERS = {
    "pk",
    "id",
    "item_id",
    "job_id",
    "invitation_id",
    "annotator_id",
    "object_id",
    "content_type_id",
}


OTHER_PARAMETERS = {
    "position": "0",
    "fmt": "csv",
    "key": "soda",
    "verb": "cancel",
    "token": "not-a-token",
    "format": "json",
    "url": "annotations/study/",
    "app_label": "annotations",
    "name": "protocols",  # a doc (/docs/<name>/)
    "preset": "subgroup",
    "uidb64": "MQ",  # a password-reset link's account id (base64 of 1)
}


PLACEHOLDER = re.compile(r"<(?:(\w+):)?(\w+)>")


def every_url() -> list[tuple[str, str | None]]:
    """(path template with <params>, the URL's full name) for every pattern the project serves."""
    urls = []
    for _view, regex, namespaces, name in extract_views_from_urlpatterns(get_resolver().url_patterns):
        template = simplify_regex(str(regex)).replace("\\.", ".")
        full_name = ":".join([*(namespaces or []), name]) if name else None
        urls.append((template, full_name))
    return urls


def walked_urls(
    ids: Callable[[str], str], *, others: dict[str, str] | None = None, skip_admin: bool = True
) -> list[tuple[str, str | None]]:
    """(path, name) of every URL with its placeholders filled: ``ids(name)`` for id parameters,
    ``others`` (or ``OTHER_PARAMETERS``) for the rest; sign-out (it ends the session) and, by default,
    Django's own admin are left out."""
    values = {**OTHER_PARAMETERS, **(others or {})}

    def fill(match: re.Match[str]) -> str:
        converter, name = match.groups()
        if converter == "drf_format_suffix":
            return ".json"
        return ids(name) if name in INT_PARAMETERS else values[name]

    paths = []
    for template, name in every_url():
        if name == "logout" or (skip_admin and template.startswith("/admin")):
            continue
        paths.append((PLACEHOLDER.sub(fill, template), name))
    return paths
