"""Tenancy (issue 15, points 1 and 9; docs/security.md, "Tenancy: pools, enrolment, demographic answers").

What a researcher does in one study (B) changes nothing anyone can do or is in another study (A):
every action that writes to an account, an annotator or an enrolment is done in B through HTTP, and
then every permission and every per-person figure in A is read again through HTTP and compared
with what it was before. Then the enrolment rule (whom a researcher may enrol), demographic answers
kept per study, and what annotators see of a study.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from annotations.models import Annotation, ConsensusLabel, Enrollment, Invitation, Study, User
from annotations.services.assignment import assignment_claim_next, assignment_submit
from annotations.services.controls import quality_settings_update
from annotations.services.studies import annotator_for_user, enrollment_add
from tests.factories import ItemFactory, StudyFactory, UserFactory
from tests.helpers import client_for, streamed

pytestmark = pytest.mark.django_db

ANSWER: dict[str, dict[str, Any]] = {"gender": {"value": "female"}, "attributes": {"value": ["hat"]}}


def page_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def join(token: str, region: str) -> int:
    """Someone opens an invitation link and starts, giving ``region`` on its form; the POST's status."""
    client = Client()
    client.get(f"/join/{token}/")
    return client.post(f"/join/{token}/begin/", {"d-region": region}).status_code


@pytest.fixture
def world() -> dict[str, Any]:
    """Study A (owner A) and study B (owner B). ``crowd`` and ``expert`` are A's crowd annotator and
    A's expert; an admin also enrolled both in B (crowd there), so B's researcher may act on them in B.
    Each submitted one item of A, so A's reports list them. A has an item for experts only."""
    admin = UserFactory.create(username="root", role=User.Role.ADMIN, is_superuser=True, is_staff=True)
    owner_a, owner_b = UserFactory.create(username="owner-a"), UserFactory.create(username="owner-b")
    a = StudyFactory.create(owner=owner_a, name="A", overlap=1)
    b = StudyFactory.create(owner=owner_b, name="B", overlap=1)
    for name in ("a1", "a2", "a3"):
        ItemFactory.create(study=a, external_id=name)
    b_item = ItemFactory.create(study=b, external_id="b1")
    crowd = UserFactory.create(username="crowd", role=User.Role.ANNOTATOR)
    expert = UserFactory.create(username="expert", role=User.Role.ANNOTATOR)
    enrollment_add(study=a, user=crowd, pool="crowd")
    enrollment_add(study=a, user=expert, pool="expert")
    enrollment_add(study=b, user=crowd)
    enrollment_add(study=b, user=expert)
    for user in (crowd, expert):
        annotator = annotator_for_user(user=user)
        assignment = assignment_claim_next(study=a, annotator=annotator)
        assert assignment is not None
        assignment_submit(assignment=assignment, answers=ANSWER, source=Annotation.Source.API, user=user)
    ItemFactory.create(study=a, external_id="a-expert", expert_only=True)
    return {
        "admin": admin,
        "owner_a": owner_a,
        "owner_b": owner_b,
        "a": a,
        "b": b,
        "b_item": b_item,
        "crowd": crowd,
        "expert": expert,
    }


def _row(rows: list[dict[str, Any]], key: str, name: str) -> dict[str, Any] | None:
    return next((row for row in rows if row.get(key) == name), None)


def _export_annotator(client: Any, study: Study, name: str) -> dict[str, Any] | None:
    response = client.get(f"/api/studies/{study.pk}/export/jsonl/")
    assert response.status_code == 200
    lines = b"".join(response.streaming_content).decode().splitlines()
    records = [json.loads(line) for line in lines]
    return _row([r for r in records if r["type"] == "annotator"], "name", name)


def standing_in_a(world: dict[str, Any], user: User) -> dict[str, Any]:
    """Everything ``user`` can do and is in study A, read through HTTP (the person's own pages and
    API, and A's researcher's pages and API)."""
    a = world["a"]
    me_api, me_page = client_for(user), page_client(user)
    owner_api, owner_page = client_for(world["owner_a"]), page_client(world["owner_a"])
    item = a.items.order_by("id").first()
    dashboard = me_page.get("/annotate/").content.decode()
    card = dashboard[dashboard.index(">A</h2>") :].split("</li>")[0]
    progress_csv = b"".join(streamed(owner_page.get(f"/studies/{a.pk}/progress.csv?by=annotator")))
    enrolments = owner_api.get(f"/api/studies/{a.pk}/enrollments/").json()
    quality = owner_api.get(f"/api/studies/{a.pk}/quality/").json()["annotators"]
    payments = owner_api.get(f"/api/studies/{a.pk}/payments/").json()
    exported = _export_annotator(owner_api, a, user.username) or {}
    enrolment = _row(enrolments, "username", user.username) or {}
    return {
        "adjudication page": me_page.get(f"/studies/{a.pk}/adjudicate/").status_code,
        "adjudication item page": me_page.get(f"/studies/{a.pk}/adjudicate/{item.pk}/").status_code,
        "adjudication API": me_api.get(f"/api/studies/{a.pk}/adjudication/").status_code,
        "dashboard: adjudicate link": f"/studies/{a.pk}/adjudicate/" in card,
        "dashboard: items open to them": re.search(r'class="count">([^<]*)<', card).group(1),
        "enrolment pool": enrolment.get("pool"),
        "enrolment answers": enrolment.get("attributes"),
        "quality pool": (_row(quality, "annotator", user.username) or {}).get("pool"),
        "payments pool": (_row(payments, "annotator", user.username) or {}).get("pool"),
        "progress pool": [
            line for line in progress_csv.decode().splitlines() if line.startswith(user.username)
        ],
        "export pool": exported.get("pool"),
        "export answers": exported.get("attributes"),
    }


# --- Acting in B ---------------------------------------------------------------------------------


def api_enrol(as_: str, username: str, pool: str) -> Callable[[dict[str, Any]], int]:
    def act(world: dict[str, Any]) -> int:
        return (
            client_for(world[as_])
            .post(
                f"/api/studies/{world['b'].pk}/enrollments/",
                {"username": username, "pool": pool},
                format="json",
            )
            .status_code
        )

    return act


def page_enrol(username: str, pool: str) -> Callable[[dict[str, Any]], int]:
    def act(world: dict[str, Any]) -> int:
        return (
            page_client(world["owner_b"])
            .post(f"/studies/{world['b'].pk}/enroll/", {"username": username, "pool": pool})
            .status_code
        )

    return act


def enrol_pool(pool: str) -> Callable[[dict[str, Any]], int]:
    def act(world: dict[str, Any]) -> int:
        return (
            page_client(world["owner_b"])
            .post(f"/studies/{world['b'].pk}/enroll-pool/", {"pool": pool})
            .status_code
        )

    return act


def exclude_in_b(world: dict[str, Any]) -> int:
    annotator = annotator_for_user(user=world["crowd"])
    return (
        client_for(world["owner_b"])
        .post(
            f"/api/studies/{world['b'].pk}/exclusions/",
            {"annotator": annotator.pk, "reason": "rushed"},
            format="json",
        )
        .status_code
    )


def import_names_in_b(world: dict[str, Any]) -> int:
    """Annotations imported into B naming A's people, with a pool and demographic answers."""
    lines = [
        {
            "item": "b1",
            "annotator": name,
            "question": "gender",
            "value": "male",
            "pool": "expert" if name == "crowd" else "crowd",
            "annotator_attributes": {"region": "Mars"},
        }
        for name in ("crowd", "expert")
    ]
    upload = io.BytesIO("".join(json.dumps(line) + "\n" for line in lines).encode())
    upload.name = "b.jsonl"
    return (
        client_for(world["owner_b"])
        .post(f"/api/studies/{world['b'].pk}/annotations/import/", {"file": upload}, format="multipart")
        .status_code
    )


def expert_invitation_in_b(world: dict[str, Any]) -> int:
    """An expert link of B with a demographic form, and someone joining through it."""
    response = client_for(world["owner_b"]).post(
        f"/api/studies/{world['b'].pk}/invitations/",
        {
            "max_uses": 2,
            "pool": "expert",
            "demographics": [{"key": "region", "label": "Region", "kind": "text"}],
        },
        format="json",
    )
    assert response.status_code == 201
    token = Invitation.objects.get(pk=response.json()["id"]).token
    return join(token, "Mars")


ACTIONS_IN_B = {
    "researcher B makes A's crowd annotator an expert (API)": (api_enrol("owner_b", "crowd", "expert"), 201),
    "researcher B makes A's expert crowd (API)": (api_enrol("owner_b", "expert", "crowd"), 201),
    "researcher B makes A's crowd annotator an expert (page)": (page_enrol("crowd", "expert"), 302),
    "researcher B makes A's expert crowd (page)": (page_enrol("expert", "crowd"), 302),
    "an admin makes A's crowd annotator an expert in B (API)": (api_enrol("admin", "crowd", "expert"), 201),
    "researcher B enrols the expert pool": (enrol_pool("expert"), 302),
    "researcher B enrols the crowd pool": (enrol_pool("crowd"), 302),
    "researcher B excludes A's crowd annotator from B": (exclude_in_b, 201),
    "researcher B imports answers naming A's people with pools and answers": (import_names_in_b, 201),
    "researcher B makes an expert link and someone joins": (expert_invitation_in_b, 302),
}


@pytest.mark.parametrize("action", list(ACTIONS_IN_B), ids=list(ACTIONS_IN_B))
def test_nothing_done_in_b_changes_anything_in_a(world, action) -> None:
    before = {who: standing_in_a(world, world[who]) for who in ("crowd", "expert")}
    act, status = ACTIONS_IN_B[action]
    assert act(world) == status
    after = {who: standing_in_a(world, world[who]) for who in ("crowd", "expert")}
    assert after == before
    # The standing compared is the real one: A's expert adjudicates A, A's crowd annotator does not.
    assert before["expert"]["adjudication API"] == 200 and before["crowd"]["adjudication API"] == 403
    assert before["expert"]["enrolment pool"] == "expert" and before["crowd"]["enrolment pool"] == "crowd"


def test_the_pool_given_in_b_holds_in_b_only(world) -> None:
    """The attack of issue 15 point 1, end to end: made an expert in B, A's crowd annotator may adjudicate
    B, and still can neither read A's adjudication queue and everyone's answers nor write A's labels."""
    a, b, crowd = world["a"], world["b"], world["crowd"]
    assert api_enrol("owner_b", "crowd", "expert")(world) == 201
    me = client_for(crowd)
    assert me.get(f"/api/studies/{b.pk}/adjudication/").status_code == 200
    item = a.items.order_by("id").first()
    assert me.get(f"/api/studies/{a.pk}/adjudication/").status_code == 403
    assert page_client(crowd).get(f"/studies/{a.pk}/adjudicate/{item.pk}/").status_code == 403
    response = me.post(
        f"/api/studies/{a.pk}/adjudication/",
        {"item": item.pk, "question": "gender", "value": "male", "note": "mine now"},
        format="json",
    )
    assert response.status_code == 403
    assert not ConsensusLabel.objects.filter(study=a).exists()
    # Nor is an expert-only item of A handed to them.
    claimed = me.post(f"/api/studies/{a.pk}/assignments/next/")
    assert (
        claimed.status_code == 200
        and claimed.json()["task"]["item"]["id"] != a.items.get(expert_only=True).pk
    )
    enrolments = client_for(world["owner_b"]).get(f"/api/studies/{b.pk}/enrollments/").json()
    assert _row(enrolments, "username", "crowd")["pool"] == "expert"


def test_making_an_expert_crowd_in_b_leaves_their_rights_in_a(world) -> None:
    assert api_enrol("owner_b", "expert", "crowd")(world) == 201
    expert = client_for(world["expert"])
    assert expert.get(f"/api/studies/{world['a'].pk}/adjudication/").status_code == 200
    assert expert.get(f"/api/studies/{world['b'].pk}/adjudication/").status_code == 403


# --- The enrolment rule --------------------------------------------------------------------------


@pytest.fixture
def instance() -> dict[str, Any]:
    """Two researchers' studies on one instance, an admin, and annotators of each."""
    admin = UserFactory.create(username="root", role=User.Role.ADMIN, is_superuser=True, is_staff=True)
    # createsuperuser leaves the default role: an admin whose role says annotator is still staff.
    superuser = UserFactory.create(
        username="super", role=User.Role.ANNOTATOR, is_superuser=True, is_staff=True
    )
    staff = UserFactory.create(username="staff", role=User.Role.ANNOTATOR, is_staff=True)
    mine_owner, theirs_owner = UserFactory.create(username="me"), UserFactory.create(username="them")
    earlier = StudyFactory.create(owner=mine_owner, name="my earlier study")
    target = StudyFactory.create(owner=mine_owner, name="my new study")
    theirs = StudyFactory.create(owner=theirs_owner, name="their study")
    own = UserFactory.create(username="own", role=User.Role.ANNOTATOR)
    own_expert = UserFactory.create(username="own-expert", role=User.Role.ANNOTATOR)
    stranger = UserFactory.create(username="stranger", role=User.Role.ANNOTATOR)
    loose = UserFactory.create(
        username="loose", role=User.Role.ANNOTATOR
    )  # made by an admin, enrolled nowhere
    enrollment_add(study=earlier, user=own)
    enrollment_add(study=earlier, user=own_expert, pool="expert")
    enrollment_add(study=theirs, user=stranger, pool="expert")
    return {
        "admin": admin,
        "superuser": superuser,
        "staff": staff,
        "me": mine_owner,
        "them": theirs_owner,
        "target": target,
        "theirs": theirs,
        "own": own,
        "own_expert": own_expert,
        "stranger": stranger,
        "loose": loose,
    }


def enrolled_in(study: Study) -> list[str]:
    return sorted(Enrollment.objects.filter(study=study).values_list("user__username", flat=True))


def test_enrol_pool_takes_only_the_researchers_own_annotators(instance) -> None:
    target, me = instance["target"], page_client(instance["me"])
    me.post(f"/studies/{target.pk}/enroll-pool/", {"pool": "crowd"})
    me.post(f"/studies/{target.pk}/enroll-pool/", {"pool": "expert"})
    assert enrolled_in(target) == ["own", "own-expert"]
    assert dict(Enrollment.objects.filter(study=target).values_list("user__username", "pool")) == {
        "own": "crowd",
        "own-expert": "expert",
    }
    listed = {row["name"] for row in client_for(instance["me"]).get("/api/annotators/").json()["results"]}
    assert listed.isdisjoint({"root", "super", "staff", "stranger", "loose"})


def test_admins_enrol_any_annotator_account_but_never_staff(instance) -> None:
    target, admin = instance["target"], page_client(instance["admin"])
    admin.post(f"/studies/{target.pk}/enroll-pool/", {"pool": "crowd"})
    assert enrolled_in(target) == ["loose", "own"]
    api = client_for(instance["admin"])
    url = f"/api/studies/{target.pk}/enrollments/"
    assert api.post(url, {"username": "stranger", "pool": "expert"}, format="json").status_code == 201
    for name in ("super", "staff", "me", "root"):
        assert api.post(url, {"username": name}, format="json").status_code == 400
    assert enrolled_in(target) == ["loose", "own", "stranger"]


@pytest.mark.parametrize("name", ["stranger", "loose", "root", "super", "staff", "them", "me"])
def test_a_researcher_may_not_enrol_others_and_learns_nothing(instance, name) -> None:
    """Someone else's annotator, an account enrolled nowhere, staff and researchers are refused exactly
    like a name that does not exist, on the API and on the page."""
    target, api = instance["target"], client_for(instance["me"])
    url = f"/api/studies/{target.pk}/enrollments/"
    refused = api.post(url, {"username": name, "pool": "expert"}, format="json")
    unknown = api.post(url, {"username": "no-such-account", "pool": "expert"}, format="json")
    assert refused.status_code == unknown.status_code == 400
    assert refused.json()["detail"] == unknown.json()["detail"].replace("no-such-account", name)
    page = page_client(instance["me"])
    shown = page.post(f"/studies/{target.pk}/enroll/", {"username": name, "pool": "crowd"}, follow=True)
    assert f"no account named &#x27;{name}&#x27; that you may enrol" in shown.content.decode()
    assert enrolled_in(target) == []


def test_a_researcher_enrols_their_own_annotator_in_a_pool(instance) -> None:
    target = instance["target"]
    response = client_for(instance["me"]).post(
        f"/api/studies/{target.pk}/enrollments/", {"username": "own", "pool": "expert"}, format="json"
    )
    assert response.status_code == 201
    assert {key: response.json()[key] for key in ("username", "pool", "attributes")} == {
        "username": "own",
        "pool": "expert",
        "attributes": {},
    }
    # Expert here, still crowd in the earlier study.
    pools = dict(Enrollment.objects.filter(user__username="own").values_list("study__name", "pool"))
    assert pools == {"my earlier study": "crowd", "my new study": "expert"}


# --- Demographic answers belong to the study they were given to ----------------------------------


def test_demographic_answers_stay_in_the_study_they_were_given_to(instance) -> None:
    theirs, them = instance["theirs"], client_for(instance["them"])
    response = them.post(
        f"/api/studies/{theirs.pk}/invitations/",
        {"max_uses": 1, "demographics": [{"key": "region", "label": "Region", "kind": "text"}]},
        format="json",
    )
    token = Invitation.objects.get(pk=response.json()["id"]).token
    assert join(token, "EMEA-secret") == 302
    participant = User.objects.get(participant__study=theirs)
    given = _row(them.get(f"/api/studies/{theirs.pk}/enrollments/").json(), "username", participant.username)
    assert given is not None and given["attributes"] == {"region": "EMEA-secret"}
    # Even an enrolment made by hand in the admin shows none of it to another study's researcher.
    target = instance["target"]
    Enrollment.objects.create(study=target, user=participant)
    me = client_for(instance["me"])
    seen = [
        me.get("/api/annotators/").content,
        me.get(f"/api/annotators/{participant.annotator.pk}/").content,
        me.get(f"/api/studies/{target.pk}/enrollments/").content,
        page_client(instance["me"]).get(f"/studies/{target.pk}/").content,
    ]
    for body in seen:
        assert b"EMEA-secret" not in body
    assert "participant" in str(seen[2]) or participant.username.encode() in seen[2]


# --- What an annotator sees of a study -----------------------------------------------------------


def test_annotators_get_no_researcher_only_description(world) -> None:
    a = world["a"]
    a.description = "Hypothesis: nurses are drawn as women"
    a.protocol = {**a.protocol, "description": "Researchers only: we expect bias here"}
    a.reveal_after_submit = True
    a.save()
    quality_settings_update(study=a, changes={"control_rate": 0.1})
    shared = UserFactory.create(username="colleague")
    a.shared_with.add(shared)
    annotator = client_for(world["crowd"])
    detail = annotator.get(f"/api/studies/{a.pk}/").json()
    listed = _row(annotator.get("/api/studies/").json()["results"], "id", a.pk)
    for body in (detail, listed):
        assert body is not None
        assert set(body) == {"id", "name", "status", "preset", "protocol", "lease_minutes", "options"}
        assert "description" not in body["protocol"] and body["protocol"]["questions"]
        assert body["options"] == {"reveal_after_submit": True}
        text = json.dumps(body)
        assert "Hypothesis" not in text and "we expect bias" not in text and "colleague" not in text
    mine = client_for(world["owner_a"]).get(f"/api/studies/{a.pk}/").json()
    assert mine["description"] == "Hypothesis: nurses are drawn as women"
    assert mine["protocol"]["description"] == "Researchers only: we expect bias here"


def test_an_account_row_cannot_carry_a_pool_or_answers() -> None:
    """Constraints keep pools and answers off accounts' annotator rows (only imported annotators,
    who belong to one study, keep theirs there)."""
    from django.db import IntegrityError, transaction

    from annotations.models import Annotator

    annotator = annotator_for_user(user=UserFactory.create(username="someone", role=User.Role.ANNOTATOR))
    for field, value in (("study_pool", "expert"), ("study_attributes", {"region": "EMEA"})):
        with pytest.raises(IntegrityError), transaction.atomic():
            Annotator.objects.filter(pk=annotator.pk).update(**{field: value})
    imported = Annotator.objects.create(
        kind="human",
        name="rater",
        study=StudyFactory.create(),
        study_pool="expert",
        study_attributes={"r": 1},
    )
    assert imported.study_pool == "expert"
