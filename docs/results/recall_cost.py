"""Where the stored recall template's time goes against the BM25 floor, at N memories, interleaved.

Builds the bench corpus under a throwaway prefix (no merge), then times, per query and in rotating order:
the floor (`bm25`, 20 hits), the recall template as any client calls it, the same with `min_importance=1`
(the importance range the default call leaves out: the same hits, every memory holds 1 or more), with `rel_only`
(the relevance query and its filters, no fusion), with `rescore_window=50` (the fusion over 50
hits instead of 100) and with `exhaustive` (every match fused in the query phase, no rescore). Then the
body the engine renders for the default call, taken apart (sent to `_search`; these change the ranking
and only say what each part costs): the relevance query with only the `content` clause, with only the
namespace filter, the rescore's relevance query replaced by `match_all` (the script still runs), the
rescore's script replaced by a constant weight. Prints the p50 client wall time of each and its ratio
to the floor.

    python docs/results/recall_cost.py $ESMEM_URL 100000 3
"""
from __future__ import annotations

import copy
import sys
from typing import Any, Callable

from esmem.apps import bench
from esmem.index.engine import Engine
from esmem.index.install import uninstall


def main(url: str, size: int, passes: int) -> None:
    engine, prefix = Engine(url), "recall-cost"
    try:
        corpus = bench.loaded(engine, prefix, size)

        def call(template: str, extra: dict[str, Any]) -> Callable[[bench.Probe], bench.Timings]:
            return bench.template_call(engine, prefix, template, extra)

        queries = bench.make_queries(corpus, 230, 0)
        rendered = {q: engine.request("POST", "/_render/template", {"id": f"{prefix}-recall", "params": {
            "namespace": q.namespace, "query": q.text}})["template_output"] for q in queries}

        def altered(change: Callable[[dict[str, Any]], None]) -> Callable[[bench.Probe], bench.Timings]:
            bodies = {}
            for q, body in rendered.items():
                bodies[q] = copy.deepcopy(body)
                change(bodies[q])

            def timed(q: bench.Probe) -> bench.Timings:
                engine.request("POST", f"/{prefix}-memories/_search", bodies[q], {"routing": q.namespace})
                return {}
            return timed

        def content_clause_only(body: dict[str, Any]) -> None:
            body.pop("rescore")
            del body["query"]["bool"]["should"][0]["bool"]["should"][1:]

        def namespace_filter_only(body: dict[str, Any]) -> None:
            body.pop("rescore")
            del body["query"]["bool"]["filter"][1:]

        def rescore_match_all(body: dict[str, Any]) -> None:
            body["rescore"]["query"]["rescore_query"]["function_score"]["query"] = {"match_all": {}}

        def rescore_no_script(body: dict[str, Any]) -> None:
            body["rescore"]["query"]["rescore_query"]["function_score"]["functions"] = [{"weight": 1}]

        calls = {"floor (bm25, 20 hits)": call("bm25", {"size": "20"}), "recall": call("recall", {}),
                 "recall, min_importance 1": call("recall", {"min_importance": "1"}),
                 "recall, rel_only": call("recall", {"rel_only": "true"}),
                 "recall, rescore_window 50": call("recall", {"rescore_window": "50"}),
                 "recall, exhaustive": call("recall", {"exhaustive": True}),
                 "rel_only, content clause only": altered(content_clause_only),
                 "rel_only, namespace filter only": altered(namespace_filter_only),
                 "rescore over match_all": altered(rescore_match_all),
                 "rescore without the script": altered(rescore_no_script)}
        timed = bench.measure(calls, list(queries[:200]) * passes, queries[200:])
        floor = timed[next(iter(calls))]["p50"]
        for name, row in timed.items():
            print(f"{name:32s} p50 {row['p50']:5.2f} ms  {row['p50'] / floor:.2f}x the floor")
    finally:
        uninstall(engine, prefix)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
