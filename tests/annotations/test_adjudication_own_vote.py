"""An expert does not break a tie that includes their own vote (issue 36, point 3): the queue leaves it
to another expert and says so; the item page, opened directly, says why it should be left; the
study's researchers (who did not vote) see it as before."""

from __future__ import annotations

import pytest
from django.test import Client

from annotations.models import Annotation, Annotator, Study, User
from annotations.services.consensus import consensus_compute
from annotations.services.studies import annotator_for_user, enrollment_add
from protocols.schema import load_protocol_text
from tests.factories import ItemFactory, StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

PROTOCOL = """
name: Hats
unit: image
questions:
  - key: hat
    kind: binary
    prompt: Is there a hat?
"""


@pytest.fixture
def tied(owner: User) -> tuple[Study, User]:
    """Two items, each tied 1-1 on ``hat``: on t1 the expert's own vote is one side of the tie."""
    study = StudyFactory.create(owner=owner, overlap=2, protocol=load_protocol_text(PROTOCOL).to_dict())
    expert = UserFactory.create(username="expert", role="annotator")
    enrollment_add(study=study, user=expert, pool="expert")
    mine = annotator_for_user(user=expert)
    other, third = (
        Annotator.objects.create(kind=Annotator.Kind.HUMAN, name=name, study=study) for name in ("p2", "p3")
    )
    for name, voters in (("t1", (mine, other)), ("t2", (other, third))):
        item = ItemFactory.create(study=study, external_id=name, judgements=2)
        for value, annotator in zip((1, 0), voters, strict=True):
            Annotation.objects.create(
                study=study, item=item, annotator=annotator, question_key="hat", value=value
            )
    consensus_compute(study=study, question="hat")
    return study, expert


def test_the_experts_own_tie_is_left_to_another_expert(tied: tuple[Study, User], owner: User) -> None:
    study, expert = tied
    client = Client()
    client.force_login(expert)
    queue = client.get(f"/studies/{study.pk}/adjudicate/").content.decode()
    assert ">t2</a>" in queue and ">t1</a>" not in queue
    assert (
        "1 item with a tie or an unmet rule that includes your own answer is left to another expert" in queue
    )
    t1 = study.items.get(external_id="t1")
    page = client.get(f"/studies/{study.pk}/adjudicate/{t1.pk}/").content.decode()
    assert 'id="own-vote"' in page and "another expert should decide it" in page
    researcher = Client()
    researcher.force_login(owner)
    both = researcher.get(f"/studies/{study.pk}/adjudicate/").content.decode()
    assert ">t1</a>" in both and ">t2</a>" in both and "own-vote-note" not in both
