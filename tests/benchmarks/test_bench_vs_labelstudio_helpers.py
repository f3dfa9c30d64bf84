"""The Label Studio comparison's pure helpers: percentiles, the over-fill count and the table."""

from __future__ import annotations

import math

from tests.benchmarks.bench_vs_labelstudio import Result, format_table, over_filled, percentile


def test_percentile_is_the_nearest_rank_and_nan_when_empty() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 100 .. 1, unordered on purpose
    assert percentile(values, 50) == 51.0  # round(0.5 * 99) = 50 (banker's rounding) -> the 51st
    assert percentile(values, 99) == 99.0
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 100.0
    assert percentile([0.2], 99) == 0.2
    assert math.isnan(percentile([], 50))


def test_over_filled_counts_items_beyond_the_overlap_only() -> None:
    assert over_filled({1: 3, 2: 4, 3: 1, 4: 6}, overlap=3) == 2
    assert over_filled({}, overlap=3) == 0


def test_the_table_pools_rounds_and_gives_the_ratio_to_the_baseline() -> None:
    results = [
        Result("labelstudio", 8, seconds=10, cycles=80, latencies=[0.1] * 160),
        Result("labelstudio", 8, seconds=10, cycles=120, latencies=[0.3] * 240),
        Result("workbench-sqlite", 8, seconds=20, cycles=2000, latencies=[0.01] * 4000, errors=["claim 500"]),
    ]
    table = format_table(results, "labelstudio", {"labelstudio": (2, 5), "workbench-sqlite": (0, 3)})
    lines = table.splitlines()
    assert lines[0].split() == [
        "server",
        "N",
        "cycles/s",
        "(min-max)",
        "p50/p95/p99",
        "ms",
        "p99/p50",
        "errors",
    ]
    ls_line = next(line for line in lines if line.startswith("labelstudio "))
    assert ls_line.split()[2:4] == ["10.0", "8.0-12.0"]  # 200 cycles in 20 s; rounds of 8 and 12/s
    assert ls_line.split()[4:6] == ["300/300/300", "1.0"]  # 240 of the 400 requests took 300 ms
    wb_line = next(line for line in lines if line.startswith("workbench-sqlite"))
    assert wb_line.split()[2] == "100.0" and wb_line.split()[-1] == "1"
    assert "ratio workbench-sqlite / labelstudio at N=8: 10.0x" in lines
    assert "labelstudio: over-filled items 2, most answers on one item 5" in lines
