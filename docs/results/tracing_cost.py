"""What a recall's spans cost when opentelemetry-api is installed and no tracer provider is set: the
client CPU per recall with esmem asking the API for its (non-recording) spans and with esmem's quiet
handle instead (esmem/tracing.py `_configured`), 10 interleaved blocks of 300 recalls each, on the
bench corpus.

    python docs/results/tracing_cost.py $ESMEM_URL 10000
"""
from __future__ import annotations

import statistics
import sys
import time

from esmem import tracing
from esmem.apps import bench
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from esmem.index.install import uninstall


def main(url: str, size: int) -> None:
    engine, prefix = Engine(url), "tracing-cost"
    try:
        corpus = bench.loaded(engine, prefix, size)
        queries = bench.make_queries(corpus, 400, 0)
        store = MemoryStore(engine, prefix)
        for q in queries[:100]:
            store.recall(q.text, q.namespace, 5, touch=False)
        quiet = tracing._configured
        cpu: dict[str, list[float]] = {"spans asked of the API": [], "esmem's quiet handle": []}
        for _ in range(10):
            for name in cpu:
                tracing._configured = (lambda: True) if name.startswith("spans") else quiet
                started = time.process_time()
                for q in queries[100:]:
                    store.recall(q.text, q.namespace, 5, touch=False)
                cpu[name].append((time.process_time() - started) / (len(queries) - 100) * 1000)
        tracing._configured = quiet
        for name, values in cpu.items():
            print(f"{name:24s} client CPU per recall: median {statistics.median(values):.3f} ms, min {min(values):.3f} ms")
    finally:
        uninstall(engine, prefix)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
