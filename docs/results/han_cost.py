"""What folding traditional Chinese to simplified (char filter esmem_han) costs: the same corpus in two
indices, one with the index template as installed and one with the char filter taken out of its
analyzers. Ingest rate (remember_many, no merge), bytes per memory after a merge to one segment, and
the p50 of the BM25 floor and the recall template on each, interleaved.

    python docs/results/han_cost.py $ESMEM_URL 100000 3
"""
from __future__ import annotations

import sys
from typing import Any

from esmem.apps import bench
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.index import install as installing
from esmem.index.engine import Engine
from esmem.index.install import uninstall


def without_folding(body: dict[str, Any]) -> dict[str, Any]:
    analysis = body["template"]["settings"]["index"]["analysis"]
    del analysis["char_filter"]["esmem_han"]
    for analyzer in analysis["analyzer"].values():
        if analyzer.get("char_filter") == ["esmem_han"]:
            del analyzer["char_filter"]
    return body


def main(url: str, size: int, passes: int) -> None:
    engine = Engine(url)
    folded, plain = "han-folded", "han-plain"
    rendered = installing.index_body
    corpus = bench.generate(size, 100, 0)
    try:
        for prefix in (folded, plain):
            uninstall(engine, prefix)
            installing.index_body = (lambda *a, **k: without_folding(rendered(*a, **k))) if prefix == plain else rendered
            install(engine, prefix)
        installing.index_body = rendered
        for prefix in (plain, folded):
            result = bench.ingest(engine, prefix, corpus.inputs(), MergePolicy(enabled=False), lambda n: None)
            stats = bench.store_stats(engine, prefix, force_merge=True)
            print(f"{prefix:10s} ingest {result['per_second']:.0f} memories/s, {stats['bytes_per_memory']:.0f} bytes/memory")

        queries = bench.make_queries(corpus, 230, 0)
        calls = {f"{p}: {name}": bench.template_call(engine, p, template, extra) for p in (plain, folded)
                 for name, template, extra in (("floor (bm25, 20 hits)", "bm25", {"size": "20"}), ("recall", "recall", {}))}
        timed = bench.measure(calls, list(queries[:200]) * passes, queries[200:])
        for name, row in timed.items():
            print(f"{name:36s} p50 {row['p50']:5.2f} ms")
    finally:
        installing.index_body = rendered
        uninstall(engine, folded)
        uninstall(engine, plain)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
