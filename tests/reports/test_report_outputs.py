"""The report's outputs: Markdown with untrusted text made inert, the HEDS 3.0 datasheet as JSON, and
``manage.py report`` writing them (with figures beside the Markdown) or printing them."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotations.models import Invitation, Study, User
from annotations.services.studies import annotator_for_user, enrollment_add
from reports.document import Column, DocTable, Paragraph, ReportDocument, Section
from reports.gather import report_build
from reports.heds import QUESTIONS, TO_COMPLETE
from reports.heds import render as heds_render
from reports.render_markdown import escape, render
from tests.factories import ItemFactory, StudyFactory, UserFactory

pytestmark = pytest.mark.django_db

HOSTILE = "| <script>x</script> **b** \\"


def _markdown(document: ReportDocument) -> str:
    return render(document).body.decode()


def test_escape_makes_untrusted_text_inert() -> None:
    assert escape(HOSTILE, cell=True) == "\\| &lt;script&gt;x&lt;/script&gt; \\*\\*b\\*\\* \\\\"
    assert escape("a\nb", cell=True) == "a<br>b"
    assert escape("# heading\n- item", line_start=True) == "\\# heading - item"  # one line: no list
    assert escape("1. one", line_start=True) == "1\\. one" and escape("28.5 s", line_start=True) == "28.5 s"
    assert escape("[link](javascript:x) ![img](y) &amp; $x$ ~~s~~ `c`") == (
        "\\[link\\](javascript:x) \\!\\[img\\](y) &amp;amp; \\$x\\$ \\~\\~s\\~\\~ \\`c\\`"
    )


def test_a_hostile_study_name_question_and_label_render_inert(owner: User) -> None:
    protocol = {
        "name": "P",
        "unit": "image",
        "questions": [
            {
                "key": "q",
                "kind": "single",
                "prompt": HOSTILE,
                "options": [{"key": "a", "label": HOSTILE}, {"key": "b", "label": "B"}],
            }
        ],
    }
    study = StudyFactory.create(owner=owner, name=HOSTILE, protocol=protocol)
    ItemFactory.create(study=study, is_reference=False, condition=HOSTILE)
    text = _markdown(report_build(study))
    assert "<script>" not in text and "</script>" not in text
    assert "**b**" not in text.replace("\\*\\*b\\*\\*", "")
    # every table row still has as many cells as its header: no pipe of the text split a cell
    for block in re.findall(r"((?:^\|.*\|\n)+)", text, flags=re.M):
        rows = block.strip("\n").split("\n")
        widths = {len(re.split(r"(?<!\\)\|", row)) for row in rows}
        assert len(widths) == 1, rows
    # the title is one heading line, the name escaped
    assert text.splitlines()[0] == "# Audit report: " + escape(HOSTILE)


def test_markdown_tables_print_values_by_their_kind() -> None:
    document = ReportDocument(
        title="T",
        study_ids=[1],
        source="consensus",
        generated_at="2026-01-01T00:00:00+00:00",
        sections=[
            Section(
                key="s",
                title="S",
                blocks=[
                    Paragraph("- not a list"),
                    DocTable(
                        key="t",
                        title="T",
                        columns=[
                            Column("g", "Group", "label"),
                            Column("n", "n", "n"),
                            Column("e", "Est", "estimate"),
                            Column("p", "p", "p"),
                        ],
                        rows=[["x|y", 1234, 0.12345, 0.0001], ["z", None, float("nan"), 0.0456]],
                        n=2,
                    ),
                ],
            )
        ],
    )
    text = _markdown(document)
    assert "| x\\|y | 1,234 | 0.123 | < 0.001 |".replace("<", "&lt;") in text
    assert "| z | - | - | 0.0456 |" in text
    assert "\n\\- not a list\n" in text


def test_heds_datasheet_fills_what_the_data_answers_and_lists_the_rest(owner: User) -> None:
    study = StudyFactory.create(owner=owner, name="H")
    ItemFactory.create(study=study, is_reference=False, model_name="sd-1.5", prompt="a photo of a nurse")
    Invitation.objects.create(
        study=study,
        platform=Invitation.Platform.PROLIFIC,
        expires_at="2099-01-01T00:00:00Z",
        max_uses=10,
        consent_text="You agree to take part.",
        demographics=[{"key": "region", "label": "Region", "kind": "text"}],
        created_by=owner,
    )
    user = UserFactory.create(username="rater", role=User.Role.ANNOTATOR)
    enrollment_add(study=study, user=user, attributes={"region": "EU"})
    annotator_for_user(user=user)
    document = report_build(study)
    rendered = heds_render(document)
    assert rendered.content_type == "application/json" and rendered.filename.endswith("-heds.json")
    sheet = json.loads(rendered.body)
    assert sheet["version"] == "HEDS 3.0" and sheet["form"] == "https://nlp-heds.github.io"
    assert [s["section"] for s in sheet["sections"]] == ["1", "2", "3", "4", "5"]
    assert [s["questions"] for s in sheet["sections"]] == [
        "1.1.1-1.3.2.3",
        "2.1-2.5",
        "3.1.1-3.3.8",
        "4.1.1-4.3.12.2",
        "5.1-5.4",
    ]
    # Every question of the form, by number, once (Section 4 once per criterion: per protocol question).
    plain = [a["question"] for s in sheet["sections"] if s["section"] != "4" for a in s["answers"]]
    (section4,) = [s for s in sheet["sections"] if s["section"] == "4"]
    keys = [q.key for q in study.protocol_obj.questions]
    assert [c["criterion"] for c in section4["criteria"]] == keys
    for criterion in section4["criteria"]:
        assert [a["question"] for a in criterion["answers"]] == [
            n for n, _ in QUESTIONS if n.startswith("4.")
        ]
    assert plain == [n for n, _ in QUESTIONS if not n.startswith("4.")] and len(QUESTIONS) == 62
    answers = {a["question"]: a["answer"] for s in sheet["sections"] if "answers" in s for a in s["answers"]}
    assert answers["2.1"] == "text: prompts (1 distinct)"
    assert answers["2.2"] == "images" and answers["2.3"] == "text-to-image generation (HEDS: Other)"
    assert answers["3.1.1"].startswith("sd-1.5: 1 (1 items in all;")
    assert "Prolific (crowd, 0 joined)" in answers["3.2.3"]
    assert answers["5.2"] == (
        "the responses include demographic answers (region); consent text shown: You agree to take part."
    )
    assert answers["1.1.1"] is None and answers["5.1"] is None
    notes = {n["topic"]: n["answer"] for s in sheet["sections"] for n in s["notes"]}
    assert notes["Systems evaluated (the items' model names)"] == "sd-1.5"
    gender = {a["question"]: a["answer"] for a in section4["criteria"][keys.index("gender")]["answers"]}
    question = study.protocol_obj.question("gender")
    assert gender["4.3.7"].startswith(question.prompt)
    assert gender["4.3.4"].startswith(", ".join(o.label for o in question.options))
    assert gender["4.3.5"] == "multiple-choice options (one answer)" and gender["4.1.1"] is None
    todo = sheet["to_complete_by_the_authors"]
    assert "5.1: which research ethics committee approved the experiment" in todo
    assert "3.2.2.2: whether participants received payment" in todo
    assert "4.3.1.2 (criterion gender): the standardised criterion name it corresponds to" in todo
    assert not any(t.startswith(("2.1:", "3.2.3:", "4.3.7 ")) for t in todo)
    assert section4["criteria_left_out"] == []  # the item has no metadata a question depends on
    # the same datasheet is the report's appendix, in every format; what is left to the authors is one
    # list at its end, each question once (Section 4's with the criteria it concerns)
    text = _markdown(document)
    assert "## HEDS 3.0 datasheet" in text
    answered, todo_list = text.split(f"### HEDS questions {TO_COMPLETE}\n")
    assert TO_COMPLETE not in answered.split("## HEDS 3.0 datasheet")[1]
    assert "\n* 5.1 which research ethics committee approved the experiment\n" in todo_list
    assert (
        "\n* 4.1.1 type of quality assessed (correctness, goodness, feature) (every criterion)\n" in todo_list
    )
    assert text.count("which research ethics committee approved the experiment") == 1
    assert "You agree to take part." in text


def test_report_command_writes_markdown_with_figures_and_heds(demo_study: Study, tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.md"
    call_command("report", str(demo_study.pk), "--format", "md", "--out", str(out), stdout=io.StringIO())
    text = out.read_text()
    links = re.findall(r"!\[[^\]]*\]\((figures/[^)]+\.svg)\)", text)
    assert links, "no figure linked"
    for link in links:
        assert (out.parent / link).read_text().lstrip().startswith("<?xml")
    assert "## Findings" in text and "## Reproducibility" in text and "sha256 of the JSONL export" in text

    printed = io.StringIO()
    call_command("report", demo_study.name, "--format", "heds", "--correction", "bh", stdout=printed)
    sheet = json.loads(printed.getvalue())
    assert sheet["study"] == demo_study.pk and sheet["to_complete_by_the_authors"]

    with pytest.raises(CommandError, match="no study"):
        call_command("report", "999999", "--format", "md", stdout=io.StringIO())
    with pytest.raises(CommandError, match="source"):
        call_command("report", str(demo_study.pk), "--source", "nobody", stdout=io.StringIO())


def test_report_command_compares_studies(owner: User, tmp_path: Path) -> None:
    first = StudyFactory.create(owner=owner, name="First")
    second = StudyFactory.create(owner=owner, name="Second")
    for study in (first, second):
        ItemFactory.create(study=study, is_reference=False)
    printed = io.StringIO()
    call_command("report", str(first.pk), "--compare", str(second.pk), stdout=printed)
    text = printed.getvalue()
    assert text.startswith("# Compare report: First vs Second")
    assert "## Studies side by side" in text and "## Study: First" in text and "## Study: Second" in text
    with pytest.raises(CommandError, match="different studies"):
        call_command("report", str(first.pk), "--compare", str(first.pk), stdout=io.StringIO())
