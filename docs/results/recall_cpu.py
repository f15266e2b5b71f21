"""Where a recall's CPU goes when 16 clients recall at once: the engine's and this process's CPU per recall.

One namespace holds N memories of the bench's corpus (as `esmem bench --mixed` builds it, no merge);
16 threads, a `MemoryStore` each, recall the mixed bench's queries for S seconds, with the reheat
write-back on (the default) and off (`touch=False`), alternating, R rounds. Per phase: recalls per
second, p50/p99, the engine's CPU (its node stats, every thread: search, fetch, HTTP, refresh, merges,
GC) and this process's CPU (os.times: the client threads, their HTTP and JSON, the reheat writer),
each divided by the recalls answered. Two cores are what the engine, the clients and the harness share.
Then, one call at a time, the engine's CPU per call of what a recall sends: the `recall` template, the
`recent` search, both in one `_msearch` (what `MemoryStore.recall` sends), and a search that matches
nothing (what any request costs the engine before its query does work).

    PYTHONPATH=. python docs/results/recall_cpu.py $ESMEM_URL 100000 15 2 > docs/results/recall-cpu.txt
"""
import json
import os
import sys
import time

from esmem.apps.bench import generate, make_queries
from esmem.apps.bench_mixed import Library, phase
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.reheat import flush_all
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from esmem.index.install import uninstall

URL, SIZE, SECONDS, ROUNDS = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
PREFIX, CLIENTS = "recall-cpu", 16


def engine_cpu_ms(engine: Engine) -> float:
    time.sleep(1.1)  # the engine caches its process stats for a second (monitor.process.refresh_interval)
    nodes = engine.request("GET", "/_nodes/stats/process", params={"filter_path": "nodes.*.process.cpu"})["nodes"]
    return float(sum(n["process"]["cpu"]["total_in_millis"] for n in nodes.values()))


def own_cpu_ms() -> float:
    t = os.times()
    return (t.user + t.system) * 1000


def main() -> None:
    engine = Engine(URL)
    corpus = generate(SIZE, 1, 0)
    ns = corpus.namespaces[0]
    probes = make_queries(corpus, 2000, 0, namespace=ns)
    uninstall(engine, PREFIX)
    install(engine, PREFIX)
    try:
        MemoryStore(engine, PREFIX, merge=MergePolicy(enabled=False)).remember_many(corpus.inputs())
        engine.request("POST", f"/{PREFIX}-memories/_refresh")
        print(f"{engine.info}, {SIZE} memories in one namespace, {CLIENTS} recall clients, {SECONDS:.0f} s a phase")
        print("phase                 recalls/s   p50 ms   p99 ms   engine CPU ms/recall   client CPU ms/recall")
        phase(engine, Library(engine, PREFIX), recalls=CLIENTS, remembers=0, seconds=min(SECONDS, 10), k=5,
              probes=probes, writes=iter(()))  # warm-up, not reported
        flush_all(60)
        for _ in range(ROUNDS):
            for touch in (True, False):
                e0, c0 = engine_cpu_ms(engine), own_cpu_ms()
                out = phase(engine, Library(engine, PREFIX, touch=touch), recalls=CLIENTS, remembers=0,
                            seconds=SECONDS, k=5, probes=probes, writes=iter(()))
                flush_all(60)  # the phase's write-backs are its cost
                op = out["ops"]["recall"]
                n = op["n"]
                label = "reheat on" if touch else "reheat off (touch=False)"
                print(f"{label:24s} {op['per_second']:7.0f} {op['p50']:8.1f} {op['p99']:8.1f} "
                      f"{(engine_cpu_ms(engine) - e0) / n:22.2f} {(own_cpu_ms() - c0) / n:22.2f}")
        one_at_a_time(engine, ns, probes)
    finally:
        uninstall(engine, PREFIX)


def one_at_a_time(engine: Engine, ns: str, probes: list) -> None:
    index = f"/{PREFIX}-memories"

    def template(name: str, **params: object):
        return lambda q: engine.request("POST", index + "/_search/template",
                                        {"id": f"{PREFIX}-{name}", "params": {"namespace": ns, **params}}, {"routing": ns})

    def msearch(q):
        lines = [{"routing": ns}, {"id": f"{PREFIX}-recall", "params": {"namespace": ns, "query": q.text, "size": 20}},
                 {"routing": ns}, {"id": f"{PREFIX}-recent", "params": {"namespace": ns, "size": 8}}]
        return engine.request("POST", index + "/_msearch/template", "".join(json.dumps(x) + "\n" for x in lines))

    calls = {"recall template": lambda q: template("recall", query=q.text)(q),
             "recent": template("recent", size=8),
             "recall + recent, one _msearch": msearch,
             "a search matching nothing": lambda q: engine.request("POST", index + "/_search", {
                 "size": 0, "query": {"term": {"namespace": "no such namespace"}}}, {"routing": ns})}
    print("\none call at a time (1,000 calls each, median of 3 alternating rounds)")
    print("call                              engine CPU ms/call   wall ms/call")
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
    for _ in range(3):
        for name, call in calls.items():
            for q in probes[:30]:
                call(q)
            e0, t0 = engine_cpu_ms(engine), time.perf_counter()
            for q in probes[30:1030]:
                call(q)
            wall = time.perf_counter() - t0  # seconds for 1,000 calls: ms a call
            rows[name].append(((engine_cpu_ms(engine) - e0) / 1000, wall))
    for name, values in rows.items():
        cpu = sorted(c for c, _ in values)[1]
        wall = sorted(w for _, w in values)[1]
        print(f"{name:33s} {cpu:18.2f} {wall:14.2f}")


if __name__ == "__main__":
    main()
