"""A/B of the stored `recall` template against the one of an older commit, on one index, interleaved.

Reproduces the numbers of docs/guides/any-language.md, "What it costs":

    git -C . archive 0455933 | tar -x -C /tmp/esmem-base        # the last commit with native decay functions
    PYTHONPATH=/tmp/esmem-base python -c 'import json; from esmem.index.templates import render; \
      from esmem.domain.ranking import RecallParams, template_params, parse_time; print(json.dumps({ \
      "template": render("templates/search/recall.mustache.j2", {"prefix": "abold"}, shared=frozenset({"prefix"})), \
      "fuse": open("/tmp/esmem-base/painless/fuse_blend.painless").read(), \
      "params": template_params(RecallParams(), query="Q", namespace="N", size=20, now=parse_time("2026-11-30T00:00:00Z"))}))' \
      > /tmp/old-recall.json
    python docs/results/ab_recall_template.py $ESMEM_URL /tmp/old-recall.json 100000 300 [largest]

Both templates run with esmem's default policy; the new one gets only namespace and query (what any
client sends), the old one the parameters its Python computed. Prints engine `took` and client wall
time per template and whether both returned the same ids.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from esmem.apps import bench
from esmem.domain.installation import install
from esmem.index.engine import Engine
from esmem.index.install import MUSTACHE_OPTIONS, uninstall
from esmem.domain.merge import MergePolicy
from esmem.values import iso, utcnow


def main(url: str, old_path: str, size: int, queries: int, largest: bool) -> None:
    engine, old, prefix = Engine(url), json.load(open(old_path)), "abtest"
    uninstall(engine, prefix)
    install(engine, prefix)
    corpus = bench.generate(size, 100, 0)
    bench.ingest(engine, prefix, corpus.inputs(), MergePolicy(enabled=False), lambda n: None)
    engine.request("POST", f"/{prefix}-memories/_refresh")
    engine.request("PUT", "/_scripts/abold-fuse_blend", {"script": {"lang": "painless", "source": old["fuse"]}})
    engine.request("PUT", "/_scripts/abold-recall", {"script": {"lang": "mustache", "source": old["template"],
                                                                "options": MUSTACHE_OPTIONS}})
    qs = bench.make_queries(corpus, queries, 0, namespace=corpus.namespaces[0] if largest else None)

    def new(q: bench.Probe) -> dict:
        return engine.request("POST", f"/{prefix}-memories/_search/template", {
            "id": f"{prefix}-recall", "params": {"namespace": q.namespace, "query": q.text}}, {"routing": q.namespace})

    def previous(q: bench.Probe) -> dict:
        params = {**old["params"], "query": q.text, "namespace": q.namespace, "now": iso(utcnow())}
        return engine.request("POST", f"/{prefix}-memories/_search/template", {"id": "abold-recall", "params": params},
                              {"routing": q.namespace})

    calls = {"old": previous, "new": new}
    try:
        for q in qs[:30]:  # warm-up
            for call in calls.values():
                call(q)
        wall: dict[str, list[float]] = {k: [] for k in calls}
        took: dict[str, list[float]] = {k: [] for k in calls}
        same = 0
        for i, q in enumerate(qs):
            ids = {}
            for name in (list(calls) if i % 2 else list(calls)[::-1]):
                t0 = time.perf_counter()
                resp = calls[name](q)
                wall[name].append((time.perf_counter() - t0) * 1000)
                took[name].append(resp["took"])
                ids[name] = [h["_id"] for h in resp["hits"]["hits"]]
            same += ids["old"] == ids["new"]
        for name in calls:
            print(f"{name}: wall p50 {statistics.median(wall[name]):.2f} ms, mean {statistics.fmean(wall[name]):.2f} ms, "
                  f"took mean {statistics.fmean(took[name]):.2f} ms")
        print(f"new/old: wall p50 {statistics.median(wall['new']) / statistics.median(wall['old']):.2f}, "
              f"took mean {statistics.fmean(took['new']) / statistics.fmean(took['old']):.2f}; "
              f"same ids in {same}/{len(qs)} queries")
    finally:
        uninstall(engine, prefix)
        for name in ("abold-fuse_blend", "abold-recall"):
            engine.request("DELETE", f"/_scripts/{name}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), len(sys.argv) > 5)
