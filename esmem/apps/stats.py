"""Monitoring numbers for one installation (seed 003 §5.3), computed by the engine in one request
(the stored `stats` template, templates/search/stats.mustache.j2).

- hit analysis: which active memories get recalled most, and how many never are (candidates for
  rewording or a lower importance);
- recency of what is used: for each recalled memory, how old it was when last recalled
  (last_accessed_at - valid_from) - all in the first bucket means old memories are never reached;
- merges: memories superseded, memories that replaced others, restatements folded into duplicates;
- counts by kind and status, and by the importance rule that scored them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from esmem.domain.store import MemoryStore
from esmem.errors import InvalidInput
from esmem.index.catalog import Search
from esmem.values import check_namespace


@dataclass(frozen=True)
class MemoryUse:
    """One memory in a hit list: enough to find it (`esmem history`) and judge it."""

    id: str
    namespace: str
    kind: str
    content: str
    access_count: int
    last_accessed_at: str | None
    valid_from: str


@dataclass(frozen=True)
class Stats:
    """Everything `esmem stats` shows; `as_dict()` is JSON-ready."""

    prefix: str
    namespace: str | None
    total: int
    namespaces: int                             # cardinality: approximate above ~3000
    by_status: dict[str, int]
    by_kind: dict[str, dict[str, int]]          # kind -> status -> count
    by_importance_rule: dict[str, int]          # active memories only
    active: int
    recalled: int                               # active memories recalled at least once
    never_recalled: int
    most_recalled: tuple[MemoryUse, ...]
    never_recalled_oldest: tuple[MemoryUse, ...]
    recall_age: dict[str, int]                  # age bucket label (templates/search/stats) -> recalled memories
    superseded: int
    superseding: int                            # memories that replaced at least one other
    restated: int                               # restatements folded into an existing memory

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _use(hit: Mapping[str, Any]) -> MemoryUse:
    src = hit["_source"]
    return MemoryUse(hit["_id"], src["namespace"], src["kind"], src["content"], int(src.get("access_count") or 0),
                     src.get("last_accessed_at"), src["valid_from"])


def collect(store: MemoryStore, namespace: str | None = None, *, top: int = 5) -> Stats:
    """Stats of every memory under the store's prefix, or of one namespace."""
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 100:
        raise InvalidInput(f"top must be an integer in 1..100, got {top!r}")
    params: dict[str, Any] = {"top": top}
    if namespace:
        params["namespace"] = check_namespace(namespace)
    store.flush()  # the store's queued reheat write-backs, then a refresh: they are not refreshed
    store.catalog.refresh()
    resp = store.catalog.search(Search("stats", params, routing=namespace))
    aggs = resp["aggregations"]
    by_status = {b["key"]: b["doc_count"] for b in aggs["by_status"]["buckets"]}
    act = aggs["active"]
    return Stats(
        prefix=store.names.prefix, namespace=namespace, total=sum(by_status.values()),
        namespaces=aggs["namespaces"]["value"], by_status=by_status,
        by_kind={b["key"]: {s["key"]: s["doc_count"] for s in b["status"]["buckets"]}
                 for b in aggs["by_kind"]["buckets"]},
        by_importance_rule={b["key"]: b["doc_count"] for b in act["rules"]["buckets"]},
        active=act["doc_count"], recalled=act["recalled"]["doc_count"], never_recalled=act["never"]["doc_count"],
        most_recalled=tuple(_use(h) for h in act["recalled"]["top"]["hits"]["hits"]),
        never_recalled_oldest=tuple(_use(h) for h in act["never"]["oldest"]["hits"]["hits"]),
        recall_age={b["key"]: b["doc_count"] for b in act["recalled"]["age"]["buckets"]},
        superseded=by_status.get("superseded", 0), superseding=aggs["superseding"]["doc_count"],
        restated=int(aggs["restated"]["value"] or 0))
