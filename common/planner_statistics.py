"""Fresh planner statistics after a bulk load (PostgreSQL).

PostgreSQL plans each query from per-table statistics that autovacuum refreshes some time after
rows change (by default: a minute's nap, then only once a tenth of the table changed). A study whose
thousands of items were just imported is not in those statistics yet: the planner believes the
study has about one item, and the claim query (services/assignment.md) then sorts the whole study
and joins it against the annotator's assignments row by row instead of walking the
``item_claim_order`` index to its first free item, a few hundred times slower (figures in
docs/benchmarks.md). So every path that adds many rows at once (item imports, generation jobs,
annotation imports, consensus labels) ends with ``statistics_refresh``, as bulk loaders do.
``ANALYZE`` reads a fixed-size sample (300 x ``default_statistics_target`` rows), so it costs
milliseconds to a few tenths of a second whatever the table size, and it may run inside the
caller's transaction (the new figures are seen once that commits).

SQLite is left alone: without ``sqlite_stat1`` its planner picks indexes by their shape, which is
what the claim query needs, and it does not switch plans as a table grows.
"""

from __future__ import annotations

from django.db import connection, models

BULK_ROWS = 200  # fewer new rows than this cannot mislead the planner by much


def statistics_refresh(*model_classes: type[models.Model], rows: int) -> bool:
    """``ANALYZE`` the tables of ``model_classes`` after ``rows`` rows were added; True if it ran."""
    if rows < BULK_ROWS or connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        for model in model_classes:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    return True
