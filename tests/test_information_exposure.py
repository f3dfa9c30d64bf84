"""What the workbench tells people who need not know: the health check says ok or not, nothing about
the database; each doc page is for its audience (annotators, researchers, admins), and a doc someone
may not read is a 404 to them, unlisted and unlinked (docs/security.md)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client

from workbench.docs_pages import EVERYONE_DOCS, RESEARCHER_DOCS, doc_names

pytestmark = pytest.mark.django_db

INTERNAL = ("security", "deploy", "benchmarks", "architecture")


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _doc_links(html: str) -> set[str]:
    return set(re.findall(r'href="(/docs/[^"]*)"', html))


def _page_text(response: Any) -> str:
    """A page without what changes on every answer (the masked CSRF token)."""
    return re.sub(r'value="[A-Za-z0-9]{64}"', "", response.content.decode())


# --- The health check -----------------------------------------------------------------------------


def test_the_health_check_says_ok_and_nothing_about_the_database(admin_user) -> None:
    for client in (Client(), _signed_in(admin_user)):
        response = client.get("/healthz/")
        assert response.status_code == 200 and response.json() == {"status": "ok"}
        for word in ("sqlite", "postgres", "database", "vendor"):
            assert word not in response.content.decode().lower()


def test_the_health_check_answers_503_when_the_database_does_not(monkeypatch, caplog) -> None:
    import workbench.views

    class Down:
        vendor = "postgresql"

        def cursor(self) -> Any:
            raise OperationalError("could not connect to server at 10.0.0.5")

    monkeypatch.setattr(workbench.views, "connection", Down())
    response = Client().get("/healthz/")
    assert response.status_code == 503 and response.json() == {"status": "unavailable"}
    assert "10.0.0.5" not in response.content.decode()
    assert "10.0.0.5" in caplog.text  # the reason is in the log, for the operator


# --- Docs by audience -----------------------------------------------------------------------------


def test_every_doc_has_an_audience_and_the_internal_ones_are_for_admins() -> None:
    names = set(doc_names())
    assert "annotating" in EVERYONE_DOCS and EVERYONE_DOCS <= names and RESEARCHER_DOCS <= names
    assert not (EVERYONE_DOCS | RESEARCHER_DOCS) & set(INTERNAL)
    assert set(INTERNAL) <= names


def test_an_annotator_reads_the_annotator_docs_only(annotator_user) -> None:
    client = _signed_in(annotator_user)
    assert client.get("/docs/annotating/").status_code == 200
    for name in (*INTERNAL, "import-export", "metrics", "crowd", "protocols"):
        assert client.get(f"/docs/{name}/").status_code == 404, name
    # the same 404 as a doc that does not exist: no existence leak
    assert _page_text(client.get("/docs/security/")) == _page_text(client.get("/docs/no-such-doc/"))
    index = client.get("/docs/").content.decode()
    assert _doc_links(index) == {f"/docs/{name}/" for name in EVERYONE_DOCS}


def test_a_researcher_reads_the_researcher_docs_but_not_the_internal_ones(owner) -> None:
    client = _signed_in(owner)
    for name in sorted(EVERYONE_DOCS | RESEARCHER_DOCS):
        assert client.get(f"/docs/{name}/").status_code == 200, name
    for name in INTERNAL:
        assert client.get(f"/docs/{name}/").status_code == 404, name
    page = client.get("/docs/import-export/").content.decode()
    assert '<a href="/docs/protocols/">docs/protocols.md</a>' in page
    assert "/docs/security/" not in page and "docs/security.md" in page  # mentioned, not linked
    assert not {f"/docs/{name}/" for name in INTERNAL} & _doc_links(client.get("/docs/").content.decode())


def test_an_admin_reads_every_doc(admin_user) -> None:
    client = _signed_in(admin_user)
    for name in doc_names():
        assert client.get(f"/docs/{name}/").status_code == 200, name
    assert (
        '<a href="/docs/security/">docs/security.md</a>'
        in client.get("/docs/import-export/").content.decode()
    )


def test_no_page_an_annotator_sees_links_a_doc_they_cannot_open(annotator_user) -> None:
    client = _signed_in(annotator_user)
    links: set[str] = set()
    for path in ("/docs/", "/annotate/", "/accounts/api-token/", *(f"/docs/{n}/" for n in EVERYONE_DOCS)):
        response = client.get(path, follow=True)
        assert response.status_code == 200, path
        links |= _doc_links(response.content.decode())
    assert links
    for link in sorted(links):
        assert client.get(link).status_code == 200, link


def test_signed_out_visitors_read_no_doc() -> None:
    for path in ("/docs/", "/docs/annotating/", "/docs/security/"):
        response = Client().get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_participants_error_page_links_no_docs(owner) -> None:
    """Invitation accounts may open only their study's task pages: their pages link no doc."""
    from datetime import timedelta

    from django.utils import timezone

    from annotations.services.invitations import PlatformIds, invitation_create, participant_join
    from tests.factories import StudyFactory

    study = StudyFactory.create(owner=owner)
    invitation = invitation_create(
        study=study, created_by=owner, expires_at=timezone.now() + timedelta(days=1), max_uses=1
    )
    participant, _ = participant_join(invitation=invitation, ids=PlatformIds(participant_id="p1"))
    client = _signed_in(participant.user)
    session = client.session
    session["participant_study"] = study.pk
    session.save()
    assert client.get("/docs/annotating/").status_code == 403  # fenced, as before
    missing = client.get("/items/999999/images/0/")
    assert missing.status_code == 404 and _doc_links(missing.content.decode()) == set()
    assert "/docs/" in _page_text(_signed_in(owner).get("/items/999999/images/0/"))
