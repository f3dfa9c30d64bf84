"""The findings page's prerequisites without a shell (issue 25, point 5): a button that makes the visage
pull prompt set from the study's stereotype table and queues its images, and buttons that start a
registered embedding labeller or captioner over the study; POST with CSRF, for who may change the study,
each refusal said on the page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from annotations.interchange.item_import import items_import_records
from annotations.models import Annotator, StereotypeEntry, Study, User
from annotations.services.studies import study_create
from common.files import MemorySource
from generation.models import GenerationJob
from labelling.models import LabellingJob
from protocols.schema import load_preset
from tests.annotations.imagefiles import png_bytes
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _page(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def markers(owner: User) -> Study:
    study = study_create(owner=owner, name="Markers", protocol=load_preset("stereotype-markers"))
    items_import_records(
        study=study,
        records=[
            ("row 1", {"external_id": "a", "file": "a.png", "metadata": {"attributes": ["poor", "tall"]}})
        ],
        source=MemorySource({"a.png": png_bytes(size=(64, 64))}),
    )
    return study


def _table(study: Study) -> None:
    rows = [
        ("Mexican", "poor", 3, True),
        ("Mexican", "sombrero", 2, None),
        ("Mexican", "talkative", 3, False),  # rated not visual: no stereotype to prompt with
        ("Mexican", "tall", 0, True),
        ("Nigerian", "rich", 2, True),
        ("Nigerian", "kind", 1, True),
    ]
    StereotypeEntry.objects.bulk_create(
        StereotypeEntry(study=study, identity=i, attribute=a, na_stereo=n, visual=v) for i, a, n, v in rows
    )


def _labeller(name: str, kind: str, **config: object) -> Annotator:
    return Annotator.objects.create(
        kind=Annotator.Kind.MACHINE, name=name, version="1", config={"kind": kind, **config}
    )


def _text(response: Any) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


def test_without_labellers_or_table_the_page_says_what_is_missing(owner: User, markers: Study) -> None:
    page = _text(_page(owner).get(f"/studies/{markers.pk}/findings/"))
    assert "No labeller that stores image embeddings is registered (kind clip)" in page
    assert "No labeller that stores captions is registered (kind captioner)" in page
    assert "upload it above first" in page and "Make the pull prompt set" not in page
    assert "the button under &#x27;Image embeddings and captions&#x27;" in page  # the note points here


def test_a_registered_embedding_labeller_is_started_from_the_findings_page(
    owner: User, markers: Study
) -> None:
    clip = _labeller("clip-b32", "clip", model="openai/clip-vit-base-patch32")
    captioner = _labeller("blip-captions", "captioner", model="Salesforce/blip-image-captioning-base")
    _labeller("clip-off", "clip", store_features=False)
    Annotator.objects.create(
        kind="machine", name="clip-disabled", version="1", config={"kind": "clip"}, disabled=True
    )
    client = _page(owner)
    page = _text(client.get(f"/studies/{markers.pk}/findings/"))
    assert "Store image embeddings: run clip-b32 1" in page and "Store captions: run blip-captions 1" in page
    assert "clip-off" not in page and "clip-disabled" not in page
    url = f"/studies/{markers.pk}/labelling/features/"
    done = client.post(url, {"kind": "embedding", "annotator": clip.pk}, follow=True)
    job = LabellingJob.objects.get(study=markers)
    assert job.annotator == clip and job.sample_size is None and job.created_by == owner
    assert done.redirect_chain[-1][0] == f"/studies/{markers.pk}/labelling/"
    assert f"Labelling job {job.pk} queued: clip-b32 stores image embeddings" in _text(done)
    wrong = client.post(url, {"kind": "embedding", "annotator": captioner.pk}, follow=True)
    assert "No labeller was started: that is no enabled labeller storing image embeddings" in _text(wrong)
    assert wrong.redirect_chain[-1][0].startswith(f"/studies/{markers.pk}/findings/")
    for bad in ({"kind": "captions", "annotator": "x"}, {"kind": "poems", "annotator": clip.pk}):
        refused = client.post(url, bad, follow=True)
        assert "No labeller was started" in _text(refused)
    assert LabellingJob.objects.count() == 1


def test_only_who_may_change_the_study_starts_work_and_csrf_is_checked(
    owner: User, other_researcher: User, markers: Study
) -> None:
    clip = _labeller("clip-b32", "clip")
    _table(markers)
    labelling = f"/studies/{markers.pk}/labelling/features/"
    pull = f"/studies/{markers.pk}/generation/pull/"
    assert (
        _page(other_researcher).post(labelling, {"kind": "embedding", "annotator": clip.pk}).status_code
        == 404
    )
    assert _page(other_researcher).post(pull, {"pull-source": "org/model", "pull-seed": 0}).status_code == 404
    annotator = UserFactory.create(username="annie", role="annotator")
    assert _page(annotator).post(labelling, {"kind": "embedding", "annotator": clip.pk}).status_code in (
        403,
        404,
    )
    assert Client().post(pull, {"pull-source": "org/model"}).status_code == 302  # to sign in
    no_token = _page(owner, csrf=True).post(labelling, {"kind": "embedding", "annotator": clip.pk})
    assert no_token.status_code == 403
    assert not LabellingJob.objects.exists() and not GenerationJob.objects.exists()


def test_the_pull_prompt_set_is_made_from_the_stereotype_table(owner: User, markers: Study) -> None:
    client = _page(owner)
    url = f"/studies/{markers.pk}/generation/pull/"
    empty = client.post(url, {"pull-source": "org/model", "pull-seed": 0}, follow=True)
    assert "No prompt set was made: the study has no stereotype table" in _text(empty)
    _table(markers)
    page = _text(client.get(f"/studies/{markers.pk}/findings/"))
    assert "Make the pull prompt set and generate it" in page and "6 rows" in page
    missing = client.post(url, {"pull-seed": 0}, follow=True)
    assert "No prompt set was made. Model: This field is required." in _text(missing)
    done = client.post(
        url, {"pull-source": "org/model", "pull-seed": 7, "pull-images_per_prompt": 2}, follow=True
    )
    job = GenerationJob.objects.get(study=markers)
    assert done.redirect_chain[-1][0] == f"/generation/jobs/{job.pk}/"
    assert f"queued as generation job {job.pk}" in _text(done)
    prompts = job.prompts
    by_condition: dict[str, list[dict]] = {}
    for prompt in prompts:
        by_condition.setdefault(prompt["condition"], []).append(prompt)
    # Mexican: poor and sombrero (NA_stereo >= 2, not rated not-visual); Nigerian: rich.
    assert sorted(p["metadata"]["identity"] for p in by_condition["default"]) == ["Mexican", "Nigerian"]
    stereotyped = {
        (p["metadata"]["identity"], p["metadata"]["attribute"]) for p in by_condition["stereotypical"]
    }
    assert stereotyped == {("Mexican", "poor"), ("Mexican", "sombrero"), ("Nigerian", "rich")}
    randoms = {
        (p["metadata"]["identity"], p["metadata"]["attribute"]) for p in by_condition["non-stereotypical"]
    }
    assert len(randoms) == 3 and not randoms & stereotyped
    assert job.total_images == 2 * len(prompts) and job.base_seed == 7


def test_a_text_study_is_refused_the_pull_set(owner: User) -> None:
    study = study_create(owner=owner, name="Words", protocol=load_preset("visualness"))
    _table(study)
    response = _page(owner).post(
        f"/studies/{study.pk}/generation/pull/", {"pull-source": "org/model", "pull-seed": 0}, follow=True
    )
    assert "this study judges text items" in _text(response) and not GenerationJob.objects.exists()
