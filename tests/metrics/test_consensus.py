from __future__ import annotations

import json
from functools import partial

import numpy as np
import pytest

from metrics.consensus import (
    REASON_NO_VOTES,
    adjudicated,
    all_agree_set,
    at_least_k,
    dawid_skene,
    majority,
    per_option,
    unanimous,
)


def test_majority() -> None:
    result = majority([("a", "x"), ("b", "x"), ("c", "y")])
    # x has 2 of 3 votes.
    assert (result.value, result.resolved, result.support) == ("x", True, ["a", "b"])
    assert result.confidence == pytest.approx(2 / 3)
    assert result.rule == "majority" and result.n_votes == 3
    json.dumps(result.to_dict())


def test_majority_tie_is_unresolved() -> None:
    result = majority([("a", "yes"), ("b", "no"), ("c", "no"), ("d", "yes")])
    assert not result.resolved and result.value is None and result.support == []
    assert result.reason == "tie between 'no' and 'yes' (2 votes each)"


def test_majority_absolute_and_abstentions() -> None:
    votes = [("a", "x"), ("b", "x"), ("c", "y"), ("d", "z"), ("e", "w")]
    # Plurality: x with 2 of 5 = 0.4; an absolute majority needs 3.
    assert majority(votes).value == "x" and majority(votes).confidence == pytest.approx(0.4)
    strict = majority(votes, absolute=True)
    assert not strict.resolved and "not more than half" in (strict.reason or "")
    # None is an abstention: 2 of the 3 counted votes.
    result = majority([("a", "x"), ("b", None), ("c", "x"), ("d", "y")])
    assert result.n_votes == 3 and result.confidence == pytest.approx(2 / 3)
    assert majority([]).reason == REASON_NO_VOTES


def test_duplicate_annotator_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        majority([("a", 1), ("a", 0)])


def test_unanimous() -> None:
    result = unanimous([("a", 3), ("b", 3)])
    assert (result.value, result.confidence, result.support) == (3, 1.0, ["a", "b"])
    split = unanimous([("a", 3), ("b", 3), ("c", 4)])
    assert not split.resolved and split.reason == "annotators disagree: 3 (2), 4 (1)"
    assert unanimous([("a", None)]).reason == REASON_NO_VOTES


def test_at_least_k() -> None:
    votes = [("a", "x"), ("b", "x"), ("c", "y")]
    result = at_least_k(votes, k=2)
    assert (result.value, result.support, result.params) == ("x", ["a", "b"], {"k": 2})
    assert result.confidence == pytest.approx(2 / 3)
    none = at_least_k(votes, k=3)
    assert not none.resolved and none.reason == "no value has 3 votes: 'x' (2), 'y' (1)"
    tie = at_least_k([*votes, ("d", "y")], k=2)
    assert not tie.resolved and (tie.reason or "").startswith("tie between 'x' and 'y'")
    with pytest.raises(ValueError):
        at_least_k(votes, k=0)


AGREE = {"Agree", "Strongly Agree"}


def test_all_agree_set_visual() -> None:
    result = all_agree_set([("a", "Strongly Agree"), ("b", "Agree"), ("c", "Agree")], agree_values=AGREE)
    assert result.value is True and result.resolved and result.confidence == 1.0
    assert result.support == ["a", "b", "c"]
    assert result.params == {"agree_values": ["Agree", "Strongly Agree"]}


def test_all_agree_set_excluded_by_one_unsure() -> None:
    result = all_agree_set([("a", "Strongly Agree"), ("b", "Agree"), ("c", "Unsure")], agree_values=AGREE)
    # One of three outside the set: value False, support = the excluder, confidence 1/3.
    assert result.value is False and result.resolved
    assert result.support == ["c"] and result.confidence == pytest.approx(1 / 3)
    assert not all_agree_set([], agree_values=AGREE).resolved
    with pytest.raises(ValueError):
        all_agree_set([("a", "Agree")], agree_values=set())


def test_adjudicated_overrides() -> None:
    votes = [("a", "x"), ("b", "y"), ("c", "y"), ("expert", "y")]
    result = adjudicated(votes, expert_id="expert", expert_value="x")
    # The crowd's majority says y; the expert says x and wins. Only a agreed with the expert.
    assert (result.value, result.resolved, result.rule) == ("x", True, "adjudicated")
    assert result.support == ["expert", "a"]
    assert result.n_votes == 3 and result.confidence == 1.0
    with pytest.raises(ValueError):
        adjudicated(votes, expert_id="expert", expert_value=None)


def test_per_option_multi() -> None:
    selections = [("a", {"red", "blue"}), ("b", {"red"}), ("c", set())]
    results = per_option(selections, options=["red", "blue"], rule=majority)
    # red: votes 1, 1, 0 -> 1 (2 of 3); blue: 1, 0, 0 -> 0 (2 of 3).
    assert results["red"].value == 1 and results["red"].support == ["a", "b"]
    assert results["blue"].value == 0 and results["blue"].support == ["b", "c"]
    # b was never shown blue: blue's votes are a 1, c 0 -> tie.
    shown = {"a": ["red", "blue"], "b": ["red"], "c": ["red", "blue"]}
    results = per_option(selections, options=["red", "blue"], rule=majority, shown=shown)
    assert not results["blue"].resolved and results["blue"].n_votes == 2
    k2 = per_option(selections, options=["red"], rule=partial(at_least_k, k=2))
    assert k2["red"].value == 1


def _simulate(seed: int, accuracies: list[float], n_items: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Binary truth; annotator j answers right with probability accuracies[j], else the other label."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    answers = [np.where(rng.random(n_items) < a, truth, 1 - truth) for a in accuracies]
    return truth, answers


def test_dawid_skene_recovers_reliabilities_and_beats_majority() -> None:
    accuracies = [0.95, 0.9, 0.8, 0.6, 0.55]
    truth, answers = _simulate(0, accuracies, 500)
    records = [(i, f"w{j}", int(answers[j][i])) for j in range(5) for i in range(500)]
    result = dawid_skene(records)
    estimated = [result.annotators[f"w{j}"].accuracy for j in range(5)]
    empirical = [float((answers[j] == truth).mean()) for j in range(5)]
    # EM estimates track each annotator's realised accuracy closely and the design values loosely.
    assert estimated == pytest.approx(empirical, abs=0.03)
    assert estimated == pytest.approx(accuracies, abs=0.08)
    assert estimated[0] > estimated[1] > estimated[2] > estimated[3]
    ds_accuracy = np.mean([result.items[i].value == truth[i] for i in range(500)])
    mv_accuracy = np.mean(
        [majority([(j, int(answers[j][i])) for j in range(5)]).value == truth[i] for i in range(500)]
    )
    assert ds_accuracy > mv_accuracy
    item = result.items[0]
    assert item.rule == "dawid_skene" and item.confidence == pytest.approx(max(result.posteriors[0].values()))
    assert sum(result.posteriors[0].values()) == pytest.approx(1.0)
    assert sum(result.priors.values()) == pytest.approx(1.0)
    confusion = result.annotators["w0"].confusion
    assert sum(confusion[0].values()) == pytest.approx(1.0)
    json.dumps({str(k): v.to_dict() for k, v in list(result.items.items())[:3]})


def test_dawid_skene_degenerate() -> None:
    assert dawid_skene([]).items == {}
    assert dawid_skene([(1, "a", None)]).labels == []
    # Every vote the same label: resolved with posterior 1.
    same = dawid_skene([(1, "a", "x"), (1, "b", "x"), (2, "a", "x")])
    assert same.items[1].value == "x" and same.items[1].confidence == pytest.approx(1.0)
    assert same.items[2].support == ["a"]
    # Two symmetric annotators who always disagree: every posterior is an exact tie.
    tie = dawid_skene([(1, "a", "x"), (1, "b", "y"), (2, "a", "x"), (2, "b", "y")])
    assert not tie.items[1].resolved and tie.items[1].reason == "tie between 'x' and 'y'"
    with pytest.raises(ValueError, match="once"):
        dawid_skene([(1, "a", "x"), (1, "a", "y")])
