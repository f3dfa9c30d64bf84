"""The Report tab answers without its preview; the preview comes from its own URL
(``/studies/<pk>/report/preview/``) with the tab's checks and options, sandboxed and kept by no cache."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.test import Client

from annotations.models import Enrollment, Study, User
from reports import gather
from reports.models import ReportJob
from tests.factories import ItemFactory, StudyFactory

NAME = '<b>Nurse & "doctor"</b> Ölçü'
TITLE = "Audit report: &lt;b&gt;Nurse &amp; &quot;doctor&quot;&lt;/b&gt; Ölçü"
PREVIEW_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; sandbox"


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def named_study(owner: User) -> Study:
    study = StudyFactory.create(owner=owner, name=NAME)
    for condition in ("base", "base", "mitigated"):
        ItemFactory.create(study=study, condition=condition)
    return study


@pytest.fixture
def builds() -> Any:
    """``reports.gather.report_build`` (as ``reports.jobs`` calls it), counted and still run."""
    with mock.patch("reports.jobs.report_build", wraps=gather.report_build) as build:
        yield build


def preview_url(study: Study) -> str:
    return f"/studies/{study.pk}/report/preview/"


def assert_preview_headers(answer: Any) -> None:
    assert answer["Content-Security-Policy"] == PREVIEW_CSP
    assert answer["Cache-Control"] == "private, no-store"
    assert answer["X-Frame-Options"] == "DENY" and answer["X-Content-Type-Options"] == "nosniff"


# --- The tab ---------------------------------------------------------------------------------------


def test_the_tab_builds_no_report(owner: User, named_study: Study, builds: Any) -> None:
    other = StudyFactory.create(owner=owner, name="Second")
    page = login(owner).get(
        f"/studies/{named_study.pk}/report/", {"correction": "bh", "compare": str(other.pk)}
    )
    assert page.status_code == 200
    assert builds.call_count == 0
    html = page.content.decode()
    # none of the report's document: not its title, not its tables
    assert "Audit report:" not in html and "Compare report:" not in html
    assert "Items by condition, model and prompt set" not in html and "srcdoc" not in html
    # its place says it is loading, to assistive technology too, and names the preview's URL with the
    # tab's options
    assert 'role="status" aria-live="polite">Preview loading…</p>' in html
    url = f"/studies/{named_study.pk}/report/preview/?correction=bh&amp;compare={other.pk}"
    assert f'data-preview-url="{url}"' in html
    assert (
        '<iframe class="report-preview" id="report-preview" title="Report preview" sandbox="" hidden>' in html
    )


def test_the_tab_answers_in_a_few_queries(
    owner: User, named_study: Study, django_assert_max_num_queries: Any
) -> None:
    """The report build reads every table of the study; the tab reads the options' few."""
    client = login(owner)
    client.get(f"/studies/{named_study.pk}/report/")  # the session and its user cached
    with django_assert_max_num_queries(20):
        assert client.get(f"/studies/{named_study.pk}/report/").status_code == 200


def test_a_large_study_tab_names_no_preview(
    owner: User, named_study: Study, settings: Any, builds: Any
) -> None:
    settings.WORKBENCH_EXPORT_INLINE_LIMIT = 2  # 3 items: large
    client = login(owner)
    html = client.get(f"/studies/{named_study.pk}/report/").content.decode()
    assert "This study is large" in html and "data-preview-url" not in html
    answer = client.get(preview_url(named_study))
    assert answer.status_code == 409 and "This study is large" in answer.content.decode()
    assert_preview_headers(answer)
    assert builds.call_count == 0


# --- The preview -----------------------------------------------------------------------------------


def test_the_preview_is_the_report_page_sandboxed_and_not_stored(
    owner: User, named_study: Study, builds: Any
) -> None:
    other = StudyFactory.create(owner=owner, name="Second")
    answer = login(owner).get(preview_url(named_study), {"correction": "bh", "compare": str(other.pk)})
    assert answer.status_code == 200, answer.content[:300]
    assert answer["Content-Type"] == "text/html; charset=utf-8"
    assert_preview_headers(answer)
    body = answer.content.decode()
    assert body.lstrip().lower().startswith("<!doctype html>")
    # the compared study is in the title (the options reach the report), the names escaped
    assert f"<h1>{TITLE.replace('Audit', 'Compare')} vs Second</h1>" in body and NAME not in body
    assert "Items by condition, model and prompt set" in body
    # the tab's options, checked as the tab checks them, are the report's
    assert builds.call_count == 1
    _study, kwargs = builds.call_args.args, builds.call_args.kwargs
    assert kwargs["correction"] == "bh" and kwargs["source"] is None
    assert [study.pk for study in kwargs["compare"]] == [other.pk]
    assert not ReportJob.objects.exists()


@pytest.mark.parametrize("who", ["other_researcher", "annotator_user", "enrolled_annotator"])
def test_only_the_study_researchers_reach_the_preview(
    request: pytest.FixtureRequest, named_study: Study, annotator_user: User, who: str, builds: Any
) -> None:
    if who == "enrolled_annotator":
        Enrollment.objects.create(study=named_study, user=annotator_user)
        user = annotator_user
    else:
        user = request.getfixturevalue(who)
    answer = login(user).get(preview_url(named_study))
    assert answer.status_code == 404 and TITLE not in answer.content.decode()
    assert builds.call_count == 0


def test_a_researcher_the_study_is_shared_with_reaches_it(named_study: Study, other_researcher: User) -> None:
    named_study.shared_with.add(other_researcher)
    answer = login(other_researcher).get(preview_url(named_study))
    assert answer.status_code == 200 and TITLE in answer.content.decode()


def test_anonymous_is_sent_to_sign_in(named_study: Study, builds: Any) -> None:
    answer = Client().get(preview_url(named_study))
    assert answer.status_code == 302 and "login" in answer["Location"]
    assert builds.call_count == 0


def test_the_preview_is_a_get(owner: User, named_study: Study) -> None:
    assert login(owner).post(preview_url(named_study)).status_code == 405


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"correction": "bonferroni"}, "unknown correction 'bonferroni': choose holm or bh"),
        ({"compare": "²"}, "compare: '²' is not a study id"),
        ({"compare": "1" * 4401}, "is not a study id"),
        ({"compare": "987654"}, "compare: study 987654 does not exist or is not yours"),
        ({"source": "x" * 250}, "source: at most 200 characters"),
        ({"compare": ["1", "2", "3", "4", "5", "6"]}, "compare: at most 5 studies"),
    ],
)
def test_a_bad_option_is_a_400_with_the_reason(
    owner: User, named_study: Study, query: dict[str, Any], reason: str, builds: Any
) -> None:
    answer = login(owner).get(preview_url(named_study), query)
    assert answer.status_code == 400
    assert answer["Content-Type"] == "text/plain; charset=utf-8"
    assert reason in answer.content.decode()
    assert_preview_headers(answer)
    assert builds.call_count == 0


def test_comparing_with_itself_or_a_hidden_study_is_refused(
    owner: User, named_study: Study, other_researcher: User, builds: Any
) -> None:
    hidden = StudyFactory.create(owner=other_researcher)
    client = login(owner)
    for compare, reason in (
        (named_study.pk, "compare: a study is not compared with itself"),
        (hidden.pk, f"compare: study {hidden.pk} does not exist or is not yours"),
    ):
        answer = client.get(preview_url(named_study), {"compare": compare})
        assert (answer.status_code, answer.content.decode()) == (400, reason)
        # the tab says the same reason, itself (400), and names no preview
        tab = client.get(f"/studies/{named_study.pk}/report/", {"compare": compare})
        assert tab.status_code == 400 and reason in tab.content.decode()
        assert "data-preview-url" not in tab.content.decode()
    assert builds.call_count == 0
