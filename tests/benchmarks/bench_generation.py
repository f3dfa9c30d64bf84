"""Images per second of the generation job runner (Django job, Celery task body, PNG encode,
storage and provenance) against a plain diffusers loop over the same prompts and seeds, in one run.

    .venv/bin/python tests/benchmarks/bench_generation.py [--model FOLDER] [--images 16]
        [--steps 2] [--size 64]

Without --model it builds the tiny random Stable Diffusion pipeline of the tests. It prints a
line per batch size with three rates (the best, median and mean of ``--repeats`` runs, the sides rotating
which goes first): the plain loop that only calls the pipeline ("plain"), the same loop writing each
image to a PNG file as a researcher's script does ("plain+png"), and the job runner; and the
runner's ratio to each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
DATA = tempfile.mkdtemp(prefix="bench-generation-")
os.environ["WORKBENCH_DATA_DIR"] = DATA
os.environ["DATABASE_URL"] = f"sqlite:///{DATA}/bench.sqlite3"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

import django  # noqa: E402

django.setup()

import torch  # noqa: E402
from django.core.management import call_command  # noqa: E402

from annotations.models import User  # noqa: E402
from annotations.services.studies import study_create  # noqa: E402
from generation.pipelines import ModelSpec, clear_pipeline_cache, derive_seed, load_pipeline  # noqa: E402
from generation.prompts.base import PromptSet, PromptSpec  # noqa: E402
from generation.services import generation_job_create, generation_job_run  # noqa: E402
from protocols.schema import load_preset  # noqa: E402


def plain_loop(
    pipe,
    spec: ModelSpec,
    prompts: list[str],
    seeds: list[int],
    out: Path | None = None,
) -> float:
    """The loop one writes without the workbench; with ``out``, each image is saved there as a PNG."""
    started = time.perf_counter()
    for start in range(0, len(prompts), spec.batch_size):
        batch, batch_seeds = prompts[start : start + spec.batch_size], seeds[start : start + spec.batch_size]
        images = pipe(
            prompt=batch,
            num_inference_steps=spec.steps,
            guidance_scale=spec.guidance,
            width=spec.width,
            height=spec.height,
            generator=[torch.Generator("cpu").manual_seed(s) for s in batch_seeds],
        ).images
        if out is not None:
            for offset, image in enumerate(images):
                image.save(out / f"{start + offset:05d}.png")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--device")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--encoder-threads",
        type=int,
        default=None,
        help="PNG encoder threads of the runner (default: its own choice, none on the CPU)",
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if args.model is None:
        from tests.fixtures.tiny_sd import save_tiny_sd

        args.model = str(save_tiny_sd(Path(DATA) / "tiny-sd"))
    owner = User.objects.create(username="bench", role=User.Role.RESEARCHER)
    prompts = [f"a photo of object number {i}" for i in range(args.images)]
    prompt_set = PromptSet(name="bench", paper="", prompts=tuple(PromptSpec(text=p) for p in prompts))
    print(
        f"model={args.model} images={args.images} steps={args.steps} size={args.size} "
        f"torch={torch.__version__} encoder_threads={args.encoder_threads} device={args.device or 'auto'}"
    )
    for batch_size in (1, 4):
        spec = ModelSpec(
            source=args.model,
            steps=args.steps,
            width=args.size,
            height=args.size,
            guidance=1.0,
            batch_size=batch_size,
        )
        pipe = load_pipeline(spec, args.device)
        seeds = [derive_seed(0, p, 0) for p in prompts]
        plain_loop(pipe, spec, prompts[:batch_size], seeds[:batch_size])  # warm up

        def runner(repeat: int, spec: ModelSpec = spec) -> float:
            study = study_create(
                owner=owner,
                name=f"bench {spec.batch_size} {repeat}",
                protocol=load_preset("object-attributes"),
            )
            job = generation_job_create(
                study=study, prompt_set=prompt_set, spec=spec, user=owner, enqueue=False
            )
            started = time.perf_counter()
            job = generation_job_run(job_id=job.pk, device=args.device, encoder_threads=args.encoder_threads)
            assert job.generated == args.images, job.error
            return time.perf_counter() - started

        out = Path(tempfile.mkdtemp(prefix="plain-", dir=DATA))
        plain_runs: list[float] = []
        saving_runs: list[float] = []
        runner_runs: list[float] = []

        def plain(_repeat: int, pipe=pipe, spec: ModelSpec = spec, seeds: list[int] = seeds) -> float:
            return plain_loop(pipe, spec, prompts, seeds)

        def saving(
            _repeat: int, pipe=pipe, spec: ModelSpec = spec, seeds: list[int] = seeds, out: Path = out
        ) -> float:
            return plain_loop(pipe, spec, prompts, seeds, out)

        sides: list[tuple[list[float], Callable[[int], float]]] = [
            (plain_runs, plain),
            (saving_runs, saving),
            (runner_runs, runner),
        ]
        for repeat in range(args.repeats):  # rotate who goes first, so drifting load hits every side
            for runs, side in sides[repeat % 3 :] + sides[: repeat % 3]:
                runs.append(side(repeat))
        for label, pick in (("best", min), ("median", statistics.median), ("mean", statistics.mean)):
            plain_rate, saving_rate, runner_rate = (
                args.images / pick(runs) for runs in (plain_runs, saving_runs, runner_runs)
            )
            print(
                f"batch {batch_size} {label} of {args.repeats}: plain {plain_rate:.2f} img/s, plain+png "
                f"{saving_rate:.2f} img/s, runner {runner_rate:.2f} img/s; runner/plain "
                f"{runner_rate / plain_rate:.3f} (overhead {100 * (1 - runner_rate / plain_rate):.1f}%), "
                f"runner/plain+png {runner_rate / saving_rate:.3f} "
                f"(overhead {100 * (1 - runner_rate / saving_rate):.1f}%)",
                flush=True,
            )
        clear_pipeline_cache()


if __name__ == "__main__":
    main()
