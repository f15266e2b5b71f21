"""Speed devices around Python's cyclic garbage collector: paused while a long write runs, and rare
full collections in a server process esmem runs.

A write allocates a few dicts per memory, none of them cyclic, and every ~700 allocations the
collector rescanned the young ones: a sixth of a 100k-memory plain import's time went there
(10,700 -> 12,900 memories/s with the pause on a 100k plain import). Measured again with and without
it in one run, on a busy 2-core machine: a 5k plain import 622 -> 1,198 memories/s; a 5k merge import
shows no gain (83 vs 63/s, within that machine's noise).

A server (`esmem serve`) keeps what it needs for good - modules, the app, the analysis caches that
fill as it answers - and every full collection scans all of it while holding the interpreter lock,
so every request in flight waits: the collections made the slowest recalls. `long_lived` moves what
start-up built out of the collector's scans and makes full collections a hundred times rarer; young
objects are collected as before. 16 clients recalling through `esmem serve` from 100,000 memories
in one namespace, three alternating runs: p99 177-218 -> 132-142 ms, p50 84-88 -> 80-85 ms, 5-7 %
more recalls a second (docs/results/serve-gc.txt).
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

FULL_COLLECTION_EVERY = 1000  # collections of the middle generation per full one (Python's default: 10)

_collector_lock = threading.Lock()
_collector_holders = 0
_collector_was_enabled = False


@contextmanager
def paused_collector() -> Iterator[None]:
    """The collector paused for a long write. Concurrent writes share the pause (the first in stops
    the collector, the last out restarts it); a collector the caller had already stopped stays stopped."""
    global _collector_holders, _collector_was_enabled
    with _collector_lock:
        if _collector_holders == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _collector_holders += 1
    try:
        yield
    finally:
        with _collector_lock:
            _collector_holders -= 1
            if _collector_holders == 0 and _collector_was_enabled:
                gc.enable()


def long_lived() -> None:
    """For a process that serves until it is stopped, once it is set up: what exists now is left out of
    every later collection (`gc.freeze`) and a full collection comes after `FULL_COLLECTION_EVERY`
    collections of the middle generation instead of 10."""
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
