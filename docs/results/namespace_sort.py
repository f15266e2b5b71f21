"""What sorting the index by namespace first does to the searches of one namespace, side by side.

Builds the bench corpus (N memories, 100 Zipf-sized namespaces, no merge) under a throwaway prefix,
whose index is sorted as esmem installs it (namespace, then valid_from newest first), and a copy of it
sorted by valid_from alone (the layout before); both force-merged to one segment. Then, per query
and in rotating order on both indices: the BM25 floor (20 hits), the stored recall template, the
pinned and the recent template as MemoryStore.recall calls them, and the recent template in the
largest namespace. Prints each call's client wall p50 and the engine's time per search (the index's
search stats: query and fetch time over searches, which `took`, whole milliseconds, cannot resolve),
and checks that both indices give the same hits. Last, what each layout costs a write: the corpus's
documents bulk-indexed (1,000 a request, then a refresh) into an empty index of each, alternately,
`passes` times each.

    python docs/results/namespace_sort.py $ESMEM_URL 100000 3
"""
from __future__ import annotations

import random
import statistics
import sys
import time
from typing import Any

from esmem.apps import bench
from esmem.index.engine import Engine, ndjson
from esmem.index.install import current_index, uninstall

SETTINGS = ("number_of_shards", "number_of_replicas", "refresh_interval", "similarity", "analysis", "knn")


BY_VALID_FROM = {"field": "valid_from", "order": "desc"}


def sorted_like(engine: Engine, live: str, name: str, sort: dict[str, Any]) -> None:
    """An empty index `name` with the mappings and analysis of `live`, sorted by `sort`."""
    settings = engine.request("GET", f"/{live}/_settings")[live]["settings"]["index"]
    mappings = engine.request("GET", f"/{live}/_mapping")[live]["mappings"]
    index = {k: v for k, v in settings.items() if k in SETTINGS}
    engine.request("PUT", f"/{name}", {"settings": {"index": {**index, "sort": sort}}, "mappings": mappings})


def ingest_rates(engine: Engine, live: str, passes: int) -> dict[str, list[float]]:
    """Documents per second bulk-indexed into an empty index of each layout, alternately."""
    docs, page = [], engine.request("POST", f"/{live}/_search", {"size": 5000, "sort": ["_doc"]}, {"scroll": "2m"})
    while page["hits"]["hits"]:
        docs += [({"index": {"_id": h["_id"], "routing": h["_source"]["namespace"]}}, h["_source"])
                 for h in page["hits"]["hits"]]
        page = engine.request("POST", "/_search/scroll", {"scroll": "2m", "scroll_id": page["_scroll_id"]})
    bodies = [ndjson(line for pair in docs[i:i + 1000] for line in pair) for i in range(0, len(docs), 1000)]
    live_sort = engine.request("GET", f"/{live}/_settings")[live]["settings"]["index"]["sort"]
    layouts = {"by namespace, valid_from": live_sort, "sorted by valid_from": BY_VALID_FROM}
    rates: dict[str, list[float]] = {}
    for n in range(passes):
        for layout in (list(layouts) if n % 2 == 0 else list(reversed(layouts))):
            name = "ns-sort-ingest"
            sorted_like(engine, live, name, layouts[layout])
            try:
                started = time.perf_counter()
                for body in bodies:
                    engine.request("POST", f"/{name}/_bulk", body)
                engine.request("POST", f"/{name}/_refresh")
                rates.setdefault(layout, []).append(len(docs) / (time.perf_counter() - started))
            finally:
                engine.request("DELETE", f"/{name}")
    return rates


def main(url: str, size: int, passes: int) -> None:
    engine, prefix = Engine(url), "ns-sort"
    copy = f"{prefix}-by-valid-from"
    try:
        corpus = bench.loaded(engine, prefix, size)
        live = current_index(engine, prefix)
        assert live is not None
        sorted_like(engine, live, copy, BY_VALID_FROM)
        engine.request("POST", "/_reindex", {"source": {"index": live, "size": 2000}, "dest": {"index": copy}},
                       {"wait_for_completion": "true", "refresh": "true"})
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
        rates = ingest_rates(engine, live, passes)
        print(f"{'bulk indexing, docs/s':32s} {' '.join(f'{r:,.0f}' for r in rates['sorted by valid_from']):>26s}"
              f"     {' '.join(f'{r:,.0f}' for r in rates['by namespace, valid_from']):>26s}")
    finally:
        engine.request("DELETE", f"/{copy}", None, {"ignore_unavailable": "true"})
        uninstall(engine, prefix)
        engine.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
