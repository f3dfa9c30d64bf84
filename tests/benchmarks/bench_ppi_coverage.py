"""Coverage and width of the machine + human sample (PPI++) intervals on ViSAGe's released annotations.

Run: python tests/benchmarks/bench_ppi_coverage.py [--reps 1000] [--data /work/shared/data]

Truth: ViSAGe's ``image_annotations_full_set.csv``; one item per (image, attribute) shown ("none of the
above" left out), Y = 1 when at least half of the showings of that pair were marked present (the people's
label). Machine labellers are simulated with error rates that differ by identity: identity k gets a
false-negative rate in [0.1, 0.5] and a false-positive rate in [0.01, 0.10] (drawn once, seeded), so the
machine-only prevalence is biased, and differently for different identities. A second labeller with its
own rates stands in for "another labeller" in the active design.

For each design (uniform; stratified by identity, proportional allocation; active: Poisson sampling with
pi from the two labellers' disagreement, mix 0.5) and each human sample size n (100, 300, 1000), over
``reps`` repetitions (fresh machine labels and a fresh sample each), it reports:

- the coverage of the 95% PPI++ interval of the overall prevalence and of the difference between two
  halves of the identities (A: the first half by name, B: the rest);
- the coverage of the human-only interval (same design, lambda 0) and of the machine-only CLT interval
  (mean of f +- 1.96 s_f / sqrt(N): its bias is what PPI corrects);
- the mean width ratio PPI / human-only and the mean gain in effective sample size.

Pure numpy through ``metrics/ppi.py`` and ``metrics/validation_sampling.py``: no Django, no database.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections import defaultdict
from collections.abc import Hashable
from pathlib import Path
from typing import Any, cast

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from metrics.ppi import ppi_difference, ppi_mean, z_value
from metrics.validation_sampling import active_probabilities, allocate_proportional

SIZES = (100, 300, 1000)
DESIGNS = ("uniform", "stratified", "active")


def load(data: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Y per (image, attribute) pair, its identity index, and the identity names."""
    marks: dict[tuple[str, str], list[bool]] = defaultdict(list)
    identity_of: dict[tuple[str, str], str] = {}
    with (data / "visage" / "image_annotations_full_set.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["attribute"] == "none of the above":
                continue
            key = (row["img"], row["attribute"])
            marks[key].append(row["present"] == "yes")
            identity_of[key] = row["identity"]
    keys = sorted(marks)
    names = sorted(set(identity_of.values()))
    index = {name: i for i, name in enumerate(names)}
    y = np.array([2 * sum(marks[k]) >= len(marks[k]) for k in keys], dtype=float)
    ident = np.array([index[identity_of[k]] for k in keys])
    return y, ident, names


def labeller(rng: np.random.Generator, n_identities: int) -> tuple[np.ndarray, np.ndarray]:
    """Per identity (false-negative rate, false-positive rate)."""
    return rng.uniform(0.1, 0.5, n_identities), rng.uniform(0.01, 0.10, n_identities)


def labels(
    rng: np.random.Generator, y: np.ndarray, ident: np.ndarray, rates: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    fn, fp = rates
    u = rng.random(y.size)
    return np.where(y == 1, u >= fn[ident], u < fp[ident]).astype(float)


def draw(
    design: str, rng: np.random.Generator, n: int, ident: np.ndarray, f: np.ndarray, g: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sampled indices and their inclusion probabilities under ``design``."""
    n_all = ident.size
    if design == "uniform":
        chosen = np.sort(rng.choice(n_all, size=n, replace=False))
        return chosen, np.full(chosen.size, n / n_all)
    if design == "stratified":
        population: dict[Hashable, int] = {
            int(k): int(c) for k, c in zip(*np.unique(ident, return_counts=True), strict=True)
        }
        allocation = allocate_proportional(population, n)
        parts, chances = [], []
        for k, a in allocation.items():
            if a:
                members = np.flatnonzero(ident == cast("int", k))
                parts.append(rng.choice(members, size=a, replace=False))
                chances.append(np.full(a, a / population[k]))
        return np.concatenate(parts), np.concatenate(chances)
    scores: dict[Hashable, float] = {i: float(v) for i, v in enumerate(f != g)}
    pi_map = active_probabilities(scores, n, mix=0.5)
    pi = np.array([pi_map[i] for i in range(n_all)])
    chosen = np.flatnonzero(rng.random(n_all) < pi)
    return chosen, pi[chosen]


def run(y: np.ndarray, ident: np.ndarray, names: list[str], reps: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(20260127)
    first = labeller(rng, len(names))
    second = labeller(rng, len(names))
    half = np.array([i < len(names) // 2 for i in range(len(names))])[ident]
    truth, truth_diff = float(y.mean()), float(y[half].mean() - y[~half].mean())
    z = z_value()
    results = []
    for design in DESIGNS:
        for n in SIZES:
            hits = {"ppi": 0, "human": 0, "machine": 0, "ppi_diff": 0, "human_diff": 0}
            ratios, gains, sizes = [], [], []
            for _ in range(reps):
                f = labels(rng, y, ident, first)
                g = labels(rng, y, ident, second)
                chosen, pi = draw(design, rng, n, ident, f, g)
                sizes.append(chosen.size)
                est = ppi_mean(y[chosen], f[chosen], f, pi=pi, proportion=True)
                assert est.ppi.low is not None and est.ppi.high is not None
                assert est.human_only.low is not None and est.human_only.high is not None
                hits["ppi"] += est.ppi.low <= truth <= est.ppi.high
                hits["human"] += est.human_only.low <= truth <= est.human_only.high
                half_m = z * float(f.std(ddof=1)) / np.sqrt(f.size)
                hits["machine"] += abs(float(f.mean()) - truth) <= half_m
                human_width = est.human_only.high - est.human_only.low
                if human_width > 0:
                    ratios.append((est.ppi.high - est.ppi.low) / human_width)
                if est.gain is not None:
                    gains.append(est.gain)
                in_a = half[chosen]
                a = ppi_mean(y[chosen][in_a], f[chosen][in_a], f[half], pi=pi[in_a], proportion=True)
                b = ppi_mean(y[chosen][~in_a], f[chosen][~in_a], f[~half], pi=pi[~in_a], proportion=True)
                diff = ppi_difference(a, b, proportion=True)
                if diff.ppi.low is not None and diff.ppi.high is not None:
                    hits["ppi_diff"] += diff.ppi.low <= truth_diff <= diff.ppi.high
                if diff.human_only.low is not None and diff.human_only.high is not None:
                    hits["human_diff"] += diff.human_only.low <= truth_diff <= diff.human_only.high
            results.append(
                {
                    "design": design,
                    "n": n,
                    "mean_sample": float(np.mean(sizes)),
                    **{f"coverage_{k}": v / reps for k, v in hits.items()},
                    "width_ratio": float(np.mean(ratios)) if ratios else float("nan"),
                    "gain": float(np.mean(gains)) if gains else float("nan"),
                }
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    args = parser.parse_args()
    started = time.perf_counter()
    y, ident, names = load(args.data)
    print(f"{y.size} items (image, attribute), {len(names)} identities, prevalence {y.mean():.4f}")
    print(
        "| design | n (mean drawn) | PPI | human-only | machine-only | PPI diff A-B | human diff A-B "
        "| width PPI / human | ESS gain |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in run(y, ident, names, args.reps):
        print(
            f"| {r['design']} | {r['n']} ({r['mean_sample']:.0f}) | {r['coverage_ppi']:.3f} | "
            f"{r['coverage_human']:.3f} | {r['coverage_machine']:.3f} | {r['coverage_ppi_diff']:.3f} | "
            f"{r['coverage_human_diff']:.3f} | {r['width_ratio']:.3f} | {r['gain']:.2f} |"
        )
    print(f"{args.reps} repetitions each, {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
