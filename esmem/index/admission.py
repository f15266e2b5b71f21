"""Admission: a process's recalls to one cluster wait their turn, so its writes never queue behind them.

A write's merge look-up and settle step are searches: the engine runs them on the same search pool, in
the same first-come queue, as every recall. Sixteen recalling threads kept that queue about 22 deep on a
2-core node and a remember waited behind it at each of its searches (p50 about half a second).
With `recalls_in_flight` set, at most that many recalls of the process are in the engine at once,
admitted in arrival order; the writes' searches do not wait here, so they find the engine's queue
nearly empty. 100k memories, 16 recall + 4 remember threads of one process (`esmem bench --mixed`,
docs/results/bench-mixed.txt): with 2 in flight remember p50 496 -> 101 ms and 6.9 -> 32.8 writes/s,
recalls 210 -> 136/s at p99 146 -> 167 ms. The engine's time is shared out, not gained. Off by
default: where recalls wait on the network more than on the engine's CPU (a remote cluster), fewer
in flight only lowers their rate.

Sync callers wait on a hand-off queue (a release wakes the next waiter only, never all of them); calls
of an async store wait on an asyncio semaphore of the running loop, through the greenlet bridge.
"""
from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from contextlib import contextmanager
from typing import Iterator

from esmem.errors import ConfigError


def checked_limit(limit: object) -> int | None:
    """`limit` if it is None or a positive integer; else a ConfigError naming `recalls_in_flight`."""
    if limit is None or (isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1):
        return limit
    raise ConfigError(f"recalls_in_flight must be a positive integer, got {limit!r}")


class Admission:
    """At most `limit` recalls in flight at once (None: no limit), admitted in arrival order."""

    def __init__(self, limit: int | None = None, *, asynchronous: bool = False):
        self.limit, self.asynchronous = checked_limit(limit), asynchronous
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: deque[threading.Event] = deque()
        self._semaphores: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = \
            weakref.WeakKeyDictionary()

    @property
    def in_flight(self) -> int:
        """Recalls admitted and not yet done (sync callers)."""
        with self._lock:
            return self._running

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """Hold a place for the duration of one recall's round trip."""
        if self.limit is None:
            yield
        elif self.asynchronous:
            from esmem.index.bridge import wait

            semaphore = self._semaphore()
            wait(semaphore.acquire())
            try:
                yield
            finally:
                semaphore.release()
        else:
            self._enter()
            try:
                yield
            finally:
                self._leave()

    def _enter(self) -> None:
        with self._lock:
            if self._running < (self.limit or 0) and not self._waiting:
                self._running += 1
                return
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the place of the recall that woke it passes to this one: `_running` stays

    def _leave(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._running -= 1

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            semaphore = self._semaphores.get(loop)
            if semaphore is None:
                semaphore = self._semaphores[loop] = asyncio.Semaphore(self.limit or 1)
            return semaphore
