"""Invitations and participants (services): creating links, joining, resuming, refusals, quotas."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone

from annotations import access
from annotations.models import Assignment, Enrollment, Invitation, Participant, Study, User
from annotations.selectors.invitations import InvitationRefused, invitation_state
from annotations.services.assignment import assignment_claim_next, assignment_submit
from annotations.services.invitations import (
    PlatformIds,
    PreviewOnly,
    demographic_answers_clean,
    demographics_from_text,
    invitation_create,
    invitation_revoke,
    participant_complete,
    participant_join,
    participant_resume,
    platform_ids_from_query,
)
from annotations.services.studies import enrollment_add, enrollment_add_pool
from common.errors import NotAllowed, NotFoundError, QuotaReached, ValidationFailed
from tests.factories import ItemFactory, StudyFactory, UserFactory

ANSWERS: dict[str, dict[str, Any]] = {
    "gender": {"value": "female"},
    "attributes": {"value": ["hat"], "shown": ["hat", "glasses", "beard"]},
}
REGION = {
    "key": "region",
    "label": "Where do you live?",
    "kind": "choice",
    "choices": ["Asia", "EMEA", "North America"],
}
LANGUAGE = {"key": "language", "label": "First language", "kind": "text", "required": False}


def invite(study: Study, owner: User, **overrides: Any) -> Invitation:
    values: dict[str, Any] = {
        "expires_at": timezone.now() + timedelta(days=7),
        "max_uses": 10,
        "platform": "prolific",
        "completion_code": "C0DE42",
    }
    values.update(overrides)
    return invitation_create(study=study, created_by=owner, **values)


def pid(n: int) -> PlatformIds:
    return PlatformIds(participant_id=f"{n:024x}", platform_study_id="study1", session_id=f"s{n}")


pytestmark = pytest.mark.django_db


class TestCreate:
    def test_prolific_link_gets_prolifics_completion_url_and_a_long_random_token(self, study, owner) -> None:
        one, two = invite(study, owner), invite(study, owner)
        assert one.completion_url == "https://app.prolific.com/submissions/complete?cc=C0DE42"
        assert len(one.token) >= 43 and one.token != two.token
        assert invitation_state(one) == "open"

    @pytest.mark.parametrize(
        ("overrides", "field"),
        [
            ({"expires_at": timezone.now() - timedelta(minutes=1)}, "expires_at"),
            ({"max_uses": 0}, "max_uses"),
            ({"completion_code": ""}, "completion_code"),
            ({"completion_code": "<b>x</b>"}, "completion_code"),
            ({"completion_url": "javascript:alert(1)"}, "completion_url"),
            ({"items_per_participant": 0}, "items_per_participant"),
            ({"pool": "vip"}, "pool"),
            ({"platform": "fiverr"}, "platform"),
        ],
    )
    def test_refusals_write_nothing(self, study, owner, overrides, field) -> None:
        with pytest.raises(ValidationFailed) as caught:
            invite(study, owner, **overrides)
        assert field in caught.value.details
        assert Invitation.objects.count() == 0

    def test_plain_link_needs_no_code_and_annotators_cannot_invite(
        self, study, owner, annotator_user
    ) -> None:
        plain = invite(study, owner, platform="none", completion_code="")
        assert plain.completion_url == "" and plain.completion_code == ""
        with pytest.raises(NotAllowed):
            invite(study, annotator_user)

    def test_demographic_form_from_yaml(self) -> None:
        fields = demographics_from_text("""
- key: region
  label: Where do you live?
  kind: choice
  choices: [Asia, EMEA, North America]
- key: language
  label: First language
  kind: text
  required: false
""")
        assert fields == [{**REGION, "required": True}, {**LANGUAGE}]

    @pytest.mark.parametrize(
        "bad",
        [
            "- key: Region\n  label: x\n  kind: text",  # not lower-case
            "- key: a\n  label: x\n  kind: choice",  # choice without choices
            "- key: a\n  label: x\n  kind: text\n  choices: [b]",  # text with choices
            "- key: a\n  label: x\n  kind: date",  # unknown kind
            "- key: a\n  label: x\n- key: a\n  label: y",  # key twice
            "- key: a\n  label: x\n  kind: choice\n  choices: [b, b]",  # choice twice
            "- key: a\n  label: x\n  colour: red",  # unknown setting
            "key: a",  # not a list
            "- [unclosed",  # not YAML
        ],
    )
    def test_bad_demographic_forms_are_refused(self, bad: str) -> None:
        with pytest.raises(ValidationFailed):
            demographics_from_text(bad)


class TestJoin:
    def test_join_makes_a_scoped_annotator_in_the_links_pool_with_attributes(self, study, owner) -> None:
        invitation = invite(
            study, owner, pool="expert", demographics=[REGION, LANGUAGE], consent_text="I agree"
        )
        consented = timezone.now()
        participant, created = participant_join(
            invitation=invitation,
            ids=pid(1),
            consented_at=consented,
            answers={"region": "EMEA", "language": "  Greek "},
        )
        assert created
        user = participant.user
        assert user.role == "annotator" and not user.has_usable_password() and not user.is_staff
        assert user.username.startswith(f"p{study.pk}-") and pid(1).participant_id not in user.username
        assert list(Enrollment.objects.filter(user=user).values_list("study_id", flat=True)) == [study.pk]
        enrolment = Enrollment.objects.get(user=user, study=study)
        assert enrolment.pool == "expert"
        assert enrolment.attributes == {"region": "EMEA", "language": "Greek"}
        assert (user.annotator.study_pool, user.annotator.study_attributes) == ("crowd", {})
        assert (
            participant.platform,
            participant.participant_id,
            participant.platform_study_id,
            participant.session_id,
        ) == ("prolific", f"{1:024x}", "study1", "s1")
        assert participant.consented_at == consented and participant.completed_at is None
        invitation.refresh_from_db()
        assert invitation.uses == 1

    def test_same_participant_id_resumes_and_uses_no_second_use(self, study, owner) -> None:
        invitation = invite(study, owner, max_uses=2)
        first, _ = participant_join(invitation=invitation, ids=pid(1))
        again, created = participant_join(invitation=invitation, ids=pid(1))
        assert not created and again.pk == first.pk and again.user_id == first.user_id
        # through another link of the same study too: one account per (study, platform, participant id)
        other_link = invite(study, owner)
        via_other, created = participant_join(invitation=other_link, ids=pid(1))
        assert not created and via_other.pk == first.pk
        assert participant_resume(invitation=invitation, ids=pid(1)).pk == first.pk
        invitation.refresh_from_db()
        other_link.refresh_from_db()
        assert (invitation.uses, other_link.uses) == (1, 0)
        assert User.objects.filter(role="annotator").count() == 1

    def test_different_participant_id_gets_a_new_account(self, study, owner) -> None:
        invitation = invite(study, owner)
        one, _ = participant_join(invitation=invitation, ids=pid(1))
        two, created = participant_join(invitation=invitation, ids=pid(2))
        assert created and one.user_id != two.user_id
        # the same participant id in another study is another person's record there
        elsewhere = invite(StudyFactory.create(owner=owner), owner)
        three, created = participant_join(invitation=elsewhere, ids=pid(1))
        assert created and three.user_id != one.user_id

    def test_sequential_exhaustion_stops_at_max_uses(self, study, owner) -> None:
        invitation = invite(study, owner, max_uses=3)
        for n in range(3):
            participant_join(invitation=invitation, ids=pid(n))
        with pytest.raises(InvitationRefused) as caught:
            participant_join(invitation=invitation, ids=pid(99))
        assert caught.value.reason == "used_up" and caught.value.status_code == 410
        invitation.refresh_from_db()
        assert invitation.uses == 3 and invitation_state(invitation) == "used up"
        assert Participant.objects.count() == 3 and User.objects.filter(role="annotator").count() == 3
        # a participant who already joined still gets back in through the used-up link
        back, created = participant_join(invitation=invitation, ids=pid(0))
        assert not created

    def test_expired_and_revoked_links_refuse_joining_and_coming_back(self, study, owner) -> None:
        invitation = invite(study, owner)
        participant_join(invitation=invitation, ids=pid(1))
        later = invitation.expires_at + timedelta(seconds=1)
        for ids in (pid(1), pid(2)):
            with pytest.raises(InvitationRefused) as caught:
                participant_join(invitation=invitation, ids=ids, now=later)
            assert caught.value.reason == "expired"
        invitation_revoke(invitation=invitation)
        revoked_at = invitation.revoked_at
        invitation_revoke(invitation=invitation)  # idempotent: the first time counts
        assert invitation.revoked_at == revoked_at and invitation_state(invitation) == "revoked"
        for ids in (pid(1), pid(2)):
            with pytest.raises(InvitationRefused) as caught:
                participant_join(invitation=invitation, ids=ids)
            assert caught.value.reason == "revoked"
        invitation.refresh_from_db()
        assert invitation.uses == 1 and Participant.objects.count() == 1

    def test_a_study_that_is_not_active_takes_no_one_new_but_lets_participants_back(
        self, study, owner
    ) -> None:
        invitation = invite(study, owner)
        first, _ = participant_join(invitation=invitation, ids=pid(1))
        for status in ("paused", "closed", "draft"):
            Study.objects.filter(pk=study.pk).update(status=status)
            invitation.refresh_from_db()
            invitation.study.refresh_from_db()
            with pytest.raises(InvitationRefused) as caught:
                participant_join(invitation=invitation, ids=pid(2))
            assert caught.value.reason == "inactive"
            assert participant_join(invitation=invitation, ids=pid(1))[0].pk == first.pk
        assert Participant.objects.count() == 1

    def test_consent_and_demographics_are_checked_and_nothing_is_written_when_they_fail(
        self, study, owner
    ) -> None:
        invitation = invite(
            study, owner, consent_text="Data will be published.", demographics=[REGION, LANGUAGE]
        )
        with pytest.raises(ValidationFailed) as caught:
            participant_join(invitation=invitation, ids=pid(1), answers={"region": "EMEA"})
        assert "consent" in caught.value.details
        for answers, errors in [
            ({}, {"region": "Please answer this question."}),
            ({"region": "Mars"}, {"region": "Choose one of the options."}),
            ({"region": "Asia", "language": "x" * 201}, {"language": "Use at most 200 characters."}),
        ]:
            with pytest.raises(ValidationFailed) as caught:
                participant_join(
                    invitation=invitation, ids=pid(1), answers=answers, consented_at=timezone.now()
                )
            assert caught.value.details == errors
        invitation.refresh_from_db()
        assert (
            invitation.uses == 0
            and Participant.objects.count() == 0
            and not User.objects.filter(role="annotator").exists()
        )

    def test_answers_cleaning_keeps_only_the_forms_keys(self) -> None:
        fields = demographics_from_text("- key: region\n  label: R\n  kind: choice\n  choices: [Asia]")
        assert demographic_answers_clean(fields=fields, data={"region": "Asia", "is_staff": "1"}) == {
            "region": "Asia"
        }

    def test_platform_link_needs_a_participant_id(self, study, owner) -> None:
        with pytest.raises(ValidationFailed):
            participant_join(invitation=invite(study, owner), ids=PlatformIds())

    def test_plain_link_makes_a_new_account_each_time(self, study, owner) -> None:
        invitation = invite(study, owner, platform="none", completion_code="")
        one, _ = participant_join(invitation=invitation, ids=PlatformIds())
        two, _ = participant_join(invitation=invitation, ids=PlatformIds())
        assert one.user_id != two.user_id and one.participant_id == two.participant_id == ""

    def test_complete_records_the_first_completion_only(self, study, owner) -> None:
        participant, _ = participant_join(invitation=invite(study, owner), ids=pid(1))
        assert not participant_complete(participant=participant).reached  # no code for no work
        assert participant.completed_at is None
        Assignment.objects.create(
            study=study,
            item=ItemFactory.create(study=study),
            annotator=participant.user.annotator,
            status="submitted",
        )
        first = timezone.now() - timedelta(hours=1)
        assert participant_complete(participant=participant, now=first).reached
        participant_complete(participant=participant)
        assert participant.completed_at == first


class TestPlatformIds:
    def test_prolific(self) -> None:
        ids = platform_ids_from_query(
            platform="prolific",
            query={
                "PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1e",
                "STUDY_ID": "60aa",
                "SESSION_ID": "s-1_x",
                "workerId": "W",
            },
        )
        assert ids == PlatformIds(
            participant_id="5f1a2b3c4d5e6f7a8b9c0d1e", platform_study_id="60aa", session_id="s-1_x"
        )

    def test_mturk_and_its_preview(self) -> None:
        ids = platform_ids_from_query(
            platform="mturk",
            query={
                "workerId": "A1B2C3D4E5F6G7",
                "assignmentId": "3ABCDEF",
                "hitId": "3HIT",
                "turkSubmitTo": "x",
            },
        )
        assert ids == PlatformIds(
            participant_id="A1B2C3D4E5F6G7", platform_study_id="3HIT", assignment_id="3ABCDEF"
        )
        with pytest.raises(PreviewOnly):
            platform_ids_from_query(
                platform="mturk", query={"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "3HIT"}
            )

    @pytest.mark.parametrize(
        "query",
        [
            {},
            {"PROLIFIC_PID": ""},
            {"PROLIFIC_PID": "{{%PROLIFIC_PID%}}"},
            {"PROLIFIC_PID": "<script>alert(1)</script>"},
            {"PROLIFIC_PID": "a" * 65},
            {"PROLIFIC_PID": "abc", "SESSION_ID": "=cmd|' /C calc'!A0"},
            {"PROLIFIC_PID": "abc def"},
        ],
    )
    def test_bad_or_missing_ids_are_refused(self, query: dict[str, str]) -> None:
        with pytest.raises(ValidationFailed):
            platform_ids_from_query(platform="prolific", query=query)

    def test_plain_link_ignores_parameters(self) -> None:
        assert platform_ids_from_query(platform="none", query={"PROLIFIC_PID": "<x>"}) == PlatformIds()


class TestScope:
    def test_participant_cannot_be_enrolled_elsewhere_nor_swept_in_by_a_pool(self, study, owner) -> None:
        participant, _ = participant_join(invitation=invite(study, owner), ids=pid(1))
        other = StudyFactory.create(owner=owner)
        with pytest.raises(NotAllowed):
            enrollment_add(study=other, user=participant.user)
        regular = UserFactory.create(username="regular", role="annotator")
        enrollment_add(study=study, user=regular)
        enrolled = enrollment_add_pool(study=other, pool="crowd", by=owner)
        assert [e.user_id for e in enrolled] == [regular.pk]
        enrollment_add(study=study, user=participant.user)  # its own study: idempotent, allowed

    def test_access_keeps_a_participant_in_its_study_even_if_enrolled_elsewhere(self, study, owner) -> None:
        participant, _ = participant_join(invitation=invite(study, owner), ids=pid(1))
        other = StudyFactory.create(owner=owner)
        Enrollment.objects.create(study=other, user=participant.user)  # e.g. written by hand in the admin
        assert access.study_get_for_annotator(user=participant.user, id=study.pk) == study
        with pytest.raises(NotFoundError):
            access.study_get_for_annotator(user=participant.user, id=other.pk)
        regular = UserFactory.create(username="regular", role="annotator")
        enrollment_add(study=other, user=regular)
        assert access.study_get_for_annotator(user=regular, id=other.pk) == other


class TestQuota:
    def test_quota_stops_claims_counting_live_leases(self, study, owner) -> None:
        study.overlap = 1
        study.save()
        items = [ItemFactory.create(study=study) for _ in range(5)]
        participant, _ = participant_join(
            invitation=invite(study, owner, items_per_participant=2), ids=pid(1)
        )
        annotator = participant.user.annotator
        first = assignment_claim_next(study=study, annotator=annotator)
        assignment_submit(assignment=first, answers=ANSWERS)
        second = assignment_claim_next(study=study, annotator=annotator)
        # the task page leases one ahead: refused, the shown item is the last one of the quota
        with pytest.raises(QuotaReached):
            assignment_claim_next(study=study, annotator=annotator, exclude=[second.pk])
        assert (
            assignment_claim_next(study=study, annotator=annotator).pk == second.pk
        )  # the held lease comes back
        assignment_submit(assignment=second, answers=ANSWERS)
        with pytest.raises(QuotaReached):
            assignment_claim_next(study=study, annotator=annotator)
        assert Assignment.objects.filter(annotator=annotator).count() == 2
        # others are not limited
        regular = UserFactory.create(username="regular", role="annotator")
        enrollment_add(study=study, user=regular)
        got = {assignment_claim_next(study=study, annotator=regular.annotator).item_id}
        assert got <= {item.pk for item in items}


def _join_in_thread(
    invitation_id: int, ids: PlatformIds, barrier: threading.Barrier, results: list[Any]
) -> None:
    try:
        invitation = Invitation.objects.get(pk=invitation_id)
        barrier.wait()
        results.append(participant_join(invitation=invitation, ids=ids))
    except InvitationRefused as exc:
        results.append(exc)
    except BaseException as exc:  # noqa: BLE001 - collected and re-raised in the main thread
        results.append(("error", exc))
    finally:
        connections.close_all()


def _run(invitation: Invitation, ids: list[PlatformIds]) -> list[Any]:
    barrier = threading.Barrier(len(ids))
    results: list[Any] = []
    threads = [
        threading.Thread(target=_join_in_thread, args=(invitation.pk, one, barrier, results)) for one in ids
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not [r for r in results if isinstance(r, tuple) and r[0] == "error"], results
    return results


@pytest.mark.django_db(transaction=True)
def test_concurrent_joins_never_exceed_max_uses_nor_duplicate_a_participant(study, owner) -> None:
    invitation = invite(study, owner, max_uses=3)
    results = _run(invitation, [pid(n) for n in range(6)])
    assert sum(isinstance(r, InvitationRefused) for r in results) == 3
    invitation.refresh_from_db()
    assert invitation.uses == 3 and Participant.objects.count() == 3
    # six first visits with one participant id at once: one account, one use
    fresh = invite(study, owner, max_uses=5)
    results = _run(fresh, [pid(77)] * 6)
    accounts = {participant.user_id for participant, _created in results}
    assert len(accounts) == 1 and sum(created for _p, created in results) == 1
    fresh.refresh_from_db()
    assert fresh.uses == 1


def test_invite_and_payments_commands(study, owner, tmp_path) -> None:
    import io
    import json

    from django.core.management import CommandError, call_command

    def run(*args: str) -> str:
        out = io.StringIO()
        call_command(*args, stdout=out)
        return out.getvalue()

    form = tmp_path / "form.yaml"
    form.write_text("- key: region\n  label: Region\n  kind: choice\n  choices: [Asia, EMEA]\n")
    consent = tmp_path / "consent.txt"
    consent.write_text("I agree to take part.")
    created = json.loads(
        run(
            "invite",
            str(study.pk),
            "--platform",
            "prolific",
            "--completion-code",
            "ABC",
            "--max-uses",
            "3",
            "--quota",
            "5",
            "--min-answered",
            "4",
            "--demographics",
            str(form),
            "--consent",
            str(consent),
            "--owner",
            "owner",
            "--base-url",
            "https://wb.example.org/",
        )
    )
    invitation = Invitation.objects.get(pk=created["id"])
    assert invitation.min_answered_items == 4
    assert created["url"] == f"https://wb.example.org/join/{invitation.token}/"
    assert (invitation.max_uses, invitation.items_per_participant, invitation.consent_text) == (
        3,
        5,
        "I agree to take part.",
    )
    assert invitation.demographics[0]["key"] == "region" and created["state"] == "open"
    assert [row["id"] for row in json.loads(run("invite", str(study.pk), "--list"))] == [invitation.pk]
    assert json.loads(run("invite", str(study.pk), "--revoke", str(invitation.pk)))["state"] == "revoked"
    with pytest.raises(CommandError, match="needs a completion code"):
        run("invite", str(study.pk), "--platform", "mturk", "--owner", "owner")
    # A link per rater pool: fixed attributes every person who joins by it gets (checked by the service).
    pooled = json.loads(
        run("invite", str(study.pk), "--attribute", "region=North America", "--owner", "owner")
    )
    assert pooled["attributes"] == {"region": "North America"}
    assert Invitation.objects.get(pk=pooled["id"]).attributes == {"region": "North America"}
    with pytest.raises(CommandError, match="KEY=VALUE"):
        run("invite", str(study.pk), "--attribute", "region", "--owner", "owner")
    with pytest.raises(CommandError, match="KEY=VALUE"):  # a blank pool is no pool
        run("invite", str(study.pk), "--attribute", "region=", "--owner", "owner")
    with pytest.raises(CommandError, match="'region' is given twice"):
        run("invite", str(study.pk), "--attribute", "region=A", "--attribute", "region=B", "--owner", "owner")
    participant, _ = participant_join(invitation=invite(study, owner), ids=pid(1))
    csv_text = run("payments", str(study.pk))
    assert csv_text.splitlines()[0].startswith("annotator,pool,platform,participant_id")
    assert f"{participant.user.username},crowd,prolific,{pid(1).participant_id}" in csv_text


def test_agreement_report_breaks_human_alpha_down_by_demographic_answers(study, owner) -> None:
    """Within-region alpha by hand: Asia's two raters agree on all three items (alpha 1); EMEA's
    pairs (m,f), (m,m), (f,m) give o_mf = o_fm = 2, o_mm = 2, n = 6, n_m = 4, n_f = 2, so
    D_o = 4/6, D_e = 2*4*2/(6*5) = 16/30 and alpha = 1 - (4/6)/(16/30) = -0.25."""
    from annotations.models import Annotation
    from annotations.selectors.agreement import agreement_report

    invitation = invite(study, owner, demographics=[REGION])
    items = [ItemFactory.create(study=study, external_id=f"i{n}") for n in range(3)]
    answers = {
        "Asia": [["male", "female", "male"], ["male", "female", "male"]],
        "EMEA": [["male", "male", "female"], ["female", "male", "male"]],
    }
    number = 0
    for region, people in answers.items():
        for values in people:
            number += 1
            participant, _ = participant_join(
                invitation=invitation, ids=pid(number), answers={"region": region}
            )
            for item, value in zip(items, values, strict=True):
                Annotation.objects.create(
                    study=study,
                    item=item,
                    annotator=participant.user.annotator,
                    question_key="gender",
                    value=value,
                )
    regular = UserFactory.create(username="regular", role="annotator")
    enrollment_add(study=study, user=regular)
    Annotation.objects.create(
        study=study, item=items[0], annotator=regular.annotator, question_key="gender", value="male"
    )
    report = agreement_report(study=study, n_resamples=0, breakdown="annotator:region")
    groups = {group["group"]: group for group in report["by_annotator_attribute"]["groups"]}
    assert set(groups) == {"Asia", "EMEA", "(not given)"}
    assert (
        groups["Asia"]["annotators"],
        groups["EMEA"]["annotators"],
        groups["(not given)"]["annotators"],
    ) == (2, 2, 1)

    def gender(group: str) -> dict[str, Any]:
        (question,) = [q for q in groups[group]["questions"] if q["key"] == "gender"]
        return question["humans"][0]

    assert gender("Asia")["value"] == pytest.approx(1.0)
    assert gender("EMEA")["value"] == pytest.approx(-0.25)
    assert gender("(not given)")["value"] is None
    client = Client()
    client.force_login(owner)
    page = client.get(
        f"/studies/{study.pk}/agreement/?breakdown=annotator:region&resamples=10"
    ).content.decode()
    assert "Alpha within groups of annotators by “region”" in page and "-0.250" in page
