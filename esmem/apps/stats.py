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
from typing import Any, Iterable, Mapping

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
    """Stats of one namespace, or of every namespace under the store's prefix (the `stats` template
    confines each call to one namespace: every namespace's numbers are merged here)."""
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 100:
        raise InvalidInput(f"top must be an integer in 1..100, got {top!r}")
    if namespace:
        check_namespace(namespace)
    store.flush()  # the store's queued reheat write-backs, then a refresh: they are not refreshed
    store.catalog.refresh()
    spaces = [namespace] if namespace else sorted(store.recaller.namespaces())
    aggs = [r["aggregations"] for i in range(0, len(spaces), FAN_OUT)
            for r in store.catalog.msearch([Search("stats", {"namespace": ns, "top": top}, routing=ns)
                                            for ns in spaces[i:i + FAN_OUT]], "stats")]
    by_status = _sum(a["by_status"]["buckets"] for a in aggs)
    by_kind: dict[str, dict[str, int]] = {}
    for a in aggs:
        for b in a["by_kind"]["buckets"]:
            into = by_kind.setdefault(b["key"], {})
            for st in b["status"]["buckets"]:
                into[st["key"]] = into.get(st["key"], 0) + st["doc_count"]
    act = [a["active"] for a in aggs]
    recalled = sorted((_use(h) for a in act for h in a["recalled"]["top"]["hits"]["hits"]),
                      key=lambda m: m.last_accessed_at or "", reverse=True)  # then by count: a stable sort
    most = sorted(recalled, key=lambda m: -m.access_count)[:top]
    oldest = sorted((_use(h) for a in act for h in a["never"]["oldest"]["hits"]["hits"]),
                    key=lambda m: m.valid_from)[:top]
    ages: dict[str, int] = {}
    for a in act:
        for b in a["recalled"]["age"]["buckets"]:
            ages[b["key"]] = ages.get(b["key"], 0) + b["doc_count"]
    return Stats(
        prefix=store.names.prefix, namespace=namespace, total=sum(by_status.values()),
        namespaces=sum(1 for a in aggs if a["namespaces"]["value"]), by_status=by_status,
        by_kind={k: dict(sorted(v.items(), key=lambda kv: -kv[1])) for k, v in
                 sorted(by_kind.items(), key=lambda kv: -sum(kv[1].values()))},
        by_importance_rule=_sum(a["rules"]["buckets"] for a in act),
        active=sum(a["doc_count"] for a in act), recalled=sum(a["recalled"]["doc_count"] for a in act),
        never_recalled=sum(a["never"]["doc_count"] for a in act),
        most_recalled=tuple(most), never_recalled_oldest=tuple(oldest),
        recall_age=ages if aggs else {label: 0 for label in AGE_LABELS},
        superseded=by_status.get("superseded", 0), superseding=sum(a["superseding"]["doc_count"] for a in aggs),
        restated=int(sum(a["restated"]["value"] or 0 for a in aggs)))


FAN_OUT = 100  # namespaces per _msearch when stats cover every namespace
AGE_LABELS = ("<1h", "1h-1d", "1d-7d", "7d-30d", "30d-90d", "90d-1y", ">=1y")  # templates/search/stats


def _sum(bucket_lists: Iterable[Iterable[Mapping[str, Any]]]) -> dict[str, int]:
    """Terms buckets of several responses added up, largest first (as one terms aggregation orders them)."""
    out: dict[str, int] = {}
    for buckets in bucket_lists:
        for b in buckets:
            out[b["key"]] = out.get(b["key"], 0) + b["doc_count"]
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))

