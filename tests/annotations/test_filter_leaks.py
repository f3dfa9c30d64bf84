"""No existence leaks through filters (issue 15, point 7; docs/security.md, "No existence leaks through
filters"): on every filtered endpoint, an id that does not exist and an id of someone else's study,
item or annotator answer the same status and the same body (200, an empty list)."""

from __future__ import annotations

from typing import Any

import pytest

from annotations.models import Annotation, Assignment, ExportJob, User
from annotations.services.studies import annotator_for_user, enrollment_add
from generation.models import GenerationJob
from labelling.models import LabellingJob
from tests.factories import ItemFactory, MachineAnnotatorFactory, StudyFactory, UserFactory
from tests.helpers import client_for

pytestmark = pytest.mark.django_db

UNKNOWN = 987654321


def _fill(study: Any, owner: User, annotator_user: User) -> dict[str, int]:
    """One of everything a filter can name, in ``study``."""
    item = ItemFactory.create(study=study)
    machine = MachineAnnotatorFactory.create(config={"kind": "colour"})
    enrollment_add(study=study, user=annotator_user)
    human = annotator_for_user(user=annotator_user)
    Annotation.objects.create(study=study, item=item, annotator=machine, question_key="gender", value="male")
    Annotation.objects.create(study=study, item=item, annotator=human, question_key="gender", value="male")
    Assignment.objects.create(study=study, item=item, annotator=human, status=Assignment.Status.SUBMITTED)
    GenerationJob.objects.create(study=study, name="p", prompts=[], model_spec={}, model_label="m")
    LabellingJob.objects.create(study=study, annotator=machine)
    ExportJob.objects.create(study=study, requested_by=owner, format="jsonl")
    return {"study": study.pk, "item": item.pk, "annotator": human.pk, "machine": machine.pk}


@pytest.fixture
def tenants() -> dict[str, Any]:
    me, them = UserFactory.create(username="me"), UserFactory.create(username="them")
    my_annotator = UserFactory.create(username="my-annotator", role=User.Role.ANNOTATOR)
    their_annotator = UserFactory.create(username="their-annotator", role=User.Role.ANNOTATOR)
    return {
        "me": me,
        "my_annotator": my_annotator,
        "mine": _fill(StudyFactory.create(owner=me), me, my_annotator),
        "theirs": _fill(StudyFactory.create(owner=them), them, their_annotator),
    }


# (who asks, endpoint, filter, which id, how many rows the asker's own id finds)
FILTERED = [
    ("me", "/api/items/", "study", "study", 1),
    ("me", "/api/annotations/", "study", "study", 2),
    ("me", "/api/annotations/", "item", "item", 2),
    ("me", "/api/annotations/", "annotator", "annotator", 1),
    ("me", "/api/assignments/", "study", "study", 0),
    ("me", "/api/generation-jobs/", "study", "study", 1),
    ("me", "/api/labelling-jobs/", "study", "study", 1),
    ("me", "/api/labelling-jobs/", "annotator", "machine", 1),
    ("me", "/api/exports/", "study", "study", 1),
    ("my_annotator", "/api/assignments/", "study", "study", 1),
    ("my_annotator", "/api/generation-jobs/", "study", "study", 0),
    ("my_annotator", "/api/annotations/", "item", "item", 1),
    ("my_annotator", "/api/annotations/", "study", "study", 1),
]
IDS = [f"{who}:{url}?{name}=" for who, url, name, _kind, _own in FILTERED]


@pytest.mark.parametrize(("who", "url", "name", "kind", "own"), FILTERED, ids=IDS)
def test_unknown_and_foreign_ids_answer_the_same(tenants, who, url, name, kind, own) -> None:
    client = client_for(tenants[who])
    foreign = client.get(url, {name: tenants["theirs"][kind]})
    unknown = client.get(url, {name: UNKNOWN})
    assert (foreign.status_code, foreign.json()) == (unknown.status_code, unknown.json())
    assert foreign.status_code == 200 and foreign.json()["results"] == []
    # The filter still filters: the asker's own id finds their own rows, and only those.
    assert client.get(url, {name: tenants["mine"][kind]}).json()["count"] == own
    # And a value that is not an id at all is refused the same way everywhere.
    refused = client.get(url, {name: "abc"})
    assert refused.status_code == 400 and "whole number" in refused.content.decode()


def test_a_view_cannot_bring_back_a_table_wide_filter() -> None:
    """The default backend refuses a view whose own filter set would check ids against the whole table."""
    from django.core.exceptions import ImproperlyConfigured
    from django_filters import rest_framework as filters

    from annotations.api.filters import ScopedFilterBackend
    from annotations.models import Item

    class Plain(filters.FilterSet):
        class Meta:
            model = Item
            fields = ["study"]

    class View:
        filterset_class = Plain

    with pytest.raises(ImproperlyConfigured, match="ScopedFilterSet"):
        ScopedFilterBackend().get_filterset_class(View(), Item.objects.none())
