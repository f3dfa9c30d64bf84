"""The assignment service: overlap, leases, pools, order, idempotent submit, skip, release; concurrency."""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from annotations.models import Annotation, AnnotationRevision, Annotator, Assignment, Item, Study
from annotations.services.assignment import (
    assignment_claim_next,
    assignment_release,
    assignment_skip,
    assignment_submit,
    assignments_expire,
    claim_order,
)
from annotations.services.studies import enrollment_add
from common.errors import Conflict, NotAllowed, ValidationFailed
from protocols.answers import SubmissionError
from tests.factories import ItemFactory, UserFactory
from tests.helpers import run_at_once

ANSWERS: dict[str, dict[str, Any]] = {
    "gender": {"value": "female"},
    "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard"]},
}


def make_annotator(study: Study, name: str, pool: str = "crowd") -> Annotator:
    user = UserFactory.create(username=name, role="annotator")
    enrollment_add(study=study, user=user, pool=pool)
    return user.annotator


def make_items(study: Study, n: int, **extra: object) -> list[Item]:
    return [ItemFactory.create(study=study, **extra) for _ in range(n)]


@pytest.mark.django_db
class TestClaim:
    def test_overlap_distinct_people_and_never_twice(self, study) -> None:
        study.overlap = 2
        study.save()
        make_items(study, 3)
        people = [make_annotator(study, f"a{i}") for i in range(4)]
        taken: Counter[int] = Counter()
        for person in people:
            seen = set()
            while (assignment := assignment_claim_next(study=study, annotator=person)) is not None:
                assert assignment.item_id not in seen
                seen.add(assignment.item_id)
                taken[assignment.item_id] += 1
                assignment_submit(assignment=assignment, answers=ANSWERS)
        assert sorted(taken.values()) == [2, 2, 2]
        assert Assignment.objects.filter(status="submitted").count() == 6
        # The last two annotators found only what was left: 6 slots for 4 people.
        assert assignment_claim_next(study=study, annotator=people[-1]) is None

    def test_fewest_completed_first(self, study) -> None:
        first, second, third = make_items(study, 3)
        a, b = make_annotator(study, "a"), make_annotator(study, "b")
        for item in (first, second):
            Assignment.objects.create(study=study, item=item, annotator=a, status="submitted")
        Item.objects.filter(pk__in=[first.pk, second.pk]).update(judgements=1)  # as assignment_submit does
        claimed = assignment_claim_next(study=study, annotator=b)
        assert claimed.item_id == third.pk

    def test_ties_are_random_but_fixed_per_annotator(self, study) -> None:
        items = make_items(study, 30)
        keys = [i * (2**31 // 30) for i in range(30)]
        random.Random(0).shuffle(keys)  # evenly spread, so every annotator's start lands in a different gap
        for item, key in zip(items, keys, strict=True):
            Item.objects.filter(pk=item.pk).update(shuffle_key=key)
        people = [make_annotator(study, f"p{i}") for i in range(5)]
        now = timezone.now()
        orders = [claim_order(study=study, annotator=person, now=now) for person in people]
        assert orders[0] == claim_order(study=study, annotator=people[0], now=now)
        assert all(sorted(order) == sorted(orders[0]) and len(order) == 30 for order in orders)
        assert len({order[0] for order in orders}) > 1  # not everyone starts on the same item
        assert orders[0] != sorted(orders[0])
        for order in orders[1:]:  # everyone walks the same random ring, from their own starting point
            start = orders[0].index(order[0])
            assert orders[0][start:] + orders[0][:start] == order
        assert assignment_claim_next(study=study, annotator=people[0]).item_id == orders[0][0]

    def test_a_held_lease_is_resumed_and_exclude_leases_one_ahead(self, study) -> None:
        make_items(study, 3)
        a = make_annotator(study, "a")
        first = assignment_claim_next(study=study, annotator=a)
        assert assignment_claim_next(study=study, annotator=a).pk == first.pk
        ahead = assignment_claim_next(study=study, annotator=a, exclude=[first.pk])
        assert ahead.pk != first.pk
        assert Assignment.objects.filter(annotator=a, status="leased").count() == 2

    def test_an_expired_lease_returns_the_slot(self, study) -> None:
        study.overlap = 1
        study.save()
        (item,) = make_items(study, 1)
        a, b = make_annotator(study, "a"), make_annotator(study, "b")
        held = assignment_claim_next(study=study, annotator=a)
        assert assignment_claim_next(study=study, annotator=b) is None
        later = timezone.now() + timedelta(minutes=study.lease_minutes + 1)
        taken = assignment_claim_next(study=study, annotator=b, now=later)
        assert taken is not None and taken.item_id == item.pk
        # a's late submit is refused: the slot went to b.
        with pytest.raises(Conflict):
            assignment_submit(assignment=held, answers=ANSWERS, now=later)
        assert not Annotation.objects.filter(annotator=a).exists()
        assert assignments_expire(study=study, now=later) == 1
        assert Assignment.objects.get(pk=held.pk).status == "expired"

    def test_a_late_submit_is_accepted_while_a_slot_is_free(self, study) -> None:
        make_items(study, 1)
        a = make_annotator(study, "a")
        held = assignment_claim_next(study=study, annotator=a)
        later = timezone.now() + timedelta(minutes=study.lease_minutes + 1)
        assert assignment_submit(assignment=held, answers=ANSWERS, now=later).status == "submitted"

    def test_expert_only_items_go_to_experts(self, study) -> None:
        (expert_item,) = make_items(study, 1, expert_only=True)
        crowd, expert = make_annotator(study, "c"), make_annotator(study, "e", pool="expert")
        assert assignment_claim_next(study=study, annotator=crowd) is None
        assert assignment_claim_next(study=study, annotator=expert).item_id == expert_item.pk

    def test_paused_study_and_strangers_get_nothing(self, study) -> None:
        make_items(study, 2)
        a = make_annotator(study, "a")
        stranger = UserFactory.create(username="stranger", role="annotator")
        from annotations.services.studies import annotator_for_user

        with pytest.raises(NotAllowed):
            assignment_claim_next(study=study, annotator=annotator_for_user(user=stranger))
        study.status = Study.Status.PAUSED
        study.save()
        with pytest.raises(Conflict):
            assignment_claim_next(study=study, annotator=a)
        assert not Assignment.objects.exists()

    def test_claim_query_count(self, study, django_assert_max_num_queries) -> None:
        Item.objects.bulk_create(
            [Item(study=study, external_id=f"bulk{i}", kind="image") for i in range(2000)]
        )
        a = make_annotator(study, "a")
        # 6 queries + 2 savepoints whatever the item count, + 1 if the ring scan wraps round
        with django_assert_max_num_queries(9):
            assert assignment_claim_next(study=study, annotator=a) is not None


@pytest.mark.django_db
class TestSubmit:
    def test_double_submit_stores_one_set(self, study) -> None:
        make_items(study, 1)
        a = make_annotator(study, "a")
        assignment = assignment_claim_next(study=study, annotator=a)
        assignment_submit(assignment=assignment, answers=ANSWERS, time_spent_ms=1200)
        assignment_submit(assignment=assignment, answers=ANSWERS, time_spent_ms=1300)
        assert Annotation.objects.filter(annotator=a).count() == 2
        assert not AnnotationRevision.objects.exists()
        before = timezone.now()
        assignment.refresh_from_db()  # the row as the submit wrote it (annotations/services/submit_writes.py)
        assert assignment.status == "submitted" and assignment.time_spent_ms == 1200
        assert assignment.completed_at is not None and assignment.completed_at <= before
        assert assignment.lease_expires_at is None
        assert Item.objects.get(pk=assignment.item_id).judgements == 1  # counted once, not per submit

    def test_an_edit_keeps_history(self, study) -> None:
        make_items(study, 1)
        a = make_annotator(study, "a")
        assignment = assignment_claim_next(study=study, annotator=a)
        assignment_submit(assignment=assignment, answers=ANSWERS)
        changed = {**ANSWERS, "gender": {"value": "male"}}
        assignment_submit(assignment=assignment, answers=changed, user=a.user)
        gender = Annotation.objects.get(annotator=a, question_key="gender")
        assert gender.value == "male"
        assert [r.value for r in gender.revisions.all()] == ["female"]
        assert gender.revisions.get().replaced_by == a.user

    def test_invalid_answers_write_nothing(self, study) -> None:
        make_items(study, 1)
        a = make_annotator(study, "a")
        assignment = assignment_claim_next(study=study, annotator=a)
        with pytest.raises(SubmissionError) as caught:
            assignment_submit(
                assignment=assignment,
                answers={"gender": {"value": "robot"}, "attributes": {"value": ["hat", "none_of_the_above"]}},
            )
        assert set(caught.value.errors) == {"gender", "attributes"}
        assert not Annotation.objects.exists()
        assert Assignment.objects.get(pk=assignment.pk).status == "leased"

    def test_someone_elses_assignment_is_refused(self, study) -> None:
        make_items(study, 1)
        a, b = make_annotator(study, "a"), make_annotator(study, "b")
        assignment = assignment_claim_next(study=study, annotator=a)
        with pytest.raises(NotAllowed):
            assignment_submit(assignment=assignment, answers=ANSWERS, user=b.user)
        with pytest.raises(NotAllowed):
            assignment_skip(assignment=assignment, reason="x", user=b.user)
        assert not Annotation.objects.exists()
        assert Assignment.objects.get(pk=assignment.pk).status == "leased"

    def test_submit_query_count(self, study, django_assert_max_num_queries) -> None:
        make_items(study, 1)
        a = make_annotator(study, "a")
        assignment = assignment_claim_next(study=study, annotator=a)
        with django_assert_max_num_queries(8):  # 6 queries + 2 savepoints
            assignment_submit(assignment=assignment, answers=ANSWERS)


@pytest.mark.django_db
class TestSkipAndRelease:
    def test_skip_needs_a_reason_and_frees_the_slot(self, study) -> None:
        study.overlap = 1
        study.save()
        make_items(study, 1)
        a, b = make_annotator(study, "a"), make_annotator(study, "b")
        assignment = assignment_claim_next(study=study, annotator=a)
        with pytest.raises(ValidationFailed):
            assignment_skip(assignment=assignment, reason="  ")
        assert Assignment.objects.get(pk=assignment.pk).status == "leased"
        assignment_skip(assignment=assignment, reason="image is broken")
        assert Assignment.objects.get(pk=assignment.pk).skip_reason == "image is broken"
        assert assignment_claim_next(study=study, annotator=a) is None  # never again for a
        assert assignment_claim_next(study=study, annotator=b) is not None

    def test_no_skip_after_submit(self, study) -> None:
        make_items(study, 1)
        a = make_annotator(study, "a")
        assignment = assignment_claim_next(study=study, annotator=a)
        assignment_submit(assignment=assignment, answers=ANSWERS)
        with pytest.raises(Conflict):
            assignment_skip(assignment=assignment, reason="oops")
        assert Assignment.objects.get(pk=assignment.pk).status == "submitted"
        with pytest.raises(Conflict):
            assignment_submit(
                assignment=Assignment.objects.create(
                    study=study, item=ItemFactory.create(study=study), annotator=a, status="skipped"
                ),
                answers=ANSWERS,
            )

    def test_released_item_comes_back_last(self, study) -> None:
        make_items(study, 2)
        a = make_annotator(study, "a")
        first = assignment_claim_next(study=study, annotator=a)
        assignment_release(assignment=first)
        second = assignment_claim_next(study=study, annotator=a)
        assert second.item_id != first.item_id
        assignment_submit(assignment=second, answers=ANSWERS)
        again = assignment_claim_next(study=study, annotator=a)
        assert again.pk == first.pk and again.status == "leased"


def _claim_and_submit_until_empty(ids: tuple[int, int]) -> None:
    study, annotator = Study.objects.get(pk=ids[0]), Annotator.objects.get(pk=ids[1])
    while (assignment := assignment_claim_next(study=study, annotator=annotator)) is not None:
        assignment_submit(assignment=assignment, answers=ANSWERS)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_on_postgresql_never_over_fill_and_lose_no_slot(study) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL)")
    study.overlap = 3
    study.save()
    items = make_items(study, 12)
    people = [make_annotator(study, f"p{i}") for i in range(10)]
    run_at_once(_claim_and_submit_until_empty, [(study.pk, p.pk) for p in people])
    per_item = Counter(Assignment.objects.filter(status="submitted").values_list("item_id", flat=True))
    assert {item.pk: per_item[item.pk] for item in items} == {item.pk: 3 for item in items}
    assert Assignment.objects.exclude(status="submitted").count() == 0
    assert Annotation.objects.count() == 12 * 3 * 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_on_sqlite_are_serialised(study) -> None:
    """The same check on the embedded default (IMMEDIATE transactions, WAL): slower, still exact."""
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL variant covers this")
    study.overlap = 2
    study.save()
    items = make_items(study, 5)
    people = [make_annotator(study, f"s{i}") for i in range(4)]
    run_at_once(_claim_and_submit_until_empty, [(study.pk, p.pk) for p in people])
    per_item = Counter(Assignment.objects.filter(status="submitted").values_list("item_id", flat=True))
    assert {item.pk: per_item[item.pk] for item in items} == {item.pk: 2 for item in items}


@pytest.mark.django_db
def test_a_manifest_marks_items_expert_only(study, tmp_path) -> None:
    from annotations.interchange.item_import import items_import
    from common.errors import ImportRefused

    manifest = tmp_path / "m.csv"
    manifest.write_text("external_id,expert_only\na,true\nb,\n")
    items_import(study=study, address=manifest)
    assert dict(Item.objects.values_list("external_id", "expert_only")) == {"a": True, "b": False}
    assert "expert_only" not in Item.objects.get(external_id="a").metadata
    bad = tmp_path / "bad.csv"
    bad.write_text("external_id,expert_only\nc,perhaps\n")
    with pytest.raises(ImportRefused):
        items_import(study=study, address=bad)
    assert not Item.objects.filter(external_id="c").exists()
