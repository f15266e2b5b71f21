"""Refreshes of one index from one process, coalesced.

A write that must be searchable before the next merge look-up asks for `_refresh`. The engine runs
refreshes on a pool of half its processors (one thread on a 2-core node), so N writers that each
refresh queue N refreshes behind each other, and behind the searches competing for the CPU. A refresh
shows every write acknowledged before it *started*; so a caller need not send its own when one that
started after it asked completes: concurrent callers share refreshes (at most two per burst),
and each still returns only once its earlier writes are searchable. Over an async client (the callers
share the event loop's thread, where one waiting for another would block the loop) each call sends its own.
"""
from __future__ import annotations

import threading
import weakref
from typing import Callable

from esmem.index.engine import Engine


class Refreshes:
    """One index's refreshes: `__call__` returns once a refresh that started after the call completed."""

    def __init__(self, send: Callable[[], object], coalesce: bool = True):
        self.send, self.coalesce = send, coalesce
        self.sent = 0  # refreshes sent (the number coalescing saves shows against the calls)
        self._cond = threading.Condition()
        self._started = 0  # generations: the n-th refresh sent
        self._done = 0  # the last generation that succeeded
        self._running = False

    def __call__(self) -> None:
        if not self.coalesce:
            self.sent += 1
            self.send()
            return
        with self._cond:
            wanted = self._started + 1  # the next refresh to start begins after this call
            while self._done < wanted:
                if not self._running:
                    self._running = True
                    self._started += 1
                    mine = self._started
                    self.sent += 1
                    break
                self._cond.wait()
            else:
                return
        ok = False
        try:
            self.send()
            ok = True
        finally:  # a failed refresh covers no one: a waiter sends its own (and gets its error)
            with self._cond:
                self._running = False
                if ok:
                    self._done = mine
                self._cond.notify_all()


_GROUPS: "weakref.WeakKeyDictionary[Engine, dict[str, Refreshes]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def refreshes(engine: Engine, index: str) -> Refreshes:
    """The process's shared refreshes of `index` through `engine`."""
    with _LOCK:
        by_index = _GROUPS.setdefault(engine, {})
        if index not in by_index:
            by_index[index] = Refreshes(lambda: engine.request("POST", f"/{index}/_refresh"),
                                        coalesce=not engine.asynchronous)
        return by_index[index]
