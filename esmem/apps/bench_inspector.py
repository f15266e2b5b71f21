"""`esmem bench --inspector`: the inspector's memories page and recall playground over HTTP, on one namespace
of bench's synthetic corpus (all `size` memories in it).

Measured with one keep-alive HTTP connection to the inspector served by uvicorn in this process, client
wall time per page (rendering included):
  list        the first page of the namespace's memories (50, newest first, the total counted)
  filtered    the first page filtered by kind and importance
  next page   a page reached with the search_after cursor of the page before it
  playground  a recall of a corpus query with its explanation (read-only)
"""
from __future__ import annotations

import http.client
import re
import socket
import threading
import time
from typing import Any, Callable
from urllib.parse import urlencode

from esmem.apps.bench import generate, make_queries
from esmem.apps.inspector import create_ui
from esmem.apps.timing import percentiles
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from esmem.index.install import uninstall

_NEXT = re.compile(r'id="next" href="([^"]+)"')


class Background:
    """An ASGI app served by uvicorn in a thread of this process, on a free port of 127.0.0.1."""

    def __init__(self, app: Any):
        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _get(conn: http.client.HTTPConnection, path: str) -> str:
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read().decode("utf-8")
    if resp.status != 200:
        raise RuntimeError(f"GET {path.split('?')[0]}: HTTP {resp.status}")
    return body


def run_inspector(engine: Engine, prefix: str, *, size: int = 100_000, queries: int = 100, seed: int = 0,
                  advance: Callable[[str], None] = lambda stage: None) -> dict[str, Any]:
    """One run; the prefix it creates is removed again."""
    corpus = generate(size, 1, seed)
    ns = corpus.namespaces[0]
    qprefix = f"{prefix}-bench-ui-{size}"
    try:
        uninstall(engine, qprefix)
        install(engine, qprefix)
        advance(f"ingest {size} memories (no merge)")
        started = time.perf_counter()
        MemoryStore(engine, qprefix, merge=MergePolicy(enabled=False)).remember_many(corpus.inputs())
        ingest_s = time.perf_counter() - started
        server = Background(create_ui(lambda: MemoryStore(engine, qprefix, background_reheat=False)))
        try:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            probes = make_queries(corpus, queries, seed, namespace=ns)
            pages: dict[str, list[str]] = {
                "list": [f"/ns/{ns}"] * queries,
                "filtered": [f"/ns/{ns}?" + urlencode({"kind": ("fact", "rule", "event")[i % 3],
                                                       "min_importance": 1 + i % 8}) for i in range(queries)],
                "playground": [f"/ns/{ns}/recall?" + urlencode({"q": p.text}) for p in probes]}
            cursor = _NEXT.search(_get(conn, pages["list"][0]))
            pages["next page"] = []
            while cursor and len(pages["next page"]) < queries:  # walk the pages: each one's cursor
                pages["next page"].append(cursor.group(1).replace("&amp;", "&"))
                cursor = _NEXT.search(_get(conn, pages["next page"][-1]))
            warm = max(2, queries // 10)
            out: dict[str, Any] = {}
            for name, paths in pages.items():
                advance(f"measure {name}")
                for path in paths[:warm]:
                    _get(conn, path)
                samples = []
                for path in paths:
                    t = time.perf_counter()
                    _get(conn, path)
                    samples.append((time.perf_counter() - t) * 1000)
                out[name] = {"n": len(samples), **percentiles(samples)}
            conn.close()
        finally:
            server.stop()
        return {"engine": str(engine.info), "size": size, "namespace": ns, "queries": queries,
                "ingest_seconds": ingest_s, "pages": out,
                "target": {"p50_ms": 300, "met": all(out[n]["p50"] < 300 for n in ("list", "playground"))}}
    finally:
        uninstall(engine, qprefix)
