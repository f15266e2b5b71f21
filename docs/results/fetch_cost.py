"""What fetching a recall's hits costs the engine, without and with vectors in the index.

Builds the bench corpus (N memories, 100 namespaces) twice under throwaway prefixes, lexical and with
MODEL's vectors, each merged to one segment, then asks each index for 40 memories of one namespace
(a term filter, the kNN leg's window) and reports the engine's mean `took`: with the whole `_source`,
with `embedding` left out of it, with no `_source` (the stored fields are still read for `_id`), and
with no stored field at all (ids and scores from the query phase alone). The bytes per memory on disk
say how the vectors are kept: in `_source`, or derived from the vector index (the k-NN plugin's
derived source, on by default for a new index from OpenSearch 3.0).

    python docs/results/fetch_cost.py $ESMEM_URL 10000 minilm-q
"""
from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from typing import Any

from esmem.apps import bench
from esmem.domain.embedding import embed_checked, load_embedder
from esmem.domain.hybrid import spec
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.index.catalog import Catalog
from esmem.index.engine import Engine
from esmem.index.install import uninstall

WAYS: dict[str, dict[str, Any]] = {
    "whole _source": {},
    "_source without embedding": {"_source": {"excludes": ["embedding"]}},
    "no _source": {"_source": False},
    "no stored field": {"stored_fields": "_none_"},
}


def main(url: str, size: int, model: str, rounds: int = 3) -> None:
    engine, embedder = Engine(url), load_embedder(model)
    corpus = bench.generate(size, 100, 0)
    items = corpus.inputs()
    vectors = embed_checked(embedder, [i.text for i in items])
    queries = bench.make_queries(corpus, 200, 0)
    print(f"{engine.info.family} {engine.info.version}, {size} memories in 100 namespaces, 40 hits of one namespace, "
          f"mean engine took over {len(queries)} requests, median of {rounds} rounds")
    built = {"lexical": ("fetch-cost-lex", None, items),
             f"vectors ({model})": ("fetch-cost-vec", spec(embedder), [replace(i, embedding=v) for i, v in zip(items, vectors)])}
    try:
        for label, (prefix, embedding, batch) in built.items():
            uninstall(engine, prefix)
            install(engine, prefix, embedding=embedding)
            bench.ingest(engine, prefix, batch, MergePolicy(enabled=False), lambda n: None)
            stats = bench.store_stats(engine, prefix, force_merge=True)
            print(f"\n{label}: {stats['bytes_per_memory']:.0f} bytes per memory")
            alias = Catalog(engine, prefix).alias
            for way, extra in WAYS.items():
                means = []
                for _ in range(rounds):
                    took = [engine.request("POST", f"/{alias}/_search",
                                           {"size": 40, "query": {"term": {"namespace": q.namespace}}, **extra},
                                           {"routing": q.namespace})["took"] for q in queries]
                    means.append(statistics.fmean(took))
                print(f"  {way:28s} took {statistics.median(means):.2f} ms")
    finally:
        for prefix, _, _ in built.values():
            uninstall(engine, prefix)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
