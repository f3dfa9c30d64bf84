from __future__ import annotations

import json

import numpy as np
import pytest

from metrics.classification import (
    REASON_NO_PAIRS,
    REASON_ONE_CLASS_PREDICTED,
    REASON_ONE_CLASS_REFERENCE,
    classification_by_group,
    classification_from_codes,
    classification_report,
    confusion_intervals,
    is_missing,
)

nan = float("nan")


def _by_label(report, label):
    return next(c for c in report.per_class if c.label == label)


def test_report_by_hand() -> None:
    reference = ["a", "a", "b", "b", "b", "c", None, "a"]
    predicted = ["a", "b", "b", "b", "c", "c", "a", nan]
    report = classification_report(reference, predicted)
    # The last two pairs miss one side: 6 complete pairs, 2 excluded.
    assert (report.n_pairs, report.n_excluded) == (6, 2)
    assert report.labels == ["a", "b", "c"]
    # rows = reference a, b, c; columns = predicted a, b, c
    assert report.confusion == [[1, 1, 0], [0, 2, 1], [0, 0, 1]]
    # accuracy = (1 + 2 + 1) / 6
    assert report.accuracy == pytest.approx(4 / 6)
    # rows (2, 3, 1), columns (1, 3, 2): p_e = (2*1 + 3*3 + 1*2) / 36 = 13/36, p_o = 24/36,
    # kappa = (24/36 - 13/36) / (1 - 13/36) = 11/23.
    assert report.kappa == pytest.approx(11 / 23)
    a = _by_label(report, "a")
    # a: TP 1, predicted 1, support 2 -> precision 1, recall 1/2, F1 = 2*1 / (2 + 1) = 2/3.
    assert (a.precision, a.recall, a.f1) == pytest.approx((1.0, 0.5, 2 / 3))
    c = _by_label(report, "c")
    # c: TP 1, predicted 2, support 1 -> precision 1/2, recall 1, F1 = 2 / 3.
    assert (c.precision, c.recall, c.f1) == pytest.approx((0.5, 1.0, 2 / 3))
    assert (c.support, c.predicted, c.true_positives) == (1, 2, 1)
    json.dumps(report.to_dict())


def test_explicit_label_order_and_absent_class() -> None:
    report = classification_report(["x", "y"], ["x", "x"], labels=["y", "x", "z"])
    assert report.labels == ["y", "x", "z"]
    # rows y, x, z: y was predicted x once; x predicted x once.
    assert report.confusion == [[0, 1, 0], [0, 1, 0], [0, 0, 0]]
    y = _by_label(report, "y")
    # y never predicted: precision undefined; recall 0/1 = 0; F1 = 0 / (1 + 0) = 0.
    assert y.precision is None and "precision" in y.undefined_reasons
    assert y.recall == 0.0 and y.f1 == 0.0
    z = _by_label(report, "z")
    assert (z.precision, z.recall, z.f1) == (None, None, None)
    assert set(z.undefined_reasons) == {"precision", "recall", "f1"}
    # p_o = 1/2; rows (y 1, x 1), columns (x 2): p_e = (1/2)(1) = 1/2 -> kappa = 0 whatever the reference:
    # the prediction holds one class, so kappa is undefined (fewer than two classes), with the reason.
    assert report.kappa is None and report.kappa_undefined_reason == REASON_ONE_CLASS_PREDICTED


def test_kappa_negative_and_undefined() -> None:
    # Complete disagreement on two items: p_o = 0, p_e = (1*1 + 1*1)/4 = 1/2, kappa = -1.
    assert classification_report(["a", "b"], ["b", "a"]).kappa == pytest.approx(-1.0)
    # Both sides always "a": p_e = 1, kappa undefined; accuracy is still 1.
    report = classification_report(["a", "a"], ["a", "a"])
    assert report.kappa is None and report.kappa_undefined_reason
    assert report.accuracy == 1.0


def test_no_complete_pairs() -> None:
    report = classification_report([None, "a"], ["b", None], labels=["a", "b"])
    assert report.n_pairs == 0 and report.n_excluded == 2
    assert report.accuracy is None and report.accuracy_undefined_reason == REASON_NO_PAIRS
    assert report.kappa is None
    assert report.confusion == [[0, 0], [0, 0]]
    empty = classification_report([], [])
    assert empty.labels == [] and empty.accuracy is None


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError, match="same|has"):
        classification_report(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="not in labels"):
        classification_report(["a"], ["q"], labels=["a"])
    with pytest.raises(ValueError, match="repeat"):
        classification_report(["a"], ["a"], labels=["a", "a"])


def test_integer_and_boolean_labels() -> None:
    report = classification_report([0, 1, 1, 0], [0, 1, 0, 0])
    # TP(1) = 1, predicted 1 once, support 2 -> precision 1, recall 1/2.
    one = _by_label(report, 1)
    assert (one.precision, one.recall) == (1.0, 0.5)
    assert report.accuracy == 0.75


def test_by_group_shares_label_order() -> None:
    reference = ["m", "f", "m", "f", "f"]
    predicted = ["m", "f", "f", "f", None]
    groups = ["g2", "g2", "g1", "g1", "g1"]
    reports = classification_by_group(reference, predicted, groups)
    assert [r.group for r in reports] == ["g1", "g2"]
    g1, g2 = reports[0].report, reports[1].report
    assert g1.labels == g2.labels == ["f", "m"]
    # g1: (m, f) wrong, (f, f) right, (f, None) excluded -> accuracy 1/2.
    assert (g1.accuracy, g1.n_pairs, g1.n_excluded) == (0.5, 2, 1)
    # g2: both right.
    assert g2.accuracy == 1.0
    json.dumps([r.to_dict() for r in reports])


def test_by_group_with_tuple_groups_and_length_check() -> None:
    reports = classification_by_group([1, 0], [1, 1], [("geo", "m1", "initial"), ("geo", "m1", "refined")])
    assert [r.group for r in reports] == [("geo", "m1", "initial"), ("geo", "m1", "refined")]
    assert [r.report.accuracy for r in reports] == [1.0, 0.0]
    with pytest.raises(ValueError):
        classification_by_group([1], [1], [])


def test_is_missing() -> None:
    assert is_missing(None) and is_missing(nan)
    assert not is_missing(0) and not is_missing("") and not is_missing(False)


def test_from_codes_matches_hand_counts_and_the_plain_functions() -> None:
    # values: 0 "m", 1 "f", 2 "x" (never used); groups: 0 "g2", 1 "g1"; the same pairs as above.
    values = ["m", "f", "x"]
    reference = np.array([0, 1, 0, 1, 1], dtype=float)
    predicted = np.array([0, 1, 1, 1, nan])
    groups = np.array([0, 0, 1, 1, 1])
    overall, by_group = classification_from_codes(
        reference, predicted, values, groups=groups, group_values=["g2", "g1"]
    )
    # Labels seen in complete pairs, sorted: f, m. Pairs (m,m) (f,f) (m,f) (f,f): C = [[2, 0], [1, 1]].
    assert overall.labels == ["f", "m"]
    assert overall.confusion == [[2, 0], [1, 1]]
    assert (overall.n_pairs, overall.n_excluded, overall.accuracy) == (4, 1, 0.75)
    # p_o = 3/4; rows (2, 2)/4, cols (3, 1)/4 -> p_e = (2*3 + 2*1)/16 = 1/2; kappa = (3/4 - 1/2)/(1/2) = 1/2.
    assert overall.kappa == pytest.approx(0.5)
    assert [g.group for g in by_group] == ["g1", "g2"]
    assert (by_group[0].report.accuracy, by_group[0].report.n_pairs, by_group[0].report.n_excluded) == (
        0.5,
        2,
        1,
    )
    assert by_group[1].report.confusion == [[1, 0], [0, 1]]
    plain = classification_by_group(
        ["m", "f", "m", "f", "f"], ["m", "f", "f", "f", None], ["g2", "g2", "g1", "g1", "g1"]
    )
    assert [g.to_dict() for g in by_group] == [g.to_dict() for g in plain]


def test_from_codes_with_no_complete_pair() -> None:
    overall, by_group = classification_from_codes(np.array([nan]), np.array([0.0]), ["a"])
    assert overall.n_pairs == 0 and overall.accuracy is None and overall.n_excluded == 1 and by_group == []


def test_confusion_intervals_of_perfect_agreement_and_of_one_class() -> None:
    # Every resample of a diagonal matrix is diagonal: kappa 1 (unless all items fall in one class, a
    # chance of 2 / 2^10, dropped as undefined) and every F1 1.
    perfect = confusion_intervals([[5, 0], [0, 5]])
    assert perfect.kappa == (1.0, 1.0) and perfect.macro_f1 == 1.0 and perfect.macro_f1_interval == (1.0, 1.0)
    # One class on both sides: kappa and macro F1 are undefined (fewer than two classes), with the reason.
    single = confusion_intervals([[10]])
    assert single.kappa == (None, None) and single.macro_f1_interval == (None, None)
    assert single.macro_f1 is None and single.reason == REASON_ONE_CLASS_REFERENCE
    empty = confusion_intervals([[0, 0], [0, 0]])
    assert empty.kappa == (None, None) and empty.macro_f1 is None and empty.reason is not None


def test_confusion_intervals_match_the_large_sample_spread_of_kappa() -> None:
    # n = 2000, p_o = 0.85, rows [1000, 1000], columns [900, 1100]: p_e = 0.5, kappa = 0.35 / 0.5 = 0.7.
    # Its large-sample standard error sqrt(p_o (1 - p_o) / (n (1 - p_e)^2)) = sqrt(0.1275 / 500) = 0.01597,
    # so a 95% interval about 2 * 1.96 * 0.01597 = 0.0626 wide around 0.7. F1: 1600/1900 and 1800/2100,
    # macro 0.849624.
    confusion = [[800, 200], [100, 900]]
    result = confusion_intervals(confusion)
    assert result.macro_f1 == pytest.approx((1600 / 1900 + 1800 / 2100) / 2)
    low, high = result.kappa
    assert low is not None and high is not None
    assert low < 0.7 < high and abs((low + high) / 2 - 0.7) < 0.01
    assert 0.8 * 0.0626 < high - low < 1.25 * 0.0626
    f1_low, f1_high = result.macro_f1_interval
    assert f1_low is not None and f1_high is not None and f1_low < result.macro_f1 < f1_high
    assert confusion_intervals(confusion) == result  # seeded: the same matrix, the same intervals


def test_kappa_on_a_consensus_of_one_class_is_undefined_not_zero() -> None:
    # The case: the consensus holds one class (6 "no"), the labeller says "yes" once. p_o = 5/6,
    # p_e = 1 x 5/6 = 5/6, so the formula gives kappa = 0 beside accuracy 0.833: a number that says nothing.
    report = classification_report(["no"] * 6, ["no"] * 5 + ["yes"])
    assert report.accuracy == pytest.approx(5 / 6)
    assert report.kappa is None and report.kappa_undefined_reason == REASON_ONE_CLASS_REFERENCE
    bootstrap = confusion_intervals(report.confusion)
    assert bootstrap.kappa == (None, None) and bootstrap.macro_f1 is None
    assert bootstrap.macro_f1_interval == (None, None) and bootstrap.reason == REASON_ONE_CLASS_REFERENCE


def test_kappa_with_two_classes_on_both_sides_stays_defined() -> None:
    # p_o = 3/4; rows (a 2, b 2), columns (a 1, b 3): p_e = (2*1 + 2*3)/16 = 1/2
    # -> kappa = (3/4 - 1/2)/(1/2) = 1/2.
    report = classification_report(["a", "a", "b", "b"], ["a", "b", "b", "b"])
    assert report.kappa == pytest.approx(0.5) and report.kappa_undefined_reason is None
