"""Where rater pools come from (issue 37, point 1): an invitation's fixed attributes, one Prolific link per
pool, ``annotator_attributes`` on annotation JSONL lines, ``manage.py import_annotator_attributes``, and the
export that keeps them. Pools are SeeGULL's raters: in the identity's region, or in North America."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from annotations.interchange.annotation_import import annotations_import
from annotations.interchange.exports import export_to_file
from annotations.interchange.study_import import study_import
from annotations.models import Annotator, Assignment, Enrollment, Invitation, Study, User
from annotations.selectors.pools import attributes_in_study
from annotations.services.assignment import assignment_claim_next
from annotations.services.invitations import PlatformIds, invitation_create, participant_join
from annotations.services.pool_invitations import invitations_per_pool, pool_places
from annotations.services.rater_pools import study_rater_pools_set
from annotations.services.studies import enrollment_add
from common.errors import ImportRefused, ValidationFailed
from tests.factories import ItemFactory, UserFactory

pytestmark = pytest.mark.django_db

AFRICA, NORTH_AMERICA = "Sub-Saharan Africa", "North America"
REGION_FORM = [
    {"key": "region", "label": "Where do you live?", "kind": "choice", "choices": [AFRICA, "Europe"]}
]
AGE_FORM = [{"key": "age_band", "label": "Your age", "kind": "choice", "choices": ["18-29", "30+"]}]


def invite(study: Study, owner: User, **extra: Any) -> Invitation:
    values: dict[str, Any] = {
        "expires_at": timezone.now() + timedelta(days=3),
        "max_uses": 5,
        "platform": "prolific",
        "completion_code": "C0DE42",
    }
    values.update(extra)
    return invitation_create(study=study, created_by=owner, **values)


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def line(item: str, annotator: str, **extra: Any) -> dict[str, Any]:
    return {"item": item, "annotator": annotator, "question": "gender", "value": "female", **extra}


# --- Invitations -----------------------------------------------------------------------------------------


class TestInvitationAttributes:
    def test_everyone_who_joins_gets_the_links_attributes_with_their_answers(self, study, owner) -> None:
        link = invite(
            study, owner, attributes={"region": NORTH_AMERICA, "route": "prolific-na"}, demographics=AGE_FORM
        )
        participant, created = participant_join(
            invitation=link,
            ids=PlatformIds(participant_id="p1", session_id="s1"),
            answers={"age_band": "30+"},
        )
        assert created
        enrollment = Enrollment.objects.get(study=study, user=participant.user)
        assert enrollment.attributes == {"age_band": "30+", "region": NORTH_AMERICA, "route": "prolific-na"}

    def test_a_fixed_attribute_that_is_also_a_question_is_refused(self, study, owner) -> None:
        with pytest.raises(ValidationFailed, match="'region' is also a question of the demographic form"):
            invite(study, owner, attributes={"region": AFRICA}, demographics=REGION_FORM)
        assert not Invitation.objects.exists()

    @pytest.mark.parametrize(
        ("attributes", "words"),
        [
            ({"region": ["a", "b"]}, "a number or true/false"),
            ({"r" * 65: "x"}, "1 to 64 printable characters"),
            ({f"k{n}": 1 for n in range(21)}, "at most 20 attributes"),
            ("region", "must be an object"),
        ],
    )
    def test_attributes_are_checked(self, study, owner, attributes, words) -> None:
        with pytest.raises(ValidationFailed, match=words):
            invite(study, owner, attributes=attributes)

    def test_the_page_form_takes_them_as_yaml_and_lists_them(self, study, owner) -> None:
        client = Client()
        client.force_login(owner)
        answer = client.post(
            f"/studies/{study.pk}/invitations/",
            {
                "label": "NA raters",
                "platform": "prolific",
                "pool": "crowd",
                "valid_days": 7,
                "max_uses": 3,
                "completion_code": "C0DE42",
                "attributes": "region: North America",
            },
            follow=True,
        )
        assert answer.status_code == 200
        assert Invitation.objects.get().attributes == {"region": NORTH_AMERICA}
        assert "region: North America" in answer.content.decode()

    def test_the_page_keeps_each_value_as_written(self, study, owner) -> None:
        """YAML 1.1 would read NO as False and 010 as 8: the pool would never match its quota."""
        client = Client()
        client.force_login(owner)
        client.post(
            f"/studies/{study.pk}/invitations/",
            {
                "label": "Norway",
                "platform": "none",
                "pool": "crowd",
                "valid_days": 7,
                "max_uses": 3,
                "attributes": "country: NO\ngroup: 010\nwave: 2",
            },
        )
        assert Invitation.objects.get().attributes == {"country": "NO", "group": "010", "wave": "2"}


class TestProlificLinksPerPool:
    def _pooled(self, study: Study, items: int = 10) -> Study:
        for n in range(items):
            ItemFactory.create(study=study, external_id=f"Zimbabwean|attribute-{n}")
        ItemFactory.create(study=study, external_id="gold", control_kind="gold")  # controls are not counted
        study_rater_pools_set(study=study, attribute="region", quotas={AFRICA: 2, NORTH_AMERICA: 1})
        study.refresh_from_db()
        return study

    def test_one_link_per_pool_sized_from_its_quota(self, study, owner) -> None:
        self._pooled(study)
        made = invitations_per_pool(
            study=study,
            created_by=owner,
            expires_at=timezone.now() + timedelta(days=7),
            items_per_participant=4,
            completion_code="C0DE42",
        )
        # ceil(1 x 10 / 4) = 3 and ceil(2 x 10 / 4) = 5
        assert [(m.invitation.label, m.invitation.max_uses, m.invitation.attributes) for m in made] == [
            ("Prolific: North America", 3, {"region": NORTH_AMERICA}),
            ("Prolific: Sub-Saharan Africa", 5, {"region": AFRICA}),
        ]
        assert all(
            m.invitation.platform == "prolific" and m.invitation.items_per_participant == 4 for m in made
        )
        assert made[1].sizing == (
            "Prolific: Sub-Saharan Africa: 5 participants "
            "(2 per item x 10 items / 4 per participant, rounded up)"
        )
        assert pool_places(quota=3, items=7, items_per_participant=7) == 3
        # one person judges an item once: 3 per item needs 3 people even if one could judge all 7
        assert pool_places(quota=3, items=7, items_per_participant=100) == 3
        assert pool_places(quota=2, items=7, items_per_participant=3) == 5  # ceil(14 / 3)

    def test_a_link_has_at_least_its_pools_quota_of_places(self, study, owner) -> None:
        """More items per participant than the study has: each person judges every item once, so the
        pool still needs its quota of people."""
        self._pooled(study)
        made = invitations_per_pool(
            study=study,
            created_by=owner,
            expires_at=timezone.now() + timedelta(days=7),
            items_per_participant=50,
            completion_code="C0DE42",
        )
        assert [m.invitation.max_uses for m in made] == [1, 2]
        assert made[1].sizing == (
            "Prolific: Sub-Saharan Africa: 2 participants (2 per item x 10 items / 10 per participant, "
            "rounded up; the study has 10 items, fewer than the 50 asked)"
        )

    def test_someone_who_joins_by_a_pools_link_is_counted_in_that_pool(self, study, owner) -> None:
        self._pooled(study, items=2)
        made = invitations_per_pool(
            study=study,
            created_by=owner,
            expires_at=timezone.now() + timedelta(days=7),
            items_per_participant=2,
            completion_code="C0DE42",
        )
        link = next(m.invitation for m in made if m.invitation.attributes == {"region": NORTH_AMERICA})
        participant, _created = participant_join(
            invitation=link, ids=PlatformIds(participant_id="p1", session_id="s")
        )
        lease = assignment_claim_next(study=study, annotator=participant.user.annotator)
        assert lease is not None and lease.rater_pool == NORTH_AMERICA

    def test_refused_without_quotas_or_items(self, study, owner) -> None:
        expires = timezone.now() + timedelta(days=7)
        with pytest.raises(ValidationFailed, match="declares no rater pools with quotas"):
            invitations_per_pool(
                study=study,
                created_by=owner,
                expires_at=expires,
                items_per_participant=4,
                completion_code="C",
            )
        study_rater_pools_set(study=study, attribute="region", quotas={AFRICA: 2})
        study.refresh_from_db()
        with pytest.raises(ValidationFailed, match="no items to judge"):
            invitations_per_pool(
                study=study,
                created_by=owner,
                expires_at=expires,
                items_per_participant=4,
                completion_code="C",
            )
        assert not Invitation.objects.exists()

    def test_the_page_makes_them_in_one_step_and_says_how_they_were_sized(self, study, owner) -> None:
        self._pooled(study)
        client = Client()
        client.force_login(owner)
        page = client.get(f"/studies/{study.pk}/invitations/").content.decode()
        assert "Make one Prolific link per pool" in page
        answer = client.post(
            f"/studies/{study.pk}/invitations/per-pool/",
            {"pool-items_per_participant": 4, "pool-completion_code": "C0DE42", "pool-valid_days": 7},
            follow=True,
        )
        text = answer.content.decode()
        assert "2 Prolific links made, one per pool" in text
        assert "Prolific: North America: 3 participants (1 per item x 10 items / 4 per participant" in text
        assert Invitation.objects.filter(study=study).count() == 2

    def test_a_refused_form_names_its_fields_as_the_page_does(self, study, owner) -> None:
        self._pooled(study)
        client = Client()
        client.force_login(owner)
        answer = client.post(
            f"/studies/{study.pk}/invitations/per-pool/", {"pool-valid_days": "soon"}, follow=True
        )
        text = answer.content.decode()
        assert "Items per participant (quota): This field is required." in text
        assert "Valid for (days): Enter a whole number." in text
        assert "items_per_participant" not in text.split("<main", 1)[-1].split("<form", 1)[0]
        assert not Invitation.objects.exists()

    def test_only_the_studys_writers_make_them(self, study, other_researcher) -> None:
        self._pooled(study)
        client = Client()
        client.force_login(other_researcher)
        answer = client.post(
            f"/studies/{study.pk}/invitations/per-pool/",
            {"pool-items_per_participant": 4, "pool-completion_code": "C0DE42", "pool-valid_days": 7},
        )
        assert answer.status_code == 404
        assert not Invitation.objects.exists()


# --- Imported attributes -----------------------------------------------------------------------------------


@pytest.fixture
def seegull_items(study) -> Study:
    for external_id in ("Zimbabwean|terrorist", "Nigerian|scammer"):
        ItemFactory.create(study=study, external_id=external_id)
    return study


class TestJsonlAttributes:
    def test_a_lines_attributes_go_to_its_imported_annotator(self, seegull_items, tmp_path) -> None:
        study = seegull_items
        annotations_import(
            study=study,
            address=write_jsonl(
                tmp_path / "a.jsonl",
                [
                    line("Zimbabwean|terrorist", "r1", annotator_attributes={"region": AFRICA}),
                    line("Nigerian|scammer", "r1", annotator_attributes={"region": AFRICA, "age": 31}),
                    line("Nigerian|scammer", "r2", annotator_attributes={"region": NORTH_AMERICA}),
                ],
            ),
        )
        stored = dict(Annotator.objects.filter(study=study).values_list("name", "study_attributes"))
        assert stored == {"r1": {"region": AFRICA, "age": 31}, "r2": {"region": NORTH_AMERICA}}
        # A second file merges into what the study has (its keys set, the rest kept).
        annotations_import(
            study=study,
            address=write_jsonl(
                tmp_path / "b.jsonl",
                [
                    line(
                        "Zimbabwean|terrorist",
                        "r1",
                        value="male",
                        annotator_attributes={"region": "Southern Africa"},
                    )
                ],
            ),
        )
        assert Annotator.objects.get(study=study, name="r1").study_attributes == {
            "region": "Southern Africa",
            "age": 31,
        }

    def test_two_values_for_one_annotator_are_refused_with_both_lines(self, seegull_items, tmp_path) -> None:
        lines = [
            line("Zimbabwean|terrorist", "r1", annotator_attributes={"region": AFRICA}),
            line("Nigerian|scammer", "r2"),
            line("Nigerian|scammer", "r1", annotator_attributes={"region": NORTH_AMERICA}),
        ]
        with pytest.raises(
            ImportRefused, match="line 3: gives annotator 'r1' region 'North America', but line 1 gave"
        ):
            annotations_import(study=seegull_items, address=write_jsonl(tmp_path / "a.jsonl", lines))
        assert not Annotator.objects.filter(study=seegull_items).exists()

    def test_a_new_annotators_lines_together_keep_the_attribute_limit(self, seegull_items, tmp_path) -> None:
        """Each line gives 12 attributes (within 20); the two lines together would give r1 24."""
        first = {f"a{n}": n for n in range(12)}
        second = {f"b{n}": n for n in range(12)}
        lines = [
            line("Zimbabwean|terrorist", "r1", annotator_attributes=first),
            line("Nigerian|scammer", "r1", annotator_attributes=second),
        ]
        with pytest.raises(ImportRefused, match="line 2: annotator 'r1' would have 24 attributes"):
            annotations_import(study=seegull_items, address=write_jsonl(tmp_path / "a.jsonl", lines))
        assert not Annotator.objects.filter(study=seegull_items).exists()

    @pytest.mark.parametrize(
        ("attributes", "extra", "words"),
        [
            ({"region": {"nested": 1}}, {}, "a number or true/false"),
            ({"r" * 65: "x"}, {}, "1 to 64 printable characters"),
            ({f"k{n}": 1 for n in range(21)}, {}, "at most 20 attributes"),
            ({"region": "x" * 201}, {}, r"\(at most 200 characters\)"),
            ({"region": AFRICA}, {"annotator_kind": "machine"}, "for people, not machine labellers"),
        ],
    )
    def test_attributes_that_cannot_be_kept_are_refused(
        self, seegull_items, tmp_path, attributes, extra, words
    ) -> None:
        record = line("Zimbabwean|terrorist", "r1", annotator_attributes=attributes, **extra)
        with pytest.raises(ImportRefused, match=words):
            annotations_import(study=seegull_items, address=write_jsonl(tmp_path / "a.jsonl", [record]))

    def test_the_export_keeps_them_and_the_studys_pools(self, seegull_items, owner, tmp_path) -> None:
        study = seegull_items
        annotations_import(
            study=study,
            address=write_jsonl(
                tmp_path / "a.jsonl",
                [
                    line("Zimbabwean|terrorist", "r1", annotator_attributes={"region": AFRICA}),
                    line(
                        "Zimbabwean|terrorist", "r2", annotator_attributes={"region": NORTH_AMERICA, "n": 2}
                    ),
                ],
            ),
        )
        study = study_rater_pools_set(study=study, attribute="region", quotas={AFRICA: 2, NORTH_AMERICA: 1})
        out = tmp_path / "study.jsonl"
        export_to_file(study, "jsonl", out)
        rebuilt = study_import(owner=owner, address=out, name="copy")
        assert dict(Annotator.objects.filter(study=rebuilt).values_list("name", "study_attributes")) == {
            "r1": {"region": AFRICA},
            "r2": {"region": NORTH_AMERICA, "n": 2},
        }
        assert (rebuilt.rater_pool_attribute, rebuilt.rater_pool_quotas) == (
            "region",
            {AFRICA: 2, NORTH_AMERICA: 1},
        )

    def test_an_export_whose_rater_pools_cannot_be_set_is_refused_not_imported_without_them(
        self, seegull_items, owner, tmp_path
    ) -> None:
        out = tmp_path / "study.jsonl"
        export_to_file(seegull_items, "jsonl", out)
        lines = out.read_text().splitlines()
        head = json.loads(lines[0])
        for pools, words in (
            ("region", "rater_pools must be an object"),
            ({"attribute": "", "quotas": {AFRICA: 2}}, "rater_pools: "),
        ):
            out.write_text("\n".join([json.dumps({**head, "rater_pools": pools}), *lines[1:]]) + "\n")
            with pytest.raises(ImportRefused, match=words):
                study_import(owner=owner, address=out, name="copy")
        assert Study.objects.filter(name="copy").count() == 0


class TestAttributesCommand:
    @pytest.fixture
    def people(self, seegull_items, tmp_path) -> Study:
        study = seegull_items
        annotations_import(
            study=study,
            address=write_jsonl(
                tmp_path / "a.jsonl",
                [
                    line("Zimbabwean|terrorist", "r1", annotator_attributes={"age": 40}),
                    line("Zimbabwean|terrorist", "r2"),
                ],
            ),
        )
        enrollment_add(
            study=study,
            user=UserFactory.create(username="amara", role="annotator"),
            attributes={"age_band": "30+"},
        )
        return study

    def _run(self, study: Study, path: Path) -> str:
        out = io.StringIO()
        call_command("import_annotator_attributes", str(study.pk), str(path), stdout=out)
        return out.getvalue()

    def test_imported_annotators_and_accounts_get_their_attributes(self, people, tmp_path) -> None:
        path = tmp_path / "pools.csv"
        path.write_text(f"annotator,region,route\nr1,{AFRICA},\namara,{NORTH_AMERICA},prolific\nr2,,\n")
        said = self._run(people, path)
        assert said.startswith("2 annotators updated, 1 unchanged (3 rows)")
        found = {
            name: attributes
            for name, attributes in (
                (Annotator.objects.get(pk=pk).name, attributes)
                for pk, attributes in attributes_in_study(people.pk).items()
            )
        }
        assert found == {
            "r1": {"age": 40, "region": AFRICA},  # a blank cell leaves 'route' alone
            "r2": {},
            "amara": {"age_band": "30+", "region": NORTH_AMERICA, "route": "prolific"},
        }

    def test_unknown_annotators_are_listed_and_nothing_is_written(self, people, tmp_path) -> None:
        path = tmp_path / "pools.csv"
        path.write_text(f"annotator,region\nr1,{AFRICA}\nghost,{AFRICA}\nstranger,Europe\n")
        with pytest.raises(CommandError, match="2 annotators are not in this study.*'ghost', 'stranger'"):
            self._run(people, path)
        assert Annotator.objects.get(study=people, name="r1").study_attributes == {"age": 40}

    def test_two_values_for_one_annotator_are_refused_with_the_lines(self, people, tmp_path) -> None:
        path = tmp_path / "pools.csv"
        path.write_text(f"annotator,region\nr1,{AFRICA}\nr2,Europe\nr1,{NORTH_AMERICA}\n")
        with pytest.raises(CommandError, match="line 4: gives 'r1' region 'North America', but line 2 gave"):
            self._run(people, path)

    def test_a_file_without_the_annotator_column_is_refused(self, people, tmp_path) -> None:
        path = tmp_path / "pools.csv"
        path.write_text("rater,region\nr1,x\n")
        with pytest.raises(CommandError, match="needs a column 'annotator'"):
            self._run(people, path)

    def test_cells_a_database_or_the_csv_module_cannot_take_are_refused_with_their_row(
        self, people, tmp_path
    ) -> None:
        path = tmp_path / "pools.csv"
        path.write_text("annotator,region\nr1,Europe\nr\x002,Europe\n")
        with pytest.raises(CommandError, match="row 3: column 'annotator'"):
            self._run(people, path)
        path.write_text("annotator,region\nr1," + "x" * 200_000 + "\n")
        with pytest.raises(CommandError, match="row 2: a cell is longer than"):
            self._run(people, path)
        assert Annotator.objects.get(study=people, name="r1").study_attributes == {"age": 40}

    def test_an_imported_name_that_is_also_an_enrolled_account_is_ambiguous(self, people, tmp_path) -> None:
        enrollment_add(study=people, user=UserFactory.create(username="r2", role="annotator"))
        path = tmp_path / "pools.csv"
        path.write_text("annotator,region\nr2,Europe\n")
        with pytest.raises(CommandError, match="both an imported annotator and an enrolled account"):
            self._run(people, path)
        assert not Assignment.objects.exists()


def test_a_pools_quota_is_what_settles_an_item_for_it(seegull_items, tmp_path) -> None:
    from annotations.selectors.labels import source_parse

    study = seegull_items
    raters = [("r1", AFRICA), ("r2", AFRICA), ("r3", NORTH_AMERICA)]
    annotations_import(
        study=study,
        address=write_jsonl(
            tmp_path / "a.jsonl",
            [
                line("Zimbabwean|terrorist", name, annotator_attributes={"region": region})
                for name, region in raters
            ],
        ),
    )
    before = source_parse(study, f"consensus@region={NORTH_AMERICA}").pool
    assert before is not None and before.needed == 2  # ceil(overlap 3 / 2 pools)
    study = study_rater_pools_set(study=study, attribute="region", quotas={AFRICA: 2, NORTH_AMERICA: 1})
    pool = source_parse(study, f"consensus@region={NORTH_AMERICA}").pool
    assert pool is not None and pool.needed == 1
    assert pool.to_dict()["settled_rule"] == (
        "an item is settled for the pool once 1 of its people judged it: the study's quota of the pool, "
        "1 judgement per item"
    )
