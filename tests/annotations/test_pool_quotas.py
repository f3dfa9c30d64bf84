"""Rater pools with quotas (issue 37, point 1): the study's settings, the claim filling each pool's quota per
item (unit, through the API with its statement count, and under concurrent claims on both databases), the
late submit, and the Overlap tab's form.

The pools are SeeGULL's two kinds of raters (a stereotype table rated by raters from the identity's own
region and by raters in North America, ``/work/shared/data/seegull``): here "Sub-Saharan Africa" with 2
judgements per item and "North America" with 1, overlap 3, on items named after SeeGULL rows.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import Annotator, Assignment, Item, Study
from annotations.selectors.pool_quotas import PoolNotCollected, pool_quota_progress
from annotations.services.assignment import (
    assignment_claim_next,
    assignment_submit,
    claim_order,
)
from annotations.services.rater_pools import pool_quotas_from_text, study_rater_pools_set
from annotations.services.studies import enrollment_add, study_update
from common.errors import Conflict, ValidationFailed
from tests.factories import ItemFactory, UserFactory
from tests.helpers import run_at_once

ANSWERS: dict[str, dict[str, Any]] = {
    "gender": {"value": "female"},
    "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard"]},
}
AFRICA, NORTH_AMERICA = "Sub-Saharan Africa", "North America"
QUOTAS = {AFRICA: 2, NORTH_AMERICA: 1}
SEEGULL_ROWS = ["Zimbabwean|terrorist", "Zimbabwean|rapist", "Nigerian|scammer", "Kenyan|runner"]
TRANSACTION = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


def person(study: Study, name: str, region: str | None) -> Annotator:
    user = UserFactory.create(username=name, role="annotator")
    enrollment_add(study=study, user=user, attributes={"region": region} if region is not None else {})
    return user.annotator


def seegull_items(study: Study, n: int) -> list[Item]:
    return [ItemFactory.create(study=study, external_id=SEEGULL_ROWS[i % 4] + f"#{i}") for i in range(n)]


def pooled(study: Study, quotas: dict[str, int] | None = None, overlap: int = 3) -> Study:
    study.overlap = overlap
    study.save()
    study_rater_pools_set(study=study, attribute="region", quotas=QUOTAS if quotas is None else quotas)
    study.refresh_from_db()
    return study


def claim_and_submit_all(study: Study, annotator: Annotator) -> list[int]:
    done = []
    while (assignment := assignment_claim_next(study=study, annotator=annotator)) is not None:
        assignment_submit(assignment=assignment, answers=ANSWERS)
        done.append(assignment.item_id)
    return done


def per_item_and_pool(study: Study) -> dict[int, Counter[str]]:
    found: dict[int, Counter[str]] = {}
    rows = Assignment.objects.filter(study=study, status="submitted").values_list("item_id", "rater_pool")
    for item_id, pool in rows:
        found.setdefault(item_id, Counter())[pool] += 1
    return found


# --- The study's settings ------------------------------------------------------------------------------


@pytest.mark.django_db
class TestSettings:
    def test_pools_and_quotas_are_saved_trimmed(self, study) -> None:
        saved = study_rater_pools_set(
            study=study, attribute=" region ", quotas={" Sub-Saharan Africa ": 2, NORTH_AMERICA: 1}
        )
        saved.refresh_from_db()
        assert (saved.rater_pool_attribute, saved.rater_pool_quotas) == ("region", QUOTAS)

    @pytest.mark.parametrize(
        ("quotas", "words"),
        [
            ({AFRICA: 0}, r"from 1 to the study's overlap \(3\); 0 is not"),
            ({AFRICA: 4}, r"from 1 to the study's overlap \(3\); 4 is not"),
            ({AFRICA: True}, "whole number"),
            ({AFRICA: 1.5}, "whole number"),
            ({AFRICA: "2"}, "whole number"),
            ({"": 1}, "printable characters"),
            ({"x" * 201: 1}, "printable characters"),
            ([AFRICA], "must be an object"),
            ({f"pool {n}": 1 for n in range(21)}, "at most 20 pools"),
        ],
    )
    def test_quotas_that_cannot_be_honoured_are_refused(self, study, quotas, words) -> None:
        with pytest.raises(ValidationFailed, match=words):
            study_rater_pools_set(study=study, attribute="region", quotas=quotas)
        study.refresh_from_db()
        assert (study.rater_pool_attribute, study.rater_pool_quotas) == ("", {})

    def test_quotas_need_an_attribute_and_clearing_it_clears_them(self, study) -> None:
        with pytest.raises(ValidationFailed, match="need the attribute"):
            study_rater_pools_set(study=study, attribute="", quotas=QUOTAS)
        pooled(study)
        cleared = study_rater_pools_set(study=study, attribute="")
        assert (cleared.rater_pool_attribute, cleared.rater_pool_quotas) == ("", {})

    def test_the_overlap_cannot_go_below_a_quota_unless_the_quotas_go_down_with_it(self, study) -> None:
        pooled(study)
        with pytest.raises(ValidationFailed, match="below the quota of pool 'Sub-Saharan Africa'"):
            study_update(study=study, overlap=1)
        with pytest.raises(ValidationFailed, match="below the quota"):
            study_update(study=study, overlap_policy="fixed:1")
        study.refresh_from_db()
        assert study.overlap == 3
        lowered = study_update(study=study, overlap=2, rater_pool_quotas={AFRICA: 1, NORTH_AMERICA: 1})
        lowered.refresh_from_db()
        assert (lowered.overlap, lowered.rater_pool_quotas) == (2, {AFRICA: 1, NORTH_AMERICA: 1})

    def test_the_quota_text_of_the_page(self) -> None:
        assert pool_quotas_from_text("Sub-Saharan Africa: 2\n\n  North America :1 \n") == QUOTAS
        assert pool_quotas_from_text("Region: with a colon: 2") == {"Region: with a colon": 2}
        with pytest.raises(ValidationFailed, match="line 2: write POOL: K"):
            pool_quotas_from_text("A: 1\nB two")
        with pytest.raises(ValidationFailed, match="line 2: pool 'A' is given twice"):
            pool_quotas_from_text("A: 1\nA: 2")
        for digits in ("²", "٣", "１"):  # digits to str.isdigit, not to int(): refused, not a 500
            with pytest.raises(ValidationFailed, match="line 1: write POOL: K"):
                pool_quotas_from_text(f"South Asia: {digits}")


# --- The claim -----------------------------------------------------------------------------------------


@pytest.mark.django_db
class TestClaim:
    def test_each_item_takes_each_pools_quota_and_no_more(self, study) -> None:
        pooled(study)
        items = seegull_items(study, 3)
        africans = [person(study, f"af{n}", AFRICA) for n in range(3)]
        americans = [person(study, f"na{n}", NORTH_AMERICA) for n in range(2)]
        assert sorted(claim_and_submit_all(study, africans[0])) == [i.pk for i in items]
        assert len(claim_and_submit_all(study, africans[1])) == 3
        assert claim_and_submit_all(study, africans[2]) == []  # every item holds its 2 from the pool
        assert len(claim_and_submit_all(study, americans[0])) == 3
        assert claim_and_submit_all(study, americans[1]) == []
        assert per_item_and_pool(study) == {item.pk: Counter({AFRICA: 2, NORTH_AMERICA: 1}) for item in items}
        progress = {
            row.pool: (row.quota, row.judgements, row.items_full, row.items)
            for row in pool_quota_progress(study)
        }
        assert progress == {AFRICA: (2, 6, 3, 3), NORTH_AMERICA: (1, 3, 3, 3)}

    def test_the_items_slots_still_hold_when_the_quotas_add_up_to_more(self, study) -> None:
        pooled(study, quotas={AFRICA: 3, NORTH_AMERICA: 3})
        (item,) = seegull_items(study, 1)
        for n in range(3):
            assert claim_and_submit_all(study, person(study, f"af{n}", AFRICA)) == [item.pk]
        assert claim_and_submit_all(study, person(study, "na", NORTH_AMERICA)) == []

    def test_a_live_lease_holds_its_pools_place_until_it_expires(self, study) -> None:
        pooled(study)
        (item,) = seegull_items(study, 1)
        first, second, third = (person(study, f"af{n}", AFRICA) for n in range(3))
        now = timezone.now()
        held = assignment_claim_next(study=study, annotator=first, now=now)
        assert held.rater_pool == AFRICA
        assert assignment_claim_next(study=study, annotator=second, now=now) is not None
        assert assignment_claim_next(study=study, annotator=third, now=now) is None
        later = now + timedelta(minutes=study.lease_minutes + 1)
        assert claim_order(study=study, annotator=third, now=later) == [item.pk]
        assert assignment_claim_next(study=study, annotator=third, now=later).item_id == item.pk

    def test_a_late_submit_is_refused_once_its_pool_is_full(self, study) -> None:
        pooled(study)
        (item,) = seegull_items(study, 1)
        late, second, third = (person(study, f"af{n}", AFRICA) for n in range(3))
        now = timezone.now()
        expired = assignment_claim_next(study=study, annotator=late, now=now)
        later = now + timedelta(minutes=study.lease_minutes + 1)
        for other in (second, third):
            assignment_submit(
                assignment=assignment_claim_next(study=study, annotator=other, now=later), answers=ANSWERS
            )
        # Two of three slots are taken, but both by the pool whose quota is 2.
        with pytest.raises(Conflict, match="expired"):
            assignment_submit(assignment=expired, answers=ANSWERS, now=later)
        assert per_item_and_pool(study) == {item.pk: Counter({AFRICA: 2})}

    @pytest.mark.parametrize(
        ("region", "words"),
        [
            ("Europe", "This study collects judgements per region; your region is not one it collects"),
            (None, "it has no region for you"),
            ("", "it has no region for you"),
        ],
    )
    def test_someone_of_no_collected_pool_is_given_nothing_and_told_why(self, study, region, words) -> None:
        pooled(study)
        seegull_items(study, 2)
        outsider = person(study, "outsider", region)
        with pytest.raises(PoolNotCollected, match=words):
            assignment_claim_next(study=study, annotator=outsider)
        assert not Assignment.objects.exists()

    def test_a_lease_held_when_quotas_leave_out_the_holders_pool_still_comes_back(self, study) -> None:
        """Mid-task when the researcher sets quotas without their pool: the item they hold is given back
        (service and API); only a new item is refused."""
        pooled(study, quotas={})
        seegull_items(study, 2)
        european = person(study, "eu", "Europe")
        held = assignment_claim_next(study=study, annotator=european)
        assert held is not None
        pooled(study)  # quotas for Africa and North America only
        assert assignment_claim_next(study=study, annotator=european).pk == held.pk
        api = _token_client(european.user)
        again = api.post(f"/api/studies/{study.pk}/assignments/next/")
        assert again.status_code == 200 and again.json()["id"] == held.pk
        assignment_submit(assignment=held, answers=ANSWERS)
        with pytest.raises(PoolNotCollected, match="your region is not one it collects"):
            assignment_claim_next(study=study, annotator=european)

    def test_without_quotas_the_pool_is_recorded_and_anyone_fills_the_slots(self, study) -> None:
        pooled(study, quotas={})
        (item,) = seegull_items(study, 1)
        for n, region in enumerate([AFRICA, AFRICA, "Europe"]):
            assert claim_and_submit_all(study, person(study, f"p{n}", region)) == [item.pk]
        assert per_item_and_pool(study) == {item.pk: Counter({AFRICA: 2, "Europe": 1})}

    def test_a_released_item_comes_back_under_the_pools_quota(self, study) -> None:
        from annotations.services.assignment import assignment_release

        pooled(study)
        (item,) = seegull_items(study, 1)
        first, second, third = (person(study, f"af{n}", AFRICA) for n in range(3))
        assignment_release(assignment=assignment_claim_next(study=study, annotator=first))
        for other in (second, third):
            assert claim_and_submit_all(study, other) == [item.pk]
        assert assignment_claim_next(study=study, annotator=first) is None  # given back, but the pool is full


# --- Through the API: the message, and the statements of a claim and a submit ----------------------------


def _token_client(user) -> APIClient:
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.mark.django_db
def test_the_api_claim_fills_the_quota_in_four_statements_and_refuses_an_outsider(study) -> None:
    pooled(study, quotas={AFRICA: 1, NORTH_AMERICA: 1}, overlap=2)
    seegull_items(study, 2)
    Item.objects.filter(study=study).update(shuffle_key=2**31 - 1)  # the first stretch finds them
    african, other_african = (person(study, f"af{n}", AFRICA) for n in range(2))
    api = _token_client(african.user)
    api.post(f"/api/studies/{study.pk}/assignments/next/")  # fills the token cache
    Assignment.objects.all().delete()
    with CaptureQueriesContext(connection) as claim:
        claimed = api.post(f"/api/studies/{study.pk}/assignments/next/")
    assert claimed.status_code == 200, claimed.content
    statements = [
        q["sql"] for q in claim.captured_queries if not q["sql"].lstrip().upper().startswith(TRANSACTION)
    ]
    assert len(statements) <= 4, [s[:90] for s in statements]
    with CaptureQueriesContext(connection) as submit:
        done = api.post(
            f"/api/assignments/{claimed.json()['id']}/submit/", {"answers": ANSWERS}, format="json"
        )
    assert done.status_code == 200
    statements = [
        q["sql"] for q in submit.captured_queries if not q["sql"].lstrip().upper().startswith(TRANSACTION)
    ]
    assert len(statements) <= 4, statements
    assert Assignment.objects.get(pk=claimed.json()["id"]).rater_pool == AFRICA
    # The other African gets the one item the first did not take; then nothing.
    second = _token_client(other_african.user)
    taken = second.post(f"/api/studies/{study.pk}/assignments/next/").json()
    assert taken["item"] != claimed.json()["item"]
    outsider = person(study, "outsider", "Europe")
    refused = _token_client(outsider.user).post(f"/api/studies/{study.pk}/assignments/next/")
    assert refused.status_code == 403
    assert "your region is not one it collects" in refused.json()["detail"]


@pytest.mark.django_db
def test_the_task_page_tells_an_outsider_why(study) -> None:
    pooled(study)
    seegull_items(study, 1)
    outsider = person(study, "outsider", "Europe")
    client = Client()
    client.force_login(outsider.user)
    page = client.get(f"/annotate/studies/{study.pk}/next/")
    assert page.status_code == 409
    assert "your region is not one it collects" in page.content.decode()


# --- Concurrent claims: no pool over-filled --------------------------------------------------------------


def _claim_and_submit_until_empty(ids: tuple[int, int]) -> None:
    claim_and_submit_all(Study.objects.get(pk=ids[0]), Annotator.objects.get(pk=ids[1]))


def _check_quotas_held_exactly(study: Study, items: list[Item]) -> None:
    assert per_item_and_pool(study) == {item.pk: Counter({AFRICA: 2, NORTH_AMERICA: 1}) for item in items}
    assert Assignment.objects.exclude(status="submitted").count() == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_on_postgresql_hold_every_pools_quota(study) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL)")
    pooled(study)
    items = seegull_items(study, 10)
    people = [person(study, f"af{n}", AFRICA) for n in range(6)]
    people += [person(study, f"na{n}", NORTH_AMERICA) for n in range(4)]
    run_at_once(_claim_and_submit_until_empty, [(study.pk, p.pk) for p in people])
    _check_quotas_held_exactly(study, items)


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_on_sqlite_hold_every_pools_quota(study) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL variant covers this")
    pooled(study)
    items = seegull_items(study, 4)
    people = [person(study, f"af{n}", AFRICA) for n in range(3)]
    people += [person(study, f"na{n}", NORTH_AMERICA) for n in range(2)]
    run_at_once(_claim_and_submit_until_empty, [(study.pk, p.pk) for p in people])
    _check_quotas_held_exactly(study, items)


# --- The Overlap tab's form and the API ----------------------------------------------------------------


@pytest.mark.django_db
class TestSettingsPage:
    def _client(self, user) -> Client:
        client = Client()
        client.force_login(user)
        return client

    def test_the_form_saves_the_pools_and_the_tab_shows_them(self, study, owner) -> None:
        client = self._client(owner)
        answer = client.post(
            f"/studies/{study.pk}/settings/",
            {"section": "pools", "attribute": "region", "quotas": "Sub-Saharan Africa: 2\nNorth America: 1"},
            follow=True,
        )
        assert "Rater pools saved." in answer.content.decode()
        study.refresh_from_db()
        assert (study.rater_pool_attribute, study.rater_pool_quotas) == ("region", QUOTAS)
        page = client.get(f"/studies/{study.pk}/").content.decode()
        assert 'id="pool-quotas"' in page and "North America: 1\nSub-Saharan Africa: 2</textarea>" in page

    def test_a_refused_form_says_why_and_saves_nothing(self, study, owner) -> None:
        answer = self._client(owner).post(
            f"/studies/{study.pk}/settings/",
            {"section": "pools", "attribute": "region", "quotas": "Sub-Saharan Africa: 9"},
            follow=True,
        )
        assert "Rater pools not saved: the quota of pool" in answer.content.decode()
        study.refresh_from_db()
        assert study.rater_pool_quotas == {}

    def test_only_the_studys_writers_change_them(self, study, other_researcher) -> None:
        answer = self._client(other_researcher).post(
            f"/studies/{study.pk}/settings/", {"section": "pools", "attribute": "region", "quotas": "A: 1"}
        )
        assert answer.status_code == 404
        study.refresh_from_db()
        assert study.rater_pool_attribute == ""

    def test_the_api_patches_and_shows_them(self, study, owner) -> None:
        api = APIClient()
        api.force_authenticate(owner)
        answer = api.patch(
            f"/api/studies/{study.pk}/",
            {"rater_pool_attribute": "region", "rater_pool_quotas": QUOTAS},
            format="json",
        )
        assert answer.status_code == 200, answer.content
        assert (answer.json()["rater_pool_attribute"], answer.json()["rater_pool_quotas"]) == (
            "region",
            QUOTAS,
        )
        refused = api.patch(f"/api/studies/{study.pk}/", {"rater_pool_quotas": {AFRICA: 5}}, format="json")
        assert refused.status_code == 400
        assert "overlap (3)" in refused.json()["detail"]
