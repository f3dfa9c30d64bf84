"""The released ViSAGe data through the workbench: ``import_visage`` then ``metrics --json`` gives the paper's
Table 1, the "thrice as likely" ratio and the appendix's consensus shares (docs/metrics.md, Reproduction).

Reads the files from settings.WORKBENCH_SHARED_DATA (env WORKBENCH_SHARED_DATA, default
``<repo>/../shared/data``).
The paper truncates L(stereo) and theta, and rounds L(random) (tests/metrics/test_visage_published.py).
"""

from __future__ import annotations

import io
import json
import math
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

pytestmark = pytest.mark.django_db

FILES = (
    "visage/image_annotations_full_set.csv",
    "seegull/stereotypes_global_v2.csv",
    "visage/Visual Attributes_.xlsx",
)

# paper name -> (file identity, L(stereo) truncated, L(random) rounded, theta truncated or None = "N/A")
TABLE_1 = {
    "Togolese": ("Togolese", 0.350, 0.0, None),
    "Swedes": ("Swedes", 0.100, 0.0, None),
    "Bhutan": ("Bhutanese", 0.016, 0.0, None),
    "Thailand": ("Thai", 0.005, 0.0, None),
    "Liberian": ("Liberian", 0.333, 0.004, 75.00),
    "Sudanese": ("Sudanese", 0.379, 0.014, 27.35),
    "Nigerian": ("Nigerian", 0.075, 0.003, 27.29),
    "Laotian": ("Laos", 0.191, 0.009, 21.56),
}


def truncate(x: float, digits: int) -> float:
    return math.floor(x * 10**digits + 1e-9) / 10**digits


def run(*args: str) -> dict:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def test_published_numbers_from_import_and_metrics_command(owner) -> None:
    data = Path(settings.WORKBENCH_SHARED_DATA)
    missing = [name for name in FILES if not (data / name).is_file()]
    if missing:
        pytest.skip(
            f"released ViSAGe/SeeGULL files not found under {data} (set WORKBENCH_SHARED_DATA): {missing}"
        )
    started = time.perf_counter()
    ids = run(
        "import_visage",
        "--annotations",
        str(data / FILES[0]),
        "--seegull",
        str(data / FILES[1]),
        "--visual-attributes",
        str(data / FILES[2]),
        "--owner",
        owner.username,
    )
    seconds = time.perf_counter() - started
    assert ids["showings"] == 120170 and ids["items"] == {"stereotype-markers": 2025, "visualness": 1994}
    assert seconds < 60, f"import took {seconds:.1f} s"

    report = run("metrics", str(ids["studies"]["stereotype-markers"]), "--json", "--source", "judgements")
    tendency = next(t for t in report["tables"] if t["key"] == "visage_tendency")
    rows = {r[0]: dict(zip(tendency["columns"], r, strict=True)) for r in tendency["rows"]}
    for paper_name, (identity, l_stereo, l_random, theta) in TABLE_1.items():
        row = rows[identity]
        assert truncate(row["l_stereo"], 3) == l_stereo, paper_name
        assert round(row["l_random"] + 1e-12, 3) == l_random, paper_name
        assert (row["theta"] is None) if theta is None else truncate(row["theta"], 2) == theta, paper_name
    # Libyan: the paper's one print slip (1/105 = 0.0095 printed 0.009)
    assert (
        rows["Libyan"]["l_random"] == pytest.approx(1 / 105) and truncate(rows["Libyan"]["theta"], 2) == 25.53
    )
    ratio = report["summary"]["thrice_ratio"]
    assert ratio["n"] == 105 and ratio["value"] == pytest.approx(3.1522, abs=1e-4)

    shares = run("metrics", str(ids["studies"]["visualness"]), "--json")
    table = next(t for t in shares["tables"] if t["key"] == "visualness_shares")
    counts = {r[0]: (r[1], r[2]) for r in table["rows"]}
    assert counts == {
        "strongly_agree": (407, 1994),
        "agree": (442, 1994),
        "disagree": (406, 1994),
        "strongly_disagree": (150, 1994),
        "unsure": (4, 1994),
    }
    assert shares["summary"]["visual_attributes"] == 518
