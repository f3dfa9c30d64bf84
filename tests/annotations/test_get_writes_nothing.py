"""A GET never creates an export job (docs/security.md, "No writes on GET"): a cross-site link or a
prefetch cannot queue work as the researcher. Exports start with a POST (the study page's buttons carry
the CSRF token); a GET shows the button (page) or answers 405 (API)."""

from __future__ import annotations

import pytest
from django.test import Client

from annotations.models import ExportJob
from tests.factories import ItemFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(owner) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    return client


@pytest.mark.parametrize("fmt", ["zip", "labelstudio", "parquet"])
def test_a_get_of_a_background_export_creates_no_job(study, owner, page, fmt) -> None:
    ItemFactory.create(study=study)
    shown = page.get(f"/studies/{study.pk}/export/{fmt}/")
    assert shown.status_code == 200 and f"Prepare the {fmt.upper()} export" in shown.content.decode()
    assert 'name="csrfmiddlewaretoken"' in shown.content.decode()
    api = client_for(owner).get(f"/api/studies/{study.pk}/export/{fmt}/")
    assert api.status_code == 405 and "start it with POST" in api.json()["detail"]
    assert client_for(owner).get(f"/api/studies/{study.pk}/export/csv/?background=1").status_code == 405
    assert not ExportJob.objects.exists()
    # a POST without the CSRF token (a cross-site form) is refused too
    assert page.post(f"/studies/{study.pk}/export/{fmt}/").status_code == 403
    assert not ExportJob.objects.exists()


def test_the_study_page_s_button_starts_the_export(study, owner, django_capture_on_commit_callbacks) -> None:
    ItemFactory.create(study=study)
    client = Client()
    client.force_login(owner)
    detail = client.get(f"/studies/{study.pk}/").content.decode()
    assert f'method="post" action="/studies/{study.pk}/export/zip/"' in detail
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/studies/{study.pk}/export/zip/", follow=True)
    assert "being prepared in the background" in response.content.decode()
    assert ExportJob.objects.get().format == "zip"
    with django_capture_on_commit_callbacks(execute=True):
        api = client_for(owner).post(f"/api/studies/{study.pk}/export/zip/")
    assert api.status_code == 202 and ExportJob.objects.count() == 2
    # the CSV button of a small study streams the file at once, as its GET does
    streamed = client.post(f"/studies/{study.pk}/export/csv/")
    assert streamed.status_code == 200 and streamed["Content-Type"].startswith("text/csv")
    assert ExportJob.objects.count() == 2


def test_small_exports_still_stream_on_get(study, owner, page) -> None:
    ItemFactory.create(study=study)
    assert page.get(f"/studies/{study.pk}/export/jsonl/").status_code == 200
    assert client_for(owner).get(f"/api/studies/{study.pk}/export/csv/").status_code == 200
    assert not ExportJob.objects.exists()
