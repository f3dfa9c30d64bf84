"""InterMit as a guided loop, end to end on the tiny diffusion model: a loop labelled by people with
hand-chosen labels, starting from the plan (tau, next axis, gamma) through the API, the page and the
command, whose
every number is computed by hand (tau before and after each step, gamma, MitAmt, MitSteps, the
negative-IS warning, Pearson r of predicted vs measured IS), driven through the API with the steps
running as Celery tasks (eager) chained by the task hook; a loop labelled by a tiny CLIP run from the
command, from the first tau to the report; re-running a step's jobs and advancing again is harmless;
bad input is a clear 400."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import item_add_files
from annotations.models import Annotation, Item, Study
from generation import pipelines
from generation.models import GenerationJob
from generation.pipelines import ModelSpec
from generation.prompts.biasconnect import biasconnect_prompt_set
from generation.services import generation_job_create, generation_job_rerun, generation_job_run
from labelling.models import LabellingJob
from mitigation.models import MitigationLoop, MitigationStep
from mitigation.services import mitigation_step_advance
from protocols.schema import load_preset, load_protocol_text
from tests.annotations.imagefiles import png_bytes
from tests.factories import StudyFactory
from tests.fixtures.tiny_sd import save_tiny_sd
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

PROTOCOL = """
key: bias-axes
name: Two bias axes
paper: biasconnect
unit: image
questions:
  - {key: gender, kind: single, prompt: "What is the gender of the person?", options: [male, female]}
  - {key: environment, kind: single, prompt: "Where is the person?", options: [indoor, outdoor]}
"""
MODEL: dict[str, Any] = {"steps": 2, "guidance": 1.0, "width": 64, "height": 64, "batch_size": 4}

# People's labels (gender, environment) per image, by set and prompt text (see the module docstring of
# each test for the numbers they give).
INITIAL = {
    "A photo of a nurse": [("male", "indoor"), ("male", "outdoor")],
    "A photo of a male nurse": [("male", "indoor"), ("male", "indoor")],
    "A photo of a female nurse": [("female", "indoor"), ("female", "indoor")],
    "A photo of a nurse working indoors": [("male", "indoor"), ("female", "indoor")],
    "A photo of a nurse working outdoors": [("male", "outdoor"), ("female", "outdoor")],
}
STEP_1 = {  # mitigating environment: the base prompts, then gender's counterfactuals
    "A photo of a nurse working indoors": [("male", "indoor"), ("female", "indoor")],
    "A photo of a nurse working outdoors": [("male", "outdoor"), ("male", "outdoor")],
    "A photo of a male nurse working indoors": [("male", "indoor")] * 2,
    "A photo of a male nurse working outdoors": [("male", "outdoor")] * 2,
    "A photo of a female nurse working indoors": [("female", "indoor")] * 2,
    "A photo of a female nurse working outdoors": [("female", "outdoor")] * 2,
}
STEP_2 = {  # environment and gender mitigated: every combination, no counterfactual left
    "A photo of a male nurse working indoors": [("male", "indoor")],
    "A photo of a male nurse working outdoors": [("male", "outdoor")],
    "A photo of a female nurse working indoors": [("female", "indoor")],
    "A photo of a female nurse working outdoors": [("female", "outdoor")],
}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_sd(tmp_path_factory.mktemp("models") / "tiny-sd")


@pytest.fixture(autouse=True)
def _fresh_pipelines(settings, tiny_model) -> Any:
    settings.WORKBENCH_MODEL_DIRS = [str(tiny_model.parent)]
    pipelines.clear_pipeline_cache()
    yield
    pipelines.clear_pipeline_cache()


@pytest.fixture
def nurses(owner, tiny_model) -> Study:
    """A bias-axes study with the initial BiasConnect set of one occupation over two axes, generated."""
    # One person labels each image (label_by_people): overlap 1, so every labelled image is settled.
    study = StudyFactory.create(
        owner=owner, name="nurses", protocol=load_protocol_text(PROTOCOL).to_dict(), overlap=1
    )
    return study


def generate_initial(study: Study, model: Path, images_per_prompt: int) -> None:
    prompt_set = biasconnect_prompt_set(
        ["nurse"], axes=["gender", "environment"], images_per_prompt=images_per_prompt, name="nurse-initial"
    )
    job = generation_job_create(
        study=study,
        prompt_set=prompt_set,
        spec=ModelSpec(source=str(model), **MODEL),
        user=None,
        enqueue=False,
    )
    assert generation_job_run(job_id=job.pk, device="cpu").status == "done"


def label_by_people(study: Study, prompt_set: str, labels: dict[str, list[tuple[str, str]]]) -> int:
    """Import one person's labels for every image of ``prompt_set`` (the import a crowd's answers take)."""
    records: list[tuple[int, dict[str, Any]]] = []
    items = Item.objects.filter(study=study, metadata__prompt_set=prompt_set).order_by("external_id")
    for item in items:
        index = int(item.external_id.rsplit("/i", 1)[1])
        gender, environment = labels[item.prompt][index]
        for question, value in (("gender", gender), ("environment", environment)):
            records.append(
                (
                    len(records) + 1,
                    {"item": item.external_id, "annotator": "rater", "question": question, "value": value},
                )
            )
    annotations_import_records(study=study, records=records)
    return items.count()


def check_the_plan(nurses: Study) -> None:
    """The plan on the initial images, by the API, the command and the page."""
    # Base: gender (1, 0) -> w_bar = 1; environment (1/2, 1/2) -> 0. tau = 0.5 * 1 + 0.5 * 0 = 0.5.
    # IS[gender] = (1 - 0, 0 - 1) = (1, -1); IS[environment] = (1 - 0, 0 - 0) = (1, 0).
    # gamma(gender) = 0.5 - 0.5 = 0, gamma(environment) = 0.5: environment first.
    api = client_for(nurses.owner)
    response = api.get(
        f"/api/studies/{nurses.pk}/intermit/", {"axes": "gender,environment", "weights": "1,1"}
    )
    assert response.status_code == 200, response.content
    plan = response.json()
    assert plan["group"] == "nurse" and plan["weights"] == {"gender": 0.5, "environment": 0.5}
    assert plan["plan"]["tau"] == pytest.approx(0.5) and plan["epsilon"] == 0.35
    assert plan["plan"]["next_axis"] == "environment" and plan["plan"]["gamma"] == pytest.approx(0.5)
    assert plan["plan"]["gammas"] == pytest.approx({"gender": 0.0, "environment": 0.5})
    assert plan["stage"]["n_base_images"] == 2 and plan["stage"]["n_items"] == 10
    assert any("IS[gender][environment] = -1.000 < 0" in w for w in plan["warnings"])
    # Weighted toward environment (p = 0.2, 0.8): tau = 0.2 * 1 = 0.2 <= 0.35, nothing to mitigate.
    done = api.get(
        f"/api/studies/{nurses.pk}/intermit/", {"axes": "gender,environment", "weights": "0.2,0.8"}
    ).json()
    assert done["plan"]["tau"] == pytest.approx(0.2) and done["plan"]["done"] is True
    out = io.StringIO()
    call_command("intermit", str(nurses.pk), "--axes", "gender,environment", stdout=out)
    text = out.getvalue()
    assert "tau = 0.5000" in text and "next axis: environment (gamma 0.5000" in text
    assert "gender: p = 0.500, w_bar = 1.0000 (n = 2; D* uniform)" in text
    page = Client()
    page.force_login(nurses.owner)
    html = page.get(
        f"/studies/{nurses.pk}/intermit/",
        {"group": "nurse", "axes": ["gender", "environment"], "epsilon": "0.35"},
    ).content.decode()
    assert (
        "τ = <strong>0.5000</strong>" in html
        and "Next axis: <strong>environment</strong>, γ = 0.5000" in html
    )
    findings = page.get(f"/studies/{nurses.pk}/findings/").content.decode()
    assert f"/studies/{nurses.pk}/intermit/" in findings


def test_a_loop_labelled_by_people_from_the_first_tau_to_the_report(
    nurses, tiny_model, django_capture_on_commit_callbacks
) -> None:
    generate_initial(nurses, tiny_model, 2)
    label_by_people(nurses, "nurse-initial", INITIAL)
    check_the_plan(nurses)
    api = client_for(nurses.owner)
    created = api.post(
        f"/api/studies/{nurses.pk}/intermit/loops/",
        {
            "axes": ["gender", "environment"],
            "epsilon": 0.2,
            "model": {"source": str(tiny_model), **MODEL},
            "images_per_step": 4,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    loop = created.json()
    assert (
        loop["status"] == "ready"
        and loop["plan"]["next_axis"] == "environment"
        and loop["source"] == "consensus"
    )
    url = f"/api/intermit/loops/{loop['loop']}/"

    # Step 1: the step's generation runs as a Celery task; the hook advances the step when it ends.
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post(url + "step/")
    assert started.status_code == 201, started.content
    step = MitigationStep.objects.get(loop_id=loop["loop"], index=1)
    assert step.status == "awaiting_labels" and step.items_made == 12 and step.generation_job.status == "done"
    assert step.axis == "environment"
    assert step.tau_before == pytest.approx(0.5) and step.gamma == pytest.approx(0.5)
    assert step.predicted_is == {"gender": pytest.approx(1.0), "environment": pytest.approx(0.0)}
    # While it is open no other step starts, and running its generation again changes nothing.
    assert api.post(url + "step/").status_code == 409
    job = generation_job_rerun(job=step.generation_job, enqueue=False)
    rerun = generation_job_run(job_id=job.pk, device="cpu")
    assert (rerun.generated, rerun.skipped) == (0, 12)
    assert mitigation_step_advance(step=step).status == "awaiting_labels"
    assert Item.objects.filter(study=nurses, metadata__prompt_set=step.prompt_set).count() == 12
    closing_too_soon = api.post(url + "close/")
    assert (
        closing_too_soon.status_code == 400 and "no labelled base image" in closing_too_soon.json()["detail"]
    )
    label_by_people(nurses, step.prompt_set, STEP_1)
    # Base: gender (3/4, 1/4) -> w_bar = 0.5, environment (1/2, 1/2) -> 0: tau = 0.25 > 0.2.
    # Measured IS = w_bar(before) - w_bar(after) = (1 - 0.5, 0 - 0) = (0.5, 0).
    report = api.post(url + "close/").json()
    first = report["steps"][0]
    assert first["status"] == "done" and first["tau_after"] == pytest.approx(0.25)
    assert first["measured_is"] == pytest.approx({"gender": 0.5, "environment": 0.0})
    assert first["created_by"] == first["closed_by"] == "owner" and first["finished_at"]
    # Gender's counterfactuals pool to (1/2, 1/2) on both axes: IS(1)[gender] = (0.5, 0), gamma = 0.25.
    assert report["status"] == "ready" and report["plan"]["next_axis"] == "gender"
    assert report["plan"]["gamma"] == pytest.approx(0.25)

    # Step 2 through the page this time.
    page = Client()
    page.force_login(nurses.owner)
    with django_capture_on_commit_callbacks(execute=True):
        page.post(f"/intermit/loops/{loop['loop']}/step/")
    second = MitigationStep.objects.get(loop_id=loop["loop"], index=2)
    assert second.status == "awaiting_labels" and second.items_made == 4
    assert second.mitigated_axes == ["environment", "gender"]
    label_by_people(nurses, second.prompt_set, STEP_2)
    page.post(f"/intermit/loops/{loop['loop']}/close/")
    report = api.get(url).json()
    # Every combination: tau = 0 <= 0.2. MitAmt = 0, MitSteps = 2/2.
    assert report["status"] == "done"
    assert report["report"]["tau_history"] == pytest.approx([0.5, 0.25, 0.0])
    assert report["report"]["mit_amt"] == pytest.approx(0.0) and report["report"][
        "mit_steps"
    ] == pytest.approx(1.0)
    assert (
        report["report"]["mitigated_axes"] == ["environment", "gender"]
        and report["report"]["reached_epsilon"]
    )
    # Validation: predicted (1, 0) then (0.5, 0), measured (0.5, 0) then (0.5, 0):
    # r = 0.375 / sqrt(0.6875 * 0.25).
    validation = report["validation"]
    assert validation["n"] == 4 and validation["r"] == pytest.approx(0.375 / math.sqrt(0.6875 * 0.25))
    assert [p[:3] for p in validation["pairs"]] == [
        [1, "environment", "gender"],
        [1, "environment", "environment"],
        [2, "gender", "gender"],
        [2, "gender", "environment"],
    ]
    assert any("initial: IS[gender][environment] = -1.000 < 0" in w for w in report["warnings"])
    html = page.get(f"/intermit/loops/{loop['loop']}/").content.decode()
    assert "MitAmt (final τ)</dt><dd>0.0000" in html and "r = 0.9045" in html and "(2/2)" in html
    out = io.StringIO()
    call_command("intermit", str(nurses.pk), "--loop", str(loop["loop"]), stdout=out)
    assert "MitAmt 0.0000, MitSteps 1.0000 (2/2)" in out.getvalue()
    assert api.post(url + "step/").status_code == 400  # tau <= epsilon: nothing left


def test_a_loop_labelled_by_a_tiny_clip_from_the_command(nurses, tiny_model, tmp_path) -> None:
    from tests.fixtures.tiny_vision_models import save_tiny_clip

    generate_initial(nurses, tiny_model, 3)
    call_command(
        "register_labeller",
        "--name",
        "clip-tiny",
        "--kind",
        "clip",
        "--set",
        f"model={save_tiny_clip(tmp_path / 'clip')}",
        "--set",
        "device=cpu",
        stdout=io.StringIO(),
    )
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "intermit",
        str(nurses.pk),
        "--axes",
        "gender,environment",
        "--epsilon",
        "0",
        "--start",
        "--model",
        str(tiny_model),
        "--labeller",
        "clip-tiny",
        "--steps",
        "2",
        "--guidance",
        "1",
        "--width",
        "64",
        "--height",
        "64",
        "--images-per-step",
        "3",
        "--device",
        "cpu",
        "--run",
        "--json",
        stdout=out,
        stderr=err,
    )
    report = json.loads(out.getvalue())
    loop = MitigationLoop.objects.get(pk=report["loop"])
    clip = loop.annotator
    assert report["source"] == f"clip-tiny@{clip.version}" and report["status"] in ("done", "exhausted")
    # The first tau by hand from the labeller's answers on the 3 base images: w_bar = 2 |share - 1/2|
    # for a two-option axis against uniform; tau = the mean of the two (equal weights).
    base = Item.objects.filter(study=nurses, metadata__prompt_set="nurse-initial", condition="base")
    answers = {
        (a.item_id, a.question_key): a.value for a in Annotation.objects.filter(annotator=clip, item__in=base)
    }
    share_male = sum(answers[(i.pk, "gender")] == "male" for i in base) / 3
    share_indoor = sum(answers[(i.pk, "environment")] == "indoor" for i in base) / 3
    tau0 = 0.5 * 2 * abs(share_male - 0.5) + 0.5 * 2 * abs(share_indoor - 0.5)
    history = report["report"]["tau_history"]
    assert history[0] == pytest.approx(tau0) and tau0 > 0  # 3 images: never balanced
    steps = report["steps"]
    assert 1 <= len(steps) <= 2 and len(history) == len(steps) + 1
    for step, before, after in zip(steps, history, history[1:], strict=False):
        assert step["status"] == "done" and step["tau_before"] == pytest.approx(before)
        assert step["tau_after"] == pytest.approx(after)
        assert step["measured_is"] == pytest.approx(
            {y: step["w_before"][y] - step["w_after"][y] for y in ("gender", "environment")}
        )
        job = LabellingJob.objects.get(pk=step["labelling_job"]["id"])
        assert job.status == "done" and job.metadata_filter == {"prompt_set": step["prompt_set"]}
        assert job.total_items == step["items_made"] and step["created_by"] == "owner"
    # Step 1 mitigates one axis: 2 prompts of ceil(3/2) = 2 images, plus the other axis's 2 groups x 2.
    assert steps[0]["items_made"] == 4 + 8
    if len(steps) == 2:
        assert steps[1]["items_made"] == 4 and steps[1]["mitigated_axes"] == [
            steps[0]["axis"],
            steps[1]["axis"],
        ]
    assert report["report"]["mit_amt"] == pytest.approx(history[-1])
    assert report["report"]["mit_steps"] == pytest.approx(len(steps) / 2)
    assert report["initial_labelling_job"]["status"] == "done"
    with pytest.raises(CommandError, match="no step can start"):
        call_command("intermit", str(nurses.pk), "--loop", str(loop.pk), "--step", stdout=io.StringIO())


def test_bad_input_is_a_clear_400(nurses, tiny_model, other_researcher) -> None:
    for index, condition in enumerate(["base", "gender:male", "environment:indoor"]):
        item_add_files(
            study=nurses,
            record={
                "external_id": f"n{index}",
                "file": "n.png",
                "condition": condition,
                "metadata": {"occupation": "nurse"},
            },
            files={"n.png": png_bytes((index * 40, 0, 0))},
        )
    api = client_for(nurses.owner)
    url = f"/api/studies/{nurses.pk}/intermit/"
    for query, message in [
        ({}, "choose the axes"),
        ({"axes": "gender,mood"}, "unknown axis 'mood'"),
        ({"axes": "gender,gender"}, "named twice"),
        ({"axes": "gender,environment", "weights": "1"}, "one weight per axis"),
        ({"axes": "gender,environment", "weights": "1,-1"}, "non-negative"),
        ({"axes": "gender", "weights": "x"}, "must be a number"),
        ({"axes": "gender", "epsilon": "2"}, "between 0 and 1"),
        ({"axes": "gender", "epsilon": "nan"}, "finite"),
        ({"axes": "gender", "group": "pilot"}, "no prompt group 'pilot'"),
        ({"axes": "gender", "source": "nobody"}, "not a source of this study"),
    ]:
        response = api.get(url, query)
        assert response.status_code == 400 and message in response.json()["detail"], (query, response.json())
    other = StudyFactory.create(owner=nurses.owner, protocol=load_preset("object-attributes").to_dict())
    response = api.get(f"/api/studies/{other.pk}/intermit/", {"axes": "gender"})
    assert response.status_code == 400 and "bias-axes" in response.json()["detail"]
    assert client_for(other_researcher).get(url, {"axes": "gender"}).status_code == 404
    # Without labels tau is undefined: the plan says why and a loop refuses to step.
    plan = api.get(url, {"axes": "gender"}).json()["plan"]
    assert plan["tau"] is None and "no labelled base image" in plan["reason"]
    loops = f"/api/studies/{nurses.pk}/intermit/loops/"
    bad_model = api.post(
        loops, {"axes": ["gender"], "model": {"source": str(tiny_model), "colour": 1}}, format="json"
    )
    assert bad_model.status_code == 400 and "unknown model setting" in bad_model.json()["detail"]
    unknown = api.post(
        loops, {"axes": ["gender"], "labeller": "nobody", "model": {"source": str(tiny_model)}}, format="json"
    )
    assert unknown.status_code == 400 and "no machine labeller" in unknown.json()["detail"]
    created = api.post(
        loops, {"axes": ["gender"], "model": {"source": str(tiny_model)}}, format="json"
    ).json()
    assert created["status"] == "needs_labels"
    refused = api.post(f"/api/intermit/loops/{created['loop']}/step/")
    assert refused.status_code == 400 and "tau cannot be computed yet" in refused.json()["detail"]
    assert api.post(f"/api/intermit/loops/{created['loop']}/advance/").status_code == 400  # no open step
    assert api.post(f"/api/intermit/loops/{created['loop']}/jump/").status_code == 404
    assert not GenerationJob.objects.filter(name__startswith="intermit").exists()
    with pytest.raises(CommandError, match="unknown axis 'mood'"):
        call_command("intermit", str(nurses.pk), "--axes", "mood", stdout=io.StringIO())
    with pytest.raises(CommandError, match="needs --model"):
        call_command("intermit", str(nurses.pk), "--axes", "gender", "--start", stdout=io.StringIO())
    page = Client()
    page.force_login(nurses.owner)
    page_response = page.get(
        f"/studies/{nurses.pk}/intermit/",
        {"group": "nurse", "axes": ["gender"], "weights": "1,2", "epsilon": "0.35"},
    )
    assert page_response.status_code == 400 and "one weight per axis" in page_response.content.decode()


def test_a_finished_labelling_task_advances_its_step(
    nurses, tmp_path, django_capture_on_commit_callbacks
) -> None:
    """The hook: when a step's labelling task ends (here eagerly, as a worker would), the step is measured."""
    from labelling.services import labeller_register, labelling_job_create
    from labelling.tasks import label_items_task
    from tests.fixtures.tiny_vision_models import save_tiny_clip

    clip = labeller_register(
        name="clip-tiny",
        kind="clip",
        config={"model": str(save_tiny_clip(tmp_path / "clip")), "device": "cpu"},
    )
    loop = MitigationLoop.objects.create(
        study=nurses,
        group="nurse",
        axes=["gender"],
        weights={"gender": 1.0},
        annotator=clip,
        model_spec={"source": "m"},
    )
    for index, condition in enumerate(["base", "base", "base", "environment:indoor"]):
        item_add_files(
            study=nurses,
            record={
                "external_id": f"s1-{index}",
                "file": "a.png",
                "condition": condition,
                "metadata": {"subject": "nurse", "mitigation": {"gender": "male"}, "prompt_set": "set1"},
            },
            files={"a.png": png_bytes((index * 50, 90, 10))},
        )
    job = labelling_job_create(
        study=nurses, annotator=clip, user=None, metadata_filter={"prompt_set": "set1"}, enqueue=False
    )
    step = MitigationStep.objects.create(
        loop=loop,
        index=1,
        axis="gender",
        mitigated_axes=["gender"],
        tau_before=1.0,
        w_before={"gender": 1.0, "environment": 0.0},
        prompt_set="set1",
        labelling_job=job,
        status=MitigationStep.Status.LABELLING,
    )
    with django_capture_on_commit_callbacks(execute=True):
        label_items_task.apply_async((job.pk,))
    step.refresh_from_db()
    assert step.status == "done" and step.n_after == 3
    assert step.tau_after == pytest.approx(step.w_after["gender"])
    assert step.measured_is["gender"] == pytest.approx(1.0 - step.w_after["gender"])
    # Advancing a finished step again changes nothing.
    assert mitigation_step_advance(step=step).tau_after == step.tau_after


def test_weights_and_seeds_that_would_break_a_loop_are_refused_and_stored_ones_repaired(
    nurses, tiny_model
) -> None:
    """Issue 24, L1: ``weights: [1e308, 1e308]`` summed to infinity and was stored as zeros, so the
    loop's page and API answered 500 for good; ``base_seed: 10**30`` (or one at the 64-bit limit, which a
    step then overflows) reached the database. Refused with a 400 naming the field; loops already stored
    that way are repaired by migration ``mitigation/0002_repair_unusable_loops``."""
    import importlib

    from django.apps import apps

    item_add_files(
        study=nurses,
        record={
            "external_id": "n0",
            "file": "n.png",
            "condition": "base",
            "metadata": {"occupation": "nurse"},
        },
        files={"n.png": png_bytes((40, 0, 0))},
    )
    api = client_for(nurses.owner)
    loops = f"/api/studies/{nurses.pk}/intermit/loops/"
    model = {"source": str(tiny_model)}
    for body, field in (
        ({"axes": ["gender", "environment"], "weights": [1e308, 1e308], "model": model}, "weights"),
        ({"axes": ["gender"], "base_seed": 10**30, "model": model}, "base_seed"),
        ({"axes": ["gender"], "base_seed": 2**63 - 1, "model": model}, "base_seed"),
    ):
        response = api.post(loops, body, format="json")
        assert response.status_code == 400 and field in json.dumps(response.json()), response.content
    page = Client(raise_request_exception=False)
    page.force_login(nurses.owner)
    assert not MitigationLoop.objects.exists()
    # A loop the old code stored: zero weights (1e308 / inf) and a seed at the 64-bit limit.
    created = api.post(loops, {"axes": ["gender", "environment"], "model": model}, format="json").json()
    MitigationLoop.objects.filter(pk=created["loop"]).update(
        weights={"gender": 0.0, "environment": 0.0}, base_seed=2**63 - 1
    )
    url = f"/api/intermit/loops/{created['loop']}/"
    broken = Client(raise_request_exception=False)
    broken.force_login(nurses.owner)
    assert broken.get(url).status_code == 500  # what every read answered before the repair
    repair = importlib.import_module("mitigation.migrations.0002_repair_unusable_loops")
    repair.repair_loops(apps, None)
    loop = MitigationLoop.objects.get(pk=created["loop"])
    assert loop.weights == {"gender": 0.5, "environment": 0.5} and loop.base_seed == 2**63 - 1 - 10_000
    assert api.get(url).status_code == 200
    assert page.get(f"/intermit/loops/{loop.pk}/").status_code == 200


@pytest.fixture
def two_male_nurses(owner) -> Study:
    """Two base images of nurses, both labelled male by one rater, the
    study's overlap (w_bar of gender: 1 against uniform)."""
    study = StudyFactory.create(
        owner=owner, name="pilot", overlap=1, protocol=load_protocol_text(PROTOCOL).to_dict()
    )
    for index in range(2):
        item_add_files(
            study=study,
            record={
                "external_id": f"n{index}",
                "file": "n.png",
                "condition": "base",
                "metadata": {"occupation": "nurse"},
            },
            files={"n.png": png_bytes((index * 40, 0, 0))},
        )
    annotations_import_records(
        study=study,
        records=[
            (i + 1, {"item": f"n{i}", "annotator": "rater", "question": "gender", "value": "male"})
            for i in range(2)
        ],
    )
    return study


def test_a_target_distribution_other_than_uniform(two_male_nurses) -> None:
    """Issue 25 point 5: D* is user-given where the paper allows it (A.10). With D* = (male 0.8,
    female 0.2), two male images are W1 = 0.2 from it, and the farthest one-hot is 0.8 away: w_bar =
    0.25; with D* = (1, 0) they are on target (0); uniform: 1. Through the API, the page and a loop."""
    study = two_male_nurses
    api = client_for(study.owner)
    url = f"/api/studies/{study.pk}/intermit/"
    uniform = api.get(url, {"axes": "gender"}).json()
    assert uniform["plan"]["tau"] == pytest.approx(1.0) and uniform["targets"]["gender"]["uniform"] is True
    skewed = api.get(url, {"axes": "gender", "targets": "gender=0.8,0.2"}).json()
    assert skewed["stage"]["w_bar"]["gender"] == pytest.approx(0.25)
    assert skewed["targets"]["gender"] == {
        "options": ["male", "female"],
        "shares": [0.8, 0.2],
        "pairs": [["male", 0.8], ["female", 0.2]],
        "uniform": False,
    }
    on_target = api.get(url, {"axes": "gender", "targets": "gender=2,0"}).json()  # normalised
    assert on_target["plan"]["tau"] == pytest.approx(0.0) and on_target["plan"]["done"] is True
    for targets, message in [
        ("gender=1", "one share per option (2: male, female), not 1"),
        ("mood=1,0", "no axis 'mood'"),
        ("gender=-1,2", "non-negative"),
        ("gender", "AXIS=SHARE"),
        ("gender=x,1", "must be a number"),
    ]:
        refused = api.get(url, {"axes": "gender", "targets": targets})
        assert refused.status_code == 400 and message in refused.json()["detail"], refused.json()
    page = Client()
    page.force_login(study.owner)
    html = page.get(
        f"/studies/{study.pk}/intermit/",
        {"group": "nurse", "axes": ["gender"], "epsilon": "0.35", "targets": "gender=0.8,0.2"},
    ).content.decode()
    assert "Target D*: gender <strong>male 0.800, female 0.200</strong>" in html
    assert "τ = <strong>0.2500</strong>" in html
    out = io.StringIO()
    call_command("intermit", str(study.pk), "--axes", "gender", "--targets", "gender=0.8,0.2", stdout=out)
    assert "gender: p = 1.000, w_bar = 0.2500 (n = 2; D* male 0.800, female 0.200)" in out.getvalue()
    # a loop keeps its D*: its stages are measured against it
    from mitigation.selectors import intermit_params_parse, loop_params
    from mitigation.services import mitigation_loop_create

    params = intermit_params_parse(study, axes="gender", targets={"gender": [0.8, 0.2]})
    loop = mitigation_loop_create(
        study=study, params=params, spec=ModelSpec(source="unused"), user=study.owner, annotator=None
    )
    assert MitigationLoop.objects.get(pk=loop.pk).targets == {"gender": [0.8, 0.2]}
    assert loop_params(loop).targets == {"gender": [0.8, 0.2]}
