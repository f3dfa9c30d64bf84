"""The SQLite write queue (workbench/sqlite_backend): writers in threads and processes queue on a
kernel lock, so none of them meets SQLite's busy handler, nothing is lost, and the lock goes with
the transaction that took it (commit, rollback, exception, close, a killed process)."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest
from django.db import OperationalError, connection, transaction

from workbench.sqlite_backend.base import DatabaseWrapper, is_read
from workbench.sqlite_backend.write_lock import WriteLock, WriteLockTimeout, lock_path

THREADS = 4
PROCESSES = 3
TRANSACTIONS = 25  # per thread


def _writer_process(database: str, data_dir: str, errors: Any) -> None:
    """One process of several: Django set up from the project's settings on ``database``."""
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ["WORKBENCH_DATA_DIR"] = data_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = "workbench.settings"
    import django

    django.setup()
    from django.db import connection as conn
    from django.db import transaction as tx

    assert conn.settings_dict["ENGINE"] == "workbench.sqlite_backend"
    # SQLite's own busy handler gives up after 50 ms: only the queue may make writers wait.
    options = {**conn.settings_dict["OPTIONS"], "timeout": 0.05, "write_lock_timeout": 60}
    conn.settings_dict["OPTIONS"] = options

    def thread_body(index: int) -> None:
        try:
            for n in range(TRANSACTIONS):
                with tx.atomic():  # read-modify-write: a lost update would show in the counter
                    with conn.cursor() as cursor:
                        cursor.execute("SELECT value FROM counter WHERE id = 1")
                        value = cursor.fetchone()[0]
                        cursor.execute("INSERT INTO row (source) VALUES (%s)", [f"{os.getpid()}-{index}-{n}"])
                        time.sleep(0.001)  # work inside the transaction, so others must queue
                        cursor.execute("UPDATE counter SET value = %s WHERE id = 1", [value + 1])
                with conn.cursor() as cursor:  # a write in autocommit mode, outside any atomic block
                    source = f"auto-{os.getpid()}-{index}-{n}"
                    cursor.execute("INSERT INTO row (source) VALUES (%s)", [source])
                    cursor.execute("SELECT COUNT(*) FROM row")
        except Exception as error:  # noqa: BLE001 (reported to the test, which fails on any)
            errors.put(f"{type(error).__name__}: {error}")
        finally:
            conn.close()

    threads = [threading.Thread(target=thread_body, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_writers_in_threads_and_processes_queue_without_locked_errors(tmp_path: Path) -> None:
    database = tmp_path / "queue.sqlite3"
    with sqlite3.connect(database) as setup:
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE row (id INTEGER PRIMARY KEY, source TEXT NOT NULL UNIQUE)")
        setup.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
        setup.execute("INSERT INTO counter VALUES (1, 0)")
    context = multiprocessing.get_context("spawn")
    errors = context.Queue()
    processes = [
        context.Process(target=_writer_process, args=(str(database), str(tmp_path), errors))
        for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=240)
    assert [process.exitcode for process in processes] == [0] * PROCESSES
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    with sqlite3.connect(database) as check:
        rows = check.execute("SELECT COUNT(*) FROM row").fetchone()[0]
        counter = check.execute("SELECT value FROM counter").fetchone()[0]
    assert rows == PROCESSES * THREADS * TRANSACTIONS * 2
    assert counter == PROCESSES * THREADS * TRANSACTIONS


def _other_holder(database: str) -> WriteLock:
    return WriteLock(lock_path(database), timeout=0.05)


def _is_held_elsewhere(database: str) -> bool:
    other = _other_holder(database)
    try:
        other.acquire()
    except WriteLockTimeout:
        return True
    finally:
        other.close()
    return False


@pytest.fixture
def sqlite_queue() -> str:
    if connection.vendor != "sqlite" or connection.settings_dict["ENGINE"] != "workbench.sqlite_backend":
        pytest.skip("the write queue is the embedded SQLite default's")
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS queue_probe (id INTEGER PRIMARY KEY, note TEXT)")
    return str(connection.settings_dict["NAME"])


@pytest.mark.django_db(transaction=True)
def test_lock_held_for_the_transaction_once_and_released_on_exception(sqlite_queue: str) -> None:
    assert not _is_held_elsewhere(sqlite_queue)
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            assert _is_held_elsewhere(sqlite_queue)  # taken at BEGIN, before any write
            with transaction.atomic():  # a savepoint inside the transaction takes nothing more
                with connection.cursor() as cursor:
                    cursor.execute("INSERT INTO queue_probe (note) VALUES ('rolled back')")
            assert _is_held_elsewhere(sqlite_queue)
            raise RuntimeError("the view failed")
    assert not _is_held_elsewhere(sqlite_queue)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO queue_probe (note) VALUES ('kept')")
    assert not _is_held_elsewhere(sqlite_queue)
    with connection.cursor() as cursor:
        cursor.execute("SELECT note FROM queue_probe")
        assert cursor.fetchall() == [("kept",)]


@pytest.mark.django_db(transaction=True)
def test_reads_outside_a_transaction_do_not_queue_and_a_writer_that_waits_too_long_is_told(
    sqlite_queue: str,
) -> None:
    holder = _other_holder(sqlite_queue)
    holder.acquire()
    try:
        started = time.monotonic()
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM queue_probe")
        assert time.monotonic() - started < 1
        queue_connection = cast(DatabaseWrapper, connection)
        assert queue_connection.write_lock is not None
        queue_connection.write_lock.timeout = 0.2
        with pytest.raises(OperationalError, match="write lock"):
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO queue_probe (note) VALUES ('waited')")
        with pytest.raises(OperationalError, match="write lock"):
            with transaction.atomic():
                pass
    finally:
        holder.close()
    with transaction.atomic():  # the connection is usable again once the holder is gone
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO queue_probe (note) VALUES ('after')")
    assert not _is_held_elsewhere(sqlite_queue)
    connection.close()  # closing drops the handle; the next connection makes its own
    assert cast(DatabaseWrapper, connection).write_lock is None


def _hold_until_killed(path: str, holding: Any) -> None:
    lock = WriteLock(path, timeout=5)
    lock.acquire()
    holding.set()
    time.sleep(120)


def test_a_killed_holder_lets_the_lock_go(tmp_path: Path) -> None:
    path = str(tmp_path / "db.sqlite3-writelock")
    context = multiprocessing.get_context("spawn")
    holding = context.Event()
    process = context.Process(target=_hold_until_killed, args=(path, holding))
    process.start()
    try:
        assert holding.wait(60)
        waiter = WriteLock(path, timeout=0.1)
        with pytest.raises(WriteLockTimeout):
            waiter.acquire()
        process.kill()
        process.join(30)
        waiter.timeout = 10
        waiter.acquire()
        assert waiter.held
        waiter.close()
    finally:
        process.kill()


def _hold_until_told(path: str, holding: Any, let_go: Any) -> None:
    lock = WriteLock(path, timeout=5)
    lock.acquire()
    holding.set()
    let_go.wait(120)
    lock.release()
    time.sleep(120)  # alive, without the lock, until the test ends it


def test_a_writer_that_gave_up_does_not_keep_the_lock(tmp_path: Path) -> None:
    path = str(tmp_path / "db.sqlite3-writelock")
    context = multiprocessing.get_context("spawn")
    holding, let_go = context.Event(), context.Event()
    process = context.Process(target=_hold_until_told, args=(path, holding, let_go))
    process.start()
    try:
        assert holding.wait(60)
        second = WriteLock(path, timeout=0.1)
        with pytest.raises(WriteLockTimeout):
            second.acquire()  # its helper thread goes on waiting in flock, then lets go at once
        let_go.set()
        third = WriteLock(path, timeout=10)
        assert third.acquire() < 10
        assert third.acquire() == 0.0  # taking it twice does nothing
        third.release()
        for lock in (second, third):
            lock.close()
    finally:
        process.kill()


def test_threads_of_one_process_get_the_lock_in_the_order_they_asked(tmp_path: Path) -> None:
    path = str(tmp_path / "db.sqlite3-writelock")
    holder = WriteLock(path, timeout=5)
    holder.acquire()
    order: list[int] = []
    queued = threading.Semaphore(0)

    def writer(index: int) -> None:
        lock = WriteLock(path, timeout=30)
        queued.release()
        lock.acquire()
        order.append(index)
        time.sleep(0.01)
        lock.release()
        lock.close()

    threads = []
    for index in range(5):
        threads.append(threading.Thread(target=writer, args=(index,)))
        threads[-1].start()
        queued.acquire()
        time.sleep(0.2)  # this one is in line (blocked in acquire) before the next one comes
    holder.release()
    for thread in threads:
        thread.join(60)
    holder.close()
    assert order == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("sql", "read"),
    [
        ("SELECT 1", True),
        ('  (SELECT "a" FROM t) UNION (SELECT "b" FROM u)', True),
        ("pragma table_info(t)", True),
        ('INSERT INTO "t" VALUES (1)', False),
        ("UPDATE t SET a = 1", False),
        ("DELETE FROM t", False),
        ("CREATE TABLE t (a)", False),
    ],
)
def test_which_statements_write(sql: str, read: bool) -> None:
    assert is_read(sql) is read
