"""Reheat write-back behind the answer: a recall queues the accesses of what it returned, one
background thread writes them with the stored `reheat` script, so no recall waits for a write.

Durable: every queued access is written by one `_bulk` of stored update scripts (retried on version
conflicts, as before), several recalls' accesses in one call when they queue up. Counted: `written`,
`failed` and `pending` say what happened to each access. A failed write-back costs that access count,
never the answer: it is reported as an `EsmemWarning` by the next recall or `flush()` of the store, in
the caller's thread. Shutdown: `MemoryStore.close()` (or leaving `with MemoryStore(...)`) and the
interpreter's exit flush what is queued (the exit waits at most `EXIT_WAIT` seconds); a process killed
with SIGKILL loses the accesses still queued, at most those of its last few recalls. Reads through the
process (`get`, `history`, `count`, `stats` of any store) flush first, so a process sees its own accesses.

One write-back per index in flight: the background writers of one index (one per store: an HTTP server or a
threaded agent has a store per thread) take turns, each writing everything it queued meanwhile. Without
turns, 16 recalling stores kept the engine's write pool (2 threads on 2 cores) ~10 bulks deep, and a
remember's own `_bulk` queued behind them (docs/results/mixed-load.txt).
"""
from __future__ import annotations

import atexit
import threading
import warnings
import weakref
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from esmem.errors import EsmemError, EsmemWarning
from esmem.index.catalog import ScriptOp

IDLE_SECONDS = 2.0  # the writer thread ends after this long without work (a new access starts it again)
EXIT_WAIT = 10.0


class Reheater:
    """Writes reheat `ScriptOp`s through `run` (Catalog.run_scripts), in the background or inline."""

    def __init__(self, run: Callable[[Sequence[ScriptOp]], Sequence[Mapping[str, Any]]], background: bool = True,
                 turn: threading.Lock | None = None):
        self.run, self.background = run, background
        self._turn = turn or threading.Lock()  # shared by the background writers of one index (`turn`)
        self.written = self.failed = 0
        self._queue: list[ScriptOp] = []
        self._errors: list[str] = []
        self._busy = False
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        _LIVE.add(self)

    @property
    def pending(self) -> int:
        """Accesses queued or being written."""
        with self._cond:
            return len(self._queue) + (1 if self._busy else 0)

    def submit(self, ops: Sequence[ScriptOp]) -> None:
        """Queue accesses (inline mode: write them now); reports earlier failures as warnings."""
        self._warn()
        if not self.background:
            self._write(list(ops))
            self._warn()
            return
        with self._cond:
            self._queue.extend(ops)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="esmem-reheat", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued access is written (or `timeout` passes: False); failures warn."""
        with self._cond:
            done = self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)
        self._warn()
        return done

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: bool(self._queue), IDLE_SECONDS):
                    self._thread = None
                    return
                self._busy = True
            with self._turn:  # what queues while another store's write-back runs joins this one's batch
                with self._cond:
                    batch, self._queue = self._queue, []
                try:
                    self._write(batch)
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()

    def _write(self, batch: list[ScriptOp]) -> None:
        ops, accesses = coalesced(batch)
        try:
            errors = [(str(o["error"]), n) for o, n in zip(self.run(ops), accesses) if o.get("error")]
        except Exception as e:  # noqa: BLE001 - the writer thread's boundary: whatever fails is counted, never fatal
            errors = [(str(e) if isinstance(e, EsmemError) else type(e).__name__, len(batch))]  # redacted: no message
        lost = sum(n for _, n in errors)
        with self._cond:
            self.written += len(batch) - lost
            self.failed += lost
            if errors:
                self._errors.append(f"{lost} of {len(batch)} accesses not counted: {errors[0][0]}")

    def _warn(self) -> None:
        with self._cond:
            errors, self._errors = self._errors, []
        for e in errors:
            warnings.warn(f"reheat write-back skipped: {e}", EsmemWarning, stacklevel=4)


def coalesced(batch: Sequence[ScriptOp]) -> tuple[list[ScriptOp], list[int]]:
    """The accesses of one memory queued together, as one write-back (`times_ms`: the stored script applies
    them in turn, in queue order, as one update each would), and how many accesses each op carries. Each write-back re-indexes the whole memory
    document, and under read load the engine's one refresh thread spends its time flushing them. 16
    stores asking 100 distinct queries for 10 s: 14,105 accesses re-indexed 11,915 documents, where one
    update per access re-indexed 13,580 for 13,580 (docs/results/reheat_coalesce.py)."""
    groups: dict[tuple[str, str, Any], list[ScriptOp]] = {}
    for op in batch:
        groups.setdefault((op.namespace, op.target, op.params.get("rho")), []).append(op)
    ops = []
    for same in groups.values():
        if len(same) == 1:
            ops.append(same[0])
            continue
        ops.append(replace(same[-1], params={**same[-1].params, "times_ms": [op.params["now_ms"] for op in same]}))
    return ops, [len(same) for same in groups.values()]


_LIVE: "weakref.WeakSet[Reheater]" = weakref.WeakSet()
_TURNS: "weakref.WeakKeyDictionary[object, dict[str, threading.Lock]]" = weakref.WeakKeyDictionary()
_TURNS_LOCK = threading.Lock()


def turn(engine: object, prefix: str) -> threading.Lock:
    """The process's one background write-back turn for the memories index of `prefix` through
    `engine` (named by its prefix: a store's construction reads nothing from the engine)."""
    with _TURNS_LOCK:
        return _TURNS.setdefault(engine, {}).setdefault(prefix, threading.Lock())


def flush_all(timeout: float | None = None) -> bool:
    """Wait for the queued write-backs of every store of this process (False if `timeout` passed)."""
    return all([r.flush(timeout) for r in list(_LIVE)])


@atexit.register
def _flush_at_exit() -> None:
    flush_all(EXIT_WAIT)
