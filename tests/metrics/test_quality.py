"""Per-annotator quality figures (metrics/quality.py) against values computed by hand."""

from __future__ import annotations

from typing import Any

from metrics.quality import (
    DEFAULT_THRESHOLDS,
    Score,
    answer_shares,
    answers_match,
    control_score,
    leave_one_out_agreement,
    leave_one_out_coded,
    loo_median,
    quality_flags,
    straight_line_judged,
    straight_lining,
    thresholds_with_defaults,
)

# unit u1: A x, B x, C x, D y;  u2: A y, B x, C x, D x;  u3: A x, B y;  u4: A x alone
ROWS = [
    ("u1", "A", "x"),
    ("u1", "B", "x"),
    ("u1", "C", "x"),
    ("u1", "D", "y"),
    ("u2", "A", "y"),
    ("u2", "B", "x"),
    ("u2", "C", "x"),
    ("u2", "D", "x"),
    ("u3", "A", "x"),
    ("u3", "B", "y"),
    ("u4", "A", "x"),
]


def test_answers_match_compares_lists_as_sets_and_never_matches_no_answer() -> None:
    assert answers_match(["hat", "glasses"], ["glasses", "hat"])
    assert not answers_match(["hat"], ["hat", "glasses"])
    assert answers_match(1, 1) and not answers_match(1, 0)
    assert not answers_match("agree", None)


def test_control_score() -> None:
    assert control_score([True, False, True, True]) == Score(4, 3, 0.75)
    assert control_score([]) == Score(0, 0, None)


def test_leave_one_out_by_hand() -> None:
    # A: u1 others x,x,y -> x agree; u2 others x,x,x -> x, A said y; u3 other y -> y, A said x; u4 none.
    # B: u1 agree, u2 (others y,x,x -> x) agree, u3 (other x) disagree. C: u1, u2 agree.
    # D: u1 (others x,x,x) disagree; u2 (others y,x,x -> x) agree.
    scores = leave_one_out_agreement(ROWS)
    assert scores["A"] == Score(3, 1, 1 / 3)
    assert scores["B"] == Score(3, 2, 2 / 3)
    assert scores["C"] == Score(2, 2, 1.0)
    assert scores["D"] == Score(2, 1, 0.5)


def test_leave_one_out_with_a_non_voter_and_ties() -> None:
    # D does not vote (excluded) but is scored. u2 for B: others A y, C x -> tie, not comparable.
    scores = leave_one_out_agreement(ROWS, voters={"A", "B", "C"})
    assert scores["A"] == Score(3, 1, 1 / 3)  # u1 agree (B x, C x), u2 disagree, u3 disagree
    assert scores["B"] == Score(2, 1, 0.5)  # u1 agree, u2 tie, u3 disagree
    assert scores["C"] == Score(1, 1, 1.0)  # u1 agree, u2 tie (A y, B x)
    assert scores["D"] == Score(2, 1, 0.5)  # u1 disagree (x,x,x), u2 agree (y,x,x -> x)


def test_leave_one_out_alone_is_not_comparable() -> None:
    assert leave_one_out_agreement([("u", "A", 1)]) == {"A": Score(0, 0, None)}
    assert leave_one_out_agreement([]) == {}


def test_straight_lining_by_hand() -> None:
    line = straight_lining(["a", "a", "b", "b", "b", "a", "c"])
    assert (line.n, line.longest_run, line.run_value) == (7, 3, "b")
    assert line.modal_value == "a" and line.modal_share == 3 / 7  # a and b tie at 3: the first seen wins
    assert straight_lining([["x", "y"], ["y", "x"], ["x"]]).longest_run == 2  # lists compared as sets
    assert straight_lining(["k"] * 12).longest_run == 12
    empty = straight_lining([])
    assert (empty.n, empty.longest_run, empty.modal_share) == (0, 0, None)


def test_flags_at_and_around_each_threshold() -> None:
    thresholds = dict(DEFAULT_THRESHOLDS)
    clean: dict[str, Any] = {
        "gold": Score(10, 7, 0.7),
        "attention_failed": 0,
        "loo": Score(10, 6, 0.6),
        "study_loo_median": 0.8,
        "median_seconds": 3.0,
        "straight": ("q", *straight_line_judged(["a"] * 9, [], thresholds)),
    }
    assert quality_flags(**clean, thresholds=thresholds) == []
    flagged = quality_flags(
        gold=Score(4, 2, 0.5),
        attention_failed=1,
        loo=Score(10, 5, 0.5),
        study_loo_median=0.8,
        median_seconds=2.0,
        straight=("q", *straight_line_judged(["a"] * 10, [], thresholds)),
        thresholds=thresholds,
    )
    assert [f.code for f in flagged] == [
        "gold_accuracy",
        "attention",
        "agreement",
        "speed",
        "straight_lining",
    ]
    # too few comparisons: no agreement flag however low
    few = quality_flags(**{**clean, "loo": Score(9, 0, 0.0)}, thresholds=thresholds)
    assert few == []
    assert quality_flags(**{**clean, "gold": Score(0, 0, None)}, thresholds=thresholds) == []


def test_thresholds_and_median() -> None:
    assert (
        thresholds_with_defaults({"max_straight_run": 5, "bogus": 1, "loo_margin": "x"})["max_straight_run"]
        == 5
    )
    assert thresholds_with_defaults(None)["loo_margin"] == 0.2
    assert (
        loo_median([Score(10, 9, 0.9), Score(10, 5, 0.5), Score(3, 0, 0.0), Score(12, 6, 0.5)], min_n=10)
        == 0.5
    )
    assert loo_median([], min_n=1) is None


def _coded(rows: list, voters: set | None) -> dict:
    units = {unit: i for i, unit in enumerate(dict.fromkeys(u for u, _a, _v in rows))}
    people = {a: i for i, a in enumerate(dict.fromkeys(a for _u, a, _v in rows))}
    values = {v: i for i, v in enumerate(dict.fromkeys(v for _u, _a, v in rows))}
    result = leave_one_out_coded(
        [units[u] for u, _a, _v in rows],
        [people[a] for _u, a, _v in rows],
        [values[v] for _u, _a, v in rows],
        [voters is None or a in voters for _u, a, _v in rows],
    )
    return {name: result[i] for name, i in people.items()}


def test_leave_one_out_coded_gives_the_hand_counts() -> None:
    # the same hand-worked cases as above, as (n, agreeing) pairs
    assert _coded(ROWS, None) == {"A": (3, 1), "B": (3, 2), "C": (2, 2), "D": (2, 1)}
    assert _coded(ROWS, {"A", "B", "C"}) == {"A": (3, 1), "B": (2, 1), "C": (1, 1), "D": (2, 1)}
    assert _coded([("u", "A", 1)], None) == {"A": (0, 0)}
    assert leave_one_out_coded([], [], [], []) == {}


def test_leave_one_out_coded_matches_the_plain_function_on_random_answers() -> None:
    import random

    rng = random.Random(3)
    rows = [(f"u{u}", f"p{p}", rng.choice("abc")) for u in range(300) for p in range(5) if rng.random() < 0.7]
    for voters in (None, {"p0", "p1", "p3"}):
        plain = leave_one_out_agreement(rows, voters=voters)
        assert _coded(rows, voters) == {a: (score.n, score.correct) for a, score in plain.items()}


def test_straight_lining_judged_against_the_questions_own_shares() -> None:
    """Issue 25 point 6: a run is straight-lining only where the answer is not that common."""
    thresholds = dict(DEFAULT_THRESHOLDS)  # run >= 10, margin 0.3, off at a modal share >= 0.9
    honest = [{"no": 0.8, "yes": 0.2}, {"no": 0.75, "yes": 0.25}]
    # 12 "no" in a row of 14 answers (share 0.857): the others say "no" 0.775 of the time -> not flagged
    line, judged = straight_line_judged(["no"] * 12 + ["yes", "yes"], honest, thresholds)
    assert line.longest_run == 12 and not judged.flagged
    assert judged.others_share == 0.775 and "close to the others' 0.78" in judged.reason
    # always "yes" (share 1.0 against the others' 0.225): flagged
    line, judged = straight_line_judged(["yes"] * 12, honest, thresholds)
    assert judged.flagged and judged.own_share - judged.others_share == 0.775
    # at the margin exactly (0.3 above the others' 0.7): flagged; just under: not
    assert straight_line_judged(["x"] * 10, [{"x": 0.7, "y": 0.3}], thresholds)[1].flagged
    assert not straight_line_judged(["x"] * 10, [{"x": 0.71, "y": 0.29}], thresholds)[1].flagged
    # a dominated question (the others give "no" 0.9 of the time): never flagged, even for "yes" runs
    dominated = straight_line_judged(["yes"] * 20, [{"no": 0.9, "yes": 0.1}], thresholds)[1]
    assert not dominated.flagged and "dominates" in dominated.reason
    # the others' share is the median over them: one other straight-liner does not move it
    others = [{"a": 0.2, "b": 0.8}, {"a": 0.3, "b": 0.7}, {"a": 1.0}]
    assert straight_line_judged(["a"] * 10, others, thresholds)[1].others_share == 0.3
    # short runs never; max_straight_run 0 never; no others: the run alone decides
    assert not straight_line_judged(["yes"] * 9, honest, thresholds)[1].flagged
    assert not straight_line_judged(["yes"] * 30, honest, {**thresholds, "max_straight_run": 0})[1].flagged
    assert straight_line_judged(["a"] * 10, [], thresholds)[1].flagged
    assert answer_shares([["x", "y"], ["y", "x"], "z", "z"]) == {'["x", "y"]': 0.5, "z": 0.5}
