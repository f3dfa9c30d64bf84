"""The adjudication page shows answers as the protocol's option labels (escaped) and draws each
annotator's boxes over the image in that annotator's colour, with a legend (Issue 16, point 1)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from annotations.interchange.annotation_import import annotations_import_records
from annotations.models import ConsensusLabel, Study, User
from annotations.services.consensus import consensus_compute
from annotations.services.studies import study_create
from protocols.schema import load_preset
from tests.annotations.builders import image_item

pytestmark = pytest.mark.django_db

ATTRIBUTES = [
    "hat",
    "<b>dark glasses</b>",
]  # the second is keyed b_dark_glasses_b, its label is untrusted text


def _line(who: str, question: str, value: object, kind: str = "human") -> dict[str, object]:
    return {"item": "m1", "annotator": who, "annotator_kind": kind, "question": question, "value": value}


@pytest.fixture
def markers(owner: User) -> Study:
    study = study_create(owner=owner, name="Markers", protocol=load_preset("stereotype-markers"), overlap=2)
    item = image_item(study, "m1", size=(2000, 1000))
    item.metadata = {"attributes": ATTRIBUTES, "identity": "x"}
    item.save(update_fields=["metadata"])
    records = [
        _line("ann", "attributes", ["hat", "b_dark_glasses_b"]),
        _line(
            "ann",
            "attribute_boxes",
            [
                {"option": "hat", "x": 100, "y": 50, "w": 400, "h": 200},
                {"option": "b_dark_glasses_b", "x": 1000, "y": 500, "w": 300, "h": 100},
            ],
        ),
        _line("bea", "attributes", ["none_of_the_above"]),
        _line("cid", "attributes", ["hat"]),
        _line("cid", "attribute_boxes", [{"option": "hat", "x": 120, "y": 60, "w": 380, "h": 180}]),
    ]
    annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    consensus_compute(study=study, question="attributes")
    return study


def _page(client: Client, study: Study, query: str = "") -> str:
    item = study.items.get(external_id="m1")
    response = client.get(f"/studies/{study.pk}/adjudicate/{item.pk}/?all=1{query}")  # every question
    assert response.status_code == 200
    return response.content.decode()


def test_answers_read_as_labels_not_keys(markers: Study, owner: User) -> None:
    client = Client()
    client.force_login(owner)
    ConsensusLabel.objects.filter(study=markers, question_key="attributes").update(
        reason="tie between 'hat' and 'b_dark_glasses_b' (1 vote each)"
    )
    page = _page(client, markers)
    answers = page[page.index("Everyone") : page.index("</table>", page.index("Everyone"))]
    assert "hat, &lt;b&gt;dark glasses&lt;/b&gt;" in answers  # labels, in order, escaped
    assert "None of the above" in answers
    assert "['hat'" not in page and "b_dark_glasses_b'" not in page and "<b>dark" not in page
    # Reasons read labels too.
    assert "tie between &#x27;hat&#x27; and &#x27;&lt;b&gt;dark glasses&lt;/b&gt;&#x27; (1 vote each)" in page
    assert "b_dark_glasses_b&#x27;" not in page
    # The decision form shows labels and submits keys.
    assert re.search(
        r'value="b_dark_glasses_b"[^>]*>( <kbd aria-hidden="true">\d</kbd>)? '
        r"&lt;b&gt;dark glasses&lt;/b&gt;</label>",
        page,
    )


def test_each_annotators_boxes_are_drawn_in_their_colour_with_a_legend(markers: Study, owner: User) -> None:
    client = Client()
    client.force_login(owner)
    page = _page(client, markers)
    assert 'viewBox="0 0 2000 1000"' in page  # original-image pixels; the browser scales with the image
    rects = re.findall(
        r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)" stroke="(#\w+)"', page
    )
    assert sorted(r[:4] for r in rects) == [
        ("100", "50", "400", "200"),
        ("1000", "500", "300", "100"),
        ("120", "60", "380", "180"),
    ]
    colour_of = {(r[0], r[1]): r[4] for r in rects}
    assert colour_of[("100", "50")] == colour_of[("1000", "500")] != colour_of[("120", "60")]
    legend = page[page.index("Boxes by annotator") : page.index("</table>", page.index("Boxes by annotator"))]
    # Blinded by default: people by number in a fixed order (ann 1, bea 2, cid 3), never by name.
    # bea (Annotator 2) drew none.
    assert "Annotator 1" in legend and "Annotator 3" in legend and "Annotator 2" not in legend
    assert "<td>ann</td>" not in legend and "<td>cid</td>" not in legend
    assert colour_of[("100", "50")] in legend and colour_of[("120", "60")] in legend
    assert "<title>Annotator 1: &lt;b&gt;dark glasses&lt;/b&gt;</title>" in page
    named = _page(client, markers, "&names=1")
    start = named.index("Boxes by annotator")
    legend = named[start : named.index("</table>", start)]
    assert "<td>ann</td>" in legend and "<td>cid</td>" in legend and "bea" not in legend
    assert "<title>ann: &lt;b&gt;dark glasses&lt;/b&gt;</title>" in named


def test_a_decision_submits_keys_and_is_shown_as_labels(markers: Study, owner: User) -> None:
    client = Client()
    client.force_login(owner)
    item = markers.items.get(external_id="m1")
    response = client.post(
        f"/studies/{markers.pk}/adjudicate/{item.pk}/",
        {"all": "1", "d-attributes": ["hat", "b_dark_glasses_b"], "note": "both visible"},
    )
    assert response.status_code == 302
    label = ConsensusLabel.objects.get(item=item, question_key="attributes")
    assert sorted(label.value) == ["b_dark_glasses_b", "hat"] and label.rule == "adjudicated"
    page = _page(client, markers)
    assert "Consensus: <strong>hat, &lt;b&gt;dark glasses&lt;/b&gt;</strong>" in page


def test_an_annotator_of_the_crowd_cannot_open_it(markers: Study, annotator_user: User) -> None:
    client = Client()
    client.force_login(annotator_user)
    item = markers.items.get(external_id="m1")
    assert client.get(f"/studies/{markers.pk}/adjudicate/{item.pk}/").status_code in (403, 404)
