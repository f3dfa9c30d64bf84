"""The full agreement report for a large study, timed end to end from the database.

    .venv/bin/python tests/benchmarks/bench_agreement.py [--items 100000] [--questions 10] [--resamples 1000]
        [--keep DIR] [--profile] [--trace-memory]

Builds (bulk_create, SQLite in a temporary folder unless DATABASE_URL is set) a study of N items
with 3 human and 2 machine annotators answering Q single-choice questions (5 options, humans
agreeing 70% of the time), then times ``agreement_report`` and prints seconds and the process's peak
resident size. ``--trace-memory`` adds tracemalloc's peak of Python allocations, but tracemalloc
slows the report about threefold (every one of millions of small allocations is recorded), so the
time of such a run is not the report's. CPU seconds are printed
too: on a machine shared with other work they say what the report costs better than wall time.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
_KEEP = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
DATA = _KEEP or tempfile.mkdtemp(prefix="bench-agreement-")
os.makedirs(DATA, exist_ok=True)
os.environ.setdefault("WORKBENCH_DATA_DIR", DATA)
os.environ.setdefault("DATABASE_URL", f"sqlite:///{DATA}/bench.sqlite3")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from annotations.models import Annotation, Annotator, Item, Study, User  # noqa: E402
from annotations.selectors.agreement import agreement_report  # noqa: E402
from protocols.schema import protocol_from_dict  # noqa: E402

OPTIONS = ["a", "b", "c", "d", "e"]


def build(items: int, questions: int) -> Study:
    owner = User.objects.create(username="bench", role=User.Role.RESEARCHER)
    protocol = protocol_from_dict(
        {
            "name": "bench",
            "unit": "image",
            "questions": [
                {"key": f"q{i}", "kind": "single", "prompt": f"question {i}", "options": OPTIONS}
                for i in range(questions)
            ],
        }
    )
    study = Study.objects.create(owner=owner, name="bench", protocol=protocol.to_dict())
    Item.objects.bulk_create(
        [Item(study=study, external_id=f"i{n}", kind="image", is_reference=True) for n in range(items)],
        batch_size=5000,
    )
    item_ids = list(Item.objects.filter(study=study).values_list("id", flat=True))
    annotators = [Annotator.objects.create(kind="human", study=study, name=f"h{i}") for i in range(3)] + [
        Annotator.objects.create(kind="machine", name=f"m{i}", version="1") for i in range(2)
    ]
    rng = random.Random(0)
    batch: list[Annotation] = []
    for question in range(questions):
        for item_id in item_ids:
            truth = rng.choice(OPTIONS)
            for annotator in annotators:
                value = truth if rng.random() < 0.7 else rng.choice(OPTIONS)
                batch.append(
                    Annotation(
                        study=study,
                        item_id=item_id,
                        annotator=annotator,
                        question_key=f"q{question}",
                        value=value,
                    )
                )
            if len(batch) >= 50_000:
                Annotation.objects.bulk_create(batch, batch_size=10_000)
                batch = []
    Annotation.objects.bulk_create(batch, batch_size=10_000)
    return study


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--keep", help="a folder for the database; a study already built there is reused")
    parser.add_argument("--profile", action="store_true", help="print the 25 most costly functions")
    parser.add_argument("--trace-memory", action="store_true", help="also trace Python allocations (slow)")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    study = Study.objects.filter(name="bench").first() if args.keep else None
    if study is None:
        study = build(args.items, args.questions)
    print(
        f"built {args.items} items x 5 annotators x {args.questions} questions "
        f"({Annotation.objects.count()} annotations) in {time.perf_counter() - started:.1f} s"
    )
    if args.trace_memory:
        tracemalloc.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        report = profiler.runcall(agreement_report, study=study, n_resamples=args.resamples)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    else:
        report = agreement_report(study=study, n_resamples=args.resamples)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    traced = (
        f", peak Python allocations {tracemalloc.get_traced_memory()[1] / 2**20:.0f} MiB (traced run: "
        f"the time is not the report's)"
        if args.trace_memory
        else ""
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    first = report["questions"][0]["humans"][0]
    print(
        f"agreement report: {seconds:.1f} s ({cpu:.1f} s of CPU), peak RSS {rss:.0f} MiB{traced}; "
        f"q0 alpha {first['value']:.3f} [{first['ci_low']:.3f}, {first['ci_high']:.3f}]"
    )


if __name__ == "__main__":
    main()
