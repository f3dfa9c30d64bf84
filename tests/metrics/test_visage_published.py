"""ViSAGe's published numbers from its released data (paper Table 1, section 4.2, appendix 8.1).

The paper prints L(stereo) and theta *truncated* (to 3 and 2 decimals) and L(random) *rounded* to 3
decimals; with those rules 29/29 L(stereo), 28/29 L(random) and 29/29 theta match. The 29th L(random) is
Libyan: 1/105 = 0.0095238 rounds to 0.010, the paper prints 0.009 (a print slip; truncation would give
0.009 but then Lebanese, Mauritian, Sudanese, Nigerian and Laotian would not match).
"""

from __future__ import annotations

import math
from functools import cache

import pytest

from metrics.visage import (
    Tendency,
    attribute_likelihoods,
    likert_consensus_shares,
    stereotype_tendency,
    thrice_ratio,
    visual_attributes,
)
from tests.metrics import visage_data as vd

pytestmark = pytest.mark.skipif(not vd.ANNOTATIONS.exists(), reason="shared ViSAGe data not present")


def truncate(x: float, places: int) -> float:
    # 1e-9 absorbs binary noise such as 0.1 * 1000 = 100.00000000000001 or 75.00000000000001.
    return math.floor(x * 10**places + 1e-9) / 10**places


def round_half_up(x: float, places: int) -> float:
    return math.floor(x * 10**places + 0.5) / 10**places


@cache
def tendencies() -> dict[str, Tendency]:
    ratings = vd.load_visual_ratings()
    visual = set(visual_attributes(ratings, vd.VISUAL_SCORES))
    pairs = vd.stereotype_pairs(vd.load_seegull(), visual)
    likelihoods = attribute_likelihoods(vd.load_showings())
    return {t.identity: t for t in stereotype_tendency(likelihoods, pairs)}


def test_visual_attribute_count_is_518_not_385() -> None:
    ratings = vd.load_visual_ratings()
    assert len(ratings) == 1994
    rows_all_visual = [a for a, r in ratings if all(s in vd.VISUAL_SCORES for s in r)]
    assert len(rows_all_visual) == 519  # "handsome" is listed twice
    assert len(visual_attributes(ratings, vd.VISUAL_SCORES)) == 518  # the paper says 385


def test_every_shown_attribute_is_visual() -> None:
    # The annotation study only showed visual attributes: this is why the visual filter reproduces Table 1.
    visual = set(visual_attributes(vd.load_visual_ratings(), vd.VISUAL_SCORES))
    shown = {s.attribute for s in vd.load_showings()} - {"none of the above"}
    assert len(shown) == 318 and shown <= visual


def test_figure_2_visual_stereotype_counts() -> None:
    # Section 3.1: Australians 63, Mexicans 46, Indians 34, New Zealand 31, Ethiopians 27, Japanese 20;
    # "around 30 identities" have a single visual stereotype.
    visual = set(visual_attributes(vd.load_visual_ratings(), vd.VISUAL_SCORES))
    pairs = vd.stereotype_pairs(vd.load_seegull(), visual)
    per_identity: dict[str, int] = {}
    for idn, _ in pairs:
        per_identity[idn] = per_identity.get(idn, 0) + 1
    expected = {
        "Australian": 63,
        "Mexican": 46,
        "Indian": 34,
        "New Zealand": 31,
        "Ethiopian": 27,
        "Japanese": 20,
    }
    assert {k: per_identity[k] for k in expected} == expected
    assert sum(1 for v in per_identity.values() if v == 1) == 30


@pytest.mark.parametrize("paper_name", sorted(vd.TABLE_1))
def test_table_1_l_stereo_truncated(paper_name: str) -> None:
    t = tendencies()[vd.PAPER_NAME_TO_FILE.get(paper_name, paper_name)]
    assert t.eligible and t.l_stereo is not None
    assert truncate(t.l_stereo, 3) == vd.TABLE_1[paper_name][0]


@pytest.mark.parametrize("paper_name", sorted(vd.TABLE_1))
def test_table_1_l_random_rounded(paper_name: str) -> None:
    t = tendencies()[vd.PAPER_NAME_TO_FILE.get(paper_name, paper_name)]
    assert t.l_random is not None
    if paper_name == "Libyan":
        # Print slip: L(random, Libyan) = mean of 7 terms (6 attributes + "None of the above") summing to
        # 1/15 -> 1/105 = 0.0095238, which rounds to 0.010.
        assert t.n_random_terms == 7 and t.l_random == pytest.approx(1 / 105)
        assert round_half_up(t.l_random, 3) == 0.010 and vd.TABLE_1[paper_name][1] == 0.009
        return
    assert round_half_up(t.l_random, 3) == vd.TABLE_1[paper_name][1]


@pytest.mark.parametrize("paper_name", sorted(vd.TABLE_1))
def test_table_1_theta_truncated(paper_name: str) -> None:
    t = tendencies()[vd.PAPER_NAME_TO_FILE.get(paper_name, paper_name)]
    expected = vd.TABLE_1[paper_name][2]
    if expected is None:  # "N/A": L(random) = 0, theta undefined, not infinite
        assert t.theta is None and t.l_random == 0 and t.reason is not None
    else:
        assert t.theta is not None and truncate(t.theta, 2) == expected


def test_thrice_as_likely() -> None:
    # Mean L(stereo) / mean L(random) over the 105 identities with > 1 visual stereotype shown.
    ratio = thrice_ratio(tendencies().values())
    assert ratio.n == 105
    assert ratio.value is not None and 3.0 <= ratio.value < 3.2
    assert ratio.value == pytest.approx(3.1522, abs=1e-4)


def test_appendix_consensus_shares() -> None:
    # Figure 6 / appendix 8.1 over 1994 rows: SA 20.41%, A 22.16%, D 20.26%, SD 7.52%, Unsure 0.2%.
    ratings = [r for _, r in vd.load_visual_ratings()]
    shares = {s.label: s for s in likert_consensus_shares(ratings, [5, 4, 3, 2, 1])}
    assert shares[5].count == 407 and truncate(100 * 407 / 1994, 2) == 20.41
    assert shares[4].count == 442 and truncate(100 * 442 / 1994, 2) == 22.16  # paper truncates
    assert shares[1].count == 150 and truncate(100 * 150 / 1994, 2) == 7.52
    assert shares[3].count == 4 and round(100 * 4 / 1994, 1) == 0.2
    # Disagree does not reproduce: 406/1994 = 20.36%, the paper prints 20.26%.
    assert shares[2].count == 406 and truncate(100 * 406 / 1994, 2) == 20.36
