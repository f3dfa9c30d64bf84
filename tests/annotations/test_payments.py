"""Payment records: values worked out by hand, the CSV (formula-safe), the page section, the API, access."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from annotations.models import Assignment, Item, Study
from annotations.selectors.payments import PAYMENT_COLUMNS, payment_rows
from annotations.services.invitations import (
    PlatformIds,
    invitation_create,
    participant_complete,
    participant_join,
)
from annotations.services.studies import enrollment_add
from tests.factories import ItemFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def assign(
    study: Study, item: Item, annotator: Any, *, status: str, spent: int | None, start: int, end: int | None
) -> Assignment:
    """An assignment leased ``start`` seconds after T0 and finished ``end`` seconds after T0."""
    assignment = Assignment.objects.create(
        study=study,
        item=item,
        annotator=annotator,
        status=status,
        time_spent_ms=spent,
        completed_at=T0 + timedelta(seconds=end) if end is not None else None,
        lease_expires_at=timezone.now() + timedelta(hours=1) if status == "leased" else None,
    )
    Assignment.objects.filter(pk=assignment.pk).update(created_at=T0 + timedelta(seconds=start))
    return assignment


@pytest.fixture
def records(study, owner):
    items = [ItemFactory.create(study=study, external_id=f"i{n}") for n in range(6)]
    invitation = invitation_create(
        study=study,
        created_by=owner,
        expires_at=timezone.now() + timedelta(days=1),
        max_uses=5,
        platform="prolific",
        completion_code="CODE",
        label='=HYPERLINK("http://evil.example","x")',
    )
    paid, _ = participant_join(
        invitation=invitation,
        ids=PlatformIds(
            participant_id="5f1a2b3c4d5e6f7a8b9c0d1e", platform_study_id="60aa", session_id="-12"
        ),
    )
    idle, _ = participant_join(invitation=invitation, ids=PlatformIds(participant_id="idle01"))
    person = paid.user.annotator
    # submitted with 4.0 s, 9.0 s and 6.0 s measured, one submitted without a measurement, one skipped
    assign(study, items[0], person, status="submitted", spent=4000, start=0, end=10)
    assign(study, items[1], person, status="submitted", spent=9000, start=20, end=30)
    assign(study, items[2], person, status="submitted", spent=6000, start=40, end=50)
    assign(study, items[3], person, status="submitted", spent=None, start=60, end=70)
    assign(study, items[4], person, status="skipped", spent=None, start=80, end=95)
    participant_complete(participant=paid, now=T0 + timedelta(seconds=100))
    regular = UserFactory.create(username="-2+3", role="annotator")  # a username a spreadsheet would compute
    enrollment_add(study=study, user=regular)
    assign(study, items[0], regular.annotator, status="submitted", spent=2500, start=5, end=8)
    assign(study, items[5], regular.annotator, status="leased", spent=None, start=300, end=None)
    return {"paid": paid, "idle": idle, "regular": regular}


def test_rows_by_hand(study, records) -> None:
    rows = {row["annotator"]: row for row in payment_rows(study)}
    paid, idle = records["paid"], records["idle"]
    assert set(rows) == {paid.user.username, idle.user.username, "-2+3"}
    row = rows[paid.user.username]
    assert {
        key: row[key]
        for key in ("items_completed", "items_skipped", "items_timed", "seconds_total", "seconds_median")
    } == {
        "items_completed": 4,
        "items_skipped": 1,
        "items_timed": 3,
        "seconds_total": 19.0,
        "seconds_median": 6.0,
    }
    assert row["first_activity"] == T0 and row["last_activity"] == T0 + timedelta(seconds=95)
    assert row["completed_at"] == T0 + timedelta(seconds=100)
    assert (row["platform"], row["participant_id"], row["platform_study_id"], row["session_id"]) == (
        "prolific",
        "5f1a2b3c4d5e6f7a8b9c0d1e",
        "60aa",
        "-12",
    )
    regular = rows["-2+3"]
    assert (
        regular["items_completed"],
        regular["seconds_total"],
        regular["seconds_median"],
        regular["platform"],
    ) == (1, 2.5, 2.5, "")
    assert regular["first_activity"] == T0 + timedelta(seconds=5)
    assert regular["last_activity"] == T0 + timedelta(seconds=300)  # the live lease is activity too
    nothing = rows[idle.user.username]
    assert (
        nothing["items_completed"],
        nothing["seconds_total"],
        nothing["seconds_median"],
        nothing["first_activity"],
        nothing["participant_id"],
    ) == (0, 0.0, None, None, "idle01")


def test_csv_values_and_formula_escaping(study, owner, records) -> None:
    client = Client()
    client.force_login(owner)
    response = client.get(f"/studies/{study.pk}/payments.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert f"study-{study.pk}-payments.csv" in response["Content-Disposition"]
    table = list(csv.reader(io.StringIO(response.getvalue().decode())))
    assert table[0] == PAYMENT_COLUMNS
    rows = {line[0]: dict(zip(PAYMENT_COLUMNS, line, strict=True)) for line in table[1:]}
    paid = rows[records["paid"].user.username]
    assert (
        paid["items_completed"] == "4" and paid["seconds_total"] == "19.0" and paid["seconds_median"] == "6.0"
    )
    assert paid["first_activity"] == "2025-03-01T09:00:00+00:00"
    assert paid["completed_at"] == "2025-03-01T09:01:40+00:00"
    assert paid["session_id"] == "'-12"  # would be a formula in a spreadsheet
    assert paid["invitation"] == '\'=HYPERLINK("http://evil.example","x")'
    assert paid["participant_id"] == "5f1a2b3c4d5e6f7a8b9c0d1e"
    assert "'-2+3" in rows and rows["'-2+3"]["seconds_median"] == "2.5"
    idle = rows[records["idle"].user.username]
    assert idle["seconds_median"] == "" and idle["first_activity"] == "" and idle["items_completed"] == "0"
    for line in table[1:]:
        assert not any(cell[:1] in ("=", "+", "-", "@") for cell in line), line


def test_progress_page_shows_the_records(study, owner, records) -> None:
    client = Client()
    client.force_login(owner)
    page = client.get(f"/studies/{study.pk}/progress/").content.decode()
    assert "Payment records" in page and f"/studies/{study.pk}/payments.csv" in page
    assert "prolific: 5f1a2b3c4d5e6f7a8b9c0d1e" in page and "19.0" in page


def test_api(study, owner, records) -> None:
    rows = {
        row["annotator"]: row for row in client_for(owner).get(f"/api/studies/{study.pk}/payments/").json()
    }
    paid = rows[records["paid"].user.username]
    assert paid["items_completed"] == 4 and paid["seconds_median"] == 6.0 and paid["session_id"] == "-12"


@pytest.mark.parametrize(
    ("who", "status"),
    [("owner", 200), ("other", 404), ("annotator", 403), ("participant", 403), ("anonymous", 302)],
)
def test_csv_permissions(study, owner, other_researcher, annotator_user, records, who, status) -> None:
    enrollment_add(study=study, user=annotator_user)
    user = {
        "owner": owner,
        "other": other_researcher,
        "annotator": annotator_user,
        "participant": records["paid"].user,
        "anonymous": None,
    }[who]
    client = Client()
    if user is not None:
        client.force_login(user)
    assert client.get(f"/studies/{study.pk}/payments.csv").status_code == status
    api_status = {"owner": 200, "other": 404, "annotator": 403, "participant": 403, "anonymous": 401}[who]
    assert client_for(user).get(f"/api/studies/{study.pk}/payments/").status_code == api_status
