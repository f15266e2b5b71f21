"""`esmem bench --embedder`: the hybrid recall path next to the BM25 floor, on bench's synthetic corpus.

Measured on one corpus (esmem.bench.generate), embedding time reported apart from engine time:
  embedding   the memories' vectors (one pass, the embedder alone) and one query's vector (p50/p95)
  ingest      remember_many with the vectors already computed, lexical index vs vector index
  bytes       primary store per memory after a force-merge, lexical vs with vectors
  latency     (a) BM25 floor, (b) the recall template, (c) MemoryStore.recall without the kNN leg,
              (h) both legs' templates in one _msearch with the query vector given (the engine's share
              of hybrid), (H) MemoryStore.recall hybrid end to end (query embedding, both legs, fusion,
              MMR); (c) and (H) on the same index, reheat off: H/c is what the kNN leg costs a recall
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Any, Callable

from esmem.apps.bench import Paths, Probe, Timings, combine_passes, generate, make_queries, measure, store_stats
from esmem.apps.timing import percentiles
from esmem.domain.embedding import Embedder, embed_checked, quantize
from esmem.domain.hybrid import spec
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index.catalog import Search
from esmem.index.engine import Engine
from esmem.index.install import KNN_TEMPLATE, uninstall
from esmem.values import epoch_ms, utcnow

HYBRID_PATHS = {"a": "BM25 match (floor)", "b": "recall template", "c": "MemoryStore.recall lexical",
                "h": "both legs, one _msearch", "H": "MemoryStore.recall hybrid"}


def run_hybrid(engine: Engine, prefix: str, embedder: Embedder, *, size: int = 2000, namespaces: int = 20,
               queries: int = 100, k: int = 5, seed: int = 0, repeat: int = 1,
               advance: Callable[[str], None] = lambda stage: None) -> dict[str, Any]:
    """One hybrid run; every prefix it creates is removed again. `repeat`: the latency comparison that
    many times back to back; every latency is the median over the passes, and the hybrid-to-lexical
    ratio (H)/(c) also its [min, max] over them."""
    corpus = generate(size, namespaces, seed)
    items = corpus.inputs()
    advance("embedding the memories")
    started, cpu = time.perf_counter(), time.process_time()
    vectors = embed_checked(embedder, [i.text for i in items])
    embed_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    lex, vec = f"{prefix}-bench-lexical", f"{prefix}-bench-hybrid"
    # CPU seconds too (all of the process's threads): on a machine others are using, wall time
    # measures them as much as the model
    out: dict[str, Any] = {"size": size, "namespaces": namespaces, "embedder": spec(embedder),
                           "embedding": {"memories_per_second": size / embed_s, "seconds": embed_s,
                                         "cpu_seconds": cpu_s}}
    try:
        for p, emb in ((lex, None), (vec, spec(embedder))):
            uninstall(engine, p)
            install(engine, p, embedding=emb)
        ingest = {}
        for p, batch in ((lex, items), (vec, [replace(i, embedding=v) for i, v in zip(items, vectors)])):
            advance(f"ingest {'with' if p == vec else 'without'} vectors")
            store = MemoryStore(engine, p, merge=MergePolicy(enabled=False))
            started = time.perf_counter()
            store.remember_many(batch)
            seconds = time.perf_counter() - started
            ingest["vectors" if p == vec else "lexical"] = {
                "seconds": seconds, "per_second": size / seconds,
                "bytes_per_memory": store_stats(engine, p, force_merge=True)["bytes_per_memory"]}
        out["ingest"] = ingest
        qs = make_queries(corpus, queries + max(2, queries // 10), seed)
        measured, warm = qs[:queries], qs[queries:]
        advance("embedding the queries")
        one = []
        for q in measured[:50]:
            started = time.perf_counter()
            embed_checked(embedder, [q.text], query=True)
            one.append((time.perf_counter() - started) * 1000)
        out["embedding"]["query_ms"] = percentiles(one)
        advance("latency")
        calls = _calls(engine, vec, embedder, k, qs)
        passes = [measure(calls, measured, warm if i == 0 else ()) for i in range(repeat)]
        out["latency"] = combine_passes(passes)
        for key, row in out["latency"].items():
            row["label"] = HYBRID_PATHS[key]
        out["hybrid_vs_lexical"] = {}
        for p in ("p50", "p95"):
            ratios = [one["H"][p] / one["c"][p] for one in passes]
            out["hybrid_vs_lexical"][p] = statistics.median(ratios)
            out["hybrid_vs_lexical"][f"{p}_spread"] = [min(ratios), max(ratios)]
        return out
    finally:
        uninstall(engine, lex)
        uninstall(engine, vec)


def _calls(engine: Engine, prefix: str, embedder: Embedder, k: int,
           queries: list[Probe]) -> dict[str, Callable[[Probe], Timings]]:
    lexical = Paths(engine, prefix, k)
    store = MemoryStore(engine, prefix, embedder=embedder)
    lexical_store = MemoryStore(engine, prefix)
    # (h): the query's vector is not the engine's time: computed before, outside the timed calls
    qvec = {q.text: quantize(v) for q, v in zip(queries, embed_checked(embedder, [q.text for q in queries], query=True))}

    def legs(q: Probe) -> Timings:
        params = {"namespace": q.namespace, "query": q.text, "now": epoch_ms(utcnow())}
        responses = store.catalog.msearch([Search("recall", params, routing=q.namespace),
                                           Search(KNN_TEMPLATE, {**params, "vector": qvec[q.text]}, routing=q.namespace)])
        return {"took": float(sum(r.get("took", 0) for r in responses))}

    def hybrid(q: Probe) -> Timings:
        store.semantic._queries.clear()  # type: ignore[union-attr]  # end to end: the query is embedded
        res = store.recall(q.text, q.namespace, k, touch=False)
        return {"took": res.engine_took_ms}

    def lexical_recall(q: Probe) -> Timings:
        return {"took": lexical_store.recall(q.text, q.namespace, k, touch=False).engine_took_ms}

    return {"a": lexical.bm25, "b": lexical.template, "c": lexical_recall, "h": legs, "H": hybrid}


def summary(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Printable rows: what a reader compares."""
    lat = report["latency"]
    rows = [(f"({key}) {row['label']}", f"p50 {row['p50']:.1f} ms, p95 {row['p95']:.1f} ms, x(a) p50 {row['ratio_p50']:.2f}")
            for key, row in lat.items()]
    ratio = report["hybrid_vs_lexical"]

    def spread(p: str) -> str:
        lo, hi = ratio[f"{p}_spread"]
        return f" [{lo:.2f}-{hi:.2f}]" if lat["H"]["passes"] > 1 else ""
    rows.append(("(H) / (c): hybrid vs lexical recall", f"p50 x{ratio['p50']:.2f}{spread('p50')}, "
                                                        f"p95 x{ratio['p95']:.2f}{spread('p95')}"))
    e, i = report["embedding"], report["ingest"]
    rows += [("embedding, memories", f"{e['memories_per_second']:.1f}/s ({e['seconds']:.1f} s, "
                                     f"{e['cpu_seconds']:.1f} CPU-s for {report['size']})"),
             ("embedding, one query", f"p50 {e['query_ms']['p50']:.1f} ms, p95 {e['query_ms']['p95']:.1f} ms"),
             ("ingest lexical", f"{i['lexical']['per_second']:.0f}/s, {i['lexical']['bytes_per_memory']:.0f} bytes/memory"),
             ("ingest with vectors", f"{i['vectors']['per_second']:.0f}/s, {i['vectors']['bytes_per_memory']:.0f} bytes/memory "
                                     "(vectors precomputed)")]
    return rows

