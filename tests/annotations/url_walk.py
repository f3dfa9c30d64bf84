"""Every URL the resolver serves, with placeholder ids filled in, for tests that walk them all."""

from __future__ import annotations

import re

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
