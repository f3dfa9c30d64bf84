"""The project's docs (``docs/*.md``), read-only at ``/docs/<name>/`` for signed-in users, each to
its audience: the annotator-facing docs to every account, the researcher docs to researchers (and
admins), the internal operations docs (and any doc not named here) to admins only. A doc someone
may not read is a 404 to them, as one that does not exist, and is neither listed nor linked for them.

There is no docs server: a page names a doc by its file name without ``.md``, which must be one of
the files under ``docs/`` (a whitelist read from the folder; nothing else is ever opened). The text
is shown escaped, as preformatted text; mentions of other docs (``docs/<name>.md``) become links.
No markdown library is a dependency, so none renders it (docs/import-export.md, "Docs in pages").
"""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from annotations.access import request_user
from annotations.models import User

DOCS_DIR = settings.BASE_DIR / "docs"
_MENTION = re.compile(r"docs/([a-z0-9-]+)\.md")

# Who reads which doc. Every signed-in account: how to annotate, and the API annotators call with
# their own token (its schema is open to every account too).
EVERYONE_DOCS = frozenset({"annotating", "api"})
# Researchers and admins: running a study.
RESEARCHER_DOCS = frozenset(
    {
        "agreement",
        "crowd",
        "generation",
        "import-export",
        "labellers",
        "metrics",
        "overlap",
        "protocols",
        "reports",
    }
)
# Every other doc is for admins only: the internal operations docs (security, deploy, benchmarks,
# architecture), and a new doc until it is named above.


def doc_names() -> list[str]:
    """Every doc a page may show: the ``.md`` files directly under ``docs/``."""
    return sorted(path.stem for path in DOCS_DIR.glob("*.md") if re.fullmatch(r"[a-z0-9-]+", path.stem))


def doc_readable(user: User, name: str) -> bool:
    """Whether the signed-in ``user`` may read the doc ``name`` (its audience above)."""
    if user.is_admin:
        return True
    if name in RESEARCHER_DOCS:
        return user.is_researcher
    return name in EVERYONE_DOCS


def docs_for(user: User) -> list[str]:
    """The docs ``user`` may read: the only ones listed, linked and shown to them."""
    return [name for name in doc_names() if doc_readable(user, name)]


def doc_html(text: str, names: list[str]) -> SafeString:
    """``text`` escaped; each mention of a known doc a link to its page."""

    def link(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            return match.group(0)
        return str(format_html('<a href="{}">{}</a>', reverse("docs-page", args=[name]), match.group(0)))

    return mark_safe(_MENTION.sub(link, escape(text)))  # escaped above; links built by format_html


@login_required
def docs_index(request: HttpRequest) -> HttpResponse:
    names = docs_for(request_user(request))
    return render(request, "workbench/docs.html", {"names": names, "name": "", "html": ""})


@login_required
def docs_page(request: HttpRequest, name: str) -> HttpResponse:
    names = docs_for(request_user(request))
    if name not in names:  # not a doc, or not one for this account: the same 404
        raise Http404("no such doc")
    text = (DOCS_DIR / f"{name}.md").read_text(encoding="utf-8")
    return render(
        request, "workbench/docs.html", {"names": names, "name": name, "html": doc_html(text, names)}
    )
