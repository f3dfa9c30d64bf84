"""Text-to-image generation with diffusers: model specs, loading, seeds, batched generation, provenance.

No Django here. The job layer turns prompt sets into :class:`ImageRequest` rows (prompt text, seed
from :func:`derive_seed`, its own key), calls :func:`generate_images` with callbacks that store each
image and each failure, and records :func:`model_provenance` with the job.

Reproducibility: every image gets its own ``torch.Generator`` seeded with its own seed, created on
the CPU, so its starting noise depends on nothing but that seed: not on the other prompts of its
batch, the batch size, or the device (diffusers draws CPU-generator noise on the CPU and then moves
it to the GPU). The arithmetic after the noise is another matter: matrix-multiply and convolution
kernels choose their blocking, vector width and reduction order by the shapes they get, and the
batch is one of those dimensions, so an image computed in a batch of 2 and the same image computed
alone may differ in the last bits of a float (seen on AVX-512 CPUs as one grey level in a pixel).
So the guarantee is structural: the same seed *in the same batch composition* (the same requests,
in the same order, in one pipeline call) on the same device model and software gives bit-identical
pixels. :func:`generate_images` batches requests in fixed chunks of ``spec.batch_size`` of the list
it is given, and a request with ``wanted=False`` is computed only to give its chunk the composition
it had when its wanted neighbours were first made (a re-run that fills in a missing image runs its
whole original batch and keeps only the missing one).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import platform
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image

if TYPE_CHECKING:
    import torch
    from diffusers import SchedulerMixin

# torch is imported inside the functions that run a model: the web app imports this module (for
# ModelSpec and seeds) and would otherwise load torch in every worker at start-up.
DTYPES = ("float32", "float16", "bfloat16")
DEVICES = ("cuda", "mps", "cpu")
MAX_SEED = 2**63 - 1  # seeds fit a signed 64-bit database column

# A pipeline call that fails for reasons of its inputs raises one of these (diffusers' checks
# raise ValueError, tokenizers TypeError, torch RuntimeError); anything else is a bug and propagates.
PIPELINE_ERRORS = (ValueError, TypeError, RuntimeError)


@dataclass(frozen=True)
class ModelSpec:
    """A diffusers model and the settings to generate with.

    ``source`` is a local folder written by ``save_pretrained`` or a hub id (``org/name``);
    ``revision`` a hub branch, tag or commit (hub only). ``dtype`` is ``auto`` (float16 on CUDA,
    float32 elsewhere), ``float32``, ``float16`` or ``bfloat16``. ``scheduler`` names a diffusers
    scheduler class (``"EulerDiscreteScheduler"``) to swap in, or None for the model's own.
    ``steps``, ``guidance``, ``width``, ``height`` and ``negative_prompt`` go to the pipeline call;
    ``batch_size`` is how many images one call makes.
    """

    source: str
    revision: str | None = None
    dtype: str = "auto"
    scheduler: str | None = None
    steps: int = 30
    guidance: float = 7.5
    width: int = 512
    height: int = 512
    negative_prompt: str | None = None
    batch_size: int = 4

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source.strip():
            raise ValueError("source must name a local model folder or a hub id, got an empty value")
        if self.revision is not None and not str(self.revision).strip():
            raise ValueError("revision must be None or a non-empty branch, tag or commit")
        if self.dtype not in ("auto", *DTYPES):
            raise ValueError(f"dtype {self.dtype!r} is not one of auto, {', '.join(DTYPES)}")
        if self.scheduler is not None:
            scheduler_class(self.scheduler)  # raises ValueError with the reason
        for name in ("steps", "width", "height", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if self.steps > 1000:
            raise ValueError(f"steps must be at most 1000, got {self.steps}")
        for name in ("width", "height"):
            if getattr(self, name) % 8:
                raise ValueError(
                    f"{name} must be a multiple of 8 (the VAE's scale), got {getattr(self, name)}"
                )
        if (
            isinstance(self.guidance, bool)
            or not isinstance(self.guidance, int | float)
            or not (math.isfinite(self.guidance) and self.guidance >= 0)
        ):
            raise ValueError(f"guidance must be a finite number >= 0, got {self.guidance!r}")
        if self.negative_prompt is not None and not isinstance(self.negative_prompt, str):
            raise ValueError("negative_prompt must be text or None")

    def load_key(self) -> tuple[str, str | None, str, str | None]:
        """The fields that change the loaded pipeline (cache key of :func:`load_pipeline`)."""
        return (self.source, self.revision, self.dtype, self.scheduler)

    def settings(self) -> dict[str, Any]:
        """The generation settings, as stored with every image."""
        return {
            "steps": self.steps,
            "guidance": self.guidance,
            "width": self.width,
            "height": self.height,
            "negative_prompt": self.negative_prompt,
            "scheduler": self.scheduler,
            "dtype": self.dtype,
            "batch_size": self.batch_size,
        }


def scheduler_class(name: str) -> type[SchedulerMixin]:
    """The diffusers scheduler class called ``name``; ValueError when there is none."""
    import diffusers
    from diffusers import SchedulerMixin

    candidate = getattr(diffusers, name, None) if name.isidentifier() else None
    if not (isinstance(candidate, type) and issubclass(candidate, SchedulerMixin)):
        raise ValueError(f"scheduler {name!r} is not a diffusers scheduler class (e.g. 'DDIMScheduler')")
    return candidate


def choose_device(preferred: str | None = None) -> str:
    """``preferred`` if given and available, else the first available of cuda, mps, cpu."""
    import torch

    available = {
        "cuda": torch.cuda.is_available(),
        "mps": bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available(),
        "cpu": True,
    }
    if preferred is not None:
        if preferred not in available:
            raise ValueError(f"device {preferred!r} is not one of {', '.join(DEVICES)}")
        if not available[preferred]:
            raise ValueError(f"device {preferred!r} is not available on this machine")
        return preferred
    return next(d for d in DEVICES if available[d])


def resolve_dtype(spec: ModelSpec, device: str) -> torch.dtype:
    """The torch dtype for ``spec`` on ``device``: ``auto`` means float16 on CUDA, float32 elsewhere."""
    import torch

    if spec.dtype == "auto":
        return torch.float16 if device == "cuda" else torch.float32
    dtype: torch.dtype = getattr(torch, spec.dtype)
    return dtype


def _local_folder(source: str) -> Path | None:
    """The folder ``source`` names by the one rule (``generation/model_source.py``), None for a hub
    id. Which folders a job may load is decided before (``generation_job_run``)."""
    from generation.model_source import model_source_resolve

    resolved = model_source_resolve(source, any_folder=True)
    return Path(resolved.location) if resolved.kind == "local" else None


def _dtype_keyword() -> str:
    """``dtype`` on diffusers that resolve it (``torch_dtype`` is deprecated there), else ``torch_dtype``."""
    from diffusers.pipelines import pipeline_utils

    return "dtype" if hasattr(pipeline_utils, "_resolve_dtype") else "torch_dtype"


_PIPELINES: dict[tuple[Any, ...], Any] = {}
_PIPELINES_LOCK = threading.Lock()


def load_pipeline(spec: ModelSpec, device: str | None = None) -> Any:
    """Load ``spec``'s pipeline through ``DiffusionPipeline.from_pretrained`` once per process.

    Any pipeline family diffusers knows works (SD 1.x/2.x/XL/3.x, Flux, Kandinsky, ...). Cached by
    ``(spec.load_key(), device)``: specs that differ only in steps, size, guidance, negative prompt
    or batch size share one loaded pipeline. The scheduler is swapped by class name when
    ``spec.scheduler`` is set; the progress bar is turned off.
    """
    from diffusers import DiffusionPipeline

    device = choose_device(device)
    key = (spec.load_key(), device)
    with _PIPELINES_LOCK:
        if key in _PIPELINES:
            return _PIPELINES[key]
        source = spec.source
        folder = _local_folder(source)
        if folder is not None:
            if not (folder / "model_index.json").is_file():
                raise ValueError(f"{folder} is not a diffusers pipeline folder (no model_index.json)")
            if spec.revision is not None:
                raise ValueError("revision applies to hub models only, not to a local folder")
            source = str(folder)
        dtype_keyword = {_dtype_keyword(): resolve_dtype(spec, device)}
        pipe = DiffusionPipeline.from_pretrained(source, revision=spec.revision, **dtype_keyword)
        if spec.scheduler is not None:
            pipe.scheduler = scheduler_class(spec.scheduler).from_config(pipe.scheduler.config)
        pipe = pipe.to(device)
        pipe.set_progress_bar_config(disable=True)
        _PIPELINES[key] = pipe
        return pipe


def clear_pipeline_cache() -> None:
    """Forget every loaded pipeline (tests; a worker that must free memory)."""
    with _PIPELINES_LOCK:
        _PIPELINES.clear()


def derive_seed(base_seed: int, prompt_text: str, index: int) -> int:
    """The seed of image ``index`` of ``prompt_text`` in a job with ``base_seed``.

    seed = first 8 bytes of sha256(f"{base_seed}\\x1f{prompt_text}\\x1f{index}" as UTF-8), read as a
    big-endian unsigned integer, with the top bit cleared (0 <= seed <= 2**63 - 1). Pure arithmetic
    on the text, so it is the same on every run, machine and Python version. Lone surrogates in
    the text are encoded with ``surrogatepass`` so a broken prompt still gets a seed.
    """
    if isinstance(base_seed, bool) or not isinstance(base_seed, int):
        raise ValueError(f"base_seed must be an integer, got {base_seed!r}")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"index must be a whole number >= 0, got {index!r}")
    payload = f"{base_seed}\x1f{prompt_text}\x1f{index}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(payload).digest()[:8], "big") & MAX_SEED


@dataclass(frozen=True)
class ImageRequest:
    """One image to make: its prompt, its seed, and the caller's key for it (e.g. an item id).

    ``wanted=False``: a batch companion. It is computed with its batch (so the wanted images of that
    batch get the exact arithmetic they had when the batch was first made) but its image is not
    handed to ``on_image``, not counted, and its failure alone is not reported."""

    prompt: str
    seed: int
    key: Hashable = None
    wanted: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be a whole number in 0..2**63-1, got {self.seed!r}")


@dataclass
class GenerationReport:
    """What :func:`generate_images` did: images made, failures (request, reason), cancellation."""

    generated: int = 0
    failures: list[tuple[ImageRequest, str]] = field(default_factory=list)
    cancelled: bool = False
    final_batch_size: int = 0
    seconds: float = 0.0


ImageCallback = Callable[[ImageRequest, Image.Image], None]
FailureCallback = Callable[[ImageRequest, str], None]


def _is_out_of_memory(error: BaseException) -> bool:
    import torch

    return isinstance(error, torch.OutOfMemoryError)


def _pipeline_call(pipe: Any, spec: ModelSpec, batch: Sequence[ImageRequest]) -> list[Image.Image]:
    import torch

    # CPU generators: the noise then depends only on the seed, whatever the device (module docstring).
    generators = [torch.Generator(device="cpu").manual_seed(r.seed) for r in batch]
    negative = [spec.negative_prompt] * len(batch) if spec.negative_prompt is not None else None
    output = pipe(
        prompt=[r.prompt for r in batch],
        negative_prompt=negative,
        num_inference_steps=spec.steps,
        guidance_scale=spec.guidance,
        width=spec.width,
        height=spec.height,
        generator=generators,
        num_images_per_prompt=1,
        output_type="pil",
    )
    images = list(output.images)
    if len(images) != len(batch):
        raise RuntimeError(f"pipeline returned {len(images)} images for {len(batch)} prompts")
    return images


def split_batch(batch: Sequence[ImageRequest], size: int) -> list[list[ImageRequest]]:
    """``batch`` cut in halves (the first half the larger), and those in halves, until each part has
    at most ``size`` requests: the same parts an out-of-memory retry makes, so a chunk run at a
    smaller size after an out-of-memory error always splits the same way."""
    if len(batch) <= size:
        return [list(batch)]
    half = math.ceil(len(batch) / 2)
    return split_batch(batch[:half], size) + split_batch(batch[half:], size)


def generate_images(
    pipe: Any,
    spec: ModelSpec,
    requests: Iterable[ImageRequest | tuple[str, int]],
    *,
    on_image: ImageCallback,
    on_failure: FailureCallback | None = None,
    should_cancel: Callable[[], bool] | None = None,
    on_batch_end: Callable[[int], None] | None = None,
) -> GenerationReport:
    """Generate one image per wanted request, in request order, in fixed batches: request ``i``
    is always in chunk ``i // spec.batch_size`` with the same neighbours, whatever else is wanted.

    - A chunk with no wanted request is skipped (no pipeline call); a chunk with at least one runs
      whole, its companions (``wanted=False``) included, so each wanted image is computed in the
      batch composition it has in a full run (bit-identical pixels; see the module docstring).
    - ``on_image(request, image)`` is called as soon as each wanted image exists, so finished
      images are stored even if a later batch fails or the job is cancelled.
    - CUDA out-of-memory (``torch.OutOfMemoryError``) on a batch retries it in halves, down to
      one image; the smaller size is kept for the rest of the run, each later chunk cut in the same
      halves (:func:`split_batch`). Out of memory at one image is that request's failure.
    - Any other error of a pipeline call (ValueError, TypeError, RuntimeError) on a batch of
      several retries its wanted requests one by one, so one bad prompt fails alone; the error of
      a single request is reported through ``on_failure(request, reason)`` and the run goes on.
    - ``should_cancel()`` is asked before every chunk that runs; when it answers True the run
      stops and the report says ``cancelled`` (requests not reached are neither generated nor
      failed).
    - ``on_batch_end(n)`` is called after each chunk that ran, with the number of wanted images it
      made (for a caller that stores or counts per batch rather than per image).
    Tuples ``(prompt, seed)`` are accepted as requests (their key is their position).
    """
    started = time.perf_counter()
    pending = [
        r if isinstance(r, ImageRequest) else ImageRequest(prompt=r[0], seed=r[1], key=i)
        for i, r in enumerate(requests)
    ]
    report = GenerationReport(final_batch_size=spec.batch_size)

    def fail(request: ImageRequest, reason: str) -> None:
        report.failures.append((request, reason))
        if on_failure is not None:
            on_failure(request, reason)

    def run(batch: list[ImageRequest]) -> None:
        if not any(request.wanted for request in batch):
            return  # only companions here (a half of a split chunk): nothing to make
        try:
            images = _pipeline_call(pipe, spec, batch)
        except PIPELINE_ERRORS as error:
            if _is_out_of_memory(error):
                import torch

                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                if len(batch) == 1:
                    fail(batch[0], f"out of memory at batch size 1: {error}")
                    return
                half = math.ceil(len(batch) / 2)
                report.final_batch_size = min(report.final_batch_size, half)
                run(batch[:half])
                run(batch[half:])
                return
            if len(batch) == 1:
                fail(batch[0], f"{type(error).__name__}: {error}")
                return
            for request in batch:  # isolate the request(s) that make the call fail
                if request.wanted:
                    run([request])
            return
        for request, image in zip(batch, images, strict=True):
            if request.wanted:
                on_image(request, image)
                report.generated += 1

    for start in range(0, len(pending), spec.batch_size):
        chunk = pending[start : start + spec.batch_size]
        if not any(request.wanted for request in chunk):
            continue
        if should_cancel is not None and should_cancel():
            report.cancelled = True
            break
        before = report.generated
        for part in split_batch(chunk, report.final_batch_size):
            run(part)
        if on_batch_end is not None:
            on_batch_end(report.generated - before)
    report.seconds = time.perf_counter() - started
    return report


def _version(package: str) -> str | None:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return None


_FOLDER_HASHES: dict[tuple[Any, ...], dict[str, Any]] = {}


def folder_fingerprint(folder: Path | str) -> dict[str, Any]:
    """sha256 over a model folder's files (configs, tokenizer, weights), hidden paths skipped.

    digest = sha256 of the lines "relative/path<TAB>sha256(file)\\n" in sorted path order, so it
    changes when any file's content, name or presence changes. Cached per (path, sizes, mtimes).
    Returns {"sha256", "files", "bytes"}.
    """
    root = Path(folder).expanduser().resolve()
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    stats = tuple((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    key = (str(root), stats)
    if key not in _FOLDER_HASHES:
        total = hashlib.sha256()
        for path in files:
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for chunk in iter(functools.partial(handle.read, 1 << 20), b""):
                    digest.update(chunk)
            total.update(f"{path.relative_to(root).as_posix()}\t{digest.hexdigest()}\n".encode())
        _FOLDER_HASHES[key] = {
            "sha256": total.hexdigest(),
            "files": len(files),
            "bytes": sum(s[1] for s in stats),
        }
    return dict(_FOLDER_HASHES[key])


def _hub_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit of a hub model in the local cache, read from its snapshot path; None if unknown."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    cached = try_to_load_from_cache(repo_id, "model_index.json", revision=revision)
    if not isinstance(cached, str):
        return None
    parts = Path(cached).parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else None


def model_provenance(spec: ModelSpec, pipe: Any | None = None, device: str | None = None) -> dict[str, Any]:
    """Everything needed to say which model made an image and how.

    Returns a JSON-ready dict: ``source``, ``kind`` (``local`` or ``hub``), for a folder its
    ``folder_sha256``/``folder_files``/``folder_bytes`` (:func:`folder_fingerprint`), for a hub
    model ``revision`` (as asked) and ``resolved_revision`` (the cached commit, or None);
    ``pipeline_class`` and ``scheduler_class`` (from ``pipe`` when given, else from the folder's
    ``model_index.json``), ``safety_checker`` (whether the pipeline has one: it blacks out images
    it flags), ``device``, ``dtype`` (resolved), ``settings`` (:meth:`ModelSpec.settings`) and
    ``versions`` of diffusers, transformers, torch and Python.
    """
    import torch

    device = device or (
        str(pipe.device.type) if pipe is not None and hasattr(pipe, "device") else choose_device()
    )
    record: dict[str, Any] = {"source": spec.source, "spec": asdict(spec)}
    index: dict[str, Any] = {}
    folder = _local_folder(spec.source)
    if folder is not None:
        fingerprint = folder_fingerprint(folder)
        record.update(
            kind="local",
            folder_sha256=fingerprint["sha256"],
            folder_files=fingerprint["files"],
            folder_bytes=fingerprint["bytes"],
        )
        index_path = folder / "model_index.json"
        if index_path.is_file():
            index = json.loads(index_path.read_text(encoding="utf-8"))
    else:
        record.update(
            kind="hub", revision=spec.revision, resolved_revision=_hub_commit(spec.source, spec.revision)
        )
    if pipe is not None:
        record["pipeline_class"] = type(pipe).__name__
        record["scheduler_class"] = type(pipe.scheduler).__name__ if hasattr(pipe, "scheduler") else None
        record["safety_checker"] = getattr(pipe, "safety_checker", None) is not None
    else:
        record["pipeline_class"] = index.get("_class_name")
        scheduler = index.get("scheduler")
        record["scheduler_class"] = spec.scheduler or (scheduler[1] if isinstance(scheduler, list) else None)
        checker = index.get("safety_checker")
        record["safety_checker"] = bool(isinstance(checker, list) and checker[0] is not None)
    record["device"] = device
    record["dtype"] = str(resolve_dtype(spec, device)).removeprefix("torch.")
    record["settings"] = spec.settings()
    record["versions"] = {
        "diffusers": _version("diffusers"),
        "transformers": _version("transformers"),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    return record
