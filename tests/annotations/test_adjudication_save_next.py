"""Issue 25 point 3 through HTTP: the queue's filters (reason, question, condition; GET parameters,
checked), the decision form pre-set to the consensus or the majority, and one "Save and next" that
records every flagged question of an item at once, checked on the server, and keeps the filters."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.models import ConsensusLabel, Study, User
from annotations.services.consensus import consensus_compute
from annotations.services.studies import enrollment_add
from protocols.schema import load_protocol_text
from tests.factories import ItemFactory, StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

PROTOCOL = """
name: Looks
unit: image
questions:
  - key: hair
    kind: single
    prompt: What hair colour?
    options:
      - {key: blond_hair, label: Blond}
      - {key: dark_hair, label: Dark}
      - {key: red_hair, label: Red}
  - key: hat
    kind: binary
    prompt: Is there a hat?
  - key: note
    kind: text
    prompt: Anything else?
"""


def _line(item: str, who: str, question: str, value: Any, kind: str = "human") -> dict[str, Any]:
    return {"item": item, "annotator": who, "annotator_kind": kind, "question": question, "value": value}


@pytest.fixture
def study(owner: User) -> Study:
    """Overlap 2 (every item fully rated); hair needs 3 votes (at-least-k), hat a majority.
    i1 (women): hair 1 blond, 1 dark (the rule is not met, no majority), hat resolved yes.
    i2 (men): hair 2 dark of 4 (the rule is not met; the majority is dark), hat tied.
    i3 (men): hair resolved red, a machine said blond. i4 (women): all agree, nothing to decide."""
    study = StudyFactory.create(
        owner=owner, name="Looks", overlap=2, protocol=load_protocol_text(PROTOCOL).to_dict()
    )
    for name, condition in (("i1", "women"), ("i2", "men"), ("i3", "men"), ("i4", "women")):
        ItemFactory.create(study=study, external_id=name, condition=condition)
    records = [
        _line("i1", "r1", "hair", "blond_hair"),
        _line("i1", "r2", "hair", "dark_hair"),
        _line("i1", "r1", "hat", 1),
        _line("i1", "r2", "hat", 1),
        _line("i2", "r1", "hair", "dark_hair"),
        _line("i2", "r2", "hair", "dark_hair"),
        _line("i2", "r3", "hair", "blond_hair"),
        _line("i2", "r4", "hair", "red_hair"),
        _line("i2", "r1", "hat", 1),
        _line("i2", "r2", "hat", 0),
        _line("i3", "r1", "hair", "red_hair"),
        _line("i3", "r2", "hair", "red_hair"),
        _line("i3", "r3", "hair", "red_hair"),
        _line("i3", "bot", "hair", "blond_hair", "machine"),
        _line("i4", "r1", "hair", "red_hair"),
        _line("i4", "r2", "hair", "red_hair"),
        _line("i4", "r3", "hair", "red_hair"),
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    consensus_compute(study=study, question="hair", rule={"rule": "at-least-k", "k": 3})
    consensus_compute(study=study, question="hat")
    return study


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _pk(study: Study, name: str) -> int:
    return int(study.items.get(external_id=name).pk)


def _rows(page: str) -> list[str]:
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    return [row for row in body.split("<tr>")[1:]]


def test_the_queue_filters_by_reason_question_and_condition(study: Study, owner: User) -> None:
    client = _client(owner)
    url = f"/studies/{study.pk}/adjudicate/"
    everything = client.get(url).content.decode()
    assert len(_rows(everything)) == 4  # i1 hair, i2 hair (rule), i2 hat (tie), i3 hair (machine)
    # Labels, not keys, in the reasons.
    assert "&#x27;Blond&#x27; (1), &#x27;Dark&#x27; (1)" in everything
    assert "bot said &#x27;Blond&#x27;, the consensus is &#x27;Red&#x27;" in everything
    assert "blond_hair&#x27;" not in everything
    cases = {
        "reason=tie": ["i2"],
        "reason=rule": ["i1", "i2"],
        "reason=machine": ["i3"],
        "question=hat": ["i2"],
        "condition=women": ["i1"],
        "condition=men&question=hair": ["i2", "i3"],
        "condition=men&reason=tie": ["i2"],
        "condition=nobody": [],
    }
    for query, expected in cases.items():
        page = client.get(f"{url}?{query}").content.decode()
        rows = _rows(page) if "<tbody>" in page else []
        found = sorted({name for row in rows for name in ("i1", "i2", "i3", "i4") if f">{name}</a>" in row})
        assert found == expected, query
        # The item links keep the filters.
        assert all(part in row for row in rows for part in query.split("&")), query
    assert (
        "Nothing to adjudicate with these filters" in client.get(f"{url}?condition=nobody").content.decode()
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [("reason=bored", "reason must be one of"), ("question=shoes", "is not a question of this study")],
)
def test_a_bad_filter_is_refused_with_a_message(study: Study, owner: User, query: str, message: str) -> None:
    client = _client(owner)
    for url in (f"/studies/{study.pk}/adjudicate/", f"/studies/{study.pk}/adjudicate/{_pk(study, 'i1')}/"):
        response = client.get(f"{url}?{query}")
        assert response.status_code == 400 and message in response.content.decode()


def test_the_consensus_or_the_majority_is_preselected_and_only_flagged_questions_shown(
    study: Study, owner: User
) -> None:
    client = _client(owner)
    i2 = client.get(f"/studies/{study.pk}/adjudicate/{_pk(study, 'i2')}/").content.decode()
    assert 'name="d-hair" value="dark_hair" data-digit="2" checked required' in i2  # the majority
    assert "Pre-selected: <strong>Dark</strong> (the majority)" in i2
    assert (
        'name="d-hat" value="1" data-digit="1" required' in i2
        and 'name="d-hat" value="1" data-digit="1" checked' not in i2
    )
    assert "No majority" in i2  # hat: a tie is the expert's to break
    assert 'name="d-note"' not in i2 and "Show all questions of this item (1 more)" in i2
    i3 = client.get(f"/studies/{study.pk}/adjudicate/{_pk(study, 'i3')}/").content.decode()
    assert 'value="red_hair" data-digit="3" checked' in i3  # the consensus the machine contradicts
    assert 'name="d-hat"' not in i3
    every = client.get(f"/studies/{study.pk}/adjudicate/{_pk(study, 'i3')}/?all=1").content.decode()
    assert 'name="d-hat"' in every and 'name="d-note"' in every and 'name="all" value="1"' in every
    assert 'name="d-hat" value="1" data-digit="1" checked' not in every  # optional, nothing pre-set


def test_save_and_next_records_every_flagged_question_and_keeps_the_filters(
    study: Study, owner: User
) -> None:
    client = _client(owner)
    i2, i3 = _pk(study, "i2"), _pk(study, "i3")
    response = client.post(
        f"/studies/{study.pk}/adjudicate/{i2}/?condition=men",
        {"d-hair": "dark_hair", "d-hat": "0", "note": "looked closely"},
    )
    assert response.status_code == 302
    # The filters stay, and the count of items decided in this run goes on (the page's progress).
    assert response["Location"] == f"/studies/{study.pk}/adjudicate/{i3}/?condition=men&done=1"
    assert "1 decided so far · 1 item left in the queue" in client.get(response["Location"]).content.decode()
    labels = {
        label.question_key: label for label in ConsensusLabel.objects.filter(item_id=i2, rule="adjudicated")
    }
    assert {key: label.value for key, label in labels.items()} == {"hair": "dark_hair", "hat": 0}
    # hair kept the pre-selected majority; hat was a tie (nothing pre-selected): a choice, not kept.
    assert labels["hair"].params == {"preselected": "dark_hair", "kept": True}
    assert labels["hat"].params == {"preselected": None, "kept": False}
    assert {label.note for label in labels.values()} == {"looked closely"}
    assert {label.adjudicated_by for label in labels.values()} == {owner}
    # The last item of the filtered queue: back to the (filtered) queue.
    response = client.post(f"/studies/{study.pk}/adjudicate/{i3}/?condition=men", {"d-hair": "red_hair"})
    assert response["Location"] == f"/studies/{study.pk}/adjudicate/?condition=men"
    page = client.get(response["Location"]).content.decode()
    assert "Nothing to adjudicate with these filters" in page


@pytest.mark.parametrize(
    ("posted", "message"),
    [
        ({"d-hair": "dark_hair"}, "hat: needs a decision"),  # a flagged question left out
        ({"d-hair": "green_hair", "d-hat": "1"}, "hair:"),  # not an option
        (
            {"d-hair": "dark_hair", "d-hat": "1", "d-note": "x"},
            "'note' is not a question open",
        ),  # not flagged
        ({"d-hair": "dark_hair", "d-hat": "1", "d-shoes": "x"}, "'shoes' is not a question open"),
        ({"d-hair": "dark_hair", "d-hat": "7"}, "hat:"),
    ],
)
def test_a_bad_save_records_nothing_and_says_why(
    study: Study, owner: User, posted: dict[str, str], message: str
) -> None:
    client = _client(owner)
    i2 = _pk(study, "i2")
    response = client.post(f"/studies/{study.pk}/adjudicate/{i2}/", posted)
    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was recorded" in page and message.replace("'", "&#x27;") in page
    assert not ConsensusLabel.objects.filter(item_id=i2, rule="adjudicated").exists()


def test_show_all_lets_a_decision_change_another_question(study: Study, owner: User) -> None:
    client = _client(owner)
    i3 = _pk(study, "i3")
    response = client.post(
        f"/studies/{study.pk}/adjudicate/{i3}/?all=1",
        {"all": "1", "d-hair": "red_hair", "d-note": "a scarf", "d-hat": ""},  # blank: no decision
    )
    assert response.status_code == 302
    decided = dict(
        ConsensusLabel.objects.filter(item_id=i3, rule="adjudicated").values_list("question_key", "value")
    )
    assert decided == {"hair": "red_hair", "note": "a scarf"}


def test_rights_as_before(study: Study) -> None:
    i1 = _pk(study, "i1")
    crowd = UserFactory.create(username="crowd", role="annotator")
    enrollment_add(study=study, user=crowd)
    expert = UserFactory.create(username="expert", role="annotator")
    enrollment_add(study=study, user=expert, pool="expert")
    refused = _client(crowd).post(f"/studies/{study.pk}/adjudicate/{i1}/", {"d-hair": "dark_hair"})
    assert refused.status_code == 403
    assert _client(crowd).get(f"/studies/{study.pk}/adjudicate/?reason=tie").status_code == 403
    assert not ConsensusLabel.objects.filter(item_id=i1, rule="adjudicated").exists()
    allowed = _client(expert).post(f"/studies/{study.pk}/adjudicate/{i1}/", {"d-hair": "dark_hair"})
    assert allowed.status_code == 302
    assert ConsensusLabel.objects.get(item_id=i1, question_key="hair").adjudicated_by == expert


def test_the_api_queue_takes_the_same_filters(study: Study, owner: User) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(owner)
    url = f"/api/studies/{study.pk}/adjudication/"
    tied = client.get(f"{url}?reason=tie").json()
    assert [(entry["external_id"], entry["question"], entry["kind"]) for entry in tied] == [
        ("i2", "hat", "tie")
    ]
    machine = client.get(f"{url}?condition=men&question=hair&reason=machine").json()
    assert [entry["external_id"] for entry in machine] == ["i3"]
    assert machine[0]["reason_text"] == "bot said 'Blond', the consensus is 'Red'"
    refused = client.get(f"{url}?question=shoes")
    assert refused.status_code == 400 and "is not a question of this study" in str(refused.json())
