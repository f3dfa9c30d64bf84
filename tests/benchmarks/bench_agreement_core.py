"""Time the pure agreement core: alpha + 1000-resample bootstrap on 100,000 items x 5 coders.

Run: ``.venv/bin/python -m tests.benchmarks.bench_agreement_core [--items N] [--coders M] [--resamples B]``
Prints, per level, the seconds for the point estimate and for the bootstrap, and the peak memory
traced by ``tracemalloc`` (numpy reports its buffers to it) plus the process's peak RSS. No Django,
no database: this is the floor under the end-to-end ``bench_agreement.py`` of issue 6.

The data imitate a 5-point likert question: each coder copies a hidden true value with probability
0.7 and answers uniformly otherwise, and 10% of judgements are missing.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import tracemalloc

import numpy as np

from metrics.agreement import LEVELS, alpha_with_bootstrap, krippendorff_alpha


def simulated_matrix(items: int, coders: int, *, seed: int = 0) -> np.ndarray:
    """coders x items float matrix of likert points 1..5 with 10% nan."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, items)
    matrix = np.where(rng.random((coders, items)) < 0.7, truth, rng.integers(1, 6, (coders, items)))
    matrix = matrix.astype(np.float64)
    matrix[rng.random(matrix.shape) < 0.1] = np.nan
    return matrix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--coders", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args(argv)

    matrix = simulated_matrix(args.items, args.coders)
    print(f"matrix: {args.coders} coders x {args.items} items, {args.resamples} resamples")
    total_start = time.perf_counter()
    for level in LEVELS:
        tracemalloc.start()
        start = time.perf_counter()
        point = krippendorff_alpha(matrix, level=level)
        point_s = time.perf_counter() - start
        start = time.perf_counter()
        result = alpha_with_bootstrap(matrix, level=level, n_resamples=args.resamples, seed=0)
        boot_s = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"{level:>8}: alpha={point.value:.4f}  95% CI [{result.ci_low:.4f}, {result.ci_high:.4f}]"
            f"  alpha {point_s:.2f} s  alpha+bootstrap {boot_s:.2f} s  traced peak {peak / 2**20:.0f} MiB"
        )
    total_s = time.perf_counter() - total_start
    # ru_maxrss is KiB on Linux.
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"all levels: {total_s:.2f} s, process peak RSS {rss_mib:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
