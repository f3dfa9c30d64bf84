"""Protocol files: the issue's example loads, presets load, bad files name the line and field."""

from __future__ import annotations

import pytest

from protocols.schema import (
    ProtocolError,
    list_presets,
    load_preset,
    load_protocol_file,
    load_protocol_text,
    protocol_from_dict,
)

ISSUE_EXAMPLE = """\
name: Example
unit: image            # image | image_set | text
questions:
  - key: gender
    kind: single       # likert | single | multi | binary | text | boxes
    prompt: What is the gender of the person?
    options: [male, female]
"""


def test_the_issue_example_loads() -> None:
    protocol = load_protocol_text(ISSUE_EXAMPLE)
    assert protocol.name == "Example"
    assert protocol.unit == "image"
    question = protocol.question("gender")
    assert question.kind == "single"
    assert [option.key for option in question.options] == ["male", "female"]


def test_every_preset_of_spec_section_2_ships_and_round_trips() -> None:
    assert set(list_presets()) == {
        "visualness",
        "stereotype-markers",
        "ssi-rubric",
        "bias-axes",
        "subgroup",
        "object-attributes",
        "attribute-check",
    }
    for key in list_presets():
        protocol = load_preset(key)
        assert protocol.key == key
        assert protocol_from_dict(protocol.to_dict()) == protocol


def test_ssi_rubric_has_the_paper_counts_per_category() -> None:
    protocol = load_preset("ssi-rubric")
    counts = {
        category: len(protocol.questions_for({"category": category}))
        for category in ("geocultural", "occupational", "adjectival")
    }
    assert counts == {"geocultural": 12, "occupational": 9, "adjectival": 10}
    assert protocol.unit == "image_set"
    assert all(q.kind == "binary" for q in protocol.questions)


def test_visualness_keeps_unsure_apart_from_the_scale() -> None:
    question = load_preset("visualness").question("visual")
    assert question.kind == "likert"
    assert [o.key for o in question.options] == ["strongly_agree", "agree", "disagree", "strongly_disagree"]
    assert question.unsure is not None and question.unsure.key == "unsure"
    assert (
        question.render_prompt(text="dark skin")
        == "The attribute dark skin can be visually depicted in an image."
    )


def test_stereotype_markers_options_come_from_the_item() -> None:
    protocol = load_preset("stereotype-markers")
    multi = protocol.question("attributes")
    assert multi.options_from == "attributes" and multi.page_size == 5
    keys = multi.choice_keys({"attributes": ["Dark skin", "poor"]})
    assert keys == ["dark_skin", "poor", "none_of_the_above"]
    assert protocol.question("attribute_boxes").linked_question == "attributes"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        (
            "name: x\nunit: image\nquestions:\n  - key: a\n    kind: singel\n    prompt: p\n",
            5,
            "questions[0].kind: 'singel' is not one of",
        ),
        (
            "name: x\nunit: picture\nquestions: []\n",
            2,
            "unit: 'picture' is not one of image, image_set, text",
        ),
        (
            "name: x\nunit: image\nquestions:\n  - key: a\n    kind: single\n    prompt: p\n",
            4,
            "give exactly one of 'options' or 'options_from'",
        ),
        (
            "name: x\nunit: image\nquestions:\n  - key: a\n    kind: single\n    prompt: p\n"
            "    options: [a, b]\n    page_size: 5\n",
            8,
            "questions[0].page_size: 'page_size' applies only to multi questions",
        ),
        (
            "name: x\nunit: image\nquestions:\n  - key: b\n    kind: boxes\n    prompt: p\n"
            "    linked_question: m\n",
            7,
            "'m' must be the key of an earlier multi question",
        ),
        (
            "name: x\nunit: image\nquestions:\n  - {key: a, kind: binary, prompt: p}\n"
            "  - {key: a, kind: binary, prompt: q}\n",
            5,
            "question key 'a' is used twice",
        ),
        (
            "name: x\nunit: image\ncolour: red\nquestions:\n  - {key: a, kind: binary, prompt: p}\n",
            3,
            "unknown field 'colour'",
        ),
        ("name: x\nunit: [image\n", 3, "not valid YAML"),
        (
            "name: x\nunit: image\nquestions:\n  - {key: a, kind: single, prompt: p, options: [x, y]}\n"
            "  - {key: b, kind: binary, prompt: q, show_if: {question: a, in: [z]}}\n",
            5,
            "'z' is not an answer of 'a'",
        ),
    ],
)
def test_bad_protocols_name_the_line_and_field(text: str, line: int, fragment: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        load_protocol_text(text, source="bad.yaml")
    assert caught.value.line == line
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(f"bad.yaml, line {line}")


def test_a_missing_file_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ProtocolError, match="cannot read the file"):
        load_protocol_file(tmp_path / "nope.yaml")


def test_colour_examples_in_presets_are_colours_the_workbench_can_store() -> None:
    """The object-attributes preset once gave "burgundy" as an example, which the normaliser refuses;
    its instructions now name the stored terms, and each example of its help texts is accepted."""
    import re

    from protocols.colours import BASIC_COLOURS, normalise_colour

    protocol = load_preset("object-attributes")
    helps = [q.help for q in protocol.questions if q.normaliser == "colour"]
    assert len(helps) == 2 and "burgundy" not in protocol.instructions + " ".join(helps)
    assert normalise_colour("burgundy") is None
    assert all(colour in protocol.instructions for colour in BASIC_COLOURS)
    examples = []
    for text in helps:
        found = re.search(r"e\.g\. ([^;)]*)", text)
        assert found, text
        examples += [word.strip() for word in found.group(1).split(",")]
    assert len(examples) >= 6
    assert [example for example in examples if normalise_colour(example) is None] == []
