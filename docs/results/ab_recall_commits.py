"""A/B of the stored `recall` template of another checkout against this one's, on one 100k bench index.

Reproduces the numbers of docs/concepts/ranking.md, "The rescore window" (2.85 -> 2.52 ms against a
1.78 ms floor):

    git worktree add /tmp/esmem-old fec954e            # the commit before the change
    python docs/results/ab_recall_commits.py $ESMEM_URL /tmp/esmem-old

Builds the bench corpus (100k memories, 100 namespaces) under prefix `abc`, installs this checkout's
artifacts, stores the other checkout's recall template beside it as `abc-recallold`, and times the BM25
floor and both templates on the same queries, interleaved (3 passes, the first unrecorded). Then it
checks that both templates return the same ids and scores. Uninstalls the prefix at the end.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

from esmem.apps.bench import Paths, generate, make_queries
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index.catalog import Search
from esmem.index.engine import Engine
from esmem.index.install import uninstall

P = "abc"


def other_template(url: str, checkout: str) -> dict:
    """The other checkout's rendered recall artifact (run there: its code renders its own files)."""
    code = ("import json\nfrom esmem.index.engine import Engine\n"
            # an older checkout keeps `artifacts` in esmem.index.install
            "try:\n    from esmem.domain.installation import artifacts\n"
            "except ImportError:\n    from esmem.index.install import artifacts\n"
            f"print(json.dumps([a.body for a in artifacts(Engine({url!r}), {P!r}) if a.name == '{P}-recall'][0]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": checkout, "PATH": "/usr/bin"}, cwd="/")
    return json.loads(out.stdout)


def main(url: str, checkout: str) -> None:
    eng = Engine(url)
    corpus = generate(100_000, 100, 0)
    uninstall(eng, P)
    install(eng, P)
    try:
        MemoryStore(eng, P, merge=MergePolicy(enabled=False)).remember_many(corpus.inputs())
        eng.request("PUT", f"/_scripts/{P}-recallold", body=other_template(url, checkout))
        queries = make_queries(corpus, 400, 0)
        cat = Paths(eng, P, 5).catalog

        def call(template: str, q, **extra):
            return cat.search(Search(template, {"namespace": q.namespace, "query": q.text, **extra}, routing=q.namespace))

        calls = {"floor": lambda q: call("bm25", q, size=20), "old": lambda q: call("recallold", q),
                 "new": lambda q: call("recall", q)}
        wall: dict[str, list[float]] = {n: [] for n in calls}
        for rep in range(3):
            for i, q in enumerate(queries):
                names = list(calls)[i % 3:] + list(calls)[:i % 3]
                for n in names:
                    t = time.perf_counter()
                    calls[n](q)
                    if rep:
                        wall[n].append((time.perf_counter() - t) * 1000)
        floor = statistics.median(wall["floor"])
        for n, v in wall.items():
            print(f"{n:5s} p50 {statistics.median(v):.2f} ms  x{statistics.median(v) / floor:.2f}")
        same = sum([(h["_id"], h["_score"]) for h in calls["old"](q)["hits"]["hits"]]
                   == [(h["_id"], h["_score"]) for h in calls["new"](q)["hits"]["hits"]] for q in queries[:100])
        print(f"identical ids and scores: {same} of 100 queries")
    finally:
        uninstall(eng, P)
        eng.request("DELETE", f"/_scripts/{P}-recallold", params={"ignore": "404"})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
