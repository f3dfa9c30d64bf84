"""Overlap policies and their replay (metrics/overlap_policy.py), against hand counts."""

from __future__ import annotations

import numpy as np
import pytest

from metrics.consensus import dawid_skene
from metrics.overlap_policy import (
    AgreePolicy,
    DawidSkeneModel,
    FixedPolicy,
    PolicyError,
    PosteriorPolicy,
    ReplaySettings,
    counting_replay,
    dawid_skene_fit,
    majority,
    overlap_replay,
    policy_parse,
    posterior_label,
    posterior_stop,
)

# Four items, their judgements interleaved in the order collected:
#   a: yes yes no       full consensus yes
#   b: no yes yes yes   full consensus yes
#   c: no yes           a tie: no full consensus
#   d: yes              full consensus yes
JUDGEMENTS = [
    ("a", "u1", "yes"),
    ("b", "u1", "no"),
    ("c", "u2", "no"),
    ("a", "u2", "yes"),
    ("b", "u2", "yes"),
    ("d", "u3", "yes"),
    ("a", "u3", "no"),
    ("b", "u3", "yes"),
    ("c", "u3", "yes"),
    ("b", "u4", "yes"),
]


@pytest.mark.parametrize(
    ("text", "policy", "canonical"),
    [
        ("fixed:3", FixedPolicy(3), "fixed:3"),
        (" Agree:2/3 ", AgreePolicy(2, 3), "agree:2/3"),
        ("agree:3/3", AgreePolicy(3, 3), "agree:3/3"),
        ("posterior:0.95/3", PosteriorPolicy(0.95, 3), "posterior:0.95/3"),
        ("posterior:.9/5", PosteriorPolicy(0.9, 5), "posterior:0.9/5"),
    ],
)
def test_policy_parse(text: str, policy: object, canonical: str) -> None:
    assert policy_parse(text) == policy
    assert str(policy_parse(text)) == canonical


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("majority:3", "'majority:3' is not a policy: use fixed:K, agree:K/MAX or posterior:P/MAX"),
        ("agree", "'agree' is not a policy"),
        ("fixed:0", "K must be a whole number from 1 to 1000, not '0'"),
        ("fixed:1001", "K must be a whole number from 1 to 1000, not '1001'"),
        ("fixed:2/3", "fixed takes one number, fixed:K"),
        ("agree:3/2", "K (3) must not exceed MAX (2)"),
        ("agree:2", "agree takes two numbers, agree:K/MAX"),
        ("agree:2/3/4", "agree takes two numbers"),
        ("agree:two/3", "K must be a whole number from 1 to 1000, not 'two'"),
        ("agree:2/3.5", "MAX must be a whole number"),
        ("posterior:1/3", "P must be a probability strictly between 0 and 1 (e.g. 0.95), not '1'"),
        ("posterior:0/3", "P must be a probability strictly between 0 and 1"),
        ("posterior:-0.5/3", "P must be a probability strictly between 0 and 1"),
        ("posterior:nan/3", "P must be a probability strictly between 0 and 1 (e.g. 0.95), not 'nan'"),
        ("posterior:95%/3", "not '95%'"),
        ("posterior:0.95", "posterior takes two numbers, posterior:P/MAX"),
        ("posterior:0.95/0", "MAX must be a whole number from 1 to 1000, not '0'"),
    ],
)
def test_policy_parse_refuses_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(PolicyError) as caught:
        policy_parse(text)
    assert reason in str(caught.value)


def test_majority_and_counting_replay_by_hand() -> None:
    assert majority(["yes", "no", "yes"]) == "yes"
    assert majority(["yes", "no"]) is None and majority([]) is None
    # agree:2/3 stops at the second equal answer; without two equal ones, MAX and a plurality.
    assert counting_replay(["yes", "yes", "no"], AgreePolicy(2, 3)) == (2, "yes")
    assert counting_replay(["no", "yes", "yes", "yes"], AgreePolicy(2, 3)) == (3, "yes")
    assert counting_replay(["x", "y", "z", "x"], AgreePolicy(2, 3)) == (3, None)
    assert counting_replay(["x", "y", "x", "z"], AgreePolicy(3, 4)) == (4, "x")
    # An item with fewer judgements than it would need uses what it has.
    assert counting_replay(["no", "yes"], AgreePolicy(2, 3)) == (2, None)
    assert counting_replay(["yes"], AgreePolicy(2, 3)) == (1, "yes")
    assert counting_replay(["no", "yes", "yes"], FixedPolicy(2)) == (2, None)
    assert counting_replay(["no", "yes", "yes"], FixedPolicy(3)) == (3, "yes")


def test_replay_agree_by_hand() -> None:
    result = overlap_replay(JUDGEMENTS, policy_parse("agree:2/3")).to_dict()
    # Used: a 2, b 3 (no yes yes), c 2 (ran out), d 1: 8 of 10.
    # Full consensus on a, b, d (c is a tie); replayed a yes, b yes, d yes: 3 of 3.
    assert result == {
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
        "left_out": {"gold_judgements": 0},
    }


def test_replay_fixed_by_hand() -> None:
    two = overlap_replay(JUDGEMENTS, FixedPolicy(2))
    # Used 2 + 2 + 2 + 1 = 7 of 10; b's first two (no, yes) tie: no label, which counts as different.
    assert (two.judgements_used, two.saved_share) == (7, 0.3)
    assert (two.same, two.items_with_full_consensus) == (2, 3)
    assert two.same_as_full_consensus == pytest.approx(2 / 3)
    one = overlap_replay(JUDGEMENTS, FixedPolicy(1))
    # One each: b's first is "no", against its full consensus "yes".
    assert (one.judgements_used, one.saved_share, one.same) == (4, 0.6, 2)
    assert one.same_by_label() == [{"label": "yes", "items": 3, "same": 2}]
    full = overlap_replay(JUDGEMENTS, FixedPolicy(4))
    assert (full.judgements_used, full.saved_share, full.same_as_full_consensus) == (10, 0.0, 1.0)


def test_replay_of_nothing() -> None:
    result = overlap_replay([], AgreePolicy(2, 3))
    assert (result.saved_share, result.same_as_full_consensus, result.items) == (None, None, [])
    assert overlap_replay([], PosteriorPolicy(0.9, 3)).items == []


def _model(prior: list[float], confusion: list[list[float]]) -> DawidSkeneModel:
    matrix = np.array(confusion)
    return DawidSkeneModel(
        classes=("no", "yes"),
        prior=np.array(prior),
        pooled=matrix,
        fallback=matrix,
        confusion={"expert": np.array([[0.99, 0.01], [0.01, 0.99]])},
        kind="full",
        iterations=0,
        converged=True,
    )


def test_posterior_stop_and_label_by_hand() -> None:
    model = _model([0.8, 0.2], [[0.9, 0.1], [0.3, 0.7]])
    # One "no": 0.8*0.9 / (0.8*0.9 + 0.2*0.3) = 0.72 / 0.78; two: 0.648 / (0.648 + 0.018).
    assert model.posterior([("u", "no")])[0] == pytest.approx(0.72 / 0.78)
    assert model.posterior([("u", "no"), ("v", "no")])[0] == pytest.approx(0.648 / 0.666)
    # no, yes: 0.8*0.9*0.1 = 0.072 against 0.2*0.3*0.7 = 0.042.
    assert model.posterior([("u", "no"), ("v", "yes")])[0] == pytest.approx(0.072 / 0.114)
    policy = PosteriorPolicy(0.95, 3)
    assert posterior_stop([("u", "no"), ("v", "no"), ("w", "no")], model, policy) == 2
    assert posterior_stop([("u", "no"), ("v", "yes"), ("w", "no")], model, policy) == 3
    assert posterior_stop([("u", "no"), ("v", "yes")], model, policy) == 2  # ran out
    assert posterior_stop([("u", "no"), ("v", "no")], None, policy) == 2  # a pilot: up to MAX
    assert posterior_stop([("u", "no")] * 5, None, policy) == 3
    # A known annotator answers with their own rows: one "no" from the expert is enough.
    # 0.8*0.99 / (0.8*0.99 + 0.2*0.01) = 0.792 / 0.794.
    assert model.posterior([("expert", "no")])[0] == pytest.approx(0.792 / 0.794)
    assert posterior_stop([("expert", "no"), ("u", "yes")], model, policy) == 1
    # One "yes": 0.8*0.1 = 0.08 against 0.2*0.7 = 0.14: yes leads.
    assert posterior_label([("u", "yes")], model) == "yes"
    assert posterior_label([], model) is None
    even = _model([0.5, 0.5], [[0.8, 0.2], [0.2, 0.8]])
    assert posterior_label([("u", "yes"), ("v", "no")], even) is None  # an exact tie


# Three items, two annotators, for the first M-step by hand (max_iter=1):
#   i1: a x, b x    i2: a y, b x    i3: a y, b y
EM_JUDGEMENTS = [("i1", "a", "x"), ("i1", "b", "x"), ("i2", "a", "y"), ("i2", "b", "x")]
EM_JUDGEMENTS += [("i3", "a", "y"), ("i3", "b", "y")]


def test_first_m_step_by_hand() -> None:
    # Start: T = vote shares, i1 (1, 0), i2 (0.5, 0.5), i3 (0, 1).
    # Prior (T summed + 1) / (3 + 2) = (2.5 / 5, 2.5 / 5).
    # Soft counts: a, true x: (1, 0.5), true y: (0, 1.5); b, true x: (1.5, 0), true y: (0.5, 1).
    # Pooled: x (2.5 + 1, 0.5 + 1) / 5, y (0.5 + 1, 2.5 + 1) / 5.
    full = dawid_skene_fit(EM_JUDGEMENTS, classes=("x", "y"), kind="full", shrink=2.0, max_iter=1)
    assert (full.iterations, full.converged) == (1, False)
    np.testing.assert_allclose(full.prior, [0.5, 0.5])
    np.testing.assert_allclose(full.pooled, [[0.7, 0.3], [0.3, 0.7]])
    # Shrunk: (counts + 2 * pooled) / (row total + 2).
    np.testing.assert_allclose(full.confusion["a"], [[2.4 / 3.5, 1.1 / 3.5], [0.6 / 3.5, 2.9 / 3.5]])
    np.testing.assert_allclose(full.confusion["b"], [[2.9 / 3.5, 0.6 / 3.5], [1.1 / 3.5, 2.4 / 3.5]])
    # One-coin: each annotator 2.5 correct of 3; pooled accuracy (5 + 1) / (6 + 2) = 0.75;
    # a_w = (2.5 + 2 * 0.75) / (3 + 2) = 0.8.
    coin = dawid_skene_fit(EM_JUDGEMENTS, classes=("x", "y"), kind="one-coin", max_iter=1)
    np.testing.assert_allclose(coin.confusion["a"], [[0.8, 0.2], [0.2, 0.8]])
    np.testing.assert_allclose(coin.fallback, [[0.75, 0.25], [0.25, 0.75]])
    pooled = dawid_skene_fit(EM_JUDGEMENTS, classes=("x", "y"), kind="pooled", max_iter=1)
    assert pooled.confusion == {}
    np.testing.assert_allclose(pooled.row("anyone", "x"), [0.7, 0.3])


def test_gold_trains_the_confusion_not_the_prior() -> None:
    # g is gold x; a answered y on it: a's true-x row gains one y, the prior is unchanged.
    judgements = [*EM_JUDGEMENTS, ("g", "a", "y")]
    model = dawid_skene_fit(judgements, classes=("x", "y"), gold={"g": "x"}, kind="full", max_iter=1)
    np.testing.assert_allclose(model.prior, [0.5, 0.5])
    # Pooled true x: (2.5 + 1, 1.5 + 1) / (4 + 2).
    np.testing.assert_allclose(model.pooled[0], [3.5 / 6, 2.5 / 6])


def _simulated(n_items: int, n_annotators: int, per_item: int, seed: int) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    accuracy = rng.uniform(0.6, 0.95, n_annotators)
    truth = rng.random(n_items) < 0.3
    rows = []
    for position in range(per_item):
        for item in range(n_items):
            annotator = (item + 7 * position) % n_annotators
            right = rng.random() < accuracy[annotator]
            said = truth[item] if right else not truth[item]
            rows.append((f"i{item}", f"w{annotator}", "yes" if said else "no"))
    return rows


def test_fit_is_deterministic_converges_and_agrees_with_crowd_kit() -> None:
    rows = _simulated(300, 12, 5, seed=1)
    first = dawid_skene_fit(rows, classes=("no", "yes"))
    again = dawid_skene_fit(list(rows), classes=("no", "yes"))
    assert first.converged and first.iterations == again.iterations
    np.testing.assert_array_equal(first.prior, again.prior)
    for annotator, matrix in first.confusion.items():
        np.testing.assert_array_equal(matrix, again.confusion[annotator])
        np.testing.assert_allclose(matrix.sum(axis=1), 1.0)
    assert first.prior.sum() == pytest.approx(1.0)
    votes: dict[str, list[tuple[str, str]]] = {}
    for item, annotator, value in rows:
        votes.setdefault(item, []).append((annotator, value))
    ours = {item: posterior_label(item_votes, first) for item, item_votes in votes.items()}
    theirs = dawid_skene(rows).items
    agree = sum(ours[item] == theirs[item].value for item in votes)
    assert agree >= 0.98 * len(votes)


def test_fit_used_never_reads_a_judgement_it_did_not_use() -> None:
    rows = _simulated(200, 10, 5, seed=2)
    settings = ReplaySettings(confusion="full", fit="used", batches=4)
    policy = PosteriorPolicy(0.9, 5)
    result = overlap_replay(rows, policy, settings=settings)
    used = {row.item: row.used for row in result.items}
    assert result.model is not None and result.model["fits"] == 4  # three batches after the pilot, one final
    # The pilot (the first quarter of the items, in the order of their first judgement) takes MAX.
    assert all(used[f"i{item}"] == 5 for item in range(50))
    assert result.judgements_used < result.judgements_available
    # Flip every judgement the replay did not use: nothing it decided may change.
    seen: dict[str, int] = {}
    flipped = []
    for item, annotator, value in rows:
        seen[item] = seen.get(item, 0) + 1
        if seen[item] > used[item]:
            value = "yes" if value == "no" else "no"
        flipped.append((item, annotator, value))
    again = overlap_replay(flipped, policy, settings=settings)
    assert [(row.item, row.used, row.label) for row in again.items] == [
        (row.item, row.used, row.label) for row in result.items
    ]


def test_fit_all_and_a_single_batch() -> None:
    rows = _simulated(120, 8, 3, seed=3)
    pilot_only = overlap_replay(rows, PosteriorPolicy(0.9, 3), settings=ReplaySettings(batches=1))
    assert pilot_only.judgements_used == pilot_only.judgements_available == 360
    leaky = overlap_replay(rows, PosteriorPolicy(0.9, 3), settings=ReplaySettings(fit="all"))
    assert leaky.model is not None and (leaky.model["fit"], leaky.model["fits"]) == ("all", 1)
    assert leaky.judgements_used < 360


def test_gold_items_stay_out_of_the_replay() -> None:
    rows = [*JUDGEMENTS, ("g", "u1", "yes"), ("g", "u2", "yes")]
    result = overlap_replay(rows, PosteriorPolicy(0.9, 3), gold={"g": "yes"})
    assert [row.item for row in result.items] == ["a", "b", "c", "d"]
    assert result.judgements_available == 10 and result.left_out == {"gold_judgements": 2}


@pytest.mark.parametrize(
    ("replay_settings", "reason"),
    [
        (ReplaySettings(shrink=0.0), "shrink must be a positive number"),
        (ReplaySettings(batches=0), "batches must be a whole number"),
        (ReplaySettings(tol=0.0), "tol must be positive"),
    ],
)
def test_settings_are_checked(replay_settings: ReplaySettings, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        overlap_replay(JUDGEMENTS, PosteriorPolicy(0.9, 3), settings=replay_settings)
