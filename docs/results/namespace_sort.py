"""What sorting the index by namespace first does to the searches of one namespace, side by side.

Builds the bench corpus (N memories, 100 Zipf-sized namespaces, no merge) under a throwaway prefix,
whose index is sorted as esmem installs it (namespace, then valid_from newest first), and a copy of it
sorted by valid_from alone (the layout before); both force-merged to one segment. Then, per query
and in rotating order on both indices: the BM25 floor (20 hits), the stored recall template, the
pinned and the recent template as MemoryStore.recall calls them, and the recent template in the
largest namespace. Prints each call's client wall p50 and the engine's time per search (the index's
search stats: query and fetch time over searches, which `took`, whole milliseconds, cannot resolve),
and checks that both indices give the same hits.

    python docs/results/namespace_sort.py $ESMEM_URL 100000 3
"""
from __future__ import annotations

import random
import statistics
import sys
import time
from typing import Any

from esmem.apps import bench
from esmem.index.engine import Engine
from esmem.index.install import current_index, uninstall

SETTINGS = ("number_of_shards", "number_of_replicas", "refresh_interval", "similarity", "analysis", "knn")


def by_valid_from(engine: Engine, live: str, copy: str) -> None:
    """`copy`: the index `live` with the same mappings and analysis, sorted by valid_from alone."""
    settings = engine.request("GET", f"/{live}/_settings")[live]["settings"]["index"]
    mappings = engine.request("GET", f"/{live}/_mapping")[live]["mappings"]
    index = {k: v for k, v in settings.items() if k in SETTINGS}
    index["sort"] = {"field": "valid_from", "order": "desc"}
    engine.request("PUT", f"/{copy}", {"settings": {"index": index}, "mappings": mappings})
    engine.request("POST", "/_reindex", {"source": {"index": live, "size": 2000}, "dest": {"index": copy}},
                   {"wait_for_completion": "true", "refresh": "true"})


def main(url: str, size: int, passes: int) -> None:
    engine, prefix = Engine(url), "ns-sort"
    copy = f"{prefix}-by-valid-from"
    try:
        corpus = bench.loaded(engine, prefix, size)
        live = current_index(engine, prefix)
        assert live is not None
        by_valid_from(engine, live, copy)
        for index in (live, copy):
            engine.request("POST", f"/{index}/_forcemerge", None, {"max_num_segments": "1"})
        queries = bench.make_queries(corpus, 200, 0)
        largest = corpus.namespaces[corpus.sizes.index(max(corpus.sizes))]

        def render(template: str, params: dict[str, Any]) -> dict[str, Any]:
            out: dict[str, Any] = engine.request("POST", "/_render/template", {"id": f"{prefix}-{template}",
                                                                               "params": params})["template_output"]
            return out

        calls: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for q in queries:
            params = {"namespace": q.namespace, "query": q.text}
            calls.setdefault("floor (bm25, 20 hits)", []).append((q.namespace, {
                "size": 20, "track_total_hits": False, "query": {"bool": {
                    "filter": [{"term": {"namespace": q.namespace}}], "must": [{"match": {"content": q.text}}]}}}))
            calls.setdefault("recall template", []).append((q.namespace, render("recall", {**params, "size": 20})))
            calls.setdefault("pinned (8)", []).append((q.namespace, render("pinned", {**params, "size": 8})))
            calls.setdefault("recent (8)", []).append((q.namespace, render("recent", {"namespace": q.namespace,
                                                                                     "size": 8})))
        calls["recent (8), largest namespace"] = [(largest, render("recent", {"namespace": largest, "size": 8}))] * 50

        def search(index: str, namespace: str, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
            started = time.perf_counter()
            resp = engine.request("POST", f"/{index}/_search", body, {"routing": namespace})
            return (time.perf_counter() - started) * 1000, resp

        def ranked(index: str, ns: str, body: dict[str, Any]) -> tuple[list[str], list[Any]]:
            hits = search(index, ns, body)[1]["hits"]["hits"]
            return [h["_id"] for h in hits], [h.get("sort") or round(h["_score"], 4) for h in hits]

        pairs = [(ranked(live, ns, body), ranked(copy, ns, body)) for bodies in calls.values() for ns, body in bodies]
        differ = sum(1 for a, b in pairs if a[0] != b[0])
        keys_differ = sum(1 for a, b in pairs if a[1] != b[1])
        def spent(index: str) -> tuple[float, int]:
            stats = engine.request("GET", f"/{index}/_stats/search")["_all"]["primaries"]["search"]
            return float(stats["query_time_in_millis"] + stats["fetch_time_in_millis"]), int(stats["query_total"])

        walls: dict[tuple[str, str], list[float]] = {}
        engine_ms: dict[tuple[str, str], float] = {}
        for name, bodies in calls.items():
            before = {i: spent(i) for i in (live, copy)}
            for _ in range(passes):
                for ns, body in bodies:
                    order = [live, copy]
                    random.shuffle(order)
                    for index in order:
                        walls.setdefault((name, index), []).append(search(index, ns, body)[0])
            for i in (live, copy):
                (ms0, n0), (ms1, n1) = before[i], spent(i)
                engine_ms[(name, i)] = (ms1 - ms0) / (n1 - n0)
        sizes = {i: engine.request("GET", f"/{i}/_stats/store")["_all"]["primaries"]["store"]["size_in_bytes"]
                 for i in (live, copy)}
        print(f"{size} memories in {len(corpus.namespaces)} namespaces (the largest {max(corpus.sizes)}), one segment each, "
              f"{passes} passes; of {len(pairs)} calls, {differ} differ in their hits, {keys_differ} in their hits' "
              f"scores or sort values (hits differing alone are equal keys in another order)")
        print(f"{'call':32s} {'sorted by valid_from':>30s} {'by namespace, valid_from':>30s}   (ms)")
        for name in calls:
            before, after = (name, copy), (name, live)
            print(f"{name:32s} p50 {statistics.median(walls[before]):5.2f} ms, engine {engine_ms[before]:5.3f}"
                  f"    p50 {statistics.median(walls[after]):5.2f} ms, engine {engine_ms[after]:5.3f}")
        print(f"{'store size':32s} {sizes[copy] / 2**20:22.1f} MiB {sizes[live] / 2**20:22.1f} MiB")
    finally:
        engine.request("DELETE", f"/{copy}", None, {"ignore_unavailable": "true"})
        uninstall(engine, prefix)
        engine.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
