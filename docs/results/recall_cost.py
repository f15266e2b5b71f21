"""Where the stored recall template's time goes against the BM25 floor, at N memories, interleaved.

Builds the bench corpus under a throwaway prefix (no merge), then times, per query and in rotating order:
the floor (`bm25`, 20 hits), the recall template as any client calls it, the same with `rel_only`
(the relevance query and its filters, no fusion) and with `rescore_window=50` (the fusion over 50
hits instead of 100). Prints the p50 client wall time of each and its ratio to the floor.

    python docs/results/recall_cost.py $ESMEM_URL 100000 3
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Callable

from esmem.apps import bench
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.index.engine import Engine
from esmem.index.install import uninstall


def main(url: str, size: int, passes: int) -> None:
    engine, prefix = Engine(url), "recall-cost"
    uninstall(engine, prefix)
    install(engine, prefix)
    try:
        corpus = bench.generate(size, 100, 0)
        bench.ingest(engine, prefix, corpus.inputs(), MergePolicy(enabled=False), lambda n: None)
        engine.request("POST", f"/{prefix}-memories/_refresh")

        def call(template: str, extra: dict[str, Any]) -> Callable[[bench.Probe], float]:
            def timed(q: bench.Probe) -> float:
                started = time.perf_counter()
                engine.request("POST", f"/{prefix}-memories/_search/template",
                               {"id": f"{prefix}-{template}", "params": {"namespace": q.namespace, "query": q.text, **extra}},
                               {"routing": q.namespace})
                return (time.perf_counter() - started) * 1000
            return timed

        calls = {"floor (bm25, 20 hits)": call("bm25", {"size": "20"}), "recall": call("recall", {}),
                 "recall, rel_only": call("recall", {"rel_only": "true"}),
                 "recall, rescore_window 50": call("recall", {"rescore_window": "50"})}
        names = list(calls)
        queries = bench.make_queries(corpus, 230, 0)
        for q in queries[200:]:  # warm-up
            for name in names:
                calls[name](q)
        wall: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(passes):
            for i, q in enumerate(queries[:200]):
                for name in names[i % len(names):] + names[:i % len(names)]:
                    wall[name].append(calls[name](q))
        floor = statistics.median(wall[names[0]])
        for name in names:
            p50 = statistics.median(wall[name])
            print(f"{name:28s} p50 {p50:5.2f} ms  {p50 / floor:.2f}x the floor")
    finally:
        uninstall(engine, prefix)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
