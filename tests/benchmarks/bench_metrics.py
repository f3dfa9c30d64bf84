"""Timing of the heaviest metrics on synthetic, seeded labels. Run: python tests/benchmarks/bench_metrics.py

1. SODA: 3 models x 5 objects x 9 conditions x 20 images x 8 attributes, every metric, 1000 permutations
   per (model, object, condition) BDS test.
2. BiasConnect: IS matrix for 26 occupations x 8 axes x 48 images per prompt.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from metrics.biasconnect import AxisImage, intersectional_sensitivity
from metrics.soda import SodaImage, soda_report

CONDITIONS = [
    "base",
    "age:young_adults",
    "age:middle_aged",
    "age:elderly",
    "gender:men",
    "gender:women",
    "ethnicity:white",
    "ethnicity:black",
    "ethnicity:asian",
]


def soda_images(rng: np.random.Generator) -> list[SodaImage]:
    values = [f"v{i}" for i in range(6)]
    return [
        SodaImage(
            f"model{m}", f"object{o}", c, {f"attr{a}": values[rng.integers(0, 3 + a % 4)] for a in range(8)}
        )
        for m in range(3)
        for o in range(5)
        for c in CONDITIONS
        for _ in range(20)
    ]


def axis_images(rng: np.random.Generator, options: dict[str, list[str]]) -> list[AxisImage]:
    axes = list(options)
    conditions = ["base"] + [f"{x}:{v}" for x in axes for v in options[x]]
    return [
        AxisImage(
            c, {y: options[y][rng.integers(0, len(options[y]))] for y in axes}, bool(rng.random() > 0.02)
        )
        for c in conditions
        for _ in range(48)
    ]


def main() -> None:
    rng = np.random.default_rng(2026)
    images = soda_images(rng)
    start = time.perf_counter()
    reports = soda_report(images, n_permutations=1000, seed=0)
    soda_s = time.perf_counter() - start
    n_tests = sum(len(r.permutation) for r in reports)
    print(f"soda: {len(images)} images, {n_tests} BDS permutation tests x 1000: {soda_s:.2f} s")

    options = {
        "gender": ["male", "female"],
        "age": ["young", "middle", "old"],
        "ethnicity": ["white", "black", "asian", "indian", "latino"],
        "body": ["slim", "average", "large"],
        "environment": ["indoor", "outdoor"],
        "clothing": ["formal", "casual"],
        "emotion": ["happy", "sad", "neutral"],
        "disability": ["fit", "disabled"],
    }
    occupations = [axis_images(rng, options) for _ in range(26)]
    start = time.perf_counter()
    matrices = [intersectional_sensitivity(imgs, options, ordinal_axes=["age"]) for imgs in occupations]
    is_s = time.perf_counter() - start
    n_images = sum(len(i) for i in occupations)
    print(f"biasconnect: {len(matrices)} IS matrices ({n_images} images, 8 axes): {is_s:.2f} s")


if __name__ == "__main__":
    main()
