"""A cursor for the hot path's statements that PostgreSQL plans once per connection.

Django's psycopg 3 backend binds parameters on the client by default: every statement reaches
PostgreSQL as new text, which it parses and plans again. On the claim and submit path that planning
was about a third of PostgreSQL's CPU per request (docs/benchmarks.md, "Claim path at the limit").
``statement_cursor`` gives, on PostgreSQL, a cursor that binds parameters on the server and asks
psycopg to prepare each statement (``execute(..., prepare=True)``): the first execution on a
connection parses it under a name, later ones only bind and run it. Connections persist
(``CONN_MAX_AGE``), so a web worker plans each hot statement once per connection, not per request.

Only statements written for it go through it (``PreparedQuery``, the claim's conditional insert and the
submit's two updates in ``annotations/services/submit_writes.py``):
their parameters are plain values of the columns they meet, so the server infers the same types the
client-side text gave. The rest of the ORM keeps Django's default binding.

``WORKBENCH_PG_PREPARED_STATEMENTS`` (default on) turns it off, for a connection pooler that cannot
keep a session's prepared statements (PgBouncer in transaction mode before 1.21). SQLite and the
setting off get Django's own cursor; the statements and results are the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper


def _cursor_classes() -> tuple[type, type]:
    """The preparing cursor and the logging wrapper for it (built once: they subclass Django's)."""
    from django.db.backends.postgresql import base

    parent: Any = base.ServerBindingCursor  # Django's, where psycopg 3 is installed
    logged: Any = base.CursorDebugWrapper

    class PreparingCursor(parent):  # type: ignore[misc]
        """Django's server-binding cursor that prepares every statement it runs."""

        def execute(
            self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: Any = None
        ) -> Any:
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

    class LoggedPreparingCursor(logged):  # type: ignore[misc]
        """Django's logging wrapper (tests, DEBUG), which records the statement with its values: the
        backend reads a client-bound cursor's last text, which a prepared statement does not leave."""

        def execute(self, sql: Any, params: Any = None) -> Any:
            with self.debug_sql(self.db.ops.compose_sql(sql, params) if params else sql, params):
                return self._execute_with_wrappers(sql, params, many=False, executor=self._execute)

    return PreparingCursor, LoggedPreparingCursor


_CLASSES: list[tuple[type, type]] = []
_ONLY_WHEN_ASKED = 2**62


def prepares(connection: BaseDatabaseWrapper) -> bool:
    """Whether ``statement_cursor`` prepares on this connection (PostgreSQL through psycopg 3, the
    setting on; with psycopg 2 Django's cursor runs the statements as before)."""
    if connection.vendor != "postgresql" or not getattr(settings, "WORKBENCH_PG_PREPARED_STATEMENTS", True):
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return bool(is_psycopg3)


@contextmanager
def statement_cursor(connection: BaseDatabaseWrapper) -> Iterator[Any]:
    """A cursor (Django's wrapper: query capture, error translation) for a hot statement."""
    if not prepares(connection):
        with connection.cursor() as cursor:
            yield cursor
        return
    if not _CLASSES:
        _CLASSES.append(_cursor_classes())
    preparing, logged = _CLASSES[0]
    connection.close_if_health_check_failed()  # as Django's own cursor(): CONN_HEALTH_CHECKS
    connection.ensure_connection()
    session = connection.connection
    if session.prepare_threshold is None:
        # Django's psycopg connection turns preparing off (None), which also refuses prepare=True:
        # a threshold no statement reaches prepares exactly the statements that ask.
        session.prepare_threshold = _ONLY_WHEN_ASKED
    with connection.wrap_database_errors:
        raw = preparing(session)
    # As Django's create_cursor: the session's time zone on the cursor where the connection's differs.
    from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.pq import Format

    loader = session.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
    if connection.timezone != loader.timezone:
        register_tzloader(connection.timezone, raw)
    # As Django's _prepare_cursor: the thread check, then its wrapper (query capture, error mapping).
    connection.validate_thread_sharing()
    cursor = logged(raw, connection) if connection.queries_logged else connection.make_cursor(raw)
    try:
        yield cursor
    finally:
        cursor.close()
