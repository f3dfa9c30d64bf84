"""Import of a large Label Studio export: build it, import it with import_labelstudio, print the time.

Run (SQLite, a fresh database in a temporary folder):
    .venv/bin/python -m tests.benchmarks.bench_labelstudio_import
    .venv/bin/python -m tests.benchmarks.bench_labelstudio_import --tasks 10000 --files 10000
Run (PostgreSQL, the database DATABASE_URL names; a new study per run):
    DATABASE_URL=postgres://USER:PASS@127.0.0.1/DB \
        .venv/bin/python -m tests.benchmarks.bench_labelstudio_import

The export is a snapshot export in Label Studio's layout, with the labeling config of
tests/fixtures/labelstudio/config.xml: ``--tasks`` tasks, the first ``--files`` of them with a local
image (a distinct 64x48 PNG under ``upload/``; imported and checked like any upload), the others a
remote URL (a reference item; never fetched). Each task has two people's annotations (snapshot
``completed_by`` with emails; a choice, a multi choice, one or two rectangles, a rating, and a text on
every third) and one prediction (model_version, score, a multi choice and a rectangle); every tenth
task also has a cancelled annotation. It prints the build time, the import time (the command, end to
end: reading, checking, writing items, files and answers in one transaction) as wall-clock and
as this process's CPU time (SQLite runs in the process: on a busy shared machine the CPU time is
what the import costs), the load average when it started, and the rows written.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "fixtures" / "labelstudio" / "config.xml"
LABELS = ["Hat", "Glasses", "Beard"]


def _png(index: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    colour = (index % 256, (index // 256) % 256, (index // 65536) % 256)
    Image.new("RGB", (64, 48), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def _rect(rid: str, index: int, label: str, origin: str = "manual") -> dict[str, Any]:
    x = 5.0 + (index % 40)
    return {
        "original_width": 64,
        "original_height": 48,
        "image_rotation": 0,
        "value": {
            "x": x,
            "y": 10.0,
            "width": 20.0,
            "height": 25.0,
            "rotation": 0,
            "rectanglelabels": [label],
        },
        "id": rid,
        "from_name": "boxes",
        "to_name": "image",
        "type": "rectanglelabels",
        "origin": origin,
    }


def _choices(rid: str, name: str, values: list[str], origin: str = "manual") -> dict[str, Any]:
    return {
        "value": {"choices": values},
        "id": rid,
        "from_name": name,
        "to_name": "image",
        "type": "choices",
        "origin": origin,
    }


def _annotation(
    aid: int, person: int, index: int, result: list[dict[str, Any]], cancelled: bool = False
) -> dict[str, Any]:
    return {
        "id": aid,
        "completed_by": {
            "id": person,
            "first_name": "",
            "last_name": "",
            "avatar": None,
            "email": f"annotator{person}@example.org",
            "initials": "an",
        },
        "result": result,
        "was_cancelled": cancelled,
        "ground_truth": False,
        "created_at": "2024-05-02T09:12:44.118021Z",
        "updated_at": "2024-05-02T09:15:02.550312Z",
        "lead_time": 10.0 + index % 50,
        "task": index,
        "project": 1,
    }


def build(folder: Path, tasks: int, files: int) -> Path:
    media = folder / "media" / "upload" / "1"
    media.mkdir(parents=True)
    records = []
    for index in range(1, tasks + 1):
        if index <= files:
            (media / f"img{index}.png").write_bytes(_png(index))
            image = f"/data/upload/1/img{index}.png"
        else:
            image = f"https://example.org/images/{index}.jpg"
        a, b = LABELS[index % 3], LABELS[(index + 1) % 3]
        people = [(index % 20) + 1, ((index + 7) % 20) + 1]
        annotations = []
        for n, person in enumerate(people):
            result = [
                _choices(f"g{index}{n}", "gender", ["Female" if (index + n) % 2 else "Male"]),
                _choices(f"a{index}{n}", "attributes", [a, b] if n else [a]),
                _rect(f"r{index}{n}a", index, a),
                {
                    "value": {"rating": 1 + (index + n) % 5},
                    "id": f"q{index}{n}",
                    "from_name": "quality",
                    "to_name": "image",
                    "type": "rating",
                    "origin": "manual",
                },
            ]
            if n:
                result.append(_rect(f"r{index}{n}b", index + 3, b))
            if index % 3 == 0:
                result.append(
                    {
                        "value": {"text": [f"note {index}"]},
                        "id": f"c{index}{n}",
                        "from_name": "comment",
                        "to_name": "image",
                        "type": "textarea",
                        "origin": "manual",
                    }
                )
            annotations.append(_annotation(index * 10 + n, person, index, result))
        if index % 10 == 0:
            annotations.append(_annotation(index * 10 + 9, 21, index, [], cancelled=True))
        prediction = {
            "id": index,
            "model_version": "yolo-attrs@2024-05",
            "result": [
                _choices(f"p{index}", "attributes", [a], "prediction"),
                _rect(f"pr{index}", index, a, "prediction"),
            ],
            "score": round(0.5 + (index % 50) / 100, 2),
            "created_at": "2024-05-01T08:30:00.000000Z",
            "updated_at": "2024-05-01T08:30:00.000000Z",
            "task": index,
            "project": 1,
        }
        records.append(
            {
                "id": index,
                "annotations": annotations,
                "predictions": [prediction],
                "data": {"image": image, "caption": f"task {index}", "group": f"g{index % 12}"},
                "meta": {},
                "project": 1,
            }
        )
    path = folder / "export.json"
    path.write_text(json.dumps(records))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=10_000, help="tasks with a local image (the rest: URLs)")
    args = parser.parse_args()
    temp = tempfile.TemporaryDirectory(prefix="bench-labelstudio-")
    if not os.environ.get("DATABASE_URL"):
        os.environ["WORKBENCH_DATA_DIR"] = temp.name
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from annotations.models import Annotation, Item, ItemImage, User

    settings.MEDIA_ROOT = str(Path(temp.name) / "stored")
    call_command("migrate", verbosity=0)
    owner, _ = User.objects.get_or_create(
        username=f"bench-ls-{time.time_ns()}", defaults={"role": "researcher"}
    )
    folder = Path(temp.name) / "export"
    folder.mkdir()
    started = time.perf_counter()
    export = build(folder, args.tasks, min(args.files, args.tasks))
    built = time.perf_counter() - started
    size = export.stat().st_size
    out = io.StringIO()
    load = os.getloadavg()[0]
    cpu = time.process_time()
    started = time.perf_counter()
    call_command(
        "import_labelstudio",
        str(export),
        "--create",
        f"bench {time.time_ns()}",
        "--config",
        str(CONFIG),
        "--media-root",
        str(folder / "media"),
        "--owner",
        owner.username,
        stdout=out,
    )
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    report = json.loads(out.getvalue())
    study = report["study"]
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cpus, database "
        f"{settings.DATABASES['default']['ENGINE']}"
    )
    print(
        f"export: {args.tasks} tasks, {min(args.files, args.tasks)} local images, {size / 1e6:.1f} MB "
        f"JSON, built in {built:.1f} s"
    )
    print(
        f"import: {elapsed:.1f} s wall, {cpu:.1f} s CPU (load average {load:.1f} at the start; "
        f"{args.tasks / elapsed:.0f} tasks/s); items {Item.objects.filter(study=study).count()}, "
        f"image files {ItemImage.objects.filter(item__study=study).count()}, "
        f"answers {Annotation.objects.filter(study=study).count()}, skips {report['answers']['skips']}, "
        f"accounts created {len(report['answers']['accounts_created'])}"
    )
    print(f"under 30 s: {'yes' if elapsed < 30 else 'NO'}")
    temp.cleanup()


if __name__ == "__main__":
    main()
