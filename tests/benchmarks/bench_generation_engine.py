"""Images per second of ``generate_images`` against a plain diffusers loop, same prompts and seeds.

Run: ``HF_HUB_OFFLINE=1 python -m tests.benchmarks.bench_generation_engine [--model FOLDER_OR_HUB_ID]``.
Without ``--model`` it builds the tiny random Stable Diffusion pipeline (64x64, 2 steps, CPU).
Both sides make the same images (same prompts, one CPU generator per image with the same seed)
at batch sizes 1 and 4; each measurement is the best of ``--repeats`` runs after one warm-up, and
the side that goes first alternates so background load hits both alike. Prints images/s and engine/plain.
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from generation.pipelines import ImageRequest, ModelSpec, derive_seed, generate_images, load_pipeline

PROMPTS = [
    "a photo of a nurse",
    "a photo of a doctor",
    "an Ethiopian person",
    "car, one product only, no people",
    "A photo of a female chef",
    "a portrait of Mexican person",
    "People who are farmers",
    "photo of a rude person",
]


def plain_loop(pipe: Any, spec: ModelSpec, requests: list[ImageRequest]) -> int:
    """The reference: diffusers called directly over the same batches, generators and settings."""
    made = 0
    for start in range(0, len(requests), spec.batch_size):
        batch = requests[start : start + spec.batch_size]
        output = pipe(
            prompt=[r.prompt for r in batch],
            negative_prompt=None,
            num_inference_steps=spec.steps,
            guidance_scale=spec.guidance,
            width=spec.width,
            height=spec.height,
            num_images_per_prompt=1,
            output_type="pil",
            generator=[torch.Generator(device="cpu").manual_seed(r.seed) for r in batch],
        )
        made += len(output.images)
    return made


def engine(pipe: Any, spec: ModelSpec, requests: list[ImageRequest]) -> int:
    made: list[int] = []
    report = generate_images(pipe, spec, requests, on_image=lambda request, image: made.append(1))
    assert not report.failures, report.failures
    return len(made)


def best_rate(run: Callable[[], int], repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        count = run()
        rates.append(count / (time.perf_counter() - started))
    return max(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", help="a pipeline folder or hub id (default: the tiny random pipeline)")
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        source = args.model
        if source is None:
            from tests.fixtures.tiny_sd import save_tiny_sd

            source = str(save_tiny_sd(Path(scratch) / "tiny-sd"))
        requests = [
            ImageRequest(prompt=PROMPTS[i % len(PROMPTS)], seed=derive_seed(7, PROMPTS[i % len(PROMPTS)], i))
            for i in range(args.images)
        ]
        print(
            f"model={args.model or 'tiny random SD'} images={args.images} steps={args.steps} "
            f"size={args.size} threads={torch.get_num_threads()}"
        )
        for batch_size in (1, 4):
            spec = ModelSpec(
                source=source,
                steps=args.steps,
                width=args.size,
                height=args.size,
                guidance=5.0,
                batch_size=batch_size,
            )
            pipe = load_pipeline(spec, args.device)
            plain_loop(pipe, spec, requests[:batch_size])  # warm-up
            engine(pipe, spec, requests[:batch_size])
            plain_rates: list[float] = []
            engine_rates: list[float] = []
            for repeat in range(args.repeats):  # alternate who goes first so load drifts hit both sides
                sides = [(plain_rates, plain_loop), (engine_rates, engine)]
                for rates, side in sides if repeat % 2 == 0 else sides[::-1]:
                    rates.append(best_rate(functools.partial(side, pipe, spec, requests), 1))
            plain, mine = max(plain_rates), max(engine_rates)
            print(
                f"batch_size={batch_size} device={pipe.device.type}: plain {plain:.2f} img/s, "
                f"engine {mine:.2f} img/s, engine/plain = {mine / plain:.3f}"
            )


if __name__ == "__main__":
    main()
