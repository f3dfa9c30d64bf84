"""The audit report of a study imported from ViSAGe's FULL released annotations (issue 26): 120,170
showings by 17,930 anonymous raters. Before issue 26 its agreement selector was killed for memory and
its quality selector ran for hours, so the report could not be built. Slow (an import and a report of
about 15 s each); skipped when the shared data is absent (tests/annotations/test_visage_reproduction.py).
"""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from annotations.models import Study, User
from reports.formats import renderer
from reports.gather import report_build
from tests.helpers import client_for
from tests.metrics.visage_data import DATA
from tests.reports.api_walk import walk

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

FILES = (
    "visage/image_annotations_full_set.csv",
    "seegull/stereotypes_global_v2.csv",
    "visage/Visual Attributes_.xlsx",
)


def test_the_full_release_report_in_markdown_and_heds_equals_the_api(owner: User, tmp_path: Path) -> None:
    # the configured folder, else where the other ViSAGe tests read it (tests/metrics/visage_data.py)
    data = next(
        (path for path in (Path(settings.WORKBENCH_SHARED_DATA), DATA) if (path / FILES[0]).is_file()),
        Path(settings.WORKBENCH_SHARED_DATA),
    )
    missing = [name for name in FILES if not (data / name).is_file()]
    if missing:
        pytest.skip(f"released ViSAGe/SeeGULL files not found under {data}: {missing}")
    out = io.StringIO()
    call_command(
        "import_visage",
        "--annotations",
        str(data / FILES[0]),
        "--seegull",
        str(data / FILES[1]),
        "--visual-attributes",
        str(data / FILES[2]),
        "--owner",
        owner.username,
        stdout=out,
    )
    study = Study.objects.get(pk=json.loads(out.getvalue())["studies"]["stereotype-markers"])

    started = time.perf_counter()
    document = report_build(study)
    seconds = time.perf_counter() - started
    assert seconds < 120, f"the report took {seconds:.0f} s"

    client = client_for(owner)
    agreement = client.get(f"/api/studies/{study.pk}/agreement/").json()
    quality = client.get(f"/api/studies/{study.pk}/quality/").json()
    assert agreement["human_annotators"] == len(quality["annotators"]) == 17930
    assert agreement["n_items"] == 2025
    alphas = agreement["study_alpha"]
    assert alphas["n_alphas"] == 222 and alphas["mean"] == pytest.approx(0.18512733600947834, abs=1e-12)

    # every number of every table equals the API's (tests/reports/api_walk.py)
    checked = walk(document, owner)
    assert checked["agreement:alpha"] >= 6 * 222 and checked["metrics"] > 100 and checked["quality:pools"] > 0

    markdown = renderer("md")(document).body.decode()
    assert "## Agreement" in markdown and "## HEDS 3.0 datasheet" in markdown
    # the study line is the per-question range and median with the count of reliable questions, never a mean
    headline = alphas["headline"]
    assert (
        headline["n_questions"] == 1 and f"Per question, {headline['text']}".replace("_", "\\_") in markdown
    )
    assert "the mean is" not in markdown
    assert "17930 people judged 2025 items" in markdown
    assert re.search(r"\*\*People who judged\*\*: 17,930", markdown)
    # one row per option of the attributes question, each with the API's alpha to three places
    for entry in agreement["questions"][0]["humans"][:20]:
        if entry["value"] is not None:
            label = entry["label"].replace("_", "\\_")
            assert f"| {label} | nominal | {entry['value']:.3f} |" in markdown, label

    sheet = json.loads(renderer("heds")(document).body)
    assert sheet["version"] == "HEDS 3.0" and sheet["study"] == study.pk
    answers = {a["question"]: a["answer"] for s in sheet["sections"] if "answers" in s for a in s["answers"]}
    people = len(quality["annotators"])
    assert answers["3.2.1"] == f"{people:,} ({people:,} crowd)"
    assert f"({agreement['n_items']:,} items in all;" in answers["3.1.1"]
    (section4,) = [s for s in sheet["sections"] if s["section"] == "4"]
    scores = {
        c["criterion"]: {a["question"]: a["answer"] for a in c["answers"]} for c in section4["criteria"]
    }
    first = agreement["questions"][0]
    humans = first["humans"]
    if len(humans) > 5:  # a many-option question: the range of its defined alphas
        defined = [h["value"] for h in humans if h["value"] is not None]
        assert scores[first["key"]]["4.3.11.2"] == (
            f"{len(defined)} of {len(humans)} alphas defined, from {min(defined):.3f} to {max(defined):.3f} "
            "(the Agreement section lists each)"
        )
