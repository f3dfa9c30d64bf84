"""Overlap policies on the claim path (docs/overlap.md, "A study under a policy"): ``fixed:K`` as before,
``agree:K/MAX`` and ``posterior:P/MAX`` through the API's claim and submit, an item that stops the moment
its policy is satisfied, no over-filled item under concurrent claims, four statements per claim and per
submit under every policy, coverage that counts a stopped item as settled, and the study page's replay."""

from __future__ import annotations

import html
import re
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotations.models import Annotation, Annotator, Assignment, ConsensusLabel, Item, Study, User
from annotations.selectors.coverage import coverage_of, item_judges, short_items
from annotations.selectors.overlap import (
    StoredModel,
    policy_opening,
    policy_slots,
    study_answers,
    study_replay,
)
from annotations.services.assignment import assignment_claim_next, assignment_submit
from annotations.services.consensus import consensus_compute
from annotations.services.studies import enrollment_add, study_overlap_refit, study_overlap_set
from common.errors import Conflict, ValidationFailed
from metrics.overlap_policy import AgreePolicy, PosteriorPolicy, overlap_replay, policy_parse
from tests.factories import ItemFactory, UserFactory
from tests.helpers import client_for, run_at_once

TRANSACTION = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def answers(gender: str) -> dict[str, dict[str, Any]]:
    return {
        "gender": {"value": gender},
        "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard", "none_of_the_above"]},
    }


def people(study: Study, n: int, prefix: str = "p") -> list[User]:
    users = []
    for index in range(n):
        user = UserFactory.create(username=f"{prefix}{index}", role="annotator")
        enrollment_add(study=study, user=user)
        users.append(user)
    return users


def claim(user: User, study: Study) -> dict[str, Any] | None:
    response = client_for(user).post(f"/api/studies/{study.pk}/assignments/next/")
    assert response.status_code in (200, 204), response.content
    return response.json() if response.status_code == 200 else None


def submit(user: User, assignment: dict[str, Any], gender: str) -> dict[str, Any]:
    response = client_for(user).post(
        f"/api/assignments/{assignment['id']}/submit/", {"answers": answers(gender)}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def set_policy(owner: User, study: Study, policy: str, **extra: Any) -> dict[str, Any]:
    response = client_for(owner).patch(
        f"/api/studies/{study.pk}/", {"overlap_policy": policy, **extra}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def item(pk: int) -> Item:
    return Item.objects.get(pk=pk)


# --- The policies' arithmetic --------------------------------------------------------------------


def test_agree_slots_are_the_judgements_plus_the_fewest_that_could_agree() -> None:
    policy = AgreePolicy(2, 3)
    assert policy_slots(policy, {}, 0, None) == 2
    assert policy_slots(policy, {"1": "m"}, 1, None) == 2
    assert policy_slots(policy, {"1": "m", "2": "m"}, 2, None) == 2  # stopped: slots == judgements
    assert policy_slots(policy, {"1": "m", "2": "f"}, 2, None) == 3
    assert policy_slots(policy, {"1": "m", "2": "f", "3": "x"}, 3, None) == 3  # MAX
    assert policy_slots(AgreePolicy(3, 5), {"1": "m", "2": "f"}, 2, None) == 4
    # A judgement without an answer to the policy's question counts towards MAX, not towards agreeing.
    assert policy_slots(policy, {"1": "m"}, 2, None) == 3


def test_posterior_slots_follow_the_model_and_a_pilot_collects_max() -> None:
    policy = PosteriorPolicy(0.9, 3)
    assert policy_slots(policy, {}, 0, None) == 3  # no model: a pilot
    model = StoredModel(
        classes=["f", "m"],
        prior=[0.5, 0.5],
        fallback=[[0.8, 0.2], [0.2, 0.8]],
        confusion={"7": [[0.99, 0.01], [0.01, 0.99]]},
    )
    # P(m | one average "m") = 0.8 < 0.9; two: 0.94 -> an unjudged item opens for two.
    assert policy_slots(policy, {}, 0, model) == 2
    assert policy_slots(policy, {"1": "m"}, 1, model) == 2
    assert policy_slots(policy, {"1": "m", "2": "m"}, 2, model) == 2  # stopped
    assert policy_slots(policy, {"7": "m"}, 1, model) == 1  # a reliable annotator stops it alone
    assert policy_slots(policy, {"1": "m", "2": "f"}, 2, model) == 3
    # Never on the prior alone: a confident prior still asks for one answer.
    confident = StoredModel(["f", "m"], [0.01, 0.99], [[0.8, 0.2], [0.2, 0.8]], {})
    assert policy_slots(policy, {}, 0, confident) == 1


# --- Setting a policy ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_api_sets_and_checks_a_policy(owner: User, study: Study) -> None:
    api = client_for(owner)
    body = api.get(f"/api/studies/{study.pk}/").json()
    assert body["overlap_policy"] == "fixed:3" and body["overlap_question"] == "gender"
    assert body["overlap_model"] is None
    body = set_policy(owner, study, "agree:2/4")
    assert body["overlap_policy"] == "agree:2/4" and body["overlap"] == 4
    refused = {
        "agree:5/4": "must not exceed MAX",
        "majority": "is not a policy",
        "posterior:1/3": "strictly between 0 and 1",
        "fixed:101": "at most 100",
    }
    for policy, why in refused.items():
        response = api.patch(f"/api/studies/{study.pk}/", {"overlap_policy": policy}, format="json")
        assert response.status_code == 400 and why in response.json()["detail"], (policy, response.json())
    # The question must be one a policy reads; the overlap follows the policy.
    response = api.patch(
        f"/api/studies/{study.pk}/",
        {"overlap_policy": "agree:2/3", "overlap_question": "colour"},
        format="json",
    )
    assert response.status_code == 400 and "single, binary or likert" in response.json()["detail"]
    response = api.patch(f"/api/studies/{study.pk}/", {"overlap": 5}, format="json")
    assert response.status_code == 400 and "follows the overlap policy agree:2/4" in response.json()["detail"]
    response = api.patch(
        f"/api/studies/{study.pk}/", {"overlap_policy": "agree:2/3", "overlap": 4}, format="json"
    )
    assert response.status_code == 400 and Study.objects.get(pk=study.pk).overlap_policy == "agree:2/4"
    body = set_policy(owner, study, "agree:2/3", overlap_question="smiling", overlap=3)
    assert (body["overlap_policy"], body["overlap_question"], body["overlap"]) == ("agree:2/3", "smiling", 3)
    body = set_policy(owner, study, "fixed:2")
    assert (body["overlap_policy"], body["overlap"]) == ("fixed:2", 2)
    assert Study.objects.get(pk=study.pk).overlap_policy == ""
    # An annotator never sees it.
    annotator = people(study, 1)[0]
    assert "overlap_policy" not in client_for(annotator).get(f"/api/studies/{study.pk}/").json()


@pytest.mark.django_db
def test_a_new_study_can_start_under_a_policy(owner: User) -> None:
    api = client_for(owner)
    made = api.post(
        "/api/studies/",
        {"name": "Agreeing", "preset": "visualness", "overlap_policy": "agree:2/3"},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert (made.json()["overlap_policy"], made.json()["overlap"]) == ("agree:2/3", 3)
    refused = api.post(
        "/api/studies/", {"name": "Bad", "preset": "visualness", "overlap_policy": "agree:4/3"}
    )
    assert refused.status_code == 400 and not Study.objects.filter(name="Bad").exists()


# --- Each policy through the API ---------------------------------------------------------------


@pytest.mark.django_db
def test_fixed_k_hands_out_as_before(owner: User, study: Study) -> None:
    set_policy(owner, study, "fixed:2")
    (only,) = [ItemFactory.create(study=study)]
    a, b, c = people(study, 3)
    for user in (a, b):
        submit(user, claim(user, study), "male")
    assert claim(c, study) is None
    assert (item(only.pk).judgements, item(only.pk).policy_slots, item(only.pk).policy_stopped) == (
        2,
        None,
        False,
    )


@pytest.mark.django_db
def test_agree_stops_an_item_the_moment_two_agree(owner: User, study: Study) -> None:
    set_policy(owner, study, "agree:2/3")
    only = ItemFactory.create(study=study)
    a, b, c, d = people(study, 4)
    first = claim(a, study)
    second = claim(b, study)
    assert first["item"] == second["item"] == only.pk
    assert claim(c, study) is None  # two leases already out: the two that could agree
    submit(a, first, "male")
    assert claim(c, study) is None  # b's lease is the one more that could agree
    submit(b, second, "male")
    stopped = item(only.pk)
    assert (stopped.judgements, stopped.policy_slots, stopped.policy_stopped) == (2, 2, True)
    assert {stopped.policy_votes[str(u.annotator.pk)] for u in (a, b)} == {"male"}
    assert claim(c, study) is None and claim(d, study) is None
    assert Assignment.objects.filter(item=only, status="submitted").count() == 2


@pytest.mark.django_db
def test_agree_asks_for_one_more_after_a_disagreement_and_stops_at_max(owner: User, study: Study) -> None:
    set_policy(owner, study, "agree:2/3")
    only = ItemFactory.create(study=study)
    a, b, c, d = people(study, 4)
    leases = [claim(user, study) for user in (a, b)]
    submit(a, leases[0], "male")
    submit(b, leases[1], "female")
    assert (item(only.pk).policy_slots, item(only.pk).policy_stopped) == (3, False)
    third = claim(c, study)
    assert third is not None and third["item"] == only.pk
    assert claim(d, study) is None
    submit(c, third, "female")
    assert item(only.pk).policy_stopped and item(only.pk).judgements == 3
    assert claim(d, study) is None


@pytest.mark.django_db
def test_an_edit_can_open_a_stopped_item_again(owner: User, study: Study) -> None:
    set_policy(owner, study, "agree:2/3")
    only = ItemFactory.create(study=study)
    a, b, c = people(study, 3)
    leases = [claim(user, study) for user in (a, b)]
    for user, lease in zip((a, b), leases, strict=True):
        submit(user, lease, "male")
    assert item(only.pk).policy_stopped
    submit(b, leases[1], "female")  # b changes their answer: the two no longer agree
    assert (item(only.pk).policy_stopped, item(only.pk).policy_slots, item(only.pk).judgements) == (
        False,
        3,
        2,
    )
    assert claim(c, study)["item"] == only.pk


@pytest.mark.django_db
def test_a_late_submit_on_a_stopped_item_is_refused(owner: User, study: Study) -> None:
    set_policy(owner, study, "agree:2/3")
    only = ItemFactory.create(study=study)
    a, b, c = people(study, 3)
    lease_a = claim(a, study)
    Assignment.objects.filter(pk=lease_a["id"]).update(lease_expires_at=timezone.now() - timedelta(minutes=1))
    lease_b, lease_c = claim(b, study), claim(c, study)
    submit(b, lease_b, "male")
    submit(c, lease_c, "male")
    late = client_for(a).post(
        f"/api/assignments/{lease_a['id']}/submit/", {"answers": answers("male")}, format="json"
    )
    assert late.status_code == 409 and item(only.pk).judgements == 2


def _pilot(owner: User, study: Study) -> list[User]:
    """Ten items judged by three people at fixed:3: eight "male", two "female"."""
    for n in range(10):
        ItemFactory.create(study=study, external_id=f"{'f' if n < 2 else 'm'}{n}")
    team = people(study, 3, prefix="pilot")
    for user in team:
        while (lease := claim(user, study)) is not None:
            submit(
                user, lease, "female" if Item.objects.get(pk=lease["item"]).external_id[0] == "f" else "male"
            )
    return team


@pytest.mark.django_db
def test_posterior_fits_on_the_study_and_stops_when_the_posterior_is_reached(
    owner: User, study: Study
) -> None:
    team = _pilot(owner, study)
    body = set_policy(owner, study, "posterior:0.99/3")
    assert body["overlap_model"]["judgements"] == 30 and body["overlap_model"]["classes"] == [
        "female",
        "male",
    ]
    model = StoredModel.of(Study.objects.get(pk=study.pk))
    assert model is not None
    one = {str(team[0].annotator.pk): "male"}
    two = one | {str(team[1].annotator.pk): "male"}
    assert model.leading(model.log_posterior(one)) < 0.99 <= model.leading(model.log_posterior(two))
    # The pilot's items all have three judgements (MAX): stopped.
    assert not Item.objects.filter(study=study, policy_stopped=False).exists()
    fresh = ItemFactory.create(study=study, external_id="new")
    assert policy_opening(Study.objects.get(pk=study.pk)) == 2
    leases = [claim(user, study) for user in team[:2]]
    assert [lease["item"] for lease in leases] == [fresh.pk, fresh.pk]
    assert claim(team[2], study) is None
    submit(team[0], leases[0], "male")
    assert not item(fresh.pk).policy_stopped and claim(team[2], study) is None
    submit(team[1], leases[1], "male")
    assert item(fresh.pk).policy_stopped and item(fresh.pk).judgements == 2
    assert claim(team[2], study) is None


@pytest.mark.django_db
def test_posterior_without_answers_is_a_pilot_and_a_refit_learns(owner: User, study: Study) -> None:
    set_policy(owner, study, "posterior:0.9/3")
    assert Study.objects.get(pk=study.pk).overlap_model == {}
    for n in range(6):
        ItemFactory.create(study=study, external_id=f"{'f' if n < 2 else 'm'}{n}")
    assert policy_opening(Study.objects.get(pk=study.pk)) == 3
    team = people(study, 3)
    for user in team:
        while (lease := claim(user, study)) is not None:
            submit(
                user, lease, "female" if Item.objects.get(pk=lease["item"]).external_id[0] == "f" else "male"
            )
    assert Item.objects.filter(study=study, judgements=3, policy_stopped=True).count() == 6
    refitted = study_overlap_refit(study=Study.objects.get(pk=study.pk))
    # One average "male" gives 0.925 under the refitted model: an unjudged item now opens for one.
    assert refitted.overlap_model["judgements"] == 18 and refitted.overlap_model["opening"] == 1
    assert policy_opening(refitted) == 1
    fresh = ItemFactory.create(study=study, external_id="new")
    lease = claim(team[0], study)
    assert lease["item"] == fresh.pk and claim(team[1], study) is None
    submit(team[0], lease, "male")
    assert item(fresh.pk).policy_stopped and item(fresh.pk).judgements == 1


@pytest.mark.django_db
def test_gold_items_train_the_model(owner: User, study: Study) -> None:
    gold = ItemFactory.create(
        study=study, external_id="g", control_kind="gold", control_answers={"gender": "female"}
    )
    real = ItemFactory.create(study=study, external_id="r")
    (annotator,) = [user.annotator for user in people(study, 1)]
    Annotation.objects.create(
        study=study, item=gold, annotator=annotator, question_key="gender", value="male"
    )
    Annotation.objects.create(
        study=study, item=real, annotator=annotator, question_key="gender", value="male"
    )
    found = study_answers(study, "gender")
    assert found.gold == {gold.pk: "female"} and found.real == 1
    assert [j[0] for j in found.judgements] == [gold.pk, real.pk]
    fitted = study_overlap_set(study=study, policy="posterior:0.9/3").overlap_model
    assert fitted["gold_items"] == 1
    # The gold answer taught the model this annotator says "male" on a "female" item.
    assert fitted["confusion"][str(annotator.pk)][0][1] > 0.5


# --- Concurrency ---------------------------------------------------------------------------------


def _gender(item_id: int, annotator_id: int) -> str:
    return "male" if (item_id * 7 + annotator_id * 3) % 5 else "female"


def _claim_and_submit(ids: tuple[int, int]) -> None:
    study_id, annotator_id = ids
    study, annotator = Study.objects.get(pk=study_id), Annotator.objects.get(pk=annotator_id)
    # Under a policy an item can want more after a claim found nothing (two disagreed): a claim that
    # finds nothing tries again until every item is stopped or this annotator has judged all it may.
    deadline = time.monotonic() + 60
    while True:
        if time.monotonic() > deadline:
            stuck = list(
                Item.objects.filter(study=study, policy_stopped=False).values(
                    "id", "judgements", "policy_slots", "policy_votes"
                )
            )
            leases = list(Assignment.objects.exclude(status="submitted").values("item_id", "status"))
            raise AssertionError(f"annotator {annotator_id} waited a minute: {stuck} {leases}")
        assignment = assignment_claim_next(study=study, annotator=annotator)
        if assignment is not None:
            answer = answers(_gender(assignment.item_id, annotator_id))
            assignment_submit(assignment=assignment, answers=answer)
            continue
        open_items = Item.objects.filter(study=study, policy_stopped=False)
        if not open_items.exclude(assignments__annotator=annotator).exists():
            return
        time.sleep(0.01)


def _run_until_nothing_is_left(study: Study, users: list[User]) -> None:
    run_at_once(_claim_and_submit, [(study.pk, user.annotator.pk) for user in users])


def _check_no_item_over_filled(study: Study, items: list[Item]) -> None:
    """Every item stopped, with no more judgements than its policy asked for: two that agree, or three."""
    submitted: dict[int, list[str]] = {}
    for item_id, value in Annotation.objects.filter(study=study, question_key="gender").values_list(
        "item_id", "value"
    ):
        submitted.setdefault(item_id, []).append(value)
    for one in items:
        values = submitted[one.pk]
        stored = Item.objects.get(pk=one.pk)
        assert stored.policy_stopped and stored.judgements == len(values), (one.pk, values)
        assert sorted(stored.policy_votes.values()) == sorted(values)
        # Two judgements only when they agree; never more than MAX, never a third after two agreed.
        assert len(values) == 2 and values[0] == values[1] or len(values) == 3, values
        if len(values) == 3:
            assert Counter(values).most_common(1)[0][1] < 3 or len(set(values)) == 1
    assert Assignment.objects.exclude(status="submitted").count() == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_under_agree_never_over_fill_on_postgresql(owner: User) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL)")
    from tests.factories import StudyFactory

    study = StudyFactory.create(owner=owner)
    study_overlap_set(study=study, policy="agree:2/3")
    items = [ItemFactory.create(study=study) for _ in range(12)]
    users = people(study, 10)
    _run_until_nothing_is_left(study, users)
    _check_no_item_over_filled(study, items)


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_under_agree_never_over_fill_on_sqlite(owner: User) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL variant covers this")
    from tests.factories import StudyFactory

    study = StudyFactory.create(owner=owner)
    study_overlap_set(study=study, policy="agree:2/3")
    items = [ItemFactory.create(study=study) for _ in range(5)]
    users = people(study, 4)
    _run_until_nothing_is_left(study, users)
    _check_no_item_over_filled(study, items)


# --- Statements per claim and per submit ---------------------------------------------------------


def _work(captured: CaptureQueriesContext) -> list[str]:
    return [
        q["sql"] for q in captured.captured_queries if not q["sql"].lstrip().upper().startswith(TRANSACTION)
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("policy", ["fixed:3", "agree:2/3", "posterior:0.99/3"])
def test_claim_and_submit_take_at_most_four_statements_under_every_policy(
    owner: User, study: Study, policy: str
) -> None:
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    if policy.startswith("posterior"):
        _pilot(owner, study)
    set_policy(owner, study, policy)
    for n in range(4):
        ItemFactory.create(study=study, external_id=f"hot{n}")
    Item.objects.filter(study=study).update(shuffle_key=2**31 - 1)
    user = people(study, 1, prefix="hot")[0]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    api.post(f"/api/studies/{study.pk}/assignments/next/")  # the token cache, the annotator
    Assignment.objects.filter(annotator__user=user).delete()
    for _round in range(2):
        with CaptureQueriesContext(connection) as claimed:
            response = api.post(f"/api/studies/{study.pk}/assignments/next/")
        assert response.status_code == 200, response.content
        assert len(_work(claimed)) <= 4, _work(claimed)
        with CaptureQueriesContext(connection) as submitted:
            done = api.post(
                f"/api/assignments/{response.json()['id']}/submit/",
                {"answers": answers("male")},
                format="json",
            )
        assert done.status_code == 200, done.content
        assert len(_work(submitted)) <= 4, _work(submitted)
        judged = Item.objects.get(pk=response.json()["item"])
        assert judged.judgements == 1
        if policy != "fixed:3":
            assert judged.policy_votes == {str(user.annotator.pk): "male"}


# --- Coverage ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_item_stopped_early_is_settled_and_one_still_wanted_is_partial(owner: User, study: Study) -> None:
    set_policy(owner, study, "agree:2/3")
    agreed, split = ItemFactory.create(study=study), ItemFactory.create(study=study)
    a, b = people(study, 2)
    for user, values in ((a, ("male", "male")), (b, ("male", "female"))):
        for _turn in range(2):
            lease = claim(user, study)
            submit(user, lease, values[0] if lease["item"] == agreed.pk else values[1])
    current = Study.objects.get(pk=study.pk)
    judges = item_judges(current)
    assert judges == {agreed.pk: 2, split.pk: 2}
    coverage, counted, _partial = coverage_of(
        study=current,
        item_ids=[agreed.pk, split.pk],
        judges=judges,
        needed=3,
        basis="human judgements (overlap 3)",
        include_partial=False,
    )
    assert (coverage.settled, coverage.partial, counted) == (1, 1, frozenset({agreed.pk}))
    assert (
        "or fewer where agree:2/3 stopped" in coverage.summary()
        and coverage.as_dict()["policy"] == "agree:2/3"
    )
    assert short_items(current, judges) == frozenset({split.pk})
    # The consensus follows: the stopped item has its label, the one still wanted is pending.
    consensus_compute(study=current, question="gender")
    labels = {c.item_id: c for c in ConsensusLabel.objects.filter(study=study, question_key="gender")}
    assert (labels[agreed.pk].pending, labels[agreed.pk].value) == (False, "male")
    assert labels[split.pk].pending and labels[split.pk].value is None
    # Back to fixed:3: the overlap decides again, both are partial.
    current = study_overlap_set(study=current, policy="fixed:3")
    assert not Item.objects.filter(study=study, policy_stopped=True).exists()
    assert short_items(current, judges) == frozenset({agreed.pk, split.pk})


# --- The study page ------------------------------------------------------------------------------


def _page(user: User, url: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 200
    return html.unescape(re.sub(r"\s+", " ", response.content.decode()))


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))


@pytest.mark.django_db
def test_the_study_page_replays_a_policy_on_the_study_answers(owner: User, study: Study) -> None:
    _pilot(owner, study)
    page = _page(owner, f"/studies/{study.pk}/")
    assert 'id="overlap"' in page and "Policy fixed:3 on question gender" in _text(page)
    page = _page(owner, f"/studies/{study.pk}/?replay_policy=agree:2/3&replay_question=gender#overlap")
    expected = study_replay(study, policy="agree:2/3", question_key="gender")
    assert expected["saved_share"] == pytest.approx(1 / 3)  # every item: two agree, the third unused
    assert "20 of 30 judgements used" in _text(page) and "saved 33.3%" in _text(page)
    assert "same label as the full consensus on 100.0% of 10 items" in _text(page)
    labels = re.findall(r"<tr><td>(\w+)</td><td>(\d+)</td><td>(\d+)</td><td>([\d.%]+)</td></tr>", page)
    assert labels == [("female", "2", "2", "100.0%"), ("male", "8", "8", "100.0%")]
    # The same numbers as metrics.overlap_policy on the same judgements, in the order they were given.
    rows = Annotation.objects.filter(study=study, question_key="gender").order_by("created_at", "id")
    direct = overlap_replay(
        [(r.item_id, str(r.annotator_id), r.value) for r in rows], policy_parse("agree:2/3")
    ).to_dict()
    assert {k: direct[k] for k in ("judgements_used", "same_by_label")} == {
        "judgements_used": expected["judgements_used"],
        "same_by_label": [
            {k: row[k] for k in ("label", "items", "same")} for row in expected["same_by_label"]
        ],
    }
    posterior = _page(owner, f"/studies/{study.pk}/?replay_policy=posterior:0.95/3&replay_confusion=pooled")
    assert "posterior:0.95/3" in posterior and "Dawid-Skene:" in _text(posterior)
    refused = _page(owner, f"/studies/{study.pk}/?replay_policy=agree:4/3")
    assert "Not replayed: policy 'agree:4/3': K (4) must not exceed MAX (3)" in refused


@pytest.mark.django_db
def test_the_study_page_saves_a_policy(owner: User, study: Study) -> None:
    client = Client()
    client.force_login(owner)
    response = client.post(
        f"/studies/{study.pk}/settings/", {"section": "overlap", "policy": "agree:2/3", "question": "gender"}
    )
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/#overlap"
    assert Study.objects.get(pk=study.pk).overlap_policy == "agree:2/3"
    page = _page(owner, f"/studies/{study.pk}/")
    assert "Policy agree:2/3 on question gender" in _text(page) and 'id="overlap-policy-form"' in page
    response = client.post(f"/studies/{study.pk}/settings/", {"section": "overlap", "policy": "agree:9/3"})
    assert Study.objects.get(pk=study.pk).overlap_policy == "agree:2/3"
    assert "Overlap policy not saved" in html.unescape(client.get(f"/studies/{study.pk}/").content.decode())
    # The settings form keeps working (its overlap is the policy's MAX).
    response = client.post(
        f"/studies/{study.pk}/settings/",
        {"name": "Renamed", "description": "", "overlap": 3, "lease_minutes": 30, "status": "active"},
    )
    assert Study.objects.get(pk=study.pk).name == "Renamed"
    with pytest.raises(ValidationFailed):
        study_overlap_set(study=study, policy="agree:2/3", overlap=4)


# --- Progress, "left" and skip undo read the policy's slots, not the overlap --------------------------


@pytest.mark.django_db
def test_progress_left_and_dashboard_count_what_the_policy_wants(owner: User, study: Study) -> None:
    from annotations.selectors.progress import item_progress, study_progress
    from annotations.selectors.studies import studies_completion
    from annotations.selectors.tasks import study_progress_for

    set_policy(owner, study, "agree:2/3")  # the overlap is MAX = 3; an unjudged item opens for 2
    stopped = ItemFactory.create(study=study).pk
    a, b, c = people(study, 3)
    for user in (a, b):
        submit(user, claim(user, study), "male")
    ItemFactory.create(study=study)  # nobody judged it yet
    study.refresh_from_db()  # the policy was set through the API
    assert item(stopped).policy_stopped and item(stopped).judgements == 2
    rows = {row["id"]: row for row in item_progress(study)}
    assert (rows[stopped]["state"], rows[stopped]["needs"]) == ("complete", 2)
    (open_row,) = [row for pk, row in rows.items() if pk != stopped]
    assert (open_row["state"], open_row["needs"]) == ("untouched", 2)
    totals = study_progress(study)
    # 2 judgements of the 2 + 2 the policies want (not of 2 items x overlap 3 = 6)
    assert (totals["complete"], totals["judgements"], totals["judgements_needed"], totals["percent"]) == (
        1,
        2,
        4,
        50.0,
    )
    assert studies_completion([study.pk])[study.pk] == {"judgements": 2, "needed": 4, "percent": 50.0}
    # c can still be given only the open item: the stopped one has 2 of its 2 slots taken.
    progress = study_progress_for(c, study.pk)
    assert progress is not None and progress.left == 1


@pytest.mark.django_db
def test_a_skip_cannot_be_undone_onto_an_item_its_policy_stopped(owner: User, study: Study) -> None:
    from annotations.services.skip_undo import assignment_skip_undo

    set_policy(owner, study, "agree:2/3")
    only = ItemFactory.create(study=study)
    a, b, d = people(study, 3)
    lease_d = claim(d, study)
    assert lease_d is not None and lease_d["item"] == only.pk
    response = client_for(d).post(
        f"/api/assignments/{lease_d['id']}/skip/", {"reason": "unclear image"}, format="json"
    )
    assert response.status_code == 200, response.content
    for user in (a, b):
        submit(user, claim(user, study), "male")
    assert item(only.pk).policy_stopped
    with pytest.raises(Conflict, match="cannot come back"):
        assignment_skip_undo(assignment=Assignment.objects.get(pk=lease_d["id"]), user=d)
    assert Assignment.objects.get(pk=lease_d["id"]).status == Assignment.Status.SKIPPED


# --- Refits in the background (the workers' sweep) ------------------------------------------------------


@pytest.mark.django_db
def test_the_sweep_refits_a_posterior_model_once_enough_judgements_came_in(owner: User, study: Study) -> None:
    from annotations.services.overlap_refits import overlap_refits_due, overlap_refits_run

    set_policy(owner, study, "posterior:0.9/3")  # no answer yet: no model, a pilot
    for n in range(6):
        ItemFactory.create(study=study, external_id=f"{'f' if n < 2 else 'm'}{n}")
    team = people(study, 3)
    for user in team[:2]:
        while (lease := claim(user, study)) is not None:
            submit(
                user, lease, "female" if Item.objects.get(pk=lease["item"]).external_id[0] == "f" else "male"
            )
    # 12 judgements since the (empty) fit: due at every=12, not at 13, never at 0.
    assert overlap_refits_due(every=13) == [] and overlap_refits_due(every=0) == []
    assert overlap_refits_due(every=12) == [study.pk]
    assert overlap_refits_run(every=12) == [study.pk]
    model = Study.objects.get(pk=study.pk).overlap_model
    assert (model["judgements"], model["study_judgements"]) == (12, 12) and model["classes"] == [
        "female",
        "male",
    ]
    assert overlap_refits_due(every=1) == [] and overlap_refits_run(every=1) == []  # nothing new since
    ItemFactory.create(study=study, external_id="m-new")  # the refit stopped the pilot's items
    lease = claim(team[2], study)
    assert lease is not None
    submit(team[2], lease, "male")
    assert overlap_refits_due(every=1) == [study.pk] and overlap_refits_due(every=2) == []
    # A paused study is not refitted (its answers may be under review).
    Study.objects.filter(pk=study.pk).update(status=Study.Status.PAUSED)
    assert overlap_refits_run(every=1) == []


@pytest.mark.django_db
def test_resume_stale_jobs_runs_the_refits_too(owner: User, study: Study, settings: Any) -> None:
    import io
    import json

    from django.core.management import call_command

    settings.WORKBENCH_OVERLAP_REFIT_EVERY = 2
    set_policy(owner, study, "posterior:0.9/3")
    ItemFactory.create(study=study)
    for user in people(study, 2):
        submit(user, claim(user, study), "male")
    out = io.StringIO()
    call_command("resume_stale_jobs", stdout=out)
    assert json.loads(out.getvalue())["overlap_refits"] == [study.pk]
    assert Study.objects.get(pk=study.pk).overlap_model["study_judgements"] == 2
