"""Agreement within and between rater pools on SeeGULL's released table (issue "Whose stereotype?", point 5).

Run: ``.venv/bin/python -m tests.benchmarks.bench_cross_pools_seegull [--table PATH] [--resamples B]
[--seed S] [--unsure-as-value]`` (default table: /work/shared/data/seegull/stereotypes_global_v2.csv).
No Django, no database: the pure functions the agreement report uses (``metrics.agreement``,
``metrics.cross_replication``) on the table's counts.

SeeGULL (Jha et al., ACL 2023) gives, per (identity, attribute) pair, how many in-region raters and how
many North-American raters called it a stereotype, not a stereotype, or were unsure: the columns
``region_stereo``, ``region_nonstereo``, ``region_unsure`` and ``NA_stereo``, ``NA_nonstereo``,
``NA_unsure`` (v1 calls the last ``us_unsure`` and has a second header row above the names). Usually
three raters per pool and pair; a few pairs carry 6 to 15 (the table sums repeated pairs).

Assumptions (docs/agreement.md, "Agreement between pools"): raters are exchangeable within a pool, so a
pair's counts are all that alpha and kappa_x need (who gave which rating does not enter either);
"unsure" is no judgement (missing, as Unsure on a likert scale); ``--unsure-as-value`` makes it a third
nominal value instead. Prints each pool's alpha (nominal, stereotype vs not), kappa_x between the pools,
its normalised form, majority agreement, each with its percentile bootstrap interval over pairs (seeded),
and the pairs whose pool majorities differ, with examples.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np

from metrics.agreement import ValueCounts, alpha_with_bootstrap_of_counts
from metrics.cross_replication import cross_replication

DEFAULT_TABLE = Path("/work/shared/data/seegull/stereotypes_global_v2.csv")
POOLS = {"in-region": "region", "North-American": "NA"}


def read_table(path: Path, *, unsure_as_value: bool) -> tuple[list[tuple[str, str]], dict[str, np.ndarray]]:
    """The pairs and, per pool, (pairs, values) counts: values (not a stereotype, stereotype[, unsure])."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    header_at = next(i for i, row in enumerate(rows) if row and row[0] == "identity")
    header = rows[header_at]
    records = [dict(zip(header, row, strict=False)) for row in rows[header_at + 1 :] if row]
    pairs = [(r["identity"], r["attribute"]) for r in records]
    counts = {}
    for pool, prefix in POOLS.items():
        unsure = f"{prefix}_unsure" if f"{prefix}_unsure" in header else "us_unsure"
        columns = [f"{prefix}_nonstereo", f"{prefix}_stereo", *([unsure] if unsure_as_value else [])]
        counts[pool] = np.array([[int(r[c]) for c in columns] for r in records], dtype=np.int64)
    return pairs, counts


def interval(value: float | None, low: float | None, high: float | None, reason: str | None = None) -> str:
    if value is None:
        return f"undefined: {reason}"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]" if low is not None and high is not None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unsure-as-value", action="store_true", help="unsure as a third nominal value")
    parser.add_argument("--examples", type=int, default=8)
    parser.add_argument(
        "--workbench",
        action="store_true",
        help="also import the table as a study (fresh SQLite) and run the agreement command on it",
    )
    args = parser.parse_args(argv)
    if not args.table.exists():
        print(f"no table at {args.table}", file=sys.stderr)
        return 1

    started = time.perf_counter()
    pairs, counts = read_table(args.table, unsure_as_value=args.unsure_as_value)
    values = ["not a stereotype", "stereotype", *(["unsure"] if args.unsure_as_value else [])]
    domain = np.arange(len(values), dtype=np.float64)
    (name_a, a), (name_b, b) = counts.items()
    print(f"table: {args.table.name}, {len(pairs)} pairs; values: {', '.join(values)}")
    print(f"bootstrap: {args.resamples} resamples of the pairs, seed {args.seed}, percentile 95% intervals")
    for name, pool in counts.items():
        raters = np.bincount(pool.sum(axis=1))
        spread = ", ".join(f"{n} ratings: {k} pairs" for n, k in enumerate(raters) if k)
        unsure = "unsure counted" if args.unsure_as_value else "unsure left out"
        print(f"{name} ratings per pair ({unsure}): {spread}")

    for name, pool in counts.items():
        alpha = alpha_with_bootstrap_of_counts(
            ValueCounts(pool, domain), level="nominal", n_resamples=args.resamples, seed=args.seed
        )
        print(
            f"alpha {name:<15} {interval(alpha.value, alpha.ci_low, alpha.ci_high, alpha.undefined_reason)}"
            f"  (n = {alpha.n_items} pairs with two or more ratings, {alpha.n_judgements} ratings)"
        )
    result = cross_replication(a, b, domain, level="nominal", n_resamples=args.resamples, seed=args.seed)
    k = result.kappa_x
    print(
        f"kappa_x {name_a} x {name_b}: {interval(k.value, k.low, k.high, k.undefined_reason)}"
        f"  (n = {result.n_items} pairs rated by both; D_o {result.observed_disagreement:.4f},"
        f" D_e {result.expected_disagreement:.4f}; {k.n_resamples_undefined} resamples undefined)"
    )
    n = result.normalised
    print(
        f"normalised kappa_x / sqrt(alpha_A alpha_B): {interval(n.value, n.low, n.high, n.undefined_reason)}"
        f"  (alphas on the same pairs: {result.alpha_a.value:.3f}, {result.alpha_b.value:.3f})"
    )
    m = result.majority
    print(
        f"majority agreement: {interval(m.value, m.low, m.high, m.undefined_reason)}"
        f"  ({result.majority_n_agree} of {result.majority_n_items} pairs with a strict majority in both"
        f" pools; {result.majority_excluded} pairs without one in at least one pool, left out)"
    )
    differing = list(result.differing)
    print(f"pairs whose pool majorities differ: {len(differing)}")
    share_a = a[:, 1] / np.maximum(a.sum(axis=1), 1)
    share_b = b[:, 1] / np.maximum(b.sum(axis=1), 1)
    for direction, mask in (
        (f"{name_a} stereotype, {name_b} not", share_a[differing] > share_b[differing]),
        (f"{name_b} stereotype, {name_a} not", share_a[differing] < share_b[differing]),
    ):
        chosen = [differing[i] for i in np.flatnonzero(mask)]
        # Widest gap first (unanimous against unanimous), then table order.
        chosen.sort(key=lambda i: -abs(share_a[i] - share_b[i]))
        unanimous = sum(1 for i in chosen if abs(share_a[i] - share_b[i]) == 1.0)
        print(f"  {direction}: {len(chosen)} pairs ({unanimous} unanimous both ways); e.g.")
        for i in chosen[: args.examples]:
            identity, attribute = pairs[i]
            print(
                f"    {identity} / {attribute}: {name_a} {a[i].tolist()}, {name_b} {b[i].tolist()}"
                " (counts: not, stereotype" + (", unsure)" if args.unsure_as_value else ")")
            )
    print(f"seconds: {time.perf_counter() - started:.2f}")
    if args.workbench:
        return through_workbench(args, pairs, counts, values, result.kappa_x.value)
    return 0


def through_workbench(
    args: argparse.Namespace,
    pairs: list[tuple[str, str]],
    counts: dict[str, np.ndarray],
    values: list[str],
    kappa_x: float | None,
) -> int:
    """The same table as a workbench study: one text item per pair, the k-th rating of a pool on a pair
    given by that pool's rater k (raters are exchangeable: who gave which rating enters neither alpha
    nor kappa_x), each rater with ``annotator_attributes: {"rater_pool": POOL}``, imported through the
    JSONL import's record path into a fresh SQLite database; then ``manage.py agreement STUDY --json
    --breakdown annotator:rater_pool``, whose ``cross`` entry must give the kappa_x printed above."""
    import io
    import json
    import os
    import tempfile

    data = tempfile.mkdtemp(prefix="bench-cross-pools-")
    os.environ.setdefault("WORKBENCH_DATA_DIR", data)
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{data}/bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from annotations.interchange.annotation_import import annotations_import_records
    from annotations.interchange.item_import import items_import_records
    from annotations.models import User
    from annotations.services.studies import study_create
    from protocols.schema import protocol_from_dict

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    keys = ["not", "stereotype", "unsure"][: len(values)]
    protocol = protocol_from_dict(
        {
            "name": "SeeGULL pairs by rater pool",
            "unit": "text",
            "questions": [
                {
                    "key": "stereotype",
                    "kind": "single",
                    "prompt": "Is {text} a stereotype?",
                    "options": [{"key": k, "label": v} for k, v in zip(keys, values, strict=True)],
                }
            ],
        }
    )
    owner = User.objects.create(username="bench", role=User.Role.RESEARCHER)
    study = study_create(owner=owner, name="SeeGULL by pool", protocol=protocol, overlap=6)
    ids = [f"{n}:{identity}|{attribute}" for n, (identity, attribute) in enumerate(pairs)]
    items_import_records(
        study=study,
        records=[(f"row {n}", {"external_id": i, "text": i}) for n, i in enumerate(ids)],
    )
    records = []
    for pool, pool_counts in counts.items():
        for item, row in zip(ids, pool_counts, strict=True):
            rater = 0
            for key, count in zip(keys, row, strict=True):
                for _ in range(int(count)):
                    rater += 1
                    records.append(
                        {
                            "item": item,
                            "annotator": f"{pool} rater {rater}",
                            "annotator_attributes": {"rater_pool": pool},
                            "question": "stereotype",
                            "value": key,
                        }
                    )
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    built = time.perf_counter() - started
    started = time.perf_counter()
    out = io.StringIO()
    call_command(
        "agreement",
        str(study.pk),
        "--json",
        "--breakdown",
        "annotator:rater_pool",
        "--resamples",
        str(args.resamples),
        "--seed",
        str(args.seed),
        stdout=out,
    )
    report_s = time.perf_counter() - started
    breakdown = json.loads(out.getvalue())["by_annotator_attribute"]
    (entry,) = breakdown["cross"]
    print(
        f"workbench: {len(ids)} items, {len(records)} annotations imported in {built:.1f} s; "
        f"agreement --json --breakdown annotator:rater_pool in {report_s:.1f} s"
    )
    for group in breakdown["groups"]:
        alpha = group["questions"][0]["humans"][0]
        print(
            f"  alpha {group['group']:<15} {interval(alpha['value'], alpha['ci_low'], alpha['ci_high'])}"
            f"  (n = {alpha['n_items']})"
        )
    print(
        f"  cross {' x '.join(entry['pools'])}: kappa_x "
        f"{interval(entry['kappa_x'], entry['low'], entry['high'])} (n = {entry['n_items']}), normalised "
        f"{interval(entry['normalised'], entry['normalised_low'], entry['normalised_high'])}, majority "
        f"{interval(entry['majority_agreement'], entry['majority_low'], entry['majority_high'])},"
        f" majorities differ on {entry['majority_differ']['n']}"
    )
    same = kappa_x is not None and abs(entry["kappa_x"] - kappa_x) < 1e-12
    print(f"  kappa_x equals the table's: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
