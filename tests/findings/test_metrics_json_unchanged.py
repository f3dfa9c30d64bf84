"""The metrics API's JSON is the same after the findings moved into their own app (issue 34): the
answers for the demo study and for a study of each preset, recorded before the move
(``tests/findings/golden/``), are compared with today's answers.

What may differ between two runs and is not a finding is normalised first: database ids (numbered in
the order they first appear), and floating-point values, which are compared to 9 significant digits
(machines with and without AVX-512 differ in the last bits). Set ``WORKBENCH_GOLDEN_WRITE=1`` to record
the answers again (only when a change of the numbers is intended, and say so in the commit).
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from annotations.models import Annotator, Study, User
from annotations.services.validation_sample import validation_sample_create
from protocols.schema import load_preset
from tests.annotations.builders import (
    A_MARKED,
    make_study,
    reliability_study,
    ssi_study,
    subgroup_study,
    visage_files,
)
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

GOLDEN = Path(__file__).resolve().parent / "golden"
# Keys whose values are database ids or addresses built from them.
ID_KEYS = {"id", "study", "study_id", "item", "item_id", "items", "item_ids", "pk"}
ID_IN_TEXT = re.compile(r"(/studies/|/items/|study-|item )(\d+)")


def _visage(owner: User, folder: Path) -> dict[str, Study]:
    out = io.StringIO()
    call_command("import_visage", *visage_files(folder), "--owner", owner.username, stdout=out)
    return {key: Study.objects.get(pk=pk) for key, pk in json.loads(out.getvalue())["studies"].items()}


def _soda(owner: User) -> Study:
    colours = {"b1": ("base", "red"), "b2": ("base", "red"), "g1": ("gender:women", "blue")}
    colours |= {"g2": ("gender:women", "blue"), "g3": ("gender:women", "red")}
    items = [
        {"external_id": k, "model": "m", "condition": c, "metadata": {"object": "car"}}
        for k, (c, _) in colours.items()
    ]
    answers = [
        {"item": k, "annotator": a, "question": "product_color", "value": v}
        for k, (_, v) in colours.items()
        for a in ("h1", "h2")
    ]
    return make_study(owner, "object-attributes", items, answers)


def _bias_axes(owner: User) -> Study:
    """The reliability study with a uniform validation sample of 20 of its 30 items (for ``ppi:``)."""
    study = reliability_study(owner)
    labeller = Annotator.objects.get(name="vlm")
    validation_sample_create(study=study, labeller=labeller, size=20, design="uniform", seed=0)
    return study


def _attribute_check(owner: User) -> Study:
    items = [{"external_id": f"c{n}", "metadata": {"object": "car"}} for n in (1, 2)]
    answers = [
        {"item": f"c{n}", "annotator": a, "question": "product_color", "value": v}
        for n in (1, 2)
        for a, v in (("h1", "appropriate"), ("h2", "ambiguous" if n == 2 else "appropriate"))
    ]
    return make_study(owner, "attribute-check", items, answers)


# name -> (build the study, the query strings asked of the metrics API)
CASES: dict[str, tuple[Callable[[User, Path], Study], list[str]]] = {
    "stereotype-markers": (lambda o, f: _visage(o, f)["stereotype-markers"], ["", "?source=consensus"]),
    "visualness": (lambda o, f: _visage(o, f)["visualness"], [""]),
    "ssi-rubric": (lambda o, f: ssi_study(o, "ssi", "m-a", A_MARKED), ["", "?correction=bh"]),
    "subgroup": (lambda o, f: subgroup_study(o), ["", "?source=vlm@1"]),
    "bias-axes": (lambda o, f: _bias_axes(o), ["", "?source=vlm@1", "?source=ppi:vlm@1"]),
    "object-attributes": (lambda o, f: _soda(o), [""]),
    "attribute-check": (lambda o, f: _attribute_check(o), [""]),
}


def normalised(value: Any, ids: dict[int, str], key: str = "") -> Any:
    """``value`` with database ids numbered by first appearance and floats to 9 significant digits."""
    if isinstance(value, dict):
        return {k: normalised(v, ids, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalised(v, ids, key) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and key in ID_KEYS:
        return ids.setdefault(value, f"id{len(ids) + 1}")
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, str):
        return ID_IN_TEXT.sub(
            lambda m: m.group(1) + ids.setdefault(int(m.group(2)), f"id{len(ids) + 1}"), value
        )
    return value


def _answers(study: Study, queries: list[str], owner: User) -> dict[str, Any]:
    api = client_for(owner if study.owner_id == owner.pk else study.owner)
    ids: dict[int, str] = {study.pk: "study"}
    out = {}
    for query in queries:
        response = api.get(f"/api/studies/{study.pk}/metrics/{query}")
        assert response.status_code == 200, (query, response.content[:500])
        out[query or "(default)"] = normalised(json.loads(response.content), ids)
    return out


def _compare(name: str, got: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    if os.environ.get("WORKBENCH_GOLDEN_WRITE") == "1":
        path.write_text(json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    recorded = json.loads(path.read_text())
    assert json.dumps(got, sort_keys=True) == json.dumps(recorded, sort_keys=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_presets_metrics_json_is_unchanged(name: str, owner: User, tmp_path: Path) -> None:
    assert name in {p for p in CASES}
    load_preset(name)  # every case is a preset
    build, queries = CASES[name]
    _compare(name, _answers(build(owner, tmp_path), queries, owner))


def test_the_demo_studys_metrics_json_is_unchanged(demo_study: Study, owner: User) -> None:
    queries = ["", "?source=colour-rule", "?correction=bh", "?partial=1"]
    _compare("demo", _answers(demo_study, queries, owner))
