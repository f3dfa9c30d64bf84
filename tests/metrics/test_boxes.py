from __future__ import annotations

import json

import numpy as np
import pytest

from metrics.boxes import (
    REASON_NO_BOXES,
    REASON_NO_MATCHES,
    box_agreement,
    iou,
    iou_matrix,
    match_boxes,
)


def test_iou_by_hand() -> None:
    # Overlap of (0,0,2,2) and (1,1,2,2) is the unit square: 1 / (4 + 4 - 1) = 1/7.
    assert iou((0, 0, 2, 2), (1, 1, 2, 2)) == pytest.approx(1 / 7)
    assert iou((0, 0, 2, 2), (0, 0, 2, 2)) == 1.0
    # Contained: 2x2 inside 4x4 -> 4 / 16.
    assert iou((0, 0, 4, 4), (1, 1, 2, 2)) == pytest.approx(0.25)
    assert iou((0, 0, 1, 1), (5, 5, 1, 1)) == 0.0
    assert iou((0, 0, 1, 1), (1, 0, 1, 1)) == 0.0  # sharing an edge is no overlap
    assert iou((0, 0, 0, 0), (0, 0, 0, 0)) == 0.0  # no area at all: defined as 0, not nan


def test_iou_matrix_shape_and_validation() -> None:
    matrix = iou_matrix([(0, 0, 2, 2), (1, 1, 2, 2)], [(0, 0, 2, 2)])
    assert matrix.shape == (2, 1)
    assert matrix[:, 0] == pytest.approx([1.0, 1 / 7])
    assert iou_matrix([], [(0, 0, 1, 1)]).shape == (0, 1)
    with pytest.raises(ValueError):
        iou_matrix([(0, 0, -1, 1)], [])
    with pytest.raises(ValueError):
        iou_matrix([(0, 0, 1)], [])  # type: ignore[list-item]  # on purpose: a box of three numbers


A = [(0, 0, 10, 10), (20, 0, 10, 10)]
B = [(1, 0, 10, 10), (50, 50, 5, 5), (20, 0, 10, 10)]


def test_match_boxes_by_hand() -> None:
    matching = match_boxes(A, B)
    # A0-B0: overlap 9 x 10 = 90, union 100 + 100 - 90 = 110 -> 9/11; A1-B2 identical -> 1; B1 alone.
    assert [(i, j) for i, j, _ in matching.pairs] == [(0, 0), (1, 2)]
    assert matching.pairs[0][2] == pytest.approx(9 / 11)
    # match rate = 2 * 2 / (2 + 3); mean IoU = (9/11 + 1) / 2 = 10/11.
    assert matching.match_rate == pytest.approx(0.8)
    assert matching.mean_iou == pytest.approx(10 / 11)
    assert matching.n_matched == 2
    json.dumps(matching.to_dict())


def test_threshold_is_inclusive_and_configurable() -> None:
    # 1-D boxes of height 1: [0, 10] and [0, 5] overlap 5 of 10 -> IoU exactly 0.5.
    assert match_boxes([(0, 0, 10, 1)], [(0, 0, 5, 1)]).n_matched == 1
    assert match_boxes([(0, 0, 10, 1)], [(0, 0, 5, 1)], threshold=0.6).n_matched == 0
    with pytest.raises(ValueError):
        match_boxes(A, B, threshold=0.0)


def test_matching_prefers_more_matches_over_one_high_iou() -> None:
    # Boxes on a line, height 1 (x-intervals): a1 [0,10], a2 [5,14], b1 [-4,6], b2 [1,10].
    # IoU a1-b2 = 9/10, a1-b1 = 6/14 = 3/7, a2-b2 = 5/13, a2-b1 = 1/18.
    # At threshold 0.35, greedy-by-IoU (or max total IoU: 0.9 > 3/7 + 5/13 = 0.81) keeps one pair;
    # the most matches is two: (a1, b1) and (a2, b2).
    a = [(0, 0, 10, 1), (5, 0, 9, 1)]
    b = [(-4, 0, 10, 1), (1, 0, 9, 1)]
    assert iou_matrix(a, b) == pytest.approx(np.array([[3 / 7, 9 / 10], [1 / 18, 5 / 13]]))
    matching = match_boxes(a, b, threshold=0.35)
    assert [(i, j) for i, j, _ in matching.pairs] == [(0, 0), (1, 1)]
    assert matching.mean_iou == pytest.approx((3 / 7 + 5 / 13) / 2)


def test_match_boxes_degenerate() -> None:
    none = match_boxes([], [])
    assert none.match_rate is None and none.mean_iou is None and none.pairs == []
    one_sided = match_boxes([(0, 0, 1, 1)], [])
    assert one_sided.match_rate == 0.0 and one_sided.mean_iou is None


def test_box_agreement_pools_items() -> None:
    items = [(A, B), ([], []), ([(0, 0, 1, 1)], [])]
    result = box_agreement(items)
    # boxes: a = 2 + 0 + 1 = 3, b = 3 + 0 + 0 = 3, matched 2 -> rate 2 * 2 / 6; mean IoU (9/11 + 1) / 2.
    assert (result.n_items, result.n_boxes_a, result.n_boxes_b, result.n_matched) == (3, 3, 3, 2)
    assert result.match_rate == pytest.approx(4 / 6)
    assert result.mean_iou == pytest.approx(10 / 11)
    json.dumps(result.to_dict())


def test_box_agreement_undefined() -> None:
    empty = box_agreement([])
    assert empty.match_rate is None and empty.match_rate_undefined_reason == REASON_NO_BOXES
    assert empty.mean_iou_undefined_reason == REASON_NO_BOXES
    apart = box_agreement([([(0, 0, 1, 1)], [(5, 5, 1, 1)])])
    assert apart.match_rate == 0.0 and apart.mean_iou is None
    assert apart.mean_iou_undefined_reason == REASON_NO_MATCHES
