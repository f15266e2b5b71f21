"""Refreshes of one index from one process, coalesced, and the point they made searchable.

A write that must be searchable before the next merge look-up asks for `_refresh`. The engine runs
refreshes on a pool of half its processors (one thread on a 2-core node), so N writers that each
refresh queue N refreshes behind each other, and behind the searches competing for the CPU. A refresh
shows every write acknowledged before it *started*; so a caller need not send its own when one that
started after it asked completes: concurrent callers share refreshes (at most two per burst),
and each still returns only once its earlier writes are searchable. Over an async client (the callers
share the event loop's thread, where one waiting for another would block the loop) each call sends its own.

Each refresh is preceded by a read of the index's checkpoint: every write numbered up to it is
searchable once that refresh completes (`visible`). A merge look-up made while that point is recent
needs no refresh of its own: what it cannot see was written after the point, and the settle step
looks there (esmem/domain/writer.py). Under 16 recalling clients a refresh waited behind the others
for about a second, twice per remember (docs/results/mixed-load.txt).
"""
from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable

from esmem.errors import EngineError
from esmem.index.engine import Engine

# How long a refresh's point stands in for a refresh of a look-up's own. Older, it still holds, but
# the settle step would read everything written since (often what the look-up already saw).
RECENT_SECONDS = 2.0


@dataclass(frozen=True)
class Checkpoint:
    """Sequence numbers of the memories index. `seen`: the lowest global checkpoint over its copies
    (every write numbered at or below it is on every in-sync copy, so the next refresh shows it to
    every search). `last`: the highest number given to a write so far, when the index has one shard
    (numbers of different shards say nothing of each other), else None. `index`: the uuid of the index
    the alias named (a migration or a re-install starts the numbers again in another index)."""

    seen: int
    last: int | None
    index: str


def checkpoint(engine: Engine, index: str) -> Checkpoint | None:
    """Where the index's sequence numbers stand; None when the cluster does not say (e.g. a role
    without the monitor privilege): callers then assume nothing."""
    try:
        resp = engine.request("GET", f"/{index}/_stats/docs", params={
            "level": "shards", "filter_path": "indices.*.uuid,indices.*.shards.*.seq_no"})
        (entry,) = resp["indices"].values()
        shards = list(entry["shards"].values())
        points = [copy["seq_no"] for copies in shards for copy in copies]
        if not points:
            return None
        return Checkpoint(min(p["global_checkpoint"] for p in points),
                          max(p["max_seq_no"] for p in points) if len(shards) == 1 else None, entry["uuid"])
    except (EngineError, KeyError, TypeError, ValueError):
        return None


class Refreshes:
    """One index's refreshes: `__call__` returns once a refresh that started after the call completed,
    with the checkpoint read just before that refresh started (None: the cluster did not say)."""

    def __init__(self, send: Callable[[], object], point: Callable[[], Checkpoint | None] = lambda: None,
                 coalesce: bool = True, clock: Callable[[], float] = time.monotonic):
        self.send, self.point, self.coalesce, self.clock = send, point, coalesce, clock
        self.sent = 0  # refreshes sent (the number coalescing saves shows against the calls)
        self._cond = threading.Condition()
        self._started = 0  # generations: the n-th refresh sent
        self._done = 0  # the last generation that succeeded
        self._running = False
        self._last: Checkpoint | None = None  # read before the last refresh that succeeded
        self._visible: tuple[Checkpoint, float] | None = None  # (the highest such point, when it was read)

    def visible(self) -> Checkpoint | None:
        """Every write of `index` numbered up to `seen` was searchable before now, by a refresh whose
        point was read less than RECENT_SECONDS ago; None: no such refresh."""
        with self._cond:
            if self._visible is None or self.clock() - self._visible[1] > RECENT_SECONDS:
                return None
            return self._visible[0]

    def forget(self) -> None:
        """The alias names another index now, whose numbers say nothing of the point."""
        with self._cond:
            self._visible = None

    def __call__(self) -> Checkpoint | None:
        if not self.coalesce:
            return self._refresh()
        with self._cond:
            wanted = self._started + 1  # the next refresh to start begins after this call
            while self._done < wanted:
                if not self._running:
                    self._running = True
                    self._started += 1
                    mine = self._started
                    break
                self._cond.wait()
            else:
                return self._last
        ok = False
        try:
            point = self._refresh()
            ok = True
            return point
        finally:  # a failed refresh covers no one: a waiter sends its own (and gets its error)
            with self._cond:
                self._running = False
                if ok:
                    self._done = mine
                self._cond.notify_all()

    def _refresh(self) -> Checkpoint | None:
        read_at = self.clock()
        point = self.point()
        self.sent += 1
        self.send()
        with self._cond:
            self._last = point
            if point is not None and (self._visible is None or point.index != self._visible[0].index
                                      or point.seen >= self._visible[0].seen):
                self._visible = (point, read_at)
        return point


_GROUPS: "weakref.WeakKeyDictionary[Engine, dict[str, Refreshes]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def refreshes(engine: Engine, index: str) -> Refreshes:
    """The process's shared refreshes of `index` through `engine`."""
    with _LOCK:
        by_index = _GROUPS.setdefault(engine, {})
        if index not in by_index:
            by_index[index] = Refreshes(lambda: engine.request("POST", f"/{index}/_refresh"),
                                        lambda: checkpoint(engine, index), coalesce=not engine.asynchronous)
        return by_index[index]


def moved(engine: Engine, alias: str) -> None:
    """`alias` names another index now (an install, a migration, an uninstall): this process's point of
    it is dropped. (Another process finds out at its next refresh, whose point is of another index, and
    settles its writes against everything meanwhile.)"""
    with _LOCK:
        group = _GROUPS.get(engine, {}).get(alias)
    if group is not None:
        group.forget()
