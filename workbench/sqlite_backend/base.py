"""Django's SQLite backend whose writers queue on a kernel lock instead of SQLite's busy handler.

A write transaction (every ``atomic`` block: this project opens them with ``BEGIN IMMEDIATE``) and
every write statement outside one first takes the database's :class:`WriteLock`
(``workbench/sqlite_backend/write_lock.py``, the mechanism and why) and holds it until SQLite's
transaction ends: at ``COMMIT``, ``ROLLBACK``, the end of an autocommit statement or the
connection's close. Reads outside a transaction take nothing, so they still run beside the writer
(WAL). Nested ``atomic`` blocks are savepoints inside the held transaction and take nothing more.
A writer that waits longer than the ``write_lock_timeout`` option (by default the ``timeout`` option,
SQLite's busy timeout) gets an ``OperationalError`` that says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.db.backends.sqlite3 import base as sqlite3_base

from workbench.sqlite_backend.write_lock import WriteLock, WriteLockTimeout, lock_path

# Statements that read: they run without the lock outside a transaction. (A raw write that begins
# with WITH or PRAGMA falls back to SQLite's busy handler, as before the queue: correct, not queued.
# Django writes with INSERT, UPDATE, DELETE and DDL, and every transaction queues at BEGIN.)
_READS = ("SELECT", "PRAGMA", "EXPLAIN", "VALUES", "WITH")


def is_read(sql: str) -> bool:
    return sql.lstrip(" \t\r\n(").upper().startswith(_READS)


class LockingCursor(sqlite3_base.SQLiteCursorWrapper):
    """Takes the write lock around a write statement that runs outside a transaction."""

    wrapper: DatabaseWrapper

    def execute(self, query: str, params: Any = None) -> Any:
        if self.wrapper.write_lock_needed(query):
            self.wrapper.write_lock_acquire()
            try:
                return super().execute(query, params)
            finally:
                self.wrapper.write_lock_release_if_done()
        return super().execute(query, params)

    def executemany(self, query: str, param_list: Any) -> Any:
        if self.wrapper.write_lock_needed(query):
            self.wrapper.write_lock_acquire()
            try:
                return super().executemany(query, param_list)
            finally:
                self.wrapper.write_lock_release_if_done()
        return super().executemany(query, param_list)


class DatabaseWrapper(sqlite3_base.DatabaseWrapper):
    write_lock: WriteLock | None = None
    write_lock_timeout = 5.0

    def get_new_connection(self, conn_params: Any) -> Any:
        name = str(self.settings_dict["NAME"])
        if not (self.is_in_memory_db() or name.startswith("file:")):
            # The settings create no folder when imported: the first connection makes the database's.
            Path(name).parent.mkdir(parents=True, exist_ok=True)
        connection = super().get_new_connection(conn_params)
        if self.is_in_memory_db() or name.startswith("file:"):
            self.write_lock = None  # one process's memory: nobody else to queue with
        else:
            self.write_lock = WriteLock(lock_path(name), self.write_lock_timeout)
        return connection

    def get_connection_params(self) -> dict[str, Any]:
        params: dict[str, Any] = super().get_connection_params()
        # How long a writer queues for the lock; by default as long as SQLite's own busy timeout.
        self.write_lock_timeout = float(params.pop("write_lock_timeout", params.get("timeout", 5)))
        return params

    def create_cursor(self, name: str | None = None) -> Any:
        cursor = self.connection.cursor(factory=LockingCursor)
        cursor.wrapper = self
        return cursor

    # The lock's life: taken at BEGIN or at a write, let go when SQLite's transaction has ended.

    def write_lock_needed(self, sql: str) -> bool:
        return self.write_lock is not None and not self.write_lock.held and not is_read(sql)

    def write_lock_acquire(self) -> None:
        if self.write_lock is None:
            return
        try:
            self.write_lock.acquire()
        except WriteLockTimeout as error:
            with self.wrap_database_errors:
                raise self.Database.OperationalError(str(error)) from error

    def write_lock_release_if_done(self) -> None:
        if self.write_lock is not None and self.write_lock.held:
            if self.connection is None or not self.connection.in_transaction:
                self.write_lock.release()

    def _start_transaction_under_autocommit(self) -> None:
        if getattr(self, "transaction_mode", None) in ("IMMEDIATE", "EXCLUSIVE"):  # not in django-stubs
            self.write_lock_acquire()
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]  # private: not in django-stubs
        except BaseException:
            self.write_lock_release_if_done()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()  # type: ignore[misc]  # private: not in django-stubs
        finally:
            self.write_lock_release_if_done()

    def _rollback(self) -> None:
        try:
            super()._rollback()  # type: ignore[misc]  # private: not in django-stubs
        finally:
            self.write_lock_release_if_done()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]  # private: not in django-stubs
        finally:
            if self.write_lock is not None:
                self.write_lock.close()
                self.write_lock = None
