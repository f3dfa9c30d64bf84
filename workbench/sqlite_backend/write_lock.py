"""A cross-process write lock that waiting writers queue on in the kernel (docs/deploy.md, "SQLite").

SQLite lets one writer at a time hold a database; the others wait in its busy handler, which sleeps
with a growing back-off (up to 100 ms a nap) and so wakes late, long after the lock is free: under
32 back-to-back writers the slowest write waited seconds. Here each writer first takes an exclusive
``flock`` on a file beside the database and holds it until its transaction ends. A writer that
finds it taken blocks inside the kernel and is woken as soon as its holder lets go, so the next
``BEGIN IMMEDIATE`` finds SQLite's own lock free and never sleeps in the busy handler.

``flock`` belongs to an open file description, so every :class:`WriteLock` (one per database
connection, so one per thread) opens the file itself: threads of one process exclude each other as
processes do (gunicorn workers, Celery workers, commands). Threads of one process first line up in
arrival order (:class:`_ProcessQueue`), so only one thread per process waits in ``flock``. The
kernel drops the lock of a process that dies, so a crash leaves nothing to clean up. The blocking
wait runs in a helper thread so the caller can give up after ``timeout`` seconds
(:class:`WriteLockTimeout`); a helper whose caller gave up closes its own copy of the file once it
gets the lock, which lets the lock go at once.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections import deque


class WriteLockTimeout(Exception):
    """A writer waited longer than its timeout for the database's write lock."""


def lock_path(database_path: str) -> str:
    """The lock file of a database file: beside it, as SQLite's own ``-wal`` and ``-shm`` files are."""
    return f"{database_path}-writelock"


class _Waiter:
    """Blocks in ``flock`` on a file descriptor of its own, for a caller that may give up waiting."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.done = threading.Event()
        self.error: OSError | None = None
        self._guard = threading.Lock()
        self._abandoned = False

    def run(self) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as error:
            self.error = error
        with self._guard:
            if self._abandoned:
                os.close(self.fd)  # the last reference to this open file: the kernel lets the lock go
            else:
                self.done.set()

    def abandon(self) -> bool:
        """Give up waiting; False when the lock arrived meanwhile (the caller holds it after all)."""
        with self._guard:
            if self.done.is_set():
                return False
            self._abandoned = True
            return True


class _ProcessQueue:
    """The threads of this process that want one database's lock, served first come, first served.

    The kernel wakes every process blocked in ``flock`` when the lock comes free and the first to run
    wins, so among many waiters the order is a lottery and the unlucky wait long. Here threads of one
    process queue in order and only the one at the head competes for ``flock``: the lottery is among
    one waiter per process (a handful of gunicorn or Celery workers), not every thread.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._busy = False
        self._waiting: deque[threading.Event] = deque()

    def enter(self, timeout: float) -> bool:
        with self._mutex:
            if not self._busy:
                self._busy = True
                return True
            turn = threading.Event()
            self._waiting.append(turn)
        if turn.wait(timeout):
            return True
        with self._mutex:
            if turn.is_set():  # handed over just as the wait ran out
                return True
            self._waiting.remove(turn)
            return False

    def leave(self) -> None:
        with self._mutex:
            if self._waiting:
                self._waiting.popleft().set()  # still busy: the next thread in line has it now
            else:
                self._busy = False


_queues: dict[tuple[int, str], _ProcessQueue] = {}
_queues_mutex = threading.Lock()


def _process_queue(path: str) -> _ProcessQueue:
    key = (os.getpid(), path)  # a forked child starts a queue of its own
    with _queues_mutex:
        if key not in _queues:
            _queues[key] = _ProcessQueue()
        return _queues[key]


class WriteLock:
    """One connection's handle on a database's write lock. Not shared between threads."""

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.held = False
        self._fd: int | None = None
        self._queue = _process_queue(path)

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o660)
        return self._fd

    def acquire(self) -> float:
        """Take the lock (once: taking it again while held does nothing); returns the seconds waited."""
        if self.held:
            return 0.0
        started = time.monotonic()
        if not self._queue.enter(self.timeout):
            raise self._timed_out()
        try:
            fd = self._file()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._wait(fd, self.timeout - (time.monotonic() - started))
        except BaseException:
            self._queue.leave()
            raise
        self.held = True
        return time.monotonic() - started

    def _timed_out(self) -> WriteLockTimeout:
        return WriteLockTimeout(
            f"waited {self.timeout:g} s for the database's write lock ({self.path}): "
            "another writer held it all that time"
        )

    def _wait(self, fd: int, timeout: float) -> None:
        waiter = _Waiter(fd)
        threading.Thread(target=waiter.run, name="sqlite-write-lock", daemon=True).start()
        if not waiter.done.wait(max(timeout, 0.0)) and waiter.abandon():
            self._fd = None  # the waiter owns that descriptor now and closes it when the lock comes
            raise self._timed_out()
        if waiter.error is not None:
            raise waiter.error

    def release(self) -> None:
        if self.held and self._fd is not None:
            self.held = False
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                self._queue.leave()

    def close(self) -> None:
        """Let the lock go and close the file (the connection is closing)."""
        was_held, self.held = self.held, False
        try:
            if self._fd is not None:
                fd, self._fd = self._fd, None
                os.close(fd)  # closing the file releases a lock held through it
        finally:
            if was_held:
                self._queue.leave()
