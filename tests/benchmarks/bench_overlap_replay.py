"""Overlap policies replayed on real data: ViSAGe's released image annotations and SeeGULL's pools
(docs/overlap.md; figures in docs/benchmarks.md, "Overlap policies replayed on real data").

Run: python tests/benchmarks/bench_overlap_replay.py [--data /work/shared/data] [--out DIR] [--orders 5]

Every figure is what ``manage.py replay_overlap FILE --policy POLICY --json`` prints (run here through
``call_command``) on a JSONL file in the workbench's annotation import format that this script writes
to ``--out`` (kept, so each command can be run again by hand). No database is touched.

ViSAGe (``visage/image_annotations_full_set.csv``): an item is one (image, attribute) shown, its
question ``present`` answered ``yes``/``no`` ("none of the above" rows left out: always "no"). The
raters are anonymous and the file's ``worker_id`` is a task, so the annotator of a row is the
importer's pseudo-rater ``<task>-r<j>``: the j-th screen of that (task, image) in file order
(annotations/interchange/visage_import.py). An item's judgements are in file order.

- ``visage-first3.jsonl``: the items with at least three judgements, each with its first three (the
  issue's "items with at least three judgements, MAX 3"): what ``fixed:3`` collected, so the full
  consensus is the majority of those three and ``agree:2/3`` keeps it by construction.
- ``visage-all.jsonl``: the same items with all their judgements (3 to 30), MAX 3 still: the
  replayed label against the majority of every judgement of the item (ties left out).

SeeGULL (``seegull/stereotypes_global_v1.csv``: 7,130 rows, each 3 in-region and 3 North American
raters, votes given as counts of stereo / non-stereo / unsure per pool): the counts do not say in
which order the votes came, so each pool's votes are put in ``--orders`` seeded random orders (seed
0, 1, ...), in-region pool first; figures are the mean and range over the orders. The annotators are
the positions ``in-region-1..3``, ``na-1..3`` (anonymous, as in the release), so Dawid-Skene runs with
one pooled confusion.

- ``seegull-region``: the in-region pool only (3 votes): full consensus = majority of the three;
- ``seegull-both``: both pools, in-region first (6 votes): full consensus = majority of the six (3-3
  and 2-2-2 ties left out).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("WORKBENCH_DATA_DIR", tempfile.mkdtemp(prefix="bench-overlap-"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402

NONE_LABEL = "none of the above"
POOLED = ["--confusion", "pooled"]
# P = 0.999999 is never reached here: every item takes MAX, labelled by Dawid-Skene (a reference row:
# how often the model's label of every judgement is the majority's).
VISAGE_RUNS: list[tuple[str, list[str]]] = [
    ("fixed:3", []),
    ("agree:2/3", []),
    ("posterior:0.95/3", POOLED),
    ("posterior:0.95/3", [*POOLED, "--fit", "all"]),
    ("posterior:0.94/3", POOLED),
    ("posterior:0.96/3", POOLED),
    ("posterior:0.95/3", ["--confusion", "full"]),
    ("posterior:0.95/3", ["--confusion", "full", "--fit", "all"]),
    ("posterior:0.95/3", ["--confusion", "one-coin"]),
]
VISAGE_ALL_RUNS = VISAGE_RUNS[:3]
SEEGULL_RUNS: dict[str, list[tuple[str, list[str]]]] = {
    "seegull-region": [
        ("agree:2/3", []),
        ("posterior:0.95/3", POOLED),
        ("posterior:0.95/3", [*POOLED, "--fit", "all"]),
        ("posterior:0.999999/3", [*POOLED, "--fit", "all"]),
    ],
    "seegull-both": [
        ("fixed:3", []),
        ("agree:2/3", []),
        ("agree:3/6", []),
        ("posterior:0.95/6", POOLED),
        ("posterior:0.95/6", [*POOLED, "--fit", "all"]),
        ("posterior:0.999999/6", [*POOLED, "--fit", "all"]),
    ],
}


def visage_records(path: Path) -> list[dict[str, Any]]:
    """One record per (image, attribute) showing, in file order, with the importer's pseudo-raters."""
    records: list[dict[str, Any]] = []
    screens: Counter[tuple[str, str]] = Counter()
    open_screen: tuple[str, str] | None = None
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            screen = (row["worker_id"].strip(), row["img"].strip())
            if open_screen != screen:
                screens[screen] += 1
                open_screen = screen
            if row["attribute"].strip() == NONE_LABEL:
                open_screen = None  # the next row opens a new screen, even of the same (task, image)
                continue
            records.append(
                {
                    "item": f"{screen[1]}|{row['attribute'].strip()}",
                    "annotator": f"{screen[0]}-r{screens[screen]}",
                    "question": "present",
                    "value": row["present"].strip().lower(),
                }
            )
    return records


def at_least(records: list[dict[str, Any]], n: int, keep: int | None) -> list[dict[str, Any]]:
    """The records of items with at least ``n`` judgements; each item's first ``keep`` (None: all)."""
    counts = Counter(record["item"] for record in records)
    seen: Counter[str] = Counter()
    kept = []
    for record in records:
        if counts[record["item"]] < n:
            continue
        seen[record["item"]] += 1
        if keep is None or seen[record["item"]] <= keep:
            kept.append(record)
    return kept


def seegull_records(path: Path, *, both: bool, seed: int) -> list[dict[str, Any]]:
    """The votes of SeeGULL v1 (two header rows) as judgements: each pool's votes in a random order
    (``seed``), in-region first; items one after another."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header = rows[1]
    pools = [("in-region", ("region_stereo", "region_nonstereo", "region_unsure"))]
    if both:
        pools.append(("na", ("NA_stereo", "NA_nonstereo", "us_unsure")))
    for number, row in enumerate(rows[2:], start=3):
        cells = dict(zip(header, row, strict=True))
        item = f"{number}:{cells['identity']}|{cells['attribute']}"
        for pool, columns in pools:
            votes = [
                value
                for value, column in zip(("stereo", "non-stereo", "unsure"), columns, strict=True)
                for _ in range(int(cells[column]))
            ]
            rng.shuffle(votes)
            records += [
                {"item": item, "annotator": f"{pool}-{j}", "question": "stereotype", "value": vote}
                for j, vote in enumerate(votes, start=1)
            ]
    return records


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def shown(policy: str, extra: list[str]) -> str:
    return " ".join(["--policy", policy, *extra])


def replay(path: Path, policy: str, extra: list[str]) -> tuple[dict[str, Any], float]:
    out = io.StringIO()
    start = time.perf_counter()
    call_command("replay_overlap", str(path), "--policy", policy, "--json", *extra, stdout=out)
    return json.loads(out.getvalue()), time.perf_counter() - start


def row(label: str, report: dict[str, Any], seconds: float) -> str:
    same = report["same_as_full_consensus"]
    return (
        f"| {label} | {report['items']:,} | {report['judgements_available']:,} | "
        f"{report['judgements_used']:,} | {report['saved_share']:.1%} | "
        f"{'-' if same is None else f'{same:.2%}'} ({report['items_with_full_consensus']:,}) | "
        f"{by_label(report)} | {seconds:.1f} s |"
    )


def by_label(report: dict[str, Any]) -> str:
    """Kept of each full-consensus label: "no 18,361/18,361, yes 825/1,000"."""
    return ", ".join(f"{row['label']} {row['same']:,}/{row['items']:,}" for row in report["same_by_label"])


HEADER = (
    "| replay | items | available | used | saved | same as full consensus (items with one) | "
    "kept, by label | time |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    parser.add_argument("--out", type=Path, help="where the JSONL files go (default: a new temporary folder)")
    parser.add_argument("--orders", type=int, default=5, help="SeeGULL: random orders inside each pool")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="overlap-replay-"))
    out.mkdir(parents=True, exist_ok=True)

    records = visage_records(args.data / "visage" / "image_annotations_full_set.csv")
    files = {
        "visage-first3": write(out / "visage-first3.jsonl", at_least(records, 3, 3)),
        "visage-all": write(out / "visage-all.jsonl", at_least(records, 3, None)),
    }
    print(
        f"ViSAGe: {len(records):,} judgements of {len({r['item'] for r in records}):,} items; files in {out}"
    )
    print(HEADER)
    for name, path in files.items():
        for policy, extra in VISAGE_RUNS if name == "visage-first3" else VISAGE_ALL_RUNS:
            report, seconds = replay(path, policy, extra)
            print(row(f"{name}.jsonl `{shown(policy, extra)}`", report, seconds))

    seegull = args.data / "seegull" / "stereotypes_global_v1.csv"
    print(
        f"\nSeeGULL v1 ({seegull.name}), {args.orders} orders inside each pool (seeds 0..{args.orders - 1}):"
    )
    print(
        "| replay | items | available | used (mean) | saved: mean (min-max) | same: mean (min-max) | "
        "items with a full consensus | kept, by label (order 0) | time per order |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    for name, runs in SEEGULL_RUNS.items():
        paths = [
            write(
                out / f"{name}-order{seed}.jsonl",
                seegull_records(seegull, both=name.endswith("both"), seed=seed),
            )
            for seed in range(args.orders)
        ]
        for policy, extra in runs:
            start = time.perf_counter()
            reports = [replay(path, policy, extra)[0] for path in paths]
            seconds = (time.perf_counter() - start) / len(paths)
            saved = [r["saved_share"] for r in reports]
            same = [r["same_as_full_consensus"] for r in reports]
            used = sum(r["judgements_used"] for r in reports) / len(reports)
            print(
                f"| {name}-order*.jsonl `{shown(policy, extra)}` | {reports[0]['items']:,} | "
                f"{reports[0]['judgements_available']:,} | {used:,.0f} | {sum(saved) / len(saved):.1%} "
                f"({min(saved):.1%}-{max(saved):.1%}) | {sum(same) / len(same):.2%} "
                f"({min(same):.2%}-{max(same):.2%}) | {reports[0]['items_with_full_consensus']:,} | "
                f"{by_label(reports[0])} | {seconds:.1f} s |"
            )


if __name__ == "__main__":
    main()
