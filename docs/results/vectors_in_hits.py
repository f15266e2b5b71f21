"""Recall with and without the vectors in its hits' _source: client wall time, engine CPU, client CPU.

Builds the bench corpus (N memories, 100 namespaces) with MODEL's vectors under a throwaway prefix,
merged to one segment, then runs 200 recalls per pass, hybrid and lexical, each way in rotation: the
installed templates as they are, and with `with_vectors` set on both recall legs (the hits keep their
vector, as on an engine that stores vectors in _source). Engine CPU is the node's process CPU over
the pass, per recall, read from /proc (the engine runs on this machine); the query vectors are
cached, so the embedder is not in the numbers.

    python docs/results/vectors_in_hits.py $ESMEM_URL 10000 minilm-q
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from esmem.apps import bench
from esmem.domain.embedding import embed_checked, load_embedder
from esmem.domain.hybrid import LEXICAL, spec
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index import catalog
from esmem.index.engine import Engine
from esmem.index.install import uninstall

PREFIX = "vectors-in-hits"


def main(url: str, size: int, model: str, passes: int = 3) -> None:
    engine, embedder = Engine(url), load_embedder(model)
    corpus = bench.generate(size, 100, 0)
    items = corpus.inputs()
    vectors = embed_checked(embedder, [i.text for i in items])
    queries = bench.make_queries(corpus, 200, 0)
    uninstall(engine, PREFIX)
    install(engine, PREFIX, embedding=spec(embedder))
    asked = {"with_vectors": False}
    send = catalog.Catalog.msearch

    def msearch(self: catalog.Catalog, searches: Any, *args: Any, **kwargs: Any) -> Any:
        if asked["with_vectors"]:
            searches = [replace(s, params={**s.params, "with_vectors": True}) if s.template in ("recall", "recall_knn")
                        else s for s in searches]
        return send(self, searches, *args, **kwargs)

    catalog.Catalog.msearch = msearch  # type: ignore[method-assign]
    try:
        bench.ingest(engine, PREFIX, [replace(i, embedding=v) for i, v in zip(items, vectors)],
                     MergePolicy(enabled=False), lambda n: None)
        bench.store_stats(engine, PREFIX, force_merge=True)
        store = MemoryStore(engine, PREFIX, embedder=embedder)

        pid = next(iter(engine.request("GET", "/_nodes/_local/process")["nodes"].values()))["process"]["id"]

        def engine_cpu_ms() -> float:  # user + system time of the node's process, read from /proc
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

        def one_pass(fusion: Any) -> tuple[float, float, float]:
            wall, cpu, engine_cpu = [], time.process_time(), engine_cpu_ms()
            for q in queries:
                started = time.perf_counter()
                store.recall(q.text, q.namespace, 5, touch=False, **({"fusion": fusion} if fusion else {}))
                wall.append((time.perf_counter() - started) * 1000)
            n = len(queries)
            return statistics.median(wall), (engine_cpu_ms() - engine_cpu) / n, (time.process_time() - cpu) * 1000 / n

        ways = {(recall, vectors_kept): [] for recall in ("hybrid", "lexical") for vectors_kept in (False, True)}
        for fusion in (None, LEXICAL):  # warm-up: the query vectors, the engine's caches
            one_pass(fusion)
        for _ in range(passes):
            for (recall, vectors_kept), rows in ways.items():
                asked["with_vectors"] = vectors_kept
                rows.append(one_pass(None if recall == "hybrid" else LEXICAL))
        print(f"{engine.info.family} {engine.info.version}, {size} memories with {model} vectors, 200 recalls a pass, "
              f"median of {passes} passes")
        for (recall, vectors_kept), rows in ways.items():
            wall, engine_cpu, client_cpu = (statistics.median(r[i] for r in rows) for i in range(3))
            print(f"  {recall:8s} hits {'with' if vectors_kept else 'without'} vectors: wall p50 {wall:.2f} ms, "
                  f"engine CPU {engine_cpu:.2f} ms, client CPU {client_cpu:.2f} ms a recall")
    finally:
        catalog.Catalog.msearch = send  # type: ignore[method-assign]
        uninstall(engine, PREFIX)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
