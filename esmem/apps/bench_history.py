"""`esmem bench --history`: does history slow recall, and what does retention cost on a large index.

Two indexes of the same `size` active memories (bench's synthetic corpus, without restatements: every
memory is active), one of them with `dead` superseded versions per active memory besides. A dead version
is its memory's text with one vocabulary word changed (what a one-slot update leaves behind), so it
matches the same queries: recall filters it out inside the engine. The active documents are the same
in both indexes; only the history differs. Then:

  latency    the recall template (b) and MemoryStore.recall (c) on both indexes, interleaved per query
             in one run (bench's `measure`), and the ratio with history / without, per path;
  retention  on the index with history: the dry run (every due memory streamed, as `esmem retention
             --dry-run` lists them) and the applied run (delete-by-query, sliced, refreshed, counted
             again), timed; active and pinned memories counted before and after.

Dead versions follow each other in time before their active memory: version j of n is valid from
valid_from - (n - j) x 30 days until the next one, so their `invalid_at` spreads over the corpus' two
years and a retention of `retired` days erases the older part of the history.
"""
from __future__ import annotations

import random
import time
from datetime import timedelta
from typing import Any, Callable, Mapping

from esmem.apps.bench import SLOTS, Paths, generate, make_queries, measure_repeated
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.policy import DecayPolicy, Retention
from esmem.domain.store import MemoryStore
from esmem.index.catalog import Catalog
from esmem.index.engine import Engine
from esmem.index.install import uninstall
from esmem.values import iso, parse_time

STEP = timedelta(days=30)  # between two versions of one memory
BATCH = 1000
ACTIVE = {"term": {"status": "active"}}


def _pinned(policy: DecayPolicy) -> dict[str, Any]:
    """What retention exempts: evergreen memories, evergreen kinds, importance at or above recall's floor."""
    return {"bool": {"should": [{"term": {"evergreen": True}}, {"terms": {"kind": list(policy.evergreen_kinds)}},
                                {"range": {"importance": {"gte": policy.params().importance_floor}}}],
                     "minimum_should_match": 1}}


def _count(catalog: Catalog, *clauses: Mapping[str, Any]) -> int:
    return catalog.count_matching({"bool": {"filter": list(clauses)}})


def add_history(catalog: Catalog, dead: int, seed: int, advance: Callable[[int], None]) -> int:
    """`dead` superseded versions before every active memory of the index; how many were written.
    `advance(n)`: n more versions written."""
    rng = random.Random(f"history:{seed}")
    words = sorted({w for values in SLOTS.values() for w in values}, key=len, reverse=True)
    written = 0
    batch: list[tuple[str, dict[str, Any]]] = []

    def flush() -> None:
        nonlocal written
        done = catalog.create(batch)
        if done.errors:
            raise RuntimeError(f"the engine refused a dead version: {done.errors[0]}")
        written += len(done.created)
        advance(len(batch))
        batch.clear()

    for hit in catalog.stream(ACTIVE):
        src = hit["_source"]
        present = [w for w in words if w in src["content"]]
        start = parse_time(src["valid_from"])
        for j in range(dead):
            text = src["content"]
            if present:  # one slot changed: a version the current memory replaced
                old = rng.choice(present)
                text = text.replace(old, rng.choice([w for w in words if w != old]), 1)
            successor = hit["_id"] if j == dead - 1 else f"{hit['_id']}-v{j + 1}"
            batch.append((f"{hit['_id']}-v{j}", {
                **src, "content": text, "status": "superseded", "superseded_by": successor,
                "valid_from": iso(start - (dead - j) * STEP), "invalid_at": iso(start - (dead - j - 1) * STEP),
                "written_as": "add", "access_count": 0}))
            if len(batch) >= BATCH:
                flush()
    if batch:
        flush()
    catalog.refresh()
    return written


def totals(size: int, dead: int, queries: int, repeat: int) -> dict[str, int]:
    """How many steps each stage of `run_history` reports (for progress bars)."""
    return {"ingest": 2 * size, "history": size * dead, "queries": 4 * (repeat * queries + _warm(queries))}


def _warm(queries: int) -> int:
    return max(2, queries // 10)


def run_history(engine: Engine, prefix: str, *, size: int, namespaces: int, queries: int, k: int, seed: int,
                dead: int = 3, repeat: int = 1, retired_days: int = 180, ttl_event_days: int = 365,
                advance: Callable[[str, int], None] = lambda stage, n: None) -> dict[str, Any]:
    """The whole comparison as a JSON-ready report (see the module docstring); `advance(stage, n)`:
    n more steps of a stage done (stages: ingest, history, queries)."""
    corpus = generate(size, namespaces, seed, restate=0.0)
    plain, aged = f"{prefix}-bench-history-0", f"{prefix}-bench-history-{dead}"
    report: dict[str, Any] = {"engine": str(engine.info), "config": {
        "size": size, "namespaces": namespaces, "queries": queries, "k": k, "seed": seed, "dead": dead,
        "repeat": repeat, "retention": {"retired": f"{retired_days}d", "ttl": {"event": f"{ttl_event_days}d"}}}}
    try:
        for p in (plain, aged):
            uninstall(engine, p)
            install(engine, p)
            store = MemoryStore(engine, p, merge=MergePolicy(enabled=False))
            store.remember_many(corpus.inputs(), progress=lambda n: advance("ingest", n))
            store.close()
        catalog = Catalog(engine, aged)
        started = time.perf_counter()
        written = add_history(catalog, dead, seed, lambda n: advance("history", n))
        report["history"] = {"written": written, "seconds": time.perf_counter() - started,
                             "documents": {p: Catalog(engine, p).store_stats()["docs"]["count"] for p in (plain, aged)}}

        without, with_ = Paths(engine, plain, k), Paths(engine, aged, k)
        calls = {"b0": without.template, f"b{dead}": with_.template, "c0": without.recall, f"c{dead}": with_.recall}
        warm = _warm(queries)
        qs = make_queries(corpus, queries + warm, seed)
        paths = measure_repeated(calls, qs[:queries], qs[queries:], repeat, lambda n: advance("queries", n))
        without.store.close()
        with_.store.close()
        report["latency"] = {
            "paths": paths,
            "ratio": {path: {q: paths[f"{path}{dead}"][q] / paths[f"{path}0"][q] for q in ("p50", "p95", "p99")}
                      for path in ("b", "c")}}

        rules = Retention(timedelta(days=retired_days), {}, {"event": timedelta(days=ttl_event_days)})
        policy = DecayPolicy(retention=rules)
        store = MemoryStore(engine, aged)
        pinned = _pinned(policy)
        before = {"active": _count(catalog, ACTIVE), "pinned": _count(catalog, pinned),
                  "active_event": _count(catalog, ACTIVE, {"term": {"kind": "event"}})}
        started = time.perf_counter()
        due = sum(1 for _ in store.retention_due(policy))
        dry = time.perf_counter() - started
        started = time.perf_counter()
        applied = store.apply_retention(policy)
        apply_seconds = time.perf_counter() - started
        after = {"active": _count(catalog, ACTIVE), "pinned": _count(catalog, pinned),
                 "active_event": _count(catalog, ACTIVE, {"term": {"kind": "event"}})}
        report["retention"] = {"documents": written + size, "due": due, "dry_run_seconds": dry,
                               "deleted": applied.deleted, "remaining": applied.remaining,
                               "apply_seconds": apply_seconds, "before": before, "after": after}
        store.close()
        return report
    finally:
        uninstall(engine, plain)
        uninstall(engine, aged)
