"""What Python's full garbage collections cost the slowest recalls of a process of the user's own: 16
threads, each with its own `MemoryStore`, recall as fast as they are answered from one namespace of the
bench corpus, in a fresh process that calls `esmem.domain.collector.long_lived()` once its stores are
set up and in one that leaves Python's collector settings as they are; the two alternate, `rounds`
times, each after a warm-up of 3 s. Also prints how many objects the collector tracks at the end of
a run and what one full collection of them takes.

    python docs/results/library_gc.py $ESMEM_URL 100000 15 2
"""
from __future__ import annotations

import gc
import subprocess
import sys
import time

from esmem.apps import bench
from esmem.domain.collector import long_lived
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from esmem.index.install import uninstall

PREFIX, THREADS = "library-gc", 16


def run(url: str, size: int, seconds: float, setup: str) -> None:
    """One measurement, in this (fresh) process."""
    engine = Engine(url)
    corpus = bench.generate(size, 1, 0)
    namespace = corpus.namespaces[0]
    probes = bench.make_queries(corpus, 2000, 0, namespace=namespace)
    del corpus
    stores = [MemoryStore(engine, PREFIX) for _ in range(THREADS)]
    if setup == "long_lived":
        long_lived()
    ms = bench.closed_loop(lambda i, probe: stores[i].recall(probe.text, namespace, 5), probes, THREADS, seconds)
    n = len(ms)
    tracked = len(gc.get_objects())
    started = time.perf_counter()
    gc.collect()
    full = (time.perf_counter() - started) * 1000
    name = "long_lived()" if setup == "long_lived" else "Python's collector settings"
    print(f"{name:28s} {n / seconds:5.0f} recalls/s  p50 {ms[n // 2]:6.1f}  p95 {ms[int(n * 0.95)]:6.1f}  "
          f"p99 {ms[int(n * 0.99)]:6.1f}  max {ms[-1]:6.1f} ms  ({tracked} objects tracked, a full collection "
          f"{full:.0f} ms)", flush=True)
    for store in stores:
        store.close()
    engine.close()


def main(url: str, size: int, seconds: float, rounds: int) -> None:
    engine = Engine(url)
    try:
        bench.loaded(engine, PREFIX, size, namespaces=1)
        print(f"{size} memories in one namespace, {THREADS} recalling threads of one process, "
              f"{seconds:.0f} s a run after 3 s of warm-up")
        for _ in range(rounds):
            for setup in ("long_lived", "python"):
                subprocess.run([sys.executable, __file__, "--run", url, str(size), str(seconds), setup], check=True)
    finally:
        uninstall(engine, PREFIX)
        engine.close()


if __name__ == "__main__":
    if sys.argv[1] == "--run":
        run(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    else:
        main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
