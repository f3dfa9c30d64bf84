"""A queryset of fixed shape compiled to SQL once per process and database, then run with new values.

Django builds and compiles a queryset on every request (``filter``, ``Q``, ``SQLCompiler.as_sql``):
on a hot path that is most of the request's time. ``PreparedQuery`` builds the queryset once per
connection (alias and vendor) with stand-in values, compiles it, finds where each stand-in lands
among the statement's parameters, and afterwards only substitutes the real values and runs the
SQL, turning rows into model instances the way ``QuerySet`` does (``from_db``, ``select_related``,
annotations, the database's converters). The SQL is exactly what the ORM writes, so locks
(``select_for_update``) and every condition stay as they were.

The stand-ins must be values the query holds nowhere else: large integers
(``PreparedQuery.stand_in(n)``), datetimes far in the future (``PreparedQuery.moment(n)``) or texts
no one writes (``PreparedQuery.stand_in_text(n)``).
A shape that depends on a value (a filter added or not) needs one ``PreparedQuery`` per variant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators

from common.statement_cursor import statement_cursor

M = TypeVar("M", bound=Model)

# Within a 32-bit integer column's range: Django turns an out-of-range lookup into an empty result.
_STAND_IN_BASE = 2_000_000_017
_MOMENT_BASE = datetime(2999, 3, 7, 11, 13, 17, 123457, tzinfo=UTC)


class _Compiled:
    """One queryset compiled for one connection: the SQL, its parameters, what to put where."""

    def __init__(self, queryset: QuerySet[Any], stand_ins: Mapping[str, Any], alias: str) -> None:
        compiler = queryset.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        self.sql = sql
        self.params = list(params)
        self.slots: list[tuple[int, str, bool]] = []  # (parameter index, name, adapted datetime)
        ops = connections[alias].ops
        for name, value in stand_ins.items():
            adapted = ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value
            places = [i for i, param in enumerate(self.params) if param == adapted or param == value]
            if not places:
                raise ValueError(f"the stand-in for {name!r} is not among the query's parameters")
            self.slots += [(i, name, isinstance(value, datetime)) for i in places]
        if len(self.slots) != len({i for i, _, _ in self.slots}):
            raise ValueError("two stand-ins share a parameter")
        self.converters = compiler.get_converters([column[0] for column in compiler.select])
        self.compiler = compiler
        klass_info = compiler.klass_info
        assert klass_info is not None
        self.model = klass_info["model"]
        fields = klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [column[0].target.attname for column in compiler.select[self.start : self.end]]
        populators: Any = get_related_populators  # (the stubs name a later Django's signature)
        self.related = populators(klass_info, compiler.select, alias)
        self.annotations = dict(compiler.annotation_col_map)


class PreparedQuery(Generic[M]):
    """``build(**stand_ins)`` returns the queryset; ``first(**values)`` runs it with the real values.

    ``build`` is called once per database connection (alias, vendor), the first time the query runs
    there, so a ``select_for_update`` query must first run inside a transaction (as it must anyway).
    """

    def __init__(
        self,
        build: Callable[..., QuerySet[M]],
        names: tuple[str, ...],
        moments: tuple[str, ...] = (),
        texts: tuple[str, ...] = (),
    ):
        self.build = build
        self.names = names
        self.moments = moments
        self.texts = texts
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    @staticmethod
    def stand_in(n: int) -> int:
        return _STAND_IN_BASE + 7919 * n

    @staticmethod
    def moment(n: int) -> datetime:
        return _MOMENT_BASE + timedelta(days=n, microseconds=n)

    @staticmethod
    def stand_in_text(n: int) -> str:
        return f"\u2063prepared-query-stand-in-{n}\u2063"

    def _stand_ins(self) -> dict[str, Any]:
        values: dict[str, Any] = {name: self.stand_in(n) for n, name in enumerate(self.names)}
        values.update({name: self.moment(n) for n, name in enumerate(self.moments)})
        values.update({name: self.stand_in_text(n) for n, name in enumerate(self.texts)})
        return values

    def compiled(self, alias: str = "default") -> _Compiled:
        connection = connections[alias]
        key = (alias, connection.vendor)
        found = self._compiled.get(key)
        if found is None:
            stand_ins = self._stand_ins()
            found = self._compiled[key] = _Compiled(self.build(**stand_ins), stand_ins, alias)
        return found

    def all(self, alias: str = "default", **values: Any) -> list[M]:
        compiled = self.compiled(alias)
        connection = connections[alias]
        params = list(compiled.params)
        for index, name, moment in compiled.slots:
            value = values[name]
            params[index] = connection.ops.adapt_datetimefield_value(value) if moment else value
        with statement_cursor(connection) as cursor:  # planned once per connection on PostgreSQL
            cursor.execute(compiled.sql, params)
            rows: Any = cursor.fetchall()
        if compiled.converters:
            rows = compiled.compiler.apply_converters(rows, compiled.converters)
        found: list[M] = []
        for row in rows:
            obj = compiled.model.from_db(alias, compiled.init_list, row[compiled.start : compiled.end])
            for populator in compiled.related:
                populator.populate(row, obj)
            for attr, position in compiled.annotations.items():
                setattr(obj, attr, row[position])
            found.append(obj)
        return found

    def first(self, alias: str = "default", **values: Any) -> M | None:
        """The first row (the queryset must be sliced ``[:1]`` or otherwise return one row)."""
        rows = self.all(alias, **values)
        return rows[0] if rows else None
