"""Reheat write-back behind the answer: a recall queues the accesses of what it returned, a background
thread writes them with the stored `reheat` script, so no recall waits for a write.

Durable: every queued access is written by one `_bulk` of stored update scripts (retried on version
conflicts, as before), several recalls' accesses in one call when they queue up. Counted: each store's
`written`, `failed` and `pending` say what happened to its accesses. A failed write-back costs that
access count, never the answer: it is reported as an `EsmemWarning` by the next recall or `flush()` of
the store that queued it, in the caller's thread. Shutdown: `MemoryStore.close()` (or leaving `with
MemoryStore(...)`) and the interpreter's exit flush what is queued (the exit waits at most `EXIT_WAIT`
seconds); a process killed with SIGKILL loses the accesses still queued, at most those of its last few
recalls. Reads through the process (`get`, `history`, `count`, `stats` of any store) flush first, so a
process sees its own accesses.

One queue per index and process (`Backlog`), shared by the stores of that index (an HTTP server or a
threaded agent has a store per thread), with one writer thread: a write-back takes everything the
stores queued since the last one started, at most once a second unless a store flushes, and the
accesses of one memory among it are one update whichever stores queued them (`coalesced`). Each update
re-indexes the whole memory document, and under read load the engine's refresh thread spends its time
flushing them: where agents recall the same memories again and again, the documents re-indexed fall
to about a third. One write-back at a time also keeps the engine's write pool free for a remember's
own `_bulk` (16 stores that each sent their own kept it ~10 bulks deep: docs/results/mixed-load.txt).
"""
from __future__ import annotations

import atexit
import threading
import time
import warnings
import weakref
from collections import Counter
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from esmem.errors import EsmemError, EsmemWarning
from esmem.index.catalog import ScriptOp

IDLE_SECONDS = 2.0  # the writer thread ends after this long without work (a new access starts it again)
EXIT_WAIT = 10.0
# A write-back starts at most this long after the previous one started (unless a store flushes): what
# queues meanwhile is one bulk, and the accesses of one memory in it one update. A written access is
# searchable only after the index's next refresh (refresh_interval 1s) anyway.
LINGER_SECONDS = 1.0

Run = Callable[[Sequence[ScriptOp]], Sequence[Mapping[str, Any]]]


class Reheater:
    """One store's write-backs: through its index's `Backlog` in the background, or inline through `run`
    (Catalog.run_scripts)."""

    def __init__(self, run: Run, background: bool = True, backlog: "Backlog | None" = None):
        self.run, self.background = run, background
        self.backlog = backlog or Backlog()
        self.written = self.failed = 0  # under the backlog's lock
        self._errors: list[str] = []
        _LIVE.add(self)

    @property
    def pending(self) -> int:
        """Accesses queued or being written."""
        return self.backlog.pending(self)

    def submit(self, ops: Sequence[ScriptOp]) -> None:
        """Queue accesses (inline mode: write them now); reports earlier failures as warnings."""
        self._warn()
        if not self.background:
            write([(self, op) for op in ops], self.run, self.backlog.cond)
            self._warn()
            return
        self.backlog.add(self, ops)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every access this store queued is written (or `timeout` passes: False); failures warn."""
        done = self.backlog.wait(self, timeout)
        self._warn()
        return done

    def _warn(self) -> None:
        with self.backlog.cond:
            errors, self._errors = self._errors, []
        for e in errors:
            warnings.warn(f"reheat write-back skipped: {e}", EsmemWarning, stacklevel=4)


class Backlog:
    """The accesses queued by the stores of one index in this process, and the one thread writing them
    (through the `run` of the store whose access is first in the batch: the stores share the index)."""

    def __init__(self, linger: float = LINGER_SECONDS) -> None:
        self.cond = threading.Condition()
        self.linger = linger
        self._queue: list[tuple[Reheater, ScriptOp]] = []
        self._writing: Counter[Reheater] = Counter()  # each store's accesses in the batch being written
        self._thread: threading.Thread | None = None
        self._hurry = 0  # stores waiting in flush(): write now
        self._started = -float("inf")  # when the last write-back started

    def add(self, owner: Reheater, ops: Sequence[ScriptOp]) -> None:
        with self.cond:
            self._queue.extend((owner, op) for op in ops)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="esmem-reheat", daemon=True)
                self._thread.start()
            self.cond.notify_all()

    def pending(self, owner: Reheater) -> int:
        with self.cond:
            return self._writing[owner] + sum(1 for o, _ in self._queue if o is owner)

    def wait(self, owner: Reheater, timeout: float | None) -> bool:
        with self.cond:
            self._hurry += 1
            self.cond.notify_all()
            try:
                return self.cond.wait_for(
                    lambda: not self._writing[owner] and not any(o is owner for o, _ in self._queue), timeout)
            finally:
                self._hurry -= 1

    def _due(self) -> bool:
        return bool(self._queue) and (self._hurry > 0 or time.monotonic() - self._started >= self.linger)

    def _loop(self) -> None:
        while True:
            with self.cond:
                if not self.cond.wait_for(lambda: bool(self._queue), IDLE_SECONDS):
                    self._thread = None
                    return
                while not self._due():
                    self.cond.wait(max(0.0, self._started + self.linger - time.monotonic()))
                self._started = time.monotonic()
                batch, self._queue = self._queue, []
                self._writing = Counter(o for o, _ in batch)
            try:
                write(batch, batch[0][0].run, self.cond)
            finally:
                with self.cond:
                    self._writing = Counter()
                    self.cond.notify_all()


def write(batch: list[tuple[Reheater, ScriptOp]], run: Run, lock: threading.Condition) -> None:
    """Write a batch of (store, access) as coalesced updates; count each access for the store that queued
    it (`lock` guards the counts)."""
    ops, owners = coalesced(batch)
    try:
        outcomes: Sequence[Mapping[str, Any]] = run(ops)
        errors = [str(o["error"]) if o.get("error") else None for o in outcomes]
    except Exception as e:  # noqa: BLE001 - the writer thread's boundary: whatever fails is counted, never fatal
        errors = [str(e) if isinstance(e, EsmemError) else type(e).__name__] * len(ops)  # redacted: no message
    lost: Counter[Reheater] = Counter()
    first: dict[Reheater, str] = {}
    for error, stores in zip(errors, owners):
        if error is not None:
            for store in stores:
                lost[store] += 1
                first.setdefault(store, error)
    with lock:
        for store, queued in Counter(store for store, _ in batch).items():
            store.written += queued - lost[store]
            store.failed += lost[store]
            if lost[store]:
                store._errors.append(f"{lost[store]} of {queued} accesses not counted: {first[store]}")


def coalesced(batch: Sequence[tuple[Reheater, ScriptOp]]) -> tuple[list[ScriptOp], list[list[Reheater]]]:
    """The accesses of one memory queued together, as one write-back (`times_ms`: the stored script applies
    them in turn, in queue order, as one update each would), and the store of each access each op carries.
    16 stores asking 100 distinct queries of 20k memories for 10 s (docs/results/reheat_coalesce.py):
    15,785 and 17,740 accesses re-indexed 5,134 and 5,108 documents through one queue per index lingering
    a second, 16,900 and 18,310 accesses 13,679 and 15,210 documents when each store wrote (and
    coalesced) its own as soon as it could (two runs each, the two back to back)."""
    groups: dict[tuple[str, str, Any], list[tuple[Reheater, ScriptOp]]] = {}
    for store, op in batch:
        groups.setdefault((op.namespace, op.target, op.params.get("rho")), []).append((store, op))
    ops = []
    for same in groups.values():
        last = same[-1][1]
        ops.append(last if len(same) == 1 else
                   replace(last, params={**last.params, "times_ms": [op.params["now_ms"] for _, op in same]}))
    return ops, [[store for store, _ in same] for same in groups.values()]


_LIVE: "weakref.WeakSet[Reheater]" = weakref.WeakSet()
_BACKLOGS: "weakref.WeakKeyDictionary[object, dict[str, Backlog]]" = weakref.WeakKeyDictionary()
_BACKLOGS_LOCK = threading.Lock()


def backlog(engine: object, prefix: str) -> Backlog:
    """The process's one write-back queue for the memories index of `prefix` through `engine` (named by
    its prefix: a store's construction reads nothing from the engine)."""
    with _BACKLOGS_LOCK:
        return _BACKLOGS.setdefault(engine, {}).setdefault(prefix, Backlog())


def flush_all(timeout: float | None = None) -> bool:
    """Wait for the queued write-backs of every store of this process (False if `timeout` passed)."""
    return all([r.flush(timeout) for r in list(_LIVE)])


@atexit.register
def _flush_at_exit() -> None:
    flush_all(EXIT_WAIT)
