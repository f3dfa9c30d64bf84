"""How far a study's items are judged: settled, partial or none (docs/metrics.md, "Settled, partial,
pending").

An item is *settled* when as many distinct people gave it a counted judgement as the study's overlap asks
for, or when the study's overlap policy stopped it with fewer (``agree:K/MAX``, ``posterior:P/MAX``:
``Item.policy_stopped``, docs/overlap.md), *partial* when some did but fewer and its policy still wants
more, *none* when nobody did. A consensus label needs a settled item
(fewer judgements make it *pending*: ``metrics.consensus.pending``), and findings count settled items
unless the reader asks to include partial ones (provisional, marked so). A machine labeller's findings
need its one answer per item: an item it answered is settled for that source.

``findings_minimum()`` is the fewest settled items findings may rest on before the findings page, compare
and the API say so at the top (setting ``WORKBENCH_FINDINGS_MIN_ITEMS``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Count

from annotations.models import Annotator, Item, Study
from annotations.selectors.counted import counted_annotations

SETTLED, PARTIAL, NONE = "settled", "partial", "none"


def findings_minimum() -> int:
    """The fewest settled items findings may rest on without a warning (``WORKBENCH_FINDINGS_MIN_ITEMS``)."""
    return max(1, int(getattr(settings, "WORKBENCH_FINDINGS_MIN_ITEMS", 30)))


def item_judges(study: Study, annotator_ids: Iterable[int] | None = None) -> dict[int, int]:
    """Item id -> distinct people (or, with ``annotator_ids``, those annotators) with a counted judgement on
    it; items nobody judged are absent. One grouped query."""
    qs = counted_annotations(study)
    qs = (
        qs.filter(annotator_id__in=list(annotator_ids))
        if annotator_ids is not None
        else qs.filter(annotator__kind=Annotator.Kind.HUMAN)
    )
    rows = qs.values("item_id").annotate(n=Count("annotator_id", distinct=True)).values_list("item_id", "n")
    return dict(rows)


def stopped_items(study: Study) -> frozenset[int]:
    """The items the study's overlap policy stopped (it wants no more judgements of them): settled, however
    few their judgements. None under ``fixed:K``, without a query."""
    if not study.overlap_policy:
        return frozenset()
    return frozenset(Item.objects.filter(study=study, policy_stopped=True).values_list("id", flat=True))


def short_items(
    study: Study, judges: dict[int, int] | None = None, stopped: frozenset[int] | None = None
) -> frozenset[int]:
    """Items with some human judgements but fewer than the study's overlap, that its overlap policy did
    not stop (their consensus is pending)."""
    judges = item_judges(study) if judges is None else judges
    stopped = stopped_items(study) if stopped is None else stopped
    return frozenset(item for item, n in judges.items() if 0 < n < study.overlap and item not in stopped)


@dataclass(frozen=True)
class Coverage:
    """How many of ``n_items`` are settled, partial and unjudged for one source, and what findings count.

    ``needed``: judgements an item needs (the overlap for people, 1 for a machine labeller);
    ``include_partial``: whether findings count partial items too (provisional); ``minimum``: the fewest
    counted items findings may rest on without a warning; ``policy``: the study's overlap policy when it
    can settle an item with fewer than ``needed`` (``agree:2/3``), else empty.
    """

    basis: str
    needed: int
    n_items: int
    settled: int
    partial: int
    none: int
    include_partial: bool
    minimum: int
    policy: str = ""

    @property
    def counted(self) -> int:
        return self.settled + (self.partial if self.include_partial else 0)

    @property
    def enough(self) -> bool:
        return self.counted >= self.minimum

    def summary(self) -> str:
        """One line, e.g. "2 settled (3 of 3 judgements), 1 partial, 4 with none; counted: settled only"."""
        counted = "settled and partial (provisional)" if self.include_partial else "settled only"
        stop = f", or fewer where {self.policy} stopped" if self.policy else ""
        return (
            f"{self.settled} settled ({self.needed} of {self.needed} {_judgements(self.needed)}{stop}), "
            f"{self.partial} partial, {self.none} with none, of {self.n_items} items; counted: {counted}"
        )

    def warning(self) -> str | None:
        """Why these findings are not to be read as a result yet, or None when they rest on enough items."""
        if self.enough:
            return None
        what = "settled and partial items" if self.include_partial else "settled items"
        reason = (
            f"These findings rest on {self.counted} {what}, fewer than the minimum of {self.minimum} "
            f"(WORKBENCH_FINDINGS_MIN_ITEMS): read them as a pilot, not a result."
        )
        if not self.include_partial and self.partial:
            reason += (
                f" {self.partial} more items have fewer than {self.needed} {_judgements(self.needed)} "
                "(partial): their labels are pending."
            )
        return reason

    def as_dict(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "needed": self.needed,
            "n_items": self.n_items,
            "settled": self.settled,
            "partial": self.partial,
            "none": self.none,
            "include_partial": self.include_partial,
            "counted": self.counted,
            "minimum": self.minimum,
            "enough": self.enough,
            "summary": self.summary(),
            "warning": self.warning(),
        } | ({"policy": self.policy} if self.policy else {})  # under fixed:K, the record as before


def _judgements(n: int) -> str:
    return "judgement" if n == 1 else "judgements"


def coverage_of(
    *,
    study: Study,
    item_ids: Iterable[int],
    judges: dict[int, int],
    needed: int,
    basis: str,
    include_partial: bool,
    stopped: frozenset[int] | None = None,
) -> tuple[Coverage, frozenset[int], frozenset[int]]:
    """The coverage of ``item_ids`` given ``judges`` (item -> judgements), the items findings count and the
    partial ones among them (empty unless ``include_partial``). An item the study's overlap policy
    stopped (``stopped``, read when not given and ``needed`` is above one) is settled with any judgement."""
    if stopped is None:
        stopped = stopped_items(study) if needed > 1 else frozenset()
    settled: set[int] = set()
    partial: set[int] = set()
    n_items = 0
    for item in item_ids:
        n_items += 1
        n = judges.get(item, 0)
        if n >= needed or (n and item in stopped):
            settled.add(item)
        elif n:
            partial.add(item)
    coverage = Coverage(
        basis=basis,
        needed=needed,
        n_items=n_items,
        settled=len(settled),
        partial=len(partial),
        none=n_items - len(settled) - len(partial),
        include_partial=include_partial,
        minimum=findings_minimum(),
        policy=study.overlap_policy if needed > 1 else "",
    )
    counted = settled | partial if include_partial else settled
    return coverage, frozenset(counted), frozenset(partial if include_partial else ())
