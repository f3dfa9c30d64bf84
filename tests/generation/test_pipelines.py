"""The generation engine on a tiny, randomly initialised Stable Diffusion pipeline (CPU, 64x64)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from generation.pipelines import (
    GenerationReport,
    ImageRequest,
    ModelSpec,
    choose_device,
    clear_pipeline_cache,
    derive_seed,
    folder_fingerprint,
    generate_images,
    load_pipeline,
    model_provenance,
)
from tests.fixtures.tiny_sd import save_tiny_sd

PROMPTS = [
    "a photo of a nurse",
    "a photo of a doctor",
    "an Ethiopian person",
    "car, one product only, no people",
]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_sd(tmp_path_factory.mktemp("tiny-sd"))


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    yield
    clear_pipeline_cache()


def tiny_spec(folder: Path, **changes: Any) -> ModelSpec:
    settings: dict[str, Any] = {
        "source": str(folder),
        "steps": 2,
        "width": 64,
        "height": 64,
        "guidance": 5.0,
        "batch_size": 4,
    }
    settings.update(changes)
    return ModelSpec(**settings)


def run(
    pipe: Any, spec: ModelSpec, requests: Sequence[ImageRequest | tuple[str, int]], **kwargs: Any
) -> tuple[dict[Any, np.ndarray], GenerationReport]:
    images: dict[Any, np.ndarray] = {}

    def keep(request: ImageRequest, image: Image.Image) -> None:
        images[request.key] = np.asarray(image).astype(np.int16)

    report = generate_images(pipe, spec, requests, on_image=keep, **kwargs)
    return images, report


def requests_for(prompts: list[str], base_seed: int = 1234) -> list[ImageRequest]:
    return [ImageRequest(prompt=p, seed=derive_seed(base_seed, p, 0), key=i) for i, p in enumerate(prompts)]


# --- seeds --------------------------------------------------------------------------------------


def test_derive_seed_is_the_pinned_sha256_value() -> None:
    # sha256(b"1234\x1fa photo of a nurse\x1f0") starts e35af81e9f41155d; clearing the top bit
    # gives 0x635af81e9f41155d = 7159307368063374685.
    by_hand = int.from_bytes(hashlib.sha256(b"1234\x1fa photo of a nurse\x1f0").digest()[:8], "big") & (
        2**63 - 1
    )
    assert by_hand == 7159307368063374685
    assert derive_seed(1234, "a photo of a nurse", 0) == 7159307368063374685
    assert derive_seed(0, "car, one product only, no people", 19) == 6543586131515879923


def test_derive_seed_changes_with_each_input_and_stays_in_range() -> None:
    seeds = {derive_seed(b, p, i) for b in (0, 1) for p in ("a", "b") for i in (0, 1)}
    assert len(seeds) == 8
    assert all(0 <= s <= 2**63 - 1 for s in seeds)
    assert derive_seed(5, "bad \ud800 text", 0) == derive_seed(5, "bad \ud800 text", 0)
    with pytest.raises(ValueError, match="index"):
        derive_seed(1, "a", -1)
    with pytest.raises(ValueError, match="base_seed"):
        derive_seed("1", "a", 0)  # type: ignore[arg-type]  # on purpose
    with pytest.raises(ValueError, match="seed"):
        ImageRequest(prompt="a", seed=2**63)


# --- model spec ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"source": " "}, "source"),
        ({"dtype": "float8"}, "dtype"),
        ({"scheduler": "NoSuchScheduler"}, "not a diffusers scheduler"),
        ({"scheduler": "StableDiffusionPipeline"}, "not a diffusers scheduler"),
        ({"steps": 0}, "steps"),
        ({"steps": 1001}, "at most 1000"),
        ({"width": 100}, "multiple of 8"),
        ({"height": -8}, "height"),
        ({"guidance": float("nan")}, "guidance"),
        ({"guidance": -1}, "guidance"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2.0}, "batch_size"),
        ({"revision": ""}, "revision"),
    ],
)
def test_model_spec_validation(changes: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {"source": "org/model"}
    settings.update(changes)
    with pytest.raises(ValueError, match=message):
        ModelSpec(**settings)


def test_model_spec_defaults_and_settings() -> None:
    spec = ModelSpec(source="org/model", scheduler="EulerDiscreteScheduler", negative_prompt="blurry")
    assert spec.load_key() == ("org/model", None, "auto", "EulerDiscreteScheduler")
    assert spec.settings()["negative_prompt"] == "blurry"
    assert spec.settings()["steps"] == 30


def test_choose_device() -> None:
    expected = (
        "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    )
    assert choose_device() == expected
    assert choose_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="not one of"):
        choose_device("tpu")


# --- loading ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_load_pipeline_caches_by_load_fields(tiny_folder: Path) -> None:
    pipe = load_pipeline(tiny_spec(tiny_folder), "cpu")
    assert type(pipe).__name__ == "StableDiffusionPipeline"
    assert pipe.dtype == torch.float32  # auto on CPU
    # Steps, size and batch size do not change the loaded pipeline: same object.
    assert load_pipeline(tiny_spec(tiny_folder, steps=3, batch_size=1), "cpu") is pipe
    swapped = load_pipeline(tiny_spec(tiny_folder, scheduler="EulerDiscreteScheduler"), "cpu")
    assert swapped is not pipe
    assert type(swapped.scheduler).__name__ == "EulerDiscreteScheduler"
    assert type(pipe.scheduler).__name__ == "DDIMScheduler"


def test_load_pipeline_refuses_a_folder_that_is_not_a_pipeline(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model_index.json"):
        load_pipeline(ModelSpec(source=str(tmp_path)), "cpu")


# --- generating ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_same_seed_same_pixels_other_seed_other_pixels(tiny_folder: Path) -> None:
    spec = tiny_spec(tiny_folder, batch_size=1)
    pipe = load_pipeline(spec, "cpu")
    first, _ = run(pipe, spec, requests_for(PROMPTS[:2]))
    second, _ = run(pipe, spec, requests_for(PROMPTS[:2]))
    other, _ = run(pipe, spec, requests_for(PROMPTS[:2], base_seed=99))
    assert first[0].shape == (64, 64, 3)
    assert all(np.array_equal(first[k], second[k]) for k in first)
    assert np.abs(first[0] - other[0]).max() > 20


@pytest.mark.slow
def test_batch_size_does_not_change_the_images(tiny_folder: Path) -> None:
    one = tiny_spec(tiny_folder, batch_size=1)
    four = tiny_spec(tiny_folder, batch_size=4)
    pipe = load_pipeline(one, "cpu")
    singles, report_one = run(pipe, one, requests_for(PROMPTS))
    batched, report_four = run(pipe, four, requests_for(PROMPTS))
    assert report_one.generated == report_four.generated == 4
    for key in singles:
        # Same noise (one generator per image), but kernels round a batch of 4 differently from a
        # batch of 1 (about 1e-6): close, not bit-identical (only the same batch composition is;
        # docs/generation.md, "Seeds").
        assert np.abs(singles[key] - batched[key]).max() <= 1
        assert np.mean(singles[key] != batched[key]) < 0.01
    # Each image lands on its own request: image 0 is far from image 1 of the other run.
    assert np.abs(singles[0] - batched[1]).max() > 20


@pytest.mark.slow
def test_companions_keep_the_batch_composition_and_are_not_handed_on(tiny_folder: Path) -> None:
    """Only chunks with a wanted request run, whole (companions included), so a wanted image is
    computed in the same call as in a full run: bit-identical on any CPU, whatever the kernels do
    with another batch size."""
    spec = tiny_spec(tiny_folder, batch_size=2)
    pipe = load_pipeline(spec, "cpu")
    prompts = [*PROMPTS, "a photo of a chef"]
    full, _ = run(pipe, spec, requests_for(prompts))
    calls: list[list[str]] = []

    def recording(**kwargs: Any) -> Any:
        calls.append(list(kwargs["prompt"]))
        return pipe(**kwargs)

    wanted = {1, 4}
    requests = [
        ImageRequest(prompt=r.prompt, seed=r.seed, key=r.key, wanted=r.key in wanted)
        for r in requests_for(prompts)
    ]
    ends: list[int] = []
    images, report = run(recording, spec, requests, on_batch_end=ends.append)
    assert calls == [prompts[0:2], prompts[4:5]]  # chunk [2, 3] has nothing wanted: no call
    assert sorted(images) == [1, 4] and report.generated == 2 and ends == [1, 1]
    assert all(np.array_equal(images[k], full[k]) for k in wanted)


@pytest.mark.slow
def test_tuples_are_accepted_as_requests(tiny_folder: Path) -> None:
    spec = tiny_spec(tiny_folder, batch_size=2)
    pipe = load_pipeline(spec, "cpu")
    images, report = run(pipe, spec, [(PROMPTS[0], 1), (PROMPTS[1], 2), (PROMPTS[2], 3)])
    assert sorted(images) == [0, 1, 2]
    assert report.generated == 3 and not report.failures


@pytest.mark.slow
def test_cancellation_stops_between_batches(tiny_folder: Path) -> None:
    spec = tiny_spec(tiny_folder, batch_size=2)
    pipe = load_pipeline(spec, "cpu")
    asked: list[int] = []

    def should_cancel() -> bool:
        asked.append(1)
        return len(asked) > 1  # let the first batch run, cancel before the second

    images, report = run(pipe, spec, requests_for(PROMPTS), should_cancel=should_cancel)
    assert report.cancelled
    assert sorted(images) == [0, 1]
    assert report.generated == 2 and report.failures == []


@pytest.mark.slow
def test_a_failing_prompt_fails_alone(tiny_folder: Path) -> None:
    spec = tiny_spec(tiny_folder, batch_size=4)
    pipe = load_pipeline(spec, "cpu")
    # A lone surrogate (e.g. from a badly decoded CSV) makes the tokenizer raise for that prompt.
    prompts = [PROMPTS[0], "a photo of a \ud800 person", PROMPTS[1], PROMPTS[2]]
    failed: list[tuple[Any, str]] = []
    images, report = run(
        pipe,
        spec,
        requests_for(prompts),
        on_failure=lambda request, reason: failed.append((request.key, reason)),
    )
    assert sorted(images) == [0, 2, 3]
    assert [key for key, _ in failed] == [1]
    assert failed[0][1].startswith("TypeError")
    assert [r.key for r, _ in report.failures] == [1]
    # The survivors are the images a clean run gives (they were regenerated one by one).
    clean, _ = run(pipe, tiny_spec(tiny_folder, batch_size=1), requests_for(prompts)[2:])
    assert np.array_equal(images[2], clean[2])


@pytest.mark.slow
def test_on_batch_end_reports_each_batch_after_its_images(tiny_folder: Path) -> None:
    spec = tiny_spec(tiny_folder, batch_size=2)
    events: list[Any] = []
    prompts = [PROMPTS[0], "a photo of a \ud800 person", *PROMPTS[1:]]  # the second fails alone
    run_report = generate_images(
        load_pipeline(spec, "cpu"),
        spec,
        requests_for(prompts),
        on_image=lambda request, _image: events.append(request.key),
        on_batch_end=lambda made: events.append(f"end {made}"),
    )
    # batches [0, 1] (1 fails), [2, 3], [4]: each end comes after its images, with how many were made
    assert events == [0, "end 1", 2, 3, "end 2", 4, "end 1"]
    assert run_report.generated == 4


class MemoryLimitedPipeline:
    """The real tiny pipeline behind a memory limit: more than ``max_images`` per call raises the
    error CUDA raises when a batch does not fit (CPU has no such limit to hit in a test)."""

    def __init__(self, pipe: Any, max_images: int) -> None:
        self.pipe, self.max_images = pipe, max_images
        self.calls: list[int] = []

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(len(kwargs["prompt"]))
        if len(kwargs["prompt"]) > self.max_images:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return self.pipe(**kwargs)


@pytest.mark.slow
def test_out_of_memory_halves_the_batch(tiny_folder: Path) -> None:
    spec = tiny_spec(tiny_folder, batch_size=4)
    limited = MemoryLimitedPipeline(load_pipeline(spec, "cpu"), max_images=1)
    prompts = [*PROMPTS, "a photo of a chef"]
    images, report = run(limited, spec, requests_for(prompts))
    assert sorted(images) == [0, 1, 2, 3, 4] and report.failures == []
    assert report.final_batch_size == 1
    # 4 -> OOM, 2 -> OOM, 1, 1, 2 -> OOM, 1, 1; then the last image directly at the kept size 1.
    assert limited.calls == [4, 2, 1, 1, 2, 1, 1, 1]
    singles, _ = run(load_pipeline(spec, "cpu"), tiny_spec(tiny_folder, batch_size=1), requests_for(prompts))
    assert all(np.array_equal(images[k], singles[k]) for k in singles)


@pytest.mark.slow
def test_out_of_memory_at_one_image_is_reported(tiny_folder: Path) -> None:
    spec = tiny_spec(tiny_folder, batch_size=2)
    limited = MemoryLimitedPipeline(load_pipeline(spec, "cpu"), max_images=0)
    images, report = run(limited, spec, requests_for(PROMPTS[:2]))
    assert images == {}
    assert [r.key for r, _ in report.failures] == [0, 1]
    assert all("out of memory at batch size 1" in reason for _, reason in report.failures)


@pytest.mark.slow
def test_negative_prompt_reaches_the_pipeline(tiny_folder: Path) -> None:
    plain = tiny_spec(tiny_folder, batch_size=1)
    negative = tiny_spec(tiny_folder, batch_size=1, negative_prompt="blurry, low quality")
    pipe = load_pipeline(plain, "cpu")
    a, _ = run(pipe, plain, requests_for(PROMPTS[:1]))
    b, _ = run(pipe, negative, requests_for(PROMPTS[:1]))
    assert not np.array_equal(a[0], b[0])


# --- provenance ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_provenance_of_a_local_folder(tiny_folder: Path, tmp_path: Path) -> None:
    spec = tiny_spec(tiny_folder)
    pipe = load_pipeline(spec, "cpu")
    record = model_provenance(spec, pipe, "cpu")
    assert record["kind"] == "local"
    assert record["pipeline_class"] == "StableDiffusionPipeline"
    assert record["scheduler_class"] == "DDIMScheduler"
    assert record["safety_checker"] is False
    assert record["device"] == "cpu" and record["dtype"] == "float32"
    assert record["settings"]["steps"] == 2
    assert set(record["versions"]) == {"diffusers", "transformers", "torch", "python"}
    assert record["versions"]["torch"] == torch.__version__
    json.dumps(record)  # storable as JSON
    # The fingerprint by hand: sha256 over "path<TAB>sha256(file)" lines in sorted path order.
    files = sorted(p for p in tiny_folder.rglob("*") if p.is_file())
    lines = "".join(
        f"{p.relative_to(tiny_folder).as_posix()}\t{hashlib.sha256(p.read_bytes()).hexdigest()}\n"
        for p in files
    )
    assert record["folder_sha256"] == hashlib.sha256(lines.encode()).hexdigest()
    assert record["folder_files"] == len(files) == 10
    # Without a loaded pipeline, the classes come from model_index.json.
    unloaded = model_provenance(spec, device="cpu")
    assert unloaded["pipeline_class"] == "StableDiffusionPipeline"
    assert unloaded["scheduler_class"] == "DDIMScheduler"
    assert unloaded["folder_sha256"] == record["folder_sha256"]


@pytest.mark.slow
def test_fingerprint_changes_with_any_weight_or_config(tiny_folder: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(tiny_folder, tmp_path / "copy"))
    assert folder_fingerprint(copy)["sha256"] == folder_fingerprint(tiny_folder)["sha256"]
    config = copy / "scheduler" / "scheduler_config.json"
    data = json.loads(config.read_text())
    data["steps_offset"] = 0
    config.write_text(json.dumps(data))
    assert folder_fingerprint(copy)["sha256"] != folder_fingerprint(tiny_folder)["sha256"]


def test_provenance_of_a_hub_model_names_the_revision() -> None:
    record = model_provenance(
        ModelSpec(source="CompVis/stable-diffusion-v1-4", revision="main"), device="cpu"
    )
    assert record["kind"] == "hub"
    assert record["revision"] == "main"
    assert record["resolved_revision"] is None  # not in this machine's cache
    assert record["dtype"] == "float32"


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_uses_half_precision_and_matches_its_own_rerun(tiny_folder: Path) -> None:
    spec = tiny_spec(tiny_folder, batch_size=2)
    pipe = load_pipeline(spec, "cuda")
    assert pipe.dtype == torch.float16
    first, _ = run(pipe, spec, requests_for(PROMPTS))
    second, _ = run(pipe, spec, requests_for(PROMPTS))
    assert all(np.array_equal(first[k], second[k]) for k in first)
    assert model_provenance(spec, pipe)["dtype"] == "float16"
