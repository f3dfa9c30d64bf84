"""``manage.py replay_overlap``: a policy replayed on a JSONL file of annotations, checked against
hand counts; bad policies and files refused with the reason (docs/overlap.md)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("replay_overlap", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def line(item: str, annotator: str, value: Any, question: str = "present", **extra: Any) -> dict[str, Any]:
    return {"item": item, "annotator": annotator, "question": question, "value": value, **extra}


# In file order (items interleaved):
#   a: yes yes no       full consensus yes
#   b: no yes yes yes   full consensus yes
#   c: no yes           a tie: no full consensus
#   d: yes              full consensus yes
# plus a machine's answer (left out) and answers to another question.
RECORDS = [
    line("a", "u1", "yes"),
    line("b", "u1", "no"),
    line("c", "u2", "no"),
    line("a", "u2", "yes"),
    line("b", "u2", "yes"),
    line("a", "clip", "no", annotator_kind="machine", annotator_version="1"),
    line("d", "u3", "yes"),
    line("a", "u3", "no"),
    line("a", "u3", ["hat", "tall"], question="attributes"),
    line("b", "u3", "yes"),
    line("c", "u3", "yes"),
    line("b", "u4", "yes"),
]


@pytest.fixture
def annotations_file(tmp_path: Path) -> Path:
    return write(tmp_path / "answers.jsonl", RECORDS)


def test_agree_replay_equals_hand_counts(annotations_file: Path) -> None:
    report = json.loads(
        run(str(annotations_file), "--policy", "agree:2/3", "--question", "present", "--json")
    )
    # Used: a 2 (yes yes), b 3 (no yes yes), c 2 (all it has), d 1: 8 of 10, 20% saved.
    # Full consensus on a, b, d (c ties); the replay gives yes, yes, yes: 3 of 3 the same.
    assert report == {
        "question": "present",
        "policy": "agree:2/3",
        "items": 4,
        "judgements_available": 10,
        "judgements_used": 8,
        "saved_share": 0.2,
        "same_as_full_consensus": 1.0,
        "items_with_full_consensus": 3,
        "same_by_label": [{"label": "yes", "items": 3, "same": 3}],
        "per_item": [
            {"item": "a", "used": 2, "label": "yes"},
            {"item": "b", "used": 3, "label": "yes"},
            {"item": "c", "used": 2, "label": None},
            {"item": "d", "used": 1, "label": "yes"},
        ],
        "model": None,
        "left_out": {"gold_judgements": 0, "machine_judgements": 1},
    }


def test_fixed_replay_and_text_output(annotations_file: Path) -> None:
    report = json.loads(run(str(annotations_file), "--policy", "fixed:2", "--question", "present", "--json"))
    # 2 + 2 + 2 + 1 = 7 of 10; b's first two tie (no label), so 2 of the 3 items agree.
    assert (report["judgements_used"], report["saved_share"]) == (7, 0.3)
    assert report["same_as_full_consensus"] == pytest.approx(2 / 3)
    assert [row["label"] for row in report["per_item"]] == ["yes", None, None, "yes"]
    text = run(str(annotations_file), "--policy", "fixed:2", "--question", "present")
    assert text.strip() == (
        "fixed:2 on 'present': 4 items, 7 of 10 judgements used (30.0% saved); "
        "same label as the full consensus on 66.7% of 3 items"
    )


def test_a_multi_question_compares_whole_answers(tmp_path: Path) -> None:
    path = write(
        tmp_path / "multi.jsonl",
        [
            line("x", "u1", ["tall", "hat"], question="attributes"),
            line("x", "u2", ["hat", "tall"], question="attributes"),
            line("x", "u3", [], question="attributes"),
        ],
    )
    report = json.loads(run(str(path), "--policy", "agree:2/3", "--json"))
    assert report["per_item"] == [{"item": "x", "used": 2, "label": ["hat", "tall"]}]


def _posterior_records() -> list[dict[str, Any]]:
    # 20 items all "no", 5 all "yes", and m: no, yes, yes (full consensus yes).
    records = []
    for item in [*(f"n{i}" for i in range(20)), *(f"y{i}" for i in range(5)), "m"]:
        values = {"n": ["no"] * 3, "y": ["yes"] * 3, "m": ["no", "yes", "yes"]}[item[0]]
        records += [line(item, who, value) for who, value in zip(("u1", "u2", "u3"), values, strict=True)]
    return records


def test_posterior_replay_equals_hand_counts(tmp_path: Path) -> None:
    path = write(tmp_path / "p.jsonl", _posterior_records())
    report = json.loads(
        run(str(path), "--policy", "posterior:0.9/3", "--fit", "all", "--confusion", "pooled", "--json")
    )
    # Fitted on all 78 answers (76 of them agree within their item), one pooled confusion: P(no | one
    # "no") and P(yes | one "yes") are above 0.9 (0.967 and 0.948), so every item stops after one
    # judgement: 26 of 78 used, 2/3 saved. m stops on its first "no" against its full consensus "yes":
    # 25 of 26 the same.
    assert (report["items"], report["judgements_available"], report["judgements_used"]) == (26, 78, 26)
    assert report["saved_share"] == pytest.approx(2 / 3)
    assert report["same_as_full_consensus"] == pytest.approx(25 / 26)
    assert report["per_item"][-1] == {"item": "m", "used": 1, "label": "no"}
    # By full consensus: the 20 "no" items all kept; of the 6 "yes" (y0-y4 and m), m lost.
    assert report["same_by_label"] == [
        {"label": "no", "items": 20, "same": 20},
        {"label": "yes", "items": 6, "same": 5},
    ]
    assert {row["used"] for row in report["per_item"]} == {1}
    model = report["model"]
    assert (model["fit"], model["fits"], model["final"]["confusion"]) == ("all", 1, "pooled")
    assert model["all_fits_converged"] is True
    # The default fits on the judgements used so far; one batch is all pilot: every item gets MAX.
    pilot = json.loads(run(str(path), "--policy", "posterior:0.9/3", "--batches", "1", "--json"))
    assert (pilot["judgements_used"], pilot["saved_share"], pilot["model"]["fit"]) == (78, 0.0, "used")


def test_gold_items_train_the_model_and_stay_out(tmp_path: Path) -> None:
    records = [*_posterior_records(), line("g", "u1", "yes"), line("g", "u2", "no")]
    path = write(tmp_path / "p.jsonl", records)
    gold = write(
        tmp_path / "gold.jsonl",
        [
            {"external_id": "g", "answers": {"present": "yes"}},
            {"external_id": "n0", "kind": "attention", "answers": {"present": "no"}},
        ],
    )
    report = json.loads(
        run(str(path), "--policy", "posterior:0.9/3", "--gold", str(gold), "--fit", "all", "--json")
    )
    assert report["items"] == 26 and report["judgements_available"] == 78
    assert report["left_out"] == {"gold_judgements": 2, "machine_judgements": 0}


@pytest.mark.parametrize(
    ("policy", "reason"),
    [
        ("agree:3/2", "policy 'agree:3/2': K (3) must not exceed MAX (2)"),
        ("posterior:1.2/3", "P must be a probability strictly between 0 and 1 (e.g. 0.95), not '1.2'"),
        ("posterior:0.95/0", "MAX must be a whole number from 1 to 1000, not '0'"),
        ("fixed:0", "K must be a whole number from 1 to 1000, not '0'"),
        ("majority", "'majority' is not a policy: use fixed:K, agree:K/MAX or posterior:P/MAX"),
        ("agree:2", "agree takes two numbers, agree:K/MAX (e.g. agree:2/3)"),
    ],
)
def test_bad_policies_are_refused_with_the_reason(annotations_file: Path, policy: str, reason: str) -> None:
    with pytest.raises(CommandError) as caught:
        run(str(annotations_file), "--policy", policy, "--question", "present")
    assert reason in str(caught.value)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ([], "answers.jsonl holds answers to 2 questions (present, attributes): choose one with --question"),
        (
            ["--question", "hair"],
            "answers.jsonl has no answer to question 'hair' (it has: present, attributes)",
        ),
        (["--question", "present", "--fit", "all"], "--fit goes with a posterior:P/MAX policy"),
    ],
)
def test_bad_arguments_are_refused(annotations_file: Path, args: list[str], reason: str) -> None:
    with pytest.raises(CommandError) as caught:
        run(str(annotations_file), "--policy", "agree:2/3", *args)
    assert reason in str(caught.value)


def test_bad_files_are_refused(tmp_path: Path) -> None:
    repeated = write(tmp_path / "r.jsonl", [line("a", "u1", "yes"), line("a", "u1", "no")])
    with pytest.raises(CommandError, match="r.jsonl line 2: repeats the answer of line 1"):
        run(str(repeated), "--policy", "agree:2/3")
    missing = write(tmp_path / "m.jsonl", [{"item": "a", "annotator": "u1", "question": "present"}])
    with pytest.raises(CommandError, match="m.jsonl line 1: 'value' is missing"):
        run(str(missing), "--policy", "agree:2/3")
    boxes = write(tmp_path / "b.jsonl", [line("a", "u1", [{"x": 1, "y": 1, "w": 2, "h": 2}])])
    with pytest.raises(CommandError, match="b.jsonl line 1: value must be an option"):
        run(str(boxes), "--policy", "agree:2/3")
    with pytest.raises(CommandError, match="no such file"):
        run(str(tmp_path / "none.jsonl"), "--policy", "agree:2/3")
    with pytest.raises(CommandError, match="--batches goes with --fit used"):
        run(str(repeated), "--policy", "posterior:0.9/3", "--fit", "all", "--batches", "3")
    with pytest.raises(CommandError, match="shrink must be a positive number"):
        run(str(repeated), "--policy", "posterior:0.9/3", "--shrink", "0")
