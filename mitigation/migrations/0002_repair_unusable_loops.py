"""Repair InterMit loops stored before issue 24's bounds, so that their page and API answer again.

``weights: [1e308, 1e308]`` summed to infinity and was stored as ``{axis: 0.0, ...}`` (every read of
the loop then raised: the weights have no positive sum); a ``base_seed`` within 10,000 of the 64-bit
limit overflowed when a step added its index. A loop whose weights are not non-negative finite
numbers, one per axis, with a positive finite sum gets equal weights (what an empty choice gives); a
base seed outside the bounds is clamped to them. Other loops are not touched. docs/security.md,
"Bad input never reaches a 500"."""

from __future__ import annotations

import math
from typing import Any

from django.db import migrations

MIN_BASE_SEED = -(2**63)
MAX_BASE_SEED = 2**63 - 1 - 10_000


def weights_usable(axes: Any, weights: Any) -> bool:
    if not isinstance(weights, dict) or not isinstance(axes, list) or set(weights) != set(axes):
        return False
    values = list(weights.values())
    if not values or any(isinstance(v, bool) or not isinstance(v, int | float) for v in values):
        return False
    total = sum(values)
    return all(math.isfinite(v) and v >= 0 for v in values) and math.isfinite(total) and total > 0


def repair_loops(apps: Any, schema_editor: Any) -> None:
    loop_model = apps.get_model("mitigation", "MitigationLoop")
    for loop in loop_model.objects.all().iterator():
        changed = []
        if not weights_usable(loop.axes, loop.weights) and isinstance(loop.axes, list) and loop.axes:
            loop.weights = {str(axis): 1 / len(loop.axes) for axis in loop.axes}
            changed.append("weights")
        if not MIN_BASE_SEED <= loop.base_seed <= MAX_BASE_SEED:
            loop.base_seed = min(max(loop.base_seed, MIN_BASE_SEED), MAX_BASE_SEED)
            changed.append("base_seed")
        if changed:
            loop.save(update_fields=changed)


class Migration(migrations.Migration):
    dependencies = [("mitigation", "0001_initial")]

    operations = [migrations.RunPython(repair_loops, migrations.RunPython.noop)]
