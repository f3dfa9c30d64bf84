"""Agreement of bounding boxes drawn by two annotators (SPEC 4: match at IoU >= 0.5, configurable).

A box is ``(x, y, w, h)``: top-left corner, width and height, in any one unit (pixels or fractions of
the image), with w, h >= 0.

- IoU(a, b) = area(a ∩ b) / area(a ∪ b); 0 when the union has no area.
- Matching on one item (or one option of an item): a one-to-one assignment between the two annotators'
  boxes that pairs only boxes with IoU >= threshold, chosen to have the *largest number* of pairs and,
  among those, the largest total IoU (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``, on
  weights 1[IoU >= t] * (B + IoU) with B = min(n_a, n_b) + 1, which makes the count dominate).
- match rate = 2 * matched / (n_a + n_b): the F1 (Dice) of the two box sets; 1 when every box of
  both annotators has a partner, and symmetric in the two annotators. Undefined (None) without boxes.
- mean IoU = mean IoU over matched pairs; undefined (None) without a match.
Over many items the counts are pooled: match rate = 2 * sum matched / sum (n_a + n_b), mean IoU over
all matched pairs of all items.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment

Box = tuple[float, float, float, float]

REASON_NO_BOXES = "neither annotator drew a box"
REASON_NO_MATCHES = "no pair of boxes reaches the IoU threshold"


@dataclass(frozen=True)
class BoxMatching:
    """Matching of two annotators' boxes on one item: ``pairs`` holds (index in a, index in b, IoU)."""

    pairs: list[tuple[int, int, float]]
    n_a: int
    n_b: int
    threshold: float
    match_rate: float | None
    mean_iou: float | None

    @property
    def n_matched(self) -> int:
        """Number of matched pairs."""
        return len(self.pairs)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field plus ``n_matched``."""
        return {**asdict(self), "n_matched": self.n_matched}


@dataclass(frozen=True)
class BoxAgreement:
    """Pooled box agreement over items; a None statistic has its reason beside it."""

    n_items: int
    n_boxes_a: int
    n_boxes_b: int
    n_matched: int
    threshold: float
    match_rate: float | None
    mean_iou: float | None
    match_rate_undefined_reason: str | None = None
    mean_iou_undefined_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field."""
        return asdict(self)


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two (x, y, w, h) boxes; 0.0 when the union has no area."""
    return float(iou_matrix([a], [b])[0, 0])


def iou_matrix(boxes_a: Sequence[Box], boxes_b: Sequence[Box]) -> npt.NDArray[np.float64]:
    """IoU of every box of ``boxes_a`` (rows) with every box of ``boxes_b`` (columns), vectorised."""
    a = _as_boxes(boxes_a)
    b = _as_boxes(boxes_b)
    ax1, ay1, ax2, ay2 = a[:, 0:1], a[:, 1:2], a[:, 0:1] + a[:, 2:3], a[:, 1:2] + a[:, 3:4]
    bx1, by1, bx2, by2 = b[:, 0], b[:, 1], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    width = np.clip(np.minimum(ax2, bx2) - np.maximum(ax1, bx1), 0.0, None)
    height = np.clip(np.minimum(ay2, by2) - np.maximum(ay1, by1), 0.0, None)
    intersection = width * height
    union = (a[:, 2:3] * a[:, 3:4]) + (b[:, 2] * b[:, 3]) - intersection
    iou: npt.NDArray[np.float64] = np.divide(
        intersection, union, out=np.zeros_like(intersection), where=union > 0
    )
    return iou


def match_boxes(boxes_a: Sequence[Box], boxes_b: Sequence[Box], *, threshold: float = 0.5) -> BoxMatching:
    """Match two annotators' boxes one-to-one at IoU >= ``threshold`` (most matches, then most IoU).

    ``pairs`` is sorted by index in ``boxes_a``. See the module docstring for the match rate.
    """
    _check_threshold(threshold)
    n_a, n_b = len(boxes_a), len(boxes_b)
    pairs: list[tuple[int, int, float]] = []
    if n_a and n_b:
        overlap = iou_matrix(boxes_a, boxes_b)
        eligible = overlap >= threshold
        # The constant makes one more match always outweigh any gain in total IoU (see module doc).
        weight = np.where(eligible, (min(n_a, n_b) + 1) + overlap, 0.0)
        rows, cols = linear_sum_assignment(weight, maximize=True)
        pairs = [
            (int(i), int(j), float(overlap[i, j])) for i, j in zip(rows, cols, strict=True) if eligible[i, j]
        ]
    total = n_a + n_b
    return BoxMatching(
        pairs=pairs,
        n_a=n_a,
        n_b=n_b,
        threshold=threshold,
        match_rate=2 * len(pairs) / total if total else None,
        mean_iou=float(np.mean([p[2] for p in pairs])) if pairs else None,
    )


def box_agreement(
    items: Iterable[tuple[Sequence[Box], Sequence[Box]]], *, threshold: float = 0.5
) -> BoxAgreement:
    """Pool ``match_boxes`` over items: each element is (annotator a's boxes, annotator b's boxes).

    An item where neither drew a box counts in ``n_items`` but adds nothing to the rates (agreement on
    "no box" is measured by the multi question the boxes belong to).
    """
    _check_threshold(threshold)
    n_items = n_a = n_b = 0
    ious: list[float] = []
    for boxes_a, boxes_b in items:
        matching = match_boxes(boxes_a, boxes_b, threshold=threshold)
        n_items += 1
        n_a += matching.n_a
        n_b += matching.n_b
        ious.extend(p[2] for p in matching.pairs)
    total = n_a + n_b
    return BoxAgreement(
        n_items=n_items,
        n_boxes_a=n_a,
        n_boxes_b=n_b,
        n_matched=len(ious),
        threshold=threshold,
        match_rate=2 * len(ious) / total if total else None,
        mean_iou=float(np.mean(ious)) if ious else None,
        match_rate_undefined_reason=None if total else REASON_NO_BOXES,
        mean_iou_undefined_reason=None if ious else (REASON_NO_MATCHES if total else REASON_NO_BOXES),
    )


def _as_boxes(boxes: Sequence[Box]) -> npt.NDArray[np.float64]:
    array = np.asarray(boxes, dtype=np.float64) if len(boxes) else np.zeros((0, 4))
    if array.ndim != 2 or array.shape[1] != 4:
        raise ValueError("each box is (x, y, w, h)")
    if not np.isfinite(array).all():
        raise ValueError("box coordinates must be finite")
    if (array[:, 2:] < 0).any():
        raise ValueError("box width and height must be non-negative")
    return array


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 1.0:
        raise ValueError("the IoU threshold must lie in (0, 1]")
