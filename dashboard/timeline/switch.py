"""The session that serves the next call, swapped atomically: the core of hot migration.

Both the in-process ``HotMigrationSession`` and the timeline's workload server (in the worker) use
it, so "no request lost or served twice across the swap" has one implementation.
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, TypeVar

S = TypeVar("S")


class SessionSwitch(Generic[S]):
    """Which session serves, and how many calls run on each.

    ``acquire`` picks the current session and counts the call in flight on it under the same lock
    that ``swap`` takes, so every call runs on exactly one session; ``drain`` waits for the calls
    still running on a session that was swapped out, after which it can be released. ``close``
    says no session will come, so callers waiting for one give up with the reason.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._current: S | None = None
        self._inflight: dict[int, int] = {}
        self.closed: str | None = None

    @property
    def current(self) -> S | None:
        return self._current

    def acquire(self, wait: bool = False) -> S | None:
        """The session for one call (``release`` it after), or None when there is none (after
        waiting for one, with ``wait``, until ``swap`` installs one or ``close`` is called)."""
        with self._cond:
            while wait and self._current is None and self.closed is None:
                self._cond.wait()
            session = self._current
            if session is not None:
                self._inflight[id(session)] = self._inflight.get(id(session), 0) + 1
            return session

    def inflight(self, session: S) -> int:
        """Calls running on ``session`` now."""
        with self._cond:
            return self._inflight.get(id(session), 0)

    def release(self, session: S) -> None:
        with self._cond:
            self._inflight[id(session)] -= 1
            self._cond.notify_all()

    def swap(self, session: S, on_swap: Callable[[S | None], None] | None = None) -> S | None:
        """Make ``session`` current; return the previous one (None for the first). ``on_swap``
        runs under the lock, so what it records is ordered before any call on the new session."""
        with self._cond:
            old, self._current = self._current, session
            if on_swap is not None:
                on_swap(old)
            self._cond.notify_all()
        return old

    def drain(self, old: S) -> int:
        """Wait until no call runs on ``old``; return how many were running when called."""
        with self._cond:
            running = self._inflight.get(id(old), 0)
            while self._inflight.get(id(old), 0):
                self._cond.wait()
            self._inflight.pop(id(old), None)
        return running

    def close(self, reason: str) -> None:
        with self._cond:
            self.closed = reason
            self._cond.notify_all()
