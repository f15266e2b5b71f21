"""Every request body lives in a file: over a library run (install, writes with merge, recall with
explain and recent-N, context, stats, count, history/restore, evaluation with both baselines, one
round of every benchmark path, uninstall) a recording transport sees no inline query DSL and no
inline Painless - only stored-template ids, by-id calls and stored-script updates."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from esmem.apps import bench
from esmem.apps.context import build_context
from esmem.apps.evaluate import Evaluation, RunConfig, load_dataset
from esmem.apps.stats import collect
from esmem.domain.installation import install
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.index.engine import Engine
from esmem.index.install import uninstall

pytestmark = pytest.mark.plain_http  # talks to the engine itself (urllib, curl, node or a recording transport)

RULES = Path(__file__).resolve().parent.parent / "datasets" / "rules.jsonl"
NOW = datetime(2026, 10, 8, 12, tzinfo=timezone.utc)
SEARCHES = ("/_search", "/_msearch", "/_count", "/_search/template", "/_msearch/template", "/_search/scroll",
            "/_update_by_query", "/_delete_by_query", "/_explain")
TEMPLATE_CALL = {"id", "params", "explain"}


def _inline_scripts(obj: Any) -> list[Any]:
    """Every `script` object with a `source` (inline Painless) anywhere in a body."""
    found = []
    if isinstance(obj, dict):
        script = obj.get("script")
        if isinstance(script, dict) and "source" in script:
            found.append(script)
        for v in obj.values():
            found += _inline_scripts(v)
    elif isinstance(obj, list):
        for v in obj:
            found += _inline_scripts(v)
    return found


def violations(calls: list[tuple[str, str, Any, Any]]) -> list[str]:
    bad = []
    for method, path, body, _ in calls:
        bare = path.split("?")[0]
        lines = [json.loads(x) for x in body.splitlines() if x.strip()] if isinstance(body, (str, bytes)) else [body]
        if bare.startswith("/_scripts/"):
            continue  # install's stored-script updates
        if any(bare.endswith(s) for s in SEARCHES):
            if bare.endswith(("/_search/template", "/_msearch/template")):
                bodies = lines[1::2] if bare.endswith("/_msearch/template") else lines
                bad += [f"{method} {bare}: not a template call {b}" for b in bodies
                        if not isinstance(b, dict) or "id" not in b or set(b) - TEMPLATE_CALL]
            elif bare.endswith("/_search/scroll"):
                bad += [f"{method} {bare}: {b}" for b in lines if b and set(b) - {"scroll", "scroll_id"}]
            else:
                bad.append(f"{method} {bare}: inline search {lines}")
        for line in lines:
            bad += [f"{method} {bare}: inline script {s}" for s in _inline_scripts(line)]
    return bad


@pytest.mark.slow
def test_a_library_run_sends_no_inline_query_dsl(engine_url: str, prefix: str) -> None:
    calls: list[tuple[str, str, Any, Any]] = []
    engine = Engine(engine_url, recorder=lambda m, p, b, q: calls.append((m, p, b, q)))
    try:
        install(engine, prefix)
        store = MemoryStore(engine, prefix, clock=lambda: NOW)
        first = store.remember("接口返回 HTTP 429 时固定等 1 秒再重试 3 次", "rec", kind="rule",
                               valid_from="2026-09-01T00:00:00Z")
        res = store.remember("接口返回 HTTP 429 时按指数退避加 jitter 再重试 5 次", "rec", kind="rule", supersedes=first.id)
        assert res.action == "superseded"
        store.remember_many([MemoryInput("prefers green tea over coffee", "rec", kind="preference"),
                             MemoryInput("allergic to penicillin", "rec", kind="fact", importance=10),
                             MemoryInput("prefers green tea over coffee", "rec", kind="preference")])
        result = store.recall("429 怎么重试", "rec", 3, params=RecallParams(recent_n=2), explain=True)
        assert result.items and result.recent
        store.recall("green tea", "rec", 2)  # installed defaults, reheat write-back
        build_context(store, result)
        assert collect(store, "rec").active == store.count("rec") == 3
        collect(store)
        store.history("rec", res.id)
        store.restore("rec", res.superseded[0])
        evaluation = Evaluation(engine, load_dataset(RULES), f"{prefix}-ev")
        try:
            for baseline in (None, "recency", "bm25"):
                assert evaluation.run(RunConfig(k=3, baseline=baseline))
        finally:
            evaluation.close()
        corpus = bench.generate(200, 3, 1, now=NOW)
        bench.ingest(engine, prefix, corpus.inputs(), store.merge.__class__(enabled=False), lambda n: None)
        paths = bench.Paths(engine, prefix, 5)
        for q in bench.make_queries(corpus, 2, 1):
            for call in paths.calls().values():
                call(q)
    finally:
        uninstall(engine, prefix)
        engine.close()
    searches = [c for c in calls if any(c[1].split("?")[0].endswith(s) for s in SEARCHES)]
    assert len(searches) > 50  # the run really searched
    assert {c[1].split("?")[0].rsplit("/", 2)[-2] + "/" + c[1].rsplit("/", 1)[-1] for c in searches} >= {
        "_search/template", "_msearch/template"}
    assert violations(calls) == []


def test_the_checker_catches_inline_dsl_and_painless() -> None:
    assert violations([("POST", "/x/_search", {"query": {"match_all": {}}}, None)])
    assert violations([("POST", "/x/_count", {"query": {"match_all": {}}}, None)])
    assert violations([("POST", "/x/_search/template", {"source": "{}", "params": {}}, None)])
    assert violations([("POST", "/x/_msearch/template", '{}\n{"source": "{}"}\n', None)])
    assert violations([("POST", "/_bulk", '{"update": {"_id": "a"}}\n{"script": {"source": "ctx._source.a = 1"}}\n',
                        None)])
    assert not violations([("POST", "/x/_search/template", {"id": "p-recall", "params": {"namespace": "n"}}, None),
                           ("POST", "/_bulk", '{"update": {"_id": "a"}}\n{"script": {"id": "p-reheat"}}\n', None),
                           ("PUT", "/_scripts/p-fuse", {"script": {"lang": "painless", "source": "return 1;"}}, None)])
