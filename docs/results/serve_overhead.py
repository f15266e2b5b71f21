"""What `esmem serve` adds to one recall when nothing else runs, and what the HTTP client adds.

Builds the bench corpus (N memories, no merge) under a throwaway prefix, starts `esmem serve --no-touch`
on a free port (as `esmem bench --mixed` does) and times, per query and in rotating order, the same
recall (k=5, no reheat) of the largest namespace through the library, through the API with one
keep-alive urllib3 connection (the HTTP library of the engine clients) and with one keep-alive httpx
connection. Prints each path's p50 client wall time and what it adds to the library.

    python docs/results/serve_overhead.py $ESMEM_URL 100000 2
"""
from __future__ import annotations

import sys

import httpx
import orjson
import urllib3

from esmem.apps import bench
from esmem.apps.bench_mixed import Served
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from esmem.index.install import uninstall


def main(url: str, size: int, passes: int) -> None:
    engine, prefix = Engine(url), "serve-overhead"
    uninstall(engine, prefix)
    install(engine, prefix)
    served = None
    try:
        corpus = bench.generate(size, 100, 0)
        bench.ingest(engine, prefix, corpus.inputs(), MergePolicy(enabled=False), lambda n: None)
        engine.request("POST", f"/{prefix}-memories/_refresh")
        namespace = corpus.namespaces[0]
        queries = bench.make_queries(corpus, 230, 0, namespace=namespace)
        served = Served(prefix, namespace, {"ESMEM_URL": url})
        store = MemoryStore(engine, prefix)
        headers = {"Authorization": f"Bearer {served.token}", "Content-Type": "application/json"}
        pool = urllib3.HTTPConnectionPool("127.0.0.1", served.port, maxsize=1, timeout=60)
        client = httpx.Client(base_url=served.url, headers=headers, timeout=60)
        path = f"/v1/namespaces/{namespace}/recall"

        def via_urllib3(q: bench.Probe) -> bench.Timings:
            response = pool.urlopen("POST", path, body=orjson.dumps({"query": q.text, "k": 5}), headers=headers)
            assert response.status == 200, response.data[:200]
            return {}

        def via_httpx(q: bench.Probe) -> bench.Timings:
            response = client.post(path, json={"query": q.text, "k": 5})
            assert response.status_code == 200, response.text[:200]
            return {}

        def via_library(q: bench.Probe) -> bench.Timings:
            store.recall(q.text, namespace, 5, touch=False)
            return {}

        calls = {"library": via_library, "serve, urllib3 client": via_urllib3, "serve, httpx client": via_httpx}
        timed = bench.measure(calls, list(queries[:200]) * passes, queries[200:])
        print(f"{size} memories, namespace {namespace}, {passes} x 200 recalls a path, interleaved")
        for name, row in timed.items():
            print(f"{name:22s} p50 {row['p50']:5.2f} ms  adds {row['p50'] - timed['library']['p50']:5.2f} ms")
    finally:
        if served:
            served.stop()
        uninstall(engine, prefix)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
