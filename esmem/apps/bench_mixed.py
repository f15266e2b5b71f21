"""`esmem bench --mixed`: recall and remember clients at once, through the library and through `esmem serve`.

One namespace holds the first size's memories of the bench's synthetic corpus (written without merge);
the remembers write the memories that follow in the same corpus (with merge, as callers write: ~10% of
them restate a memory already there), the recalls ask the bench's queries of that namespace. Each
client is a thread that calls as fast as it is answered for a fixed time. Per path, three phases:
the remember clients alone, the recall clients alone, then both at once, each phase on every path back
to back (after an unreported warm-up: the ingest's segment merges settle first); the library path uses one
`MemoryStore` per client thread (a store takes one write at a time), the HTTP path an `esmem serve`
process on a free port of 127.0.0.1 and one keep-alive connection per client (urllib3, the HTTP library
of the engine clients: an httpx client took 0.3 to 0.4 ms more a recall, docs/results/serve-overhead.txt). A third path is the
library with `recall(..., touch=False)`: what the recalls' reheat write-backs cost, side by side (each
write-back re-indexes the whole memory document). With `recalls_in_flight`, the library and serve paths
run once more with that many recalls of the process in the engine at once (esmem/index/admission.py).
During each phase the engine's refresh, search and write thread pools are sampled (mean active and
queued tasks).
"""
from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import orjson

from esmem.apps.bench import Probe, generate, make_queries
from esmem.apps.timing import percentiles
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.reheat import flush_all
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import EsmemError
from esmem.index.engine import Engine
from esmem.index.install import uninstall
from esmem.values import iso

OPS = ("remember", "recall")
POOLS = ("refresh", "search", "write")
NO_REHEAT = "library, touch=False"  # the library path with the recalls' reheat write-backs off
WRITES_PER_SECOND = 300  # memories set aside per remember client and second of a phase (more than one writes)


class Phase:
    """Latencies (ms) and errors of each operation, shared by the client threads of one phase."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.first_error: dict[str, str] = {}
        self._lock = threading.Lock()

    def timed(self, op: str, call: Callable[[], None]) -> None:
        started = time.perf_counter()
        try:
            call()
        except Exception as e:  # noqa: BLE001 - a client's failure is counted and reported, the run goes on
            with self._lock:
                self.errors[op] += 1
                self.first_error.setdefault(op, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200])
            return
        elapsed = (time.perf_counter() - started) * 1000
        with self._lock:
            self.ms[op].append(elapsed)


class Clients:
    """How one path's clients call: `remember(client, memory)`, `recall(client, probe)`; a client
    is the thread's own connection or store, made by `client()` and closed by `close(client)`."""

    def client(self) -> Any:
        raise NotImplementedError

    def remember(self, client: Any, memory: MemoryInput) -> None:
        raise NotImplementedError

    def recall(self, client: Any, probe: Probe, k: int) -> None:
        raise NotImplementedError

    def close(self, client: Any) -> None:
        pass


class Library(Clients):
    def __init__(self, engine: Engine, prefix: str, *, touch: bool = True):
        self.engine, self.prefix, self.touch = engine, prefix, touch

    def client(self) -> MemoryStore:
        return MemoryStore(self.engine, self.prefix)

    def remember(self, client: MemoryStore, memory: MemoryInput) -> None:
        client.remember_many([memory])

    def recall(self, client: MemoryStore, probe: Probe, k: int) -> None:
        client.recall(probe.text, probe.namespace, k, touch=self.touch)

    def close(self, client: MemoryStore) -> None:
        client.close()


class Http(Clients):
    def __init__(self, url: str, token: str):
        import urllib3

        address = urlsplit(url)
        self.urllib3, self.host, self.port = urllib3, address.hostname or "127.0.0.1", address.port
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def client(self) -> Any:
        return self.urllib3.HTTPConnectionPool(self.host, self.port, maxsize=1, timeout=120)

    def _post(self, client: Any, path: str, body: dict[str, Any]) -> None:
        response = client.urlopen("POST", path, body=orjson.dumps(body), headers=self.headers)
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {response.data[:200]!r}")

    def remember(self, client: Any, memory: MemoryInput) -> None:
        body: dict[str, Any] = {"content": memory.content, "kind": memory.kind, "importance": memory.importance,
                                "entities": list(memory.entities)}
        if memory.valid_from is not None:
            body["valid_from"] = iso(memory.valid_from) if isinstance(memory.valid_from, datetime) else memory.valid_from
        self._post(client, f"/v1/namespaces/{memory.namespace}/memories", body)

    def recall(self, client: Any, probe: Probe, k: int) -> None:
        self._post(client, f"/v1/namespaces/{probe.namespace}/recall", {"query": probe.text, "k": k})

    def close(self, client: Any) -> None:
        client.close()


def _sample_pools(engine: Engine, stop: threading.Event, into: dict[str, list[tuple[int, int]]]) -> None:
    while not stop.wait(0.25):
        try:
            rows = engine.request("GET", "/_cat/thread_pool/" + ",".join(POOLS),
                                  params={"format": "json", "h": "name,active,queue"})
        except EsmemError:
            continue
        for row in rows:
            into[row["name"]].append((int(row["active"]), int(row["queue"])))


def phase(engine: Engine, clients: Clients, *, recalls: int, remembers: int, seconds: float, k: int,
          probes: Sequence[Probe], writes: Iterator[MemoryInput]) -> dict[str, Any]:
    """`recalls` + `remembers` client threads calling for `seconds`; what each operation measured."""
    result = Phase()
    take = threading.Lock()
    ready = threading.Barrier(recalls + remembers + 1)
    stop_at: list[float] = []
    started_at = [0.0]

    def run(op: str, n: int) -> None:
        client = clients.client()
        ask = itertools.cycle(probes[n::max(1, recalls)] or probes)
        try:
            ready.wait()
            while time.monotonic() < stop_at[0]:
                if op == "remember":
                    with take:
                        memory = next(writes, None)
                    if memory is None:
                        return
                    result.timed(op, lambda: clients.remember(client, memory))
                else:
                    probe = next(ask)
                    result.timed(op, lambda: clients.recall(client, probe, k))
        finally:
            clients.close(client)

    threads = [threading.Thread(target=run, args=("recall", n), daemon=True) for n in range(recalls)]
    threads += [threading.Thread(target=run, args=("remember", n), daemon=True) for n in range(remembers)]
    for t in threads:
        t.start()
    pools: dict[str, list[tuple[int, int]]] = defaultdict(list)
    sampling = threading.Event()
    sampler = threading.Thread(target=_sample_pools, args=(engine, sampling, pools), daemon=True)
    stop_at.append(time.monotonic() + seconds)
    ready.wait()
    started_at[0] = time.monotonic()
    sampler.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started_at[0]
    sampling.set()
    sampler.join()
    ops: dict[str, Any] = {}
    for op, count in (("recall", recalls), ("remember", remembers)):
        if count:
            ms = result.ms[op]
            ops[op] = {"clients": count, "n": len(ms), "per_second": len(ms) / wall, "errors": result.errors[op],
                       "first_error": result.first_error.get(op), **percentiles(ms)}
    return {"seconds": wall, "ops": ops,
            "pools": {name: {"active": sum(a for a, _ in v) / len(v), "queue": sum(q for _, q in v) / len(v)}
                      for name, v in sorted(pools.items()) if v}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """`esmem serve` in a process of its own on a free port, with an API key for `namespace`."""

    def __init__(self, prefix: str, namespace: str, env: Mapping[str, str]):
        from esmem.apps.api_keys import add_key

        self.dir = tempfile.TemporaryDirectory(prefix="esmem-bench-")
        keys = Path(self.dir.name) / "keys.json"
        self.token = add_key(keys, "bench", [namespace])
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(Path(self.dir.name) / "serve.log", "w+")
        self.proc = subprocess.Popen([sys.executable, "-c", "from esmem.cli.main import main; main()",
                                      "--prefix", prefix, "serve", "--keys", str(keys), "--port", str(self.port)],
                                     env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise EsmemError(f"esmem serve did not start: {self.tail()}")
                time.sleep(0.1)

    def tail(self) -> str:
        self.log.seek(0)
        lines = [line for line in self.log.read().splitlines() if not line.startswith("{")]  # not the access log
        return lines[-1] if lines else "(no output)"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        self.dir.cleanup()


def targets(paths: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The mixed-load speed targets, evaluated (reported, never asserted: machines are noisy)."""
    rows = []
    for path, phases in paths.items():
        if path == NO_REHEAT:  # a measurement of the reheat's cost, not a way callers recall by default
            continue
        mixed = phases["mixed"]["ops"]
        rows.append(("remember p50 <= 100 ms", path, mixed["remember"]["p50"], mixed["remember"]["p50"] <= 100))
        rows.append(("recall p99 <= 100 ms", path, mixed["recall"]["p99"], mixed["recall"]["p99"] <= 100))
    if "serve" in paths and "library" in paths:
        for op in OPS:
            added = paths["serve"]["mixed"]["ops"][op]["p50"] - paths["library"]["mixed"]["ops"][op]["p50"]
            rows.append((f"serve adds <= 2 ms p50 ({op})", "mixed", added, added <= 2))
    return [{"target": t, "scope": s, "value": v, "met": m} for t, s, v, m in rows]


def ratios(paths: Mapping[str, Mapping[str, Any]], recalls_in_flight: int | None = None) -> list[dict[str, Any]]:
    """Each operation's mixed p50/p99 over the same operation alone (per path), serve over library,
    library over library with touch=False (what the reheat write-backs cost) and, with
    `recalls_in_flight`, the library with that limit over the library without."""
    out = []
    for path, phases in paths.items():
        for op in OPS:
            alone, mixed = phases[f"{op} alone"]["ops"][op], phases["mixed"]["ops"][op]
            out.append({"ratio": f"mixed / {op} alone", "path": path, "op": op,
                        **{q: mixed[q] / alone[q] if alone[q] else None for q in ("p50", "p99")}})
    others = [("serve", "serve / library"), (NO_REHEAT, "library / touch=False")]
    if recalls_in_flight is not None:
        others.append((admitted("library", recalls_in_flight), f"{recalls_in_flight} in flight / library"))
    for other, label in others:
        if other not in paths or "library" not in paths:
            continue
        for name in ("remember alone", "recall alone", "mixed"):
            for op, lib in paths["library"][name]["ops"].items():
                them = paths[other][name]["ops"][op]
                top, bottom = (lib, them) if other == NO_REHEAT else (them, lib)
                out.append({"ratio": f"{label}, {name}", "path": other, "op": op,
                            **{q: top[q] / bottom[q] if bottom[q] else None for q in ("p50", "p99")}})
    return out


def admitted(path: str, limit: int) -> str:
    """The name of `path` run with `limit` recalls in flight."""
    return f"{path}, {limit} in flight"


def run_mixed(engine: Engine, prefix: str, *, size: int, recalls: int = 16, remembers: int = 4,
              seconds: float = 30.0, k: int = 5, seed: int = 0, serve: bool = True,
              serve_env: Mapping[str, str] | None = None, recalls_in_flight: int | None = None,
              advance: Callable[[str], None] = lambda stage: None) -> dict[str, Any]:
    """One run: ingest, then per path the three phases; the prefix it creates is removed again."""
    if engine.admission.limit is not None:  # the paths without a limit would have one
        raise EsmemError("the mixed bench runs paths without and with a limit of recalls in flight: "
                         "unset ESMEM_RECALLS_IN_FLIGHT (the limited paths take --recalls-in-flight)")
    if recalls_in_flight is not None and engine.config is None:
        raise EsmemError("recalls_in_flight needs an engine made from a ConnectionConfig (not Engine.from_client)")
    npaths = (3 if serve else 2) + (0 if recalls_in_flight is None else 2 if serve else 1)
    pool = WRITES_PER_SECOND * remembers * int(seconds + 1) * 2 * npaths + 10 * WRITES_PER_SECOND * remembers
    advance(f"generate {size} + {pool} memories")
    corpus = generate(size + pool, 1, seed)
    ns = corpus.namespaces[0]
    items = corpus.inputs()
    writes = iter(items[size:])
    qprefix = f"{prefix}-bench-mixed-{size}"
    probes = make_queries(corpus, 2000, seed, namespace=ns)  # their words come from the whole pool: fine
    procs: list[Served] = []
    limited: Engine | None = None
    report: dict[str, Any] = {"engine": str(engine.info), "config": {
        "size": size, "namespace": ns, "recall_clients": recalls, "remember_clients": remembers,
        "seconds": seconds, "k": k, "seed": seed, "recalls_in_flight": recalls_in_flight}, "paths": {}}
    try:
        uninstall(engine, qprefix)
        install(engine, qprefix)
        advance(f"ingest {size} memories (no merge)")
        started = time.perf_counter()
        MemoryStore(engine, qprefix, merge=MergePolicy(enabled=False)).remember_many(items[:size])
        report["ingest_seconds"] = time.perf_counter() - started
        paths: list[tuple[str, Clients]] = [("library", Library(engine, qprefix)),
                                            (NO_REHEAT, Library(engine, qprefix, touch=False))]
        if recalls_in_flight is not None and engine.config is not None:
            limited = Engine(replace(engine.config, recalls_in_flight=recalls_in_flight))
            paths.append((admitted("library", recalls_in_flight), Library(limited, qprefix)))
        if serve:
            procs.append(Served(qprefix, ns, {**(serve_env or {}), "ESMEM_RECALLS_IN_FLIGHT": ""}))
            paths.append(("serve", Http(procs[-1].url, procs[-1].token)))
            if recalls_in_flight is not None:
                procs.append(Served(qprefix, ns, {**(serve_env or {}), "ESMEM_RECALLS_IN_FLIGHT": str(recalls_in_flight)}))
                paths.append((admitted("serve", recalls_in_flight), Http(procs[-1].url, procs[-1].token)))
        try:
            advance("warm-up (not reported)")  # the ingest's segment merges and the caches settle first
            phase(engine, paths[0][1], recalls=recalls, remembers=remembers, seconds=min(10.0, seconds), k=k,
                  probes=probes, writes=writes)
            flush_all(60)
            # each phase on each path back to back, so both paths see the same index and machine
            for name, r, w in (("remember alone", 0, remembers), ("recall alone", recalls, 0),
                               ("mixed", recalls, remembers)):
                for path, clients in paths:
                    advance(f"{path}: {name} ({r} recall + {w} remember clients, {seconds:.0f} s)")
                    report["paths"].setdefault(path, {})[name] = phase(
                        engine, clients, recalls=r, remembers=w, seconds=seconds, k=k, probes=probes, writes=writes)
                    flush_all(60)  # this process's reheat write-backs land before the next phase
        finally:
            for proc in procs:
                proc.stop()
            if limited is not None:
                limited.close()
        report["ratios"] = ratios(report["paths"], recalls_in_flight)
        report["targets"] = targets(report["paths"])
        return report
    finally:
        flush_all(60)
        uninstall(engine, qprefix)
