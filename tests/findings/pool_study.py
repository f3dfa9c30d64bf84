"""A visual-ness study judged by two rater pools that disagree on one attribute in a known way (shared by
the tests of pool sources, the compare of two pools and the report's "Who judged" section).

Ten people, five per pool (``region`` = ``in`` or ``na``, each carried by the import's
``annotator_attributes``), overlap 10, so an item is settled for a pool at ceil(10 / 2) = 5 of its people:

| term | in (5 people)          | na                        | everyone                |
| ---- | ---------------------- | ------------------------- | ----------------------- |
| hat  | strongly_agree x5      | strongly_agree x5         | strongly_agree (10)     |
| kind | strongly_disagree x5   | strongly_disagree x5      | strongly_disagree (10)  |
| poor | agree x5               | disagree x4, agree x1     | agree 6 : disagree 4    |
| tall | agree x5               | agree x2 (partial for na) | 7 of 10: pending        |

Majority per pool: in labels hat SA, kind SD, poor A, tall A (4 settled items); na labels hat SA, kind SD,
poor D (3 settled, tall partial: 2 of 5). Visual-ness shares of the consensus (count / items): in SA 1/4,
A 2/4, D 0, SD 1/4; na SA 1/3, A 0, D 1/3, SD 1/3; na - in: SA +1/12, A -1/2, D +1/3, SD +1/12.
Visual attributes (every rating Agree or Strongly Agree, settled items): in hat, poor, tall; na hat.
"""

from __future__ import annotations

from typing import Any

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.models import Study, User
from annotations.services.studies import study_create
from protocols.schema import load_preset

IN, NA = "in", "na"
TERMS = ("hat", "kind", "poor", "tall")
# term -> pool -> the values of its people, in order (in1..in5, na1..na5)
VALUES: dict[str, dict[str, list[str]]] = {
    "hat": {IN: ["strongly_agree"] * 5, NA: ["strongly_agree"] * 5},
    "kind": {IN: ["strongly_disagree"] * 5, NA: ["strongly_disagree"] * 5},
    "poor": {IN: ["agree"] * 5, NA: ["disagree"] * 4 + ["agree"]},
    "tall": {IN: ["agree"] * 5, NA: ["agree"] * 2},
}


def _line(term: str, person: str, value: str, pool: str) -> dict[str, Any]:
    return {
        "item": term,
        "annotator": person,
        "question": "visual",
        "value": value,
        "annotator_attributes": {"region": pool},
    }


def region_pool_study(owner: User, name: str = "Visual-ness by region") -> Study:
    """The study of the module docstring (imported items and annotations, no consensus stored)."""
    study = study_create(owner=owner, name=name, protocol=load_preset("visualness"), overlap=10)
    items_import_records(
        study=study,
        records=[(f"row {n}", {"external_id": term, "text": term}) for n, term in enumerate(TERMS)],
    )
    lines = [
        _line(term, f"{pool}{n}", value, pool)
        for term, pools in VALUES.items()
        for pool, values in pools.items()
        for n, value in enumerate(values, start=1)
    ]
    annotations_import_records(study=study, records=list(enumerate(lines, start=1)))
    return study
