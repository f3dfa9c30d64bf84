"""The People section against numbers worked out by hand: people per pool, time on task, exclusions and
demographic cells below 5 people suppressed."""

from __future__ import annotations

import pytest

from annotations.models import Assignment, Item, Study, User
from annotations.services.quality import annotator_exclude
from annotations.services.studies import annotator_for_user, enrollment_add
from reports.document import DocTable, Facts
from reports.gather import report_build
from reports.sections.people import OTHER_ANSWERS, SUPPRESSED, suppressed_counts, time_on_task
from tests.factories import ItemFactory, StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

# seconds per submitted item, by person; regions given on the enrolment
TIMES = {"ann": [10, 20, 60], "bob": [30], "cy": [40, 50], "dee": [], "eve": [], "fay": [], "gus": []}
REGIONS = {"ann": "EU", "bob": "EU", "cy": "Asia", "dee": "EU", "eve": "EU", "fay": "EU", "gus": "Asia"}


@pytest.fixture
def people_study(owner: User) -> Study:
    study = StudyFactory.create(owner=owner, name="People")
    items = [ItemFactory.create(study=study, is_reference=False) for _ in range(3)]
    for name, seconds in TIMES.items():
        user = UserFactory.create(username=name, role=User.Role.ANNOTATOR)
        pool = "expert" if name == "ann" else "crowd"
        enrollment_add(study=study, user=user, pool=pool, attributes={"region": REGIONS[name]})
        annotator = annotator_for_user(user=user)
        for item, spent in zip(items, seconds or [None], strict=False):
            Assignment.objects.create(
                study=study,
                item=item,
                annotator=annotator,
                status=Assignment.Status.SUBMITTED if spent else Assignment.Status.SKIPPED,
                time_spent_ms=None if spent is None else spent * 1000,
            )
    annotator_exclude(
        study=study,
        annotator=annotator_for_user(user=User.objects.get(username="cy")),
        user=owner,
        reason="failed | checks",
    )
    return study


def _table(document, key: str) -> DocTable:
    return next(t for t in document.tables() if t.key == key)


def _facts(document) -> dict[str, str]:
    people = next(s for s in document.sections if s.key == "people")
    return dict(next(b for b in people.blocks if isinstance(b, Facts)).pairs)


def test_people_section_matches_hand_computed_numbers(people_study: Study) -> None:
    document = report_build(people_study)
    facts = _facts(document)
    # medians per person: ann 20 s, bob 30 s, cy 45 s -> median over people 30 s; 210 s = 0.06 h
    assert facts["Median time on task (median over people of their median seconds per item)"] == "30.0 s"
    assert facts["Hours on timed items"] == f"{210 / 3600:.2f}"
    assert facts["Items completed (people with accounts)"] == "6"
    assert facts["People who judged"] == "7"
    assert facts["Effective hourly pay"].startswith("-")

    pools = {row[0]: row for row in _table(document, "people_pools").rows}
    assert pools["expert"][1:4] == [1, 0, 3]  # ann: 1 person, not excluded, 3 items
    assert pools["crowd"][1:4] == [6, 1, 3]  # bob 1 + cy 2 items; cy excluded
    exclusions = _table(document, "people_exclusions")
    assert exclusions.rows == [["failed | checks", 1, 0]]

    # EU: 5 people (shown), Asia: 2 people (suppressed)
    demographics = _table(document, "people_demographics")
    assert demographics.rows == [["region", "EU", 5], ["region", OTHER_ANSWERS, SUPPRESSED]]
    assert all("Asia" not in str(cell) for row in demographics.rows for cell in row)  # never named
    assert demographics.n == 7


def test_suppression_and_time_on_task_by_hand() -> None:
    # b (4) and c (1) are rarer than 5: not named, 5 people together
    assert suppressed_counts(["a"] * 5 + ["b"] * 4 + ["c"] + [None, ""]) == [("a", 5), (OTHER_ANSWERS, 5)]
    assert suppressed_counts(["a"] * 5 + ["b"] * 2) == [("a", 5), (OTHER_ANSWERS, SUPPRESSED)]
    assert suppressed_counts(["a"] * 3, minimum=3) == [("a", 3)]
    # 40 answers of 5 people each: the 30 most frequent (ties by name) listed, 10 x 5 = 50 together
    many = [f"v{i:02d}" for i in range(40) for _ in range(5 + (i < 3))]
    counted = suppressed_counts(many)
    assert len(counted) == 31 and counted[-1][1] == 10 * 5 and counted[-1][0].startswith("other answers")
    assert ("v00", 6) in counted and ("v29", 5) in counted and all(v != "v30" for v, _n in counted)
    rows = [
        {"seconds_median": 12.0, "seconds_total": 36.0, "items_completed": 3},
        {"seconds_median": None, "seconds_total": 0.0, "items_completed": 0},
        {"seconds_median": 4.0, "seconds_total": 4.0, "items_completed": 1},
    ]
    assert time_on_task(rows) == {
        "people_timed": 2,
        "median_seconds": 8.0,
        "hours_total": 40 / 3600,
        "items_completed": 4,
    }


def test_an_item_count_and_the_questions_come_from_the_study(people_study: Study) -> None:
    document = report_build(people_study)
    items = _table(document, "design_items")
    assert sum(row[-1] for row in items.rows) == Item.objects.filter(study=people_study).count() == 3
    questions = _table(document, "design_questions")
    assert [row[0] for row in questions.rows] == [q.key for q in people_study.protocol_obj.questions]
