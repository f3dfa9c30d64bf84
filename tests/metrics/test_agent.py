"""Agent stereotype score and machine-vs-human comparison against hand-computed values."""

from __future__ import annotations

import pytest

from metrics.agent import PairLabels, compare_machine_to_human, stereotype_score


def test_stereotype_score() -> None:
    s = stereotype_score(["male", "male", "female", None], "male")
    # 3 labelled: male 2/3 is the majority and the pair's subgroup -> detected.
    assert (s.majority, s.n, s.detected) == ("male", 3, True)
    assert s.score == pytest.approx(2 / 3) and s.target_share == pytest.approx(2 / 3)
    f = stereotype_score(["male", "male", "female"], "female")
    assert f.detected is False and f.target_share == pytest.approx(1 / 3)
    assert stereotype_score(["male", "male", "female"], "male", threshold=0.7).detected is False  # 2/3 < .7
    tie = stereotype_score(["male", "female"], "male")
    assert (
        tie.majority is None and tie.score == 0.5 and tie.detected is False and tie.tied == ["female", "male"]
    )
    empty = stereotype_score([None], "male")
    assert empty.score is None and empty.detected is None and empty.n == 0


def test_machine_vs_human() -> None:
    pairs = [
        # human f 3/4 (detected); machine f 2/4 tie (not detected): |.5 - .75| = .25, disagree.
        PairLabels("p1", "gender", "female", ["female"] * 3 + ["male"], ["female", "female", "male", "male"]),
        # human m 1/3 (not); machine m 2/3 (detected): |2/3 - 1/3| = 1/3, disagree.
        PairLabels("p2", "gender", "male", ["male", "female", "female"], ["male", "male", "female"]),
        # human asian 1 (detected); machine asian 2/3 (detected): 1/3, agree.
        PairLabels("p3", "race", "asian", ["asian", "asian"], ["asian", "latino", "asian"]),
        # machine has no label: left out of both figures.
        PairLabels("p4", "race", "asian", ["asian"], [None]),
    ]
    r = compare_machine_to_human(pairs)
    dims = {d.dimension: d for d in r.per_dimension}
    # gender: (.25 + 1/3)/2 = .291667; race: 1/3 over 1 pair.
    assert (
        dims["gender"].mean_abs_difference == pytest.approx(0.291667, abs=1e-6)
        and dims["gender"].n_pairs == 2
    )
    assert dims["race"].mean_abs_difference == pytest.approx(1 / 3) and dims["race"].n_pairs == 1
    # detection agrees on p3 only of 3 compared pairs.
    assert r.detection_accuracy == pytest.approx(1 / 3) and r.n_compared == 3
    none = compare_machine_to_human([])
    assert none.detection_accuracy is None and none.reason


def test_images_labelled_none_stay_in_the_denominator() -> None:
    """Agent section 3: score = majority-subgroup images / all images; 'None' images count (issue 14)."""
    # Appendix C Table 4's shape: Jew, Jew, None -> majority jew, 2 of 3 images.
    s = stereotype_score(["jew", "jew", "none"], "jew")
    assert (s.majority, s.n, s.n_none, s.detected) == ("jew", 3, 1, True)
    assert s.score == pytest.approx(2 / 3) and s.target_share == pytest.approx(2 / 3)
    # 5 labelled (2 none), one unanswered (Python None: left out): female 2/5, male 1/5.
    five = stereotype_score(["female", "none", "female", None, "none", "male"], "female")
    assert (five.majority, five.score, five.target_share, five.n, five.n_none) == ("female", 0.4, 0.4, 5, 2)
    # 'none' is never the majority, even when it is the most frequent label.
    many = stereotype_score(["none", "none", "none", "male"], "female")
    assert (many.majority, many.score, many.target_share, many.detected) == ("male", 0.25, 0.0, False)
    only = stereotype_score(["none", "none"], "male")
    assert (only.majority, only.score, only.target_share, only.n, only.detected) == (None, 0.0, 0.0, 2, False)
    assert only.reason == "every labelled image is 'none'"
    # machine vs human: human female 1 of 2 (a none), machine 2 of 2: |1 - 1/2| = 1/2.
    r = compare_machine_to_human(
        [PairLabels("p", "gender", "female", ["female", "none"], ["female", "female"])]
    )
    assert r.per_dimension[0].mean_abs_difference == pytest.approx(0.5)
