"""The report's doors through the user's path: the Report tab (preview, downloads, jobs) and the API
(``POST /api/studies/{id}/report/``, its job and its download), with their permissions."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from annotations.models import Enrollment, Study, User
from reports.models import ReportJob
from tests.factories import ItemFactory, StudyFactory
from tests.helpers import client_for
from tests.reports.documents import pdf_text, poppler_missing
from tests.s3_server import FileStore, fetch_download

NAME = '<b>Nurse & "doctor"</b> Ölçü'


@pytest.fixture(autouse=True)
def jobs_run(django_capture_on_commit_callbacks: Any) -> Any:
    """Tests run in a transaction that never commits: run what a commit would send (the job's task,
    eager) as the block that queued it ends."""
    return django_capture_on_commit_callbacks


def made(client: Any, study: Study, body: dict[str, Any], jobs_run: Any) -> dict[str, Any]:
    """POST a report through the API, let its job run (eager) and answer its state then."""
    with jobs_run(execute=True):
        answer = client.post(f"/api/studies/{study.pk}/report/", body, format="json")
    assert answer.status_code == 202, answer.content
    job: dict[str, Any] = client.get(f"/api/studies/{study.pk}/report/{answer.json()['id']}/").json()
    return job


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


# --- The Report tab --------------------------------------------------------------------------------


def test_the_tab_shows_the_preview_with_the_name_escaped(owner: User, named_study: Study) -> None:
    client = login(owner)
    page = client.get(f"/studies/{named_study.pk}/report/")
    assert page.status_code == 200
    html = page.content.decode()
    assert NAME not in html and "&lt;b&gt;Nurse &amp; &quot;doctor&quot;&lt;/b&gt; Ölçü" in html
    # The preview is the report page, fetched after the tab into a sandboxed frame (study.js sets it
    # as the frame's srcdoc): the tab names its URL; the page itself holds none of it.
    assert 'sandbox=""' in html and 'title="Report preview"' in html and "srcdoc" not in html
    assert f'data-preview-url="/studies/{named_study.pk}/report/preview/?correction=holm"' in html
    assert "script-src 'self'" in page["Content-Security-Policy"]
    for fmt in ("md", "html", "tex", "pdf", "heds"):
        assert f'name="format" value="{fmt}"' in html
    preview = client.get(f"/studies/{named_study.pk}/report/preview/", {"correction": "holm"})
    assert preview.status_code == 200 and preview["Content-Type"] == "text/html; charset=utf-8"
    body = preview.content.decode()
    assert NAME not in body and "&lt;b&gt;Nurse &amp; &quot;doctor&quot;&lt;/b&gt; Ölçü" in body


def test_the_study_page_links_the_tab(owner: User, named_study: Study) -> None:
    html = login(owner).get(f"/studies/{named_study.pk}/").content.decode()
    assert f'href="/studies/{named_study.pk}/report/" id="tab-report"' in html


@pytest.mark.parametrize("who", ["other_researcher", "annotator_user", "enrolled_annotator"])
def test_only_the_study_researchers_reach_the_tab(
    request: pytest.FixtureRequest, named_study: Study, annotator_user: User, who: str
) -> None:
    if who == "enrolled_annotator":
        Enrollment.objects.create(study=named_study, user=annotator_user)
        user = annotator_user
    else:
        user = request.getfixturevalue(who)
    client = login(user)
    assert client.get(f"/studies/{named_study.pk}/report/").status_code == 404
    refused = client.post(f"/studies/{named_study.pk}/report/make/", {"format": "pdf"})
    assert refused.status_code == 404 and not ReportJob.objects.exists()


def test_anonymous_is_sent_to_sign_in(named_study: Study) -> None:
    answer = Client().get(f"/studies/{named_study.pk}/report/")
    assert answer.status_code == 302 and "login" in answer["Location"]


def test_html_is_made_in_the_request(owner: User, named_study: Study) -> None:
    answer = login(owner).post(
        f"/studies/{named_study.pk}/report/make/", {"format": "html", "correction": "bh"}
    )
    assert answer.status_code == 200
    assert answer["Content-Disposition"] == f'attachment; filename="report-study-{named_study.pk}.html"'
    assert "sandbox" in answer["Content-Security-Policy"]
    body = answer.content.decode()
    assert "&lt;b&gt;Nurse" in body and "<b>Nurse" not in body and not ReportJob.objects.exists()


@pytest.mark.skipif(poppler_missing(), reason="poppler-utils (pdftotext) is not installed")
def test_pdf_from_the_tab_goes_through_a_job_and_downloads(
    owner: User, named_study: Study, default_store: FileStore, tmp_path: Path, jobs_run: Any
) -> None:
    client = login(owner)
    with jobs_run(execute=True):
        answer = client.post(
            f"/studies/{named_study.pk}/report/make/", {"format": "pdf", "correction": "holm"}
        )
    assert answer.status_code == 302 and answer["Location"].endswith("#report-jobs")
    job = ReportJob.objects.get()
    assert (job.status, job.format, job.requested_by_id, job.filename) == (
        "done",
        "pdf",
        owner.pk,
        f"report-study-{named_study.pk}.pdf",
    )
    page = client.get(answer["Location"]).content.decode()
    assert f'href="/studies/{named_study.pk}/report/{job.pk}/download/"' in page
    # The row's state is polled by static/js/study.js from the API.
    assert f'data-status-url="/api/studies/{named_study.pk}/report/{job.pk}/"' in page
    pdf = fetch_download(client.get(f"/studies/{named_study.pk}/report/{job.pk}/download/"), default_store)
    assert NAME.replace("<b>", "").replace("</b>", "") in " ".join(pdf_text(pdf, tmp_path).split()).replace(
        "<b>", ""
    ).replace("</b>", "")


def test_a_bad_option_on_the_tab_is_said_not_raised(
    owner: User, named_study: Study, other_researcher: User
) -> None:
    hidden = StudyFactory.create(owner=other_researcher)
    page = login(owner).get(f"/studies/{named_study.pk}/report/?compare={hidden.pk}")
    assert (
        page.status_code == 400
        and f"study {hidden.pk} does not exist or is not yours" in page.content.decode()
    )
    refused = login(owner).post(f"/studies/{named_study.pk}/report/make/", {"format": "docx"})
    assert refused.status_code == 400 and "unknown report format" in refused.content.decode()
    assert not ReportJob.objects.exists()


# --- The API ---------------------------------------------------------------------------------------


@pytest.mark.skipif(poppler_missing(), reason="poppler-utils (pdftotext) is not installed")
def test_api_pdf_job_runs_and_downloads(
    owner: User, named_study: Study, default_store: FileStore, tmp_path: Path, jobs_run: Any
) -> None:
    client = client_for(owner)
    job = made(client, named_study, {"format": "pdf"}, jobs_run)
    assert job["status"] == "done" and job["format"] == "pdf" and job["correction"] == "holm"
    assert job["download_url"] == f"/api/studies/{named_study.pk}/report/{job['id']}/download/"
    answer = client.get(job["download_url"])
    if default_store.kind != "s3":  # streamed by the app: sandboxed as the Report tab's download is
        assert answer["Content-Security-Policy"] == "default-src 'none'; sandbox"
        assert answer["Content-Disposition"].startswith("attachment;")
    pdf = fetch_download(answer, default_store)
    text = " ".join(pdf_text(pdf, tmp_path).split())
    assert f"Audit report: {NAME}" in text
    # the Design section's items table, counted by condition: 2 base items and 1 mitigated one
    assert "Items by condition, model and prompt set" in text
    assert re.search(r"\bbase 2\b", text) and re.search(r"\bmitigated 1\b", text)


@pytest.mark.django_db
def test_api_tex_job_is_a_zip_of_the_source_and_its_figures(
    demo_study: Study, default_store: FileStore, jobs_run: Any
) -> None:
    client = client_for(demo_study.owner)
    job = made(client, demo_study, {"format": "tex"}, jobs_run)
    assert job["status"] == "done", job["error"]
    assert job["filename"] == f"report-study-{demo_study.pk}.zip"
    data = fetch_download(client.get(job["download_url"]), default_store)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = sorted(archive.namelist())
        source = archive.read("report.tex").decode()
        figures = [name for name in names if name != "report.tex"]
        assert figures and all(name.startswith("figures/") and name.endswith(".pdf") for name in figures)
        assert all(archive.read(name).startswith(b"%PDF") for name in figures)
    # every figure in the zip is included by the source, and the source names no other
    assert sorted(re.findall(r"\\includegraphics(?:\[[^\]]*\])?\{([^}]+)\}", source)) == figures
    assert r"\begin{document}" in source and r"\toprule" in source


def test_api_compare_with_a_study_of_ones_own(owner: User, named_study: Study, jobs_run: Any) -> None:
    other = StudyFactory.create(owner=owner, name="Second")
    client = client_for(owner)
    job = made(client, named_study, {"format": "html", "compare": [other.pk]}, jobs_run)
    assert job["status"] == "done" and job["compare"] == [other.pk]
    assert ReportJob.objects.get().compare == [other.pk]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"format": "docx"}, "unknown report format 'docx': choose one of md, html, tex, pdf, heds"),
        ({"format": "pdf", "correction": "bonferroni"}, "unknown correction 'bonferroni': choose holm or bh"),
        ({"format": "pdf", "compare": "all"}, "compare: "),
        ({"format": "pdf", "compare": ["x"]}, "compare: item 0: A valid integer is required."),
        ({}, "format: This field is required."),
    ],
)
def test_api_refuses_bad_options(owner: User, named_study: Study, body: dict[str, Any], message: str) -> None:
    answer = client_for(owner).post(f"/api/studies/{named_study.pk}/report/", body, format="json")
    assert answer.status_code == 400 and answer.json()["detail"].startswith(message), answer.json()
    assert not ReportJob.objects.exists()


def test_api_refuses_to_compare_with_a_study_one_may_not_see(
    owner: User, named_study: Study, other_researcher: User
) -> None:
    hidden = StudyFactory.create(owner=other_researcher)
    client = client_for(owner)
    for compare, message in (
        ([hidden.pk], f"compare: study {hidden.pk} does not exist or is not yours"),
        ([987654], "compare: study 987654 does not exist or is not yours"),
        ([named_study.pk], "compare: a study is not compared with itself"),
    ):
        answer = client.post(
            f"/api/studies/{named_study.pk}/report/", {"format": "pdf", "compare": compare}, format="json"
        )
        assert answer.status_code == 400 and answer.json()["detail"] == message
    assert not ReportJob.objects.exists()


@pytest.mark.parametrize("who", ["other_researcher", "annotator_user", "enrolled_annotator", "anonymous"])
def test_api_is_for_the_study_researchers_only(
    request: pytest.FixtureRequest,
    owner: User,
    named_study: Study,
    annotator_user: User,
    who: str,
    jobs_run: Any,
) -> None:
    job = made(client_for(owner), named_study, {"format": "html"}, jobs_run)
    if who == "enrolled_annotator":
        Enrollment.objects.create(study=named_study, user=annotator_user)
        user: User | None = annotator_user
    else:
        user = None if who == "anonymous" else request.getfixturevalue(who)
    client = client_for(user)
    expected = 401 if user is None else 404
    refused = client.post(f"/api/studies/{named_study.pk}/report/", {"format": "pdf"}, format="json")
    assert refused.status_code in ((401, 403) if user is None else (expected,))
    for url in (f"/api/studies/{named_study.pk}/report/{job['id']}/", job["download_url"]):
        assert client.get(url).status_code in ((401, 403) if user is None else (expected,))
    assert ReportJob.objects.count() == 1


def test_a_job_is_its_requesters_own(
    owner: User, named_study: Study, other_researcher: User, jobs_run: Any
) -> None:
    """Another researcher of the same study sees none of one's jobs (they may compare other studies)."""
    job = made(client_for(owner), named_study, {"format": "html"}, jobs_run)
    named_study.shared_with.add(other_researcher)
    assert login(other_researcher).get(f"/studies/{named_study.pk}/report/").status_code == 200
    other = client_for(other_researcher)
    assert other.get(f"/api/studies/{named_study.pk}/report/{job['id']}/").status_code == 404
    assert other.get(job["download_url"]).status_code == 404


def test_a_job_run_again_is_harmless(
    owner: User, named_study: Study, default_store: FileStore, jobs_run: Any
) -> None:
    from reports.jobs import report_job_run

    job = made(client_for(owner), named_study, {"format": "html"}, jobs_run)
    again = report_job_run(job_id=job["id"])
    assert again.status == "done" and again.file.name == ReportJob.objects.get().file.name


def test_a_large_study_makes_every_format_in_the_background(
    owner: User, named_study: Study, settings: Any, jobs_run: Any
) -> None:
    settings.WORKBENCH_EXPORT_INLINE_LIMIT = 2  # 3 items: large
    client = login(owner)
    page = client.get(f"/studies/{named_study.pk}/report/").content.decode()
    assert "This study is large" in page and "srcdoc" not in page
    with jobs_run(execute=True):
        answer = client.post(f"/studies/{named_study.pk}/report/make/", {"format": "html"})
    assert answer.status_code == 302
    job = ReportJob.objects.get()
    assert (job.format, job.status, job.content_type) == ("html", "done", "text/html; charset=utf-8")


@pytest.mark.django_db
def test_the_tab_offers_the_sources_that_hold_labels(demo_study: Study) -> None:
    from findings.report import sources_available

    sources = sources_available(demo_study)
    assert "consensus" in sources and len(sources) >= 2  # the people and the colour rule
    client = login(demo_study.owner)
    html = client.get(f"/studies/{demo_study.pk}/report/").content.decode()
    select = html.split('id="report-source"')[1].split("</select>")[0]
    offered = re.findall(r'<option value="([^"]*)"', select)
    assert offered == ["", *sources]
    chosen = sources[1]
    page = client.get(f"/studies/{demo_study.pk}/report/", {"source": chosen}).content.decode()
    assert f'<option value="{chosen}" selected>' in page


@pytest.mark.parametrize("value", ["²", "٣", "1" * 4401, "-1", "0", "9" * 20])
def test_a_compare_value_that_is_not_a_plain_study_id_is_a_400_on_every_door(
    owner: User, named_study: Study, value: str
) -> None:
    """Third hardening round, L1: '²' and a 4,401-digit value answered 500 on the Report tab and its
    make button, and Arabic-Indic digits were read as a study id."""
    page = login(owner)
    tab = page.get(f"/studies/{named_study.pk}/report/", {"compare": value})
    make = page.post(f"/studies/{named_study.pk}/report/make/", {"format": "md", "compare": value})
    api = client_for(owner).post(
        f"/api/studies/{named_study.pk}/report/", {"format": "md", "compare": [value]}, format="json"
    )
    for answer in (tab, make, api):
        assert answer.status_code == 400, (answer.status_code, answer.content[:300])
    assert "not a study id" in tab.content.decode() or "compare" in tab.content.decode()
    assert not ReportJob.objects.exists()
