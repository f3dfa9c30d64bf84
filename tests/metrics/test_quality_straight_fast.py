"""``OthersShares`` / ``straight_line_judged_among`` (issue 26) give exactly what judging each annotator
against the list of every other annotator's shares gives, on random data with many ties."""

from __future__ import annotations

import random
import statistics
from collections import Counter
from typing import Any

import pytest

from metrics.quality import (
    DEFAULT_THRESHOLDS,
    OthersShares,
    answer_key,
    answer_shares,
    straight_line_judged,
    straight_line_judged_among,
)


def reference_medians(
    shares: dict[str, dict[Any, float]], annotator: str
) -> tuple[dict[Any, float], float] | None:
    """The others' median share of every answer any other gave, and the largest of them: by hand."""
    others = [own for who, own in shares.items() if who != annotator]
    if not others:
        return None
    keys = {key for own in others for key in own}
    medians = {key: statistics.median([own.get(key, 0.0) for own in others]) for key in keys}
    return medians, max(medians.values())


def random_question(rng: random.Random) -> dict[str, list[Any]]:
    """Answers of 1..30 annotators from a small answer set (shares tie often: equal lengths, few
    values), some with lists (answers compared as sets) and long runs."""
    options: list[Any] = ["a", "b", "c", ["x", "y"], ["y", "x"], 1]
    answers = {}
    for n in range(rng.randint(1, 30)):
        length = rng.choice([1, 2, 4, 5, 10, 12, 20])
        if rng.random() < 0.3:
            values = [rng.choice(options)] * length
        else:
            pool = rng.sample(range(len(options)), rng.randint(1, 3))
            values = [options[rng.choice(pool)] for _ in range(length)]
        answers[f"r{n}"] = values
    return answers


@pytest.mark.parametrize("seed", range(40))
def test_fast_judgement_equals_the_others_list(seed: int) -> None:
    rng = random.Random(seed)
    answers = random_question(rng)
    counted = {who: values for who, values in answers.items() if rng.random() < 0.85}
    shares = {who: answer_shares(values) for who, values in counted.items()}
    question = OthersShares(shares)
    thresholds = {
        **DEFAULT_THRESHOLDS,
        "max_straight_run": rng.choice([0, 4, 10]),
        "straight_margin": rng.choice([0.0, 0.2, 0.3]),
        "straight_dominant_share": rng.choice([0.5, 0.9]),
    }
    for who, values in [*answers.items(), ("nobody", ["a"] * 12)]:
        others = [own for a, own in shares.items() if a != who]
        plain = straight_line_judged(values, others, thresholds)
        fast = straight_line_judged_among(values, who, question, thresholds)
        assert fast == plain, (seed, who)
        expected = reference_medians(shares, who)
        got = question.share_and_modal(who)
        if expected is None:
            assert got is None and fast[1].others_share is None
            continue
        assert got is not None
        medians, modal = expected
        share_of, fast_modal = got
        assert fast_modal == modal  # the same float, not approximately
        for key in {answer_key(v) for v in values} | set(medians):
            assert share_of(key, 0.0) == medians.get(key, 0.0), (seed, who, key)


def test_ties_and_even_counts_use_the_mean_of_the_middle_two() -> None:
    # x's shares over four annotators: 0.25, 0.5, 0.5, 1.0 (ties at the middle)
    shares: dict[str, dict[Any, float]] = {
        "A": {"x": 0.25, "y": 0.75},
        "B": {"x": 0.5, "y": 0.5},
        "C": {"x": 0.5, "z": 0.5},
        "D": {"x": 1.0},
    }
    question = OthersShares(shares)
    cases = {"A": (0.5, 0.5), "B": (0.5, 0.5), "C": (0.5, 0.5), "D": (0.5, 0.5)}
    for who, (x_median, modal) in cases.items():
        got = question.share_and_modal(who)
        assert got is not None
        share_of, fast_modal = got
        assert share_of("x", 0.0) == x_median and fast_modal == modal
    # y: others of D are 0.75, 0.5, 0 -> 0.5; others of B: 0.75, 0, 0 -> 0
    got_d, got_b = question.share_and_modal("D"), question.share_and_modal("B")
    assert got_d is not None and got_b is not None
    assert got_d[0]("y", 0.0) == 0.5 and got_b[0]("y", 0.0) == 0.0
    # someone not counted is judged against all four: x 0.5, y (0, 0, 0.5, 0.75) -> 0.25
    outsider = question.share_and_modal("E")
    assert outsider is not None and outsider[0]("y", 0.0) == 0.25 and outsider[1] == 0.5
    assert OthersShares({"A": {"x": 1.0}}).share_and_modal("A") is None


def test_three_thousand_annotators_against_the_plain_form() -> None:
    rng = random.Random(7)
    answers = {f"r{n}": [rng.choice("abcd") for _ in range(rng.randint(1, 12))] for n in range(3000)}
    shares = {who: answer_shares(values) for who, values in answers.items()}
    question = OthersShares(shares)
    flagged = Counter(
        straight_line_judged_among(values, who, question, DEFAULT_THRESHOLDS)[1].flagged
        for who, values in answers.items()
    )
    assert sum(flagged.values()) == 3000
    sample = rng.sample(sorted(answers), 20)
    for who in sample:
        others = [own for a, own in shares.items() if a != who]
        assert straight_line_judged_among(answers[who], who, question, DEFAULT_THRESHOLDS) == (
            straight_line_judged(answers[who], others, DEFAULT_THRESHOLDS)
        )
