"""Answers are checked against their question, the same way for humans, imports and machines."""

from __future__ import annotations

import pytest

from protocols.answers import (
    AnswerError,
    ItemContext,
    SubmissionError,
    clean_answer,
    clean_submission,
)
from protocols.colours import normalise_colour
from protocols.schema import load_protocol_text
from tests.factories import EXAMPLE_PROTOCOL

PROTOCOL = load_protocol_text(EXAMPLE_PROTOCOL)
CONTEXT = ItemContext(metadata={}, image_sizes=[(100, 80)])


def check(key: str, value, **kwargs):
    return clean_answer(PROTOCOL.question(key), value, context=CONTEXT, protocol=PROTOCOL, **kwargs)


def test_single_accepts_an_option_and_refuses_others() -> None:
    assert check("gender", "female").value == "female"
    with pytest.raises(AnswerError, match="'other' is not one of male, female"):
        check("gender", "other")
    with pytest.raises(AnswerError, match="must be one option key"):
        check("gender", ["male"])


def test_multi_records_what_was_shown_and_none_is_exclusive() -> None:
    answer = check("attributes", ["hat"], shown=["hat", "glasses"])
    assert answer.value == ["hat"] and answer.shown == ["hat", "glasses"]
    assert check("attributes", []).value == []
    with pytest.raises(AnswerError, match="excludes every other option"):
        check("attributes", ["hat", "none_of_the_above"])
    with pytest.raises(AnswerError, match="'beard' was selected but not shown"):
        check("attributes", ["beard"], shown=["hat"])
    with pytest.raises(AnswerError, match="selected twice"):
        check("attributes", ["hat", "hat"])


def test_binary_takes_0_or_1_and_an_optional_reason() -> None:
    assert check("smiling", 1, reason=" teeth visible ").reason == "teeth visible"
    assert check("smiling", True).value == 1
    with pytest.raises(AnswerError, match="must be 0 or 1"):
        check("smiling", 2)
    with pytest.raises(AnswerError, match="takes no reason"):
        check("gender", "male", reason="because")


def test_text_colour_is_normalised_to_the_vocabulary() -> None:
    assert check("colour", "Navy_Blue").value == "blue"
    assert check("colour", "navy blue").value == "blue"
    with pytest.raises(AnswerError, match="is not a colour"):
        check("colour", "banana")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gray", "grey"),
        ("light blue", "blue"),
        ("Dark-Green", "green"),
        ("saddlebrown", "brown"),
        ("#ff0000", "red"),
        ("hotpink", "pink"),
        ("tan", "beige"),
        ("reddish", "red"),
        ("silver", "grey"),
        ("", None),
        ("the colour of money", None),
    ],
)
def test_colour_normaliser_cases(text: str, expected: str | None) -> None:
    assert normalise_colour(text) == expected


def test_boxes_must_be_inside_the_image_and_linked_to_a_selected_option() -> None:
    box = {"option": "hat", "x": 10, "y": 5, "w": 20.4, "h": 30}
    assert check("boxes", [box], selected=["hat"]).value == [
        {"option": "hat", "x": 10, "y": 5, "w": 20, "h": 30}
    ]
    with pytest.raises(AnswerError, match="outside the 100x80 image"):
        check("boxes", [{**box, "x": 90}], selected=["hat"])
    with pytest.raises(AnswerError, match="'hat' is not selected in 'attributes'"):
        check("boxes", [box], selected=["glasses"])
    with pytest.raises(AnswerError, match="'none_of_the_above' is not one of hat, glasses, beard"):
        check("boxes", [{**box, "option": "none_of_the_above"}], selected=[])
    with pytest.raises(AnswerError, match="width and height of at least 1"):
        check("boxes", [{**box, "w": 0}], selected=["hat"])


def test_a_submission_reports_every_problem_at_once() -> None:
    with pytest.raises(SubmissionError) as caught:
        clean_submission(
            PROTOCOL, {"attributes": {"value": ["wig"]}, "nonsense": {"value": 1}}, context=CONTEXT
        )
    assert caught.value.errors == {
        "nonsense": "is not a question of this protocol",
        "gender": "is required",
        "attributes": "'wig' is not one of hat, glasses, beard, none_of_the_above",
    }


def test_show_if_hides_a_question_until_its_condition_holds() -> None:
    protocol = load_protocol_text(
        "name: p\nunit: image\nquestions:\n"
        "  - {key: person, kind: single, prompt: p, options: ['yes', 'no']}\n"
        "  - {key: age, kind: single, prompt: a, options: [young, old],"
        " show_if: {question: person, in: ['yes']}}\n"
    )
    assert [
        a.question_key for a in clean_submission(protocol, {"person": {"value": "no"}}, context=CONTEXT)
    ] == ["person"]
    with pytest.raises(SubmissionError) as caught:
        clean_submission(protocol, {"person": {"value": "yes"}}, context=CONTEXT)
    assert caught.value.errors == {"age": "is required"}
    with pytest.raises(SubmissionError, match="is asked only when 'person' is one of yes"):
        clean_submission(protocol, {"person": {"value": "no"}, "age": {"value": "old"}}, context=CONTEXT)
