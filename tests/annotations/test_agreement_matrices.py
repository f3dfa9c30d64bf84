"""How the agreement report reads one question's judgements (``selectors.matrices.question_rows``):
the database joins every row into one string and Python splits it, so the values must come back whole
whatever characters they hold (commas, quotes, backslashes, unicode, the separator characters
themselves), and an empty question or a question with one coder must read as such. Run on SQLite and
on PostgreSQL (``DATABASE_URL``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from annotations.interchange.annotation_import import annotations_import_records
from annotations.models import Annotation, Annotator
from annotations.selectors.agreement import agreement_report
from annotations.selectors.matrices import question_matrix, question_rows, reliability_for
from metrics.agreement import krippendorff_alpha, krippendorff_alpha_of_counts, value_counts
from protocols.schema import load_protocol_text
from tests.factories import ItemFactory, StudyFactory

pytestmark = pytest.mark.django_db

PROTOCOL = """
name: Awkward values
unit: image
questions:
  - key: note
    kind: text
    prompt: Anything to add?
  - key: gender
    kind: single
    prompt: What is the gender of the person?
    options: [male, female]
    required: false
  - key: smiling
    kind: binary
    prompt: Is the person smiling?
    required: false
"""

# Each text holds something a naive split of the joined string would cut or mangle: the id separator
# (a comma), the row separator U+001F and U+001E inside the text (JSON escapes them as \\u001f), JSON's
# own escapes (quotes, backslashes, a literal "\\u001f"), text that looks like JSON, and non-ASCII.
AWKWARD = [
    "red, green",
    'say "hi"',
    "café ✓ 日本語 🙂",
    "a\x1fb\x1ec",
    "back\\slash \\u001f",
    '{"json": [1, 2]}',
    ",",
    "1,2",
]

# (item, coder, text): four items, three coders, some agreeing.
NOTES = [
    ("i0", "r1", AWKWARD[0]),
    ("i0", "r2", AWKWARD[0]),
    ("i0", "r3", AWKWARD[1]),
    ("i1", "r1", AWKWARD[2]),
    ("i1", "r2", AWKWARD[2]),
    ("i1", "r3", AWKWARD[2]),
    ("i2", "r1", AWKWARD[3]),
    ("i2", "r2", AWKWARD[4]),
    ("i2", "r3", AWKWARD[3]),
    ("i3", "r1", AWKWARD[5]),
    ("i3", "r2", AWKWARD[6]),
    ("i3", "r3", AWKWARD[7]),
]


@pytest.fixture
def awkward(owner):
    study = StudyFactory.create(owner=owner, protocol=load_protocol_text(PROTOCOL).to_dict())
    for name in ("i0", "i1", "i2", "i3"):
        ItemFactory.create(study=study, external_id=name)
    records: list[dict[str, object]] = [
        {"item": item, "annotator": who, "annotator_kind": "human", "question": "note", "value": text}
        for item, who, text in NOTES
    ]
    # One coder alone answers "smiling"; nobody answers "gender".
    records += [
        {"item": item, "annotator": "r1", "annotator_kind": "human", "question": "smiling", "value": True}
        for item in ("i0", "i1", "i2")
    ]
    report = annotations_import_records(study=study, records=list(enumerate(records, start=1)))
    assert report.created == len(records)
    return study


def test_question_rows_give_back_every_value_whole(awkward) -> None:
    annotators, items, texts = question_rows(awkward, "note")
    assert len(annotators) == len(items) == len(texts) == len(NOTES)
    read = {(int(a), int(i), json.loads(t)) for a, i, t in zip(annotators, items, texts, strict=True)}
    # The same rows as the ORM reads them, value by value.
    stored = set(
        Annotation.objects.filter(study=awkward, question_key="note").values_list(
            "annotator_id", "item_id", "value"
        )
    )
    assert read == stored
    assert {value for _a, _i, value in read} == set(AWKWARD)


def test_an_empty_question_and_a_single_coder_read_as_such(awkward) -> None:
    annotators, items, texts = question_rows(awkward, "gender")
    assert (annotators.size, items.size, texts) == (0, 0, [])
    protocol = awkward.protocol_obj
    assert question_matrix(awkward, protocol.question("gender")) is None

    annotators, items, texts = question_rows(awkward, "smiling")
    r1 = Annotator.objects.get(name="r1")
    assert set(annotators.tolist()) == {r1.pk} and len(set(items.tolist())) == 3
    assert [json.loads(t) for t in texts] == [True, True, True]
    smiling = question_matrix(awkward, protocol.question("smiling"))
    assert smiling is not None and smiling.matrix.shape == (1, 3) and smiling.values == [True]


def test_the_report_codes_each_distinct_text_once(awkward) -> None:
    report = agreement_report(study=awkward, n_resamples=50)
    by_key = {q["key"]: q for q in report["questions"]}
    # The expected alpha from the records themselves: coders x items, one nominal code per text.
    coders, item_names = ["r1", "r2", "r3"], ["i0", "i1", "i2", "i3"]
    matrix = np.full((3, 4), np.nan)
    for item, who, text in NOTES:
        matrix[coders.index(who), item_names.index(item)] = AWKWARD.index(text)
    expected = krippendorff_alpha(matrix, level="nominal")
    note = by_key["note"]["humans"][0]
    assert note["coders"] == 3 and note["n_judgements"] == len(NOTES)
    assert note["value"] == pytest.approx(expected.value)
    # Nobody answered "gender": no coder, no alpha; one coder on "smiling": one coder, no alpha.
    assert by_key["gender"]["humans"][0]["coders"] == 0
    assert by_key["gender"]["humans"][0]["value"] is None
    smiling = by_key["smiling"]["humans"][0]
    assert smiling["coders"] == 1 and smiling["value"] is None and smiling["undefined_reason"]


MULTI = """
name: Ticks
unit: image
questions:
  - key: marks
    kind: multi
    prompt: Which of these are in the image?
    options: [hat, scarf, glasses]
    none_option: {key: none, label: None of these}
    required: false
"""


@pytest.mark.parametrize("seed", range(4))
def test_multi_counts_equal_the_value_counts_of_the_dense_option_matrices(owner, seed: int) -> None:
    """``reliability_for`` counts each option's 0s and 1s per item without the coders x items matrix
    (issue 26); the arrays equal ``value_counts`` of the matrix the rule describes (docs/agreement.md:
    an option counts for a coder where it was shown, or everywhere when ``shown`` was not recorded,
    1 where ticked), so alpha and its interval are the same."""
    rng = np.random.default_rng(seed)
    study = StudyFactory.create(owner=owner, protocol=load_protocol_text(MULTI).to_dict())
    items = [ItemFactory.create(study=study, external_id=f"i{n}") for n in range(9)]
    coders = [
        Annotator.objects.create(name=f"r{n}", kind=Annotator.Kind.HUMAN, study=study) for n in range(6)
    ]
    options = ["hat", "scarf", "glasses", "none"]
    cells: list[tuple[int, int, list[str], list[str] | None]] = []
    for row, coder in enumerate(coders):
        for column, item in enumerate(items):
            if rng.random() < 0.3:
                continue
            shown = None if rng.random() < 0.4 else [o for o in options if rng.random() < 0.7] or ["none"]
            pool = shown or options
            ticked = [o for o in pool if rng.random() < 0.4]
            Annotation.objects.create(
                study=study, item=item, annotator=coder, question_key="marks", value=ticked, shown=shown
            )
            cells.append((row, column, ticked, shown))
    question = study.protocol_obj.question("marks")
    item_options = {items[0].pk: ["hat"], items[1].pk: ["scarf", "none"]}
    for restrict in (None, item_options):
        got = reliability_for(study, question, item_options=restrict)
        assert [r.label for r in got] == [f"marks:{o}" for o in options]
        used_rows = sorted({row for row, *_rest in cells})
        used_columns = sorted({column for _r, column, *_rest in cells})
        for data in got:
            option = data.label.split(":")[1]
            matrix = np.full((len(used_rows), len(used_columns)), np.nan)
            for row, column, ticked, shown in cells:
                if shown is not None and option not in shown:
                    continue
                allowed = (restrict or {}).get(items[column].pk)
                if shown is None and allowed is not None and option not in allowed:
                    continue
                matrix[used_rows.index(row), used_columns.index(column)] = float(option in ticked)
            expected = value_counts(matrix)
            assert np.array_equal(data.counts.counts, expected.counts), option
            assert np.array_equal(data.counts.domain, expected.domain), option
            assert data.annotator_ids == [coders[row].pk for row in used_rows]
            assert data.item_ids == [items[column].pk for column in used_columns]
            assert krippendorff_alpha_of_counts(data.counts, level="nominal") == krippendorff_alpha(
                matrix, level="nominal"
            )
