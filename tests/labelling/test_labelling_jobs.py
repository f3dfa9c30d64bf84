"""Machine labellers running over a study's items: same validation as humans, failed attempts kept
with the raw text, retries, the cache, skipping what is answered; real labellers, real HTTP server."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.interchange.item_import import item_add_files
from annotations.models import Annotation, AnnotationRevision, ItemFeature
from common.errors import ValidationFailed
from labelling.models import LabelAttempt, LabellingJob
from labelling.services import item_embeddings, labeller_register, labelling_job_create, labelling_job_run
from protocols.schema import load_preset, load_protocol_text
from tests.annotations.imagefiles import png_bytes
from tests.factories import StudyFactory
from tests.fixtures.chat_server import ChatServer, json_reply, status_reply
from tests.s3_server import FileStore

pytestmark = pytest.mark.django_db

PROTOCOL = """
name: Cups
unit: image
questions:
  - {key: product_color, kind: text, prompt: 'Main colour of the product?', normaliser: colour}
  - {key: background_color, kind: text, prompt: 'Background colour?', normaliser: colour}
  - {key: shape, kind: single, prompt: 'Shape of the cup?', options: [mug, tumbler, sippy]}
"""


def drawn(colour: tuple[int, int, int], background: tuple[int, int, int]) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (96, 96), background)
    ImageDraw.Draw(image).rectangle((24, 24, 72, 72), fill=colour)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def cups(owner):
    study = StudyFactory.create(owner=owner, protocol=load_protocol_text(PROTOCOL).to_dict())
    for name, colour, background in [
        ("red-on-white", (220, 20, 20), (250, 250, 250)),
        ("blue-on-beige", (20, 40, 210), (235, 222, 190)),
    ]:
        item_add_files(
            study=study,
            record={"external_id": name, "file": f"{name}.png"},
            files={f"{name}.png": drawn(colour, background)},
        )
    return study


def run(study, annotator, **kwargs):
    job = labelling_job_create(study=study, annotator=annotator, user=None, enqueue=False, **kwargs)
    return labelling_job_run(job_id=job.pk, sleep=lambda seconds: None)


def answers(study, annotator) -> dict:
    return {
        (a.item.external_id, a.question_key): a.value
        for a in Annotation.objects.filter(study=study, annotator=annotator).select_related("item")
    }


def test_the_colour_rule_labels_drawn_images_into_the_vocabulary(file_store: FileStore, cups) -> None:
    # The images are read from the store (the media folder, or the bucket of the test S3 server).
    assert len(file_store.names("items/")) == 2
    colour = labeller_register(name="colour-rule", kind="colour", config={})
    job = run(cups, colour)
    assert (job.status, job.answered, job.failed, job.total_items) == ("done", 4, 0, 2)
    assert answers(cups, colour) == {
        ("red-on-white", "product_color"): "red",
        ("red-on-white", "background_color"): "white",
        ("blue-on-beige", "product_color"): "blue",
        ("blue-on-beige", "background_color"): "beige",
    }
    assert Annotation.objects.filter(annotator=colour).first().source == "labeller"
    again = run(cups, colour)  # everything answered: nothing is asked again
    assert (again.skipped, again.answered) == (2, 0)


def test_a_partly_answered_item_is_asked_only_what_is_missing(cups) -> None:
    """A run that stopped inside an item (its worker killed between two answers) left some of the
    item's questions answered: the resumed run asks only the rest, so no answer is given twice."""
    colour = labeller_register(name="colour-rule", kind="colour", config={})
    run(cups, colour)
    Annotation.objects.filter(
        annotator=colour, item__external_id="red-on-white", question_key="background_color"
    ).delete()
    resumed = run(cups, colour)
    assert (resumed.status, resumed.answered, resumed.skipped, resumed.done_items) == ("done", 1, 1, 2)
    assert answers(cups, colour)[("red-on-white", "background_color")] == "white"
    assert not AnnotationRevision.objects.filter(annotation__annotator=colour).exists()


def test_a_new_configuration_is_a_new_version(cups) -> None:
    first = labeller_register(name="colour-rule", kind="colour", config={})
    second = labeller_register(name="colour-rule", kind="colour", config={"border_fraction": 0.1})
    assert first.version != second.version and first.pk != second.pk
    assert labeller_register(name="colour-rule", kind="colour", config={}).pk == first.pk
    with pytest.raises(ValidationFailed, match="exists with another configuration"):
        labeller_register(name="colour-rule", kind="colour", config={"x": 1}, version=first.version)
    with pytest.raises(ValidationFailed, match="unknown labeller kind"):
        labeller_register(name="nope", kind="telepathy", config={})


def test_a_vlm_answers_through_a_real_http_server_with_retries_and_a_cache(cups) -> None:
    with ChatServer() as server:
        vlm = labeller_register(
            name="gpt-test",
            kind="vlm",
            config={
                "base_url": server.base_url,
                "model": "gpt-4o",
                "api_key_env": None,
                "template": "generic",
                "max_attempts": 2,
                "backoff_base_s": 0,
                "price_per_1k_prompt_tokens": 1.0,
                "concurrency": 1,
            },
        )
        # One request at a time, so the scripted replies meet the items in order: the first pass
        # asks both items, then the failed questions are asked again.
        server.queue(
            [
                json_reply(
                    {"product_color": "red", "background_color": "white", "shape": "goblet"}
                ),  # red: bad option
                status_reply(500),  # blue: a server error, which the client retries
                json_reply(
                    {"product_color": "bluish-ish banana", "background_color": "beige", "shape": "tumbler"}
                ),
                json_reply({"shape": "mug"}),  # red, second attempt: only the failed question is asked
                json_reply({"product_color": "banana"}),  # blue, second attempt: still not a colour
            ]
        )
        job = run(cups, vlm)
        assert job.status == "done"
        got = answers(cups, vlm)
        assert got[("red-on-white", "shape")] == "mug" and got[("blue-on-beige", "shape")] == "tumbler"
        assert ("blue-on-beige", "product_color") not in got
        attempts = list(
            LabelAttempt.objects.filter(job=job)
            .order_by("id")
            .values_list("question_key", "attempt", "error")
        )
        assert attempts[0][:2] == ("shape", 1) and "goblet" in attempts[0][2]
        colour_failures = [a for a in attempts if a[0] == "product_color"]
        assert [a[1] for a in colour_failures] == [1, 2] and "no colour" in colour_failures[-1][2]
        assert job.failed == 1  # the colour question failed every attempt; nothing was coerced
        assert LabelAttempt.objects.filter(job=job).exclude(raw="").count() == len(attempts)
        assert job.cost_usd > 0
        # Only answers that fully validated are cached: a re-run asks again for both items once, and
        # after that the same questions on the same images cost nothing.
        Annotation.objects.filter(annotator=vlm).delete()
        server.queue(
            [
                json_reply({"product_color": "red", "background_color": "white", "shape": "mug"}),
                json_reply({"product_color": "blue", "background_color": "beige", "shape": "tumbler"}),
            ]
        )
        assert run(cups, vlm).answered == 6
        calls = len(server.requests)
        Annotation.objects.filter(annotator=vlm).delete()
        cached = run(cups, vlm)
        assert (cached.answered, cached.cached, cached.cost_usd) == (6, 6, 0.0)
        assert len(server.requests) == calls
        image_part = server.requests[0].body["messages"][-1]["content"]
        assert any(
            part.get("type") == "image_url" and part["image_url"]["url"].startswith("data:image/")
            for part in image_part
            if isinstance(part, dict)
        )


def test_reference_items_without_images_are_recorded_not_dropped(owner) -> None:
    from tests.factories import ItemFactory

    study = StudyFactory.create(owner=owner, protocol=load_protocol_text(PROTOCOL).to_dict())
    ItemFactory.create(study=study, external_id="ref")
    colour = labeller_register(name="colour-rule", kind="colour", config={})
    job = run(study, colour)
    assert (
        job.failed == 2
        and LabelAttempt.objects.filter(job=job, error__contains="reference item").count() == 2
    )


def test_faces_answer_is_there_a_person_on_a_real_photo(owner) -> None:
    from PIL import Image
    from skimage import data

    study = StudyFactory.create(owner=owner, protocol=load_preset("bias-axes").to_dict())
    buffer = io.BytesIO()
    Image.fromarray(data.astronaut()).save(buffer, format="PNG")
    item_add_files(
        study=study, record={"external_id": "astronaut", "file": "a.png"}, files={"a.png": buffer.getvalue()}
    )
    item_add_files(
        study=study,
        record={"external_id": "flat", "file": "f.png"},
        files={"f.png": png_bytes(size=(64, 64))},
    )
    faces = labeller_register(name="haar", kind="faces", config={"presence_questions": ["person"]})
    job = run(study, faces)
    assert answers(study, faces) == {("astronaut", "person"): "yes", ("flat", "person"): "no"}
    assert job.failed == 0


def test_clip_labels_and_stores_embeddings(owner, tmp_path) -> None:
    from tests.fixtures.tiny_vision_models import save_tiny_clip

    folder = save_tiny_clip(tmp_path / "clip")
    study = StudyFactory.create(owner=owner, protocol=load_protocol_text(PROTOCOL).to_dict())
    for index in range(3):
        item_add_files(
            study=study,
            record={"external_id": f"i{index}", "file": "x.png"},
            files={"x.png": png_bytes((index * 80, 10, 10))},
        )
    clip = labeller_register(name="clip-tiny", kind="clip", config={"model": str(folder), "device": "cpu"})
    job = run(study, clip, sample_size=2, seed=1)
    assert job.total_items == 2 and job.answered == 2  # CLIP answers the single question only
    assert set(v for v in answers(study, clip).values()) <= {"mug", "tumbler", "sippy"}
    vectors = item_embeddings(study=study, annotator=clip)
    assert len(vectors) == 2 and all(
        np.isclose(np.linalg.norm(v[0]), 1.0, atol=1e-4) for v in vectors.values()
    )
    assert ItemFeature.objects.count() == 2


def test_the_commands(cups) -> None:
    out = io.StringIO()
    call_command(
        "register_labeller", "--name", "colour-rule", "--kind", "colour", "--set", "max_side=64", stdout=out
    )
    registered = json.loads(out.getvalue())
    assert registered["config"] == {"max_side": 64, "kind": "colour"}
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "autolabel", str(cups.pk), "--labeller", "colour-rule", "--sample", "1", stdout=out, stderr=err
    )
    summary = json.loads(out.getvalue())
    assert summary["items"] == 1 and summary["answered"] == 2 and summary["status"] == "done"
    assert "1/1" in err.getvalue()
    with pytest.raises(CommandError, match="no labeller 'nobody'"):
        call_command(
            "autolabel", str(cups.pk), "--labeller", "nobody", stdout=io.StringIO(), stderr=io.StringIO()
        )
    with pytest.raises(CommandError, match="unknown labeller kind"):
        call_command("register_labeller", "--name", "x", "--kind", "magic", stdout=io.StringIO())
    assert LabellingJob.objects.count() == 1


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 201), ("other", 404), ("annotator", 403), ("anonymous", 401)]
)
def test_labelling_jobs_api(
    cups,
    owner,
    other_researcher,
    annotator_user,
    role,
    status,
    django_capture_on_commit_callbacks,
) -> None:
    from annotations.services.studies import enrollment_add
    from tests.helpers import client_for

    enrollment_add(study=cups, user=annotator_user)
    clients = {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}
    colour = labeller_register(name="colour-rule", kind="colour", config={})
    client = client_for(clients[role])
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/labelling-jobs/", {"study": cups.pk, "annotator": colour.pk}, format="json"
        )
    assert response.status_code == status
    if status == 201:
        made = LabellingJob.objects.get(pk=response.json()["id"])
        assert made.status == "done" and made.answered == 4  # the queued task ran (eagerly, in tests)
        job = {"id": made.pk}
        assert client.get(f"/api/labelling-jobs/{job['id']}/attempts/").json() == []
        assert client_for(other_researcher).get(f"/api/labelling-jobs/{job['id']}/").status_code == 404
    else:
        assert LabellingJob.objects.count() == 0


def test_a_sample_size_or_seed_too_large_for_the_database_is_refused(cups, owner) -> None:
    from django.test import Client

    from tests.helpers import client_for

    colour = labeller_register(name="colour-rule", kind="colour", config={})
    api = client_for(owner)
    page = Client(raise_request_exception=False)
    page.force_login(owner)
    for field in ("sample_size", "seed"):
        job = {"study": cups.pk, "annotator": colour.pk, field: 10**30}
        response = api.post("/api/labelling-jobs/", job, format="json")
        assert response.status_code == 400 and field in response.json(), response.content
        form = {"annotator": colour.pk, "seed": 0, field: 10**30}
        refused = page.post(f"/studies/{cups.pk}/labelling/", form)
        assert refused.status_code in (200, 400) and "Ensure this value is" in refused.content.decode()
    assert LabellingJob.objects.count() == 0


def test_the_labelling_page(cups, owner, annotator_user, django_capture_on_commit_callbacks) -> None:
    from django.test import Client

    colour = labeller_register(name="colour-rule", kind="colour", config={})
    client = Client()
    client.force_login(owner)
    assert "Run a labeller" in client.get(f"/studies/{cups.pk}/labelling/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/studies/{cups.pk}/labelling/",
            {"annotator": colour.pk, "sample_size": 1, "seed": 0},
            follow=True,
        )
    page = response.content.decode()
    assert "colour-rule" in page and LabellingJob.objects.get().answered == 2
    other = Client()
    other.force_login(annotator_user)
    assert other.get(f"/studies/{cups.pk}/labelling/").status_code in (403, 404)


@pytest.mark.parametrize(("kind", "queue"), [("colour", "celery"), ("clip", "gpu")])
def test_a_job_is_sent_after_commit_to_the_queue_its_labeller_needs(
    cups, kind, queue, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    from celery import current_app

    sent = []
    task = current_app.tasks["labelling.tasks.label_items_task"]
    monkeypatch.setattr(task, "apply_async", lambda args, **options: sent.append((args, options)))
    labeller = labeller_register(name=f"{kind}-labeller", kind=kind, config={})
    with django_capture_on_commit_callbacks(execute=True):
        job = labelling_job_create(study=cups, annotator=labeller, user=None)
        assert sent == []
    assert sent == [((job.pk,), {"queue": queue})]


def test_a_run_stamps_the_heartbeat_and_stops_when_cancelled(cups) -> None:
    colour = labeller_register(name="colour-rule", kind="colour", config={})
    job = labelling_job_create(study=cups, annotator=colour, user=None, enqueue=False)
    LabellingJob.objects.filter(pk=job.pk).update(cancel_requested=True)
    job = labelling_job_run(job_id=job.pk)
    assert job.status == LabellingJob.Status.CANCELLED and job.heartbeat_at is not None
    assert job.done_items == 0


def test_a_metadata_filter_key_is_a_literal_key_never_a_lookup(
    cups, owner, django_capture_on_commit_callbacks
) -> None:
    """Issue 24, L5: ``{"long__regex": "^(a|aa)+$"}`` ran a regular expression (a catastrophic one
    on the shared worker) over ``metadata.long``. The key now names the metadata key "long__regex"."""
    from annotations.models import Item
    from tests.helpers import client_for

    Item.objects.filter(study=cups, external_id="red-on-white").update(metadata={"long": "a" * 12})
    Item.objects.filter(study=cups, external_id="blue-on-beige").update(metadata={"long__regex": "^(a|aa)+$"})
    colour = labeller_register(name="colour-rule", kind="colour", config={})
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(owner).post(
            "/api/labelling-jobs/",
            {"study": cups.pk, "annotator": colour.pk, "metadata_filter": {"long__regex": "^(a|aa)+$"}},
            format="json",
        )
    assert response.status_code == 201, response.content
    job = LabellingJob.objects.get(pk=response.json()["id"])
    assert job.status == "done" and job.total_items == 1
    assert {item for item, _question in answers(cups, colour)} == {"blue-on-beige"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(owner).post(
            "/api/labelling-jobs/",
            {"study": cups.pk, "annotator": colour.pk, "metadata_filter": {"long__isnull": "false"}},
            format="json",
        )
    assert response.status_code == 201
    assert LabellingJob.objects.get(pk=response.json()["id"]).total_items == 0
