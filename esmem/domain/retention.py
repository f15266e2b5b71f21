"""Retention: erase what a policy's [retention] table says has been kept long enough.

Two rules (esmem/domain/policy.py, `Retention`): non-active versions (superseded, forgotten, retired)
go a set time after they were replaced (`invalid_at`), per kind or for every kind; active memories
of a kind with a time to live go that long after `valid_from`. Pinned memories (evergreen, of an
evergreen kind, or importance at or above recall's `importance_floor`) are exempt from both, and a version without
`invalid_at` is kept (when it was replaced is unknown).

The rules are one query, so a dry run lists exactly what the delete removes, and the delete is one
delete-by-query sliced per shard (`slices=auto`): the cost is the matching documents', not the
index's. An applied run is counted again after its refresh (0: the proof) and audited like an erase.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterator, Sequence

from esmem.domain.erase import digest
from esmem.domain.policy import Retention
from esmem.index.catalog import Catalog
from esmem.values import check_namespace, iso

_ROUNDS = 3  # a document a writer changed during the delete is skipped: count and delete again


@dataclass(frozen=True)
class Due:
    """A memory the retention erases, and the rule that names it."""

    id: str
    namespace: str
    kind: str
    status: str
    rule: str  # "retired" | "ttl"


@dataclass(frozen=True)
class Applied:
    deleted: int
    remaining: int
    audit_id: str | None


def due_query(rules: Retention, now: datetime, floor: float, evergreen_kinds: Sequence[str] = (),
              namespaces: Sequence[str] = ()) -> dict[str, Any] | None:
    """The query of every memory the rules erase at `now` (None: they erase nothing)."""
    def before(field: str, keep: Any) -> dict[str, Any]:
        return {"range": {field: {"lt": iso(now - keep)}}}

    retired = {"term": {"status": "active"}}
    rules_clauses: list[Any] = []
    for kind, keep in rules.retired_by_kind.items():
        if keep is not None:
            rules_clauses.append({"bool": {"filter": [{"term": {"kind": kind}}, before("invalid_at", keep)],
                                           "must_not": [retired]}})
    if rules.retired is not None:
        rules_clauses.append({"bool": {"filter": [before("invalid_at", rules.retired)],
                                       "must_not": [retired, {"terms": {"kind": sorted(rules.retired_by_kind)}}]}})
    for kind, ttl in rules.ttl.items():
        rules_clauses.append({"bool": {"filter": [{"term": {"kind": kind}}, retired, before("valid_from", ttl)]}})
    if not rules_clauses:
        return None
    filters: list[Any] = [{"bool": {"should": rules_clauses, "minimum_should_match": 1}}]
    if namespaces:
        filters.append({"terms": {"namespace": [check_namespace(ns) for ns in namespaces]}})
    pinned = [{"term": {"evergreen": True}}, {"range": {"importance": {"gte": floor}}},
              {"terms": {"kind": list(evergreen_kinds)}}]
    return {"bool": {"filter": filters, "must_not": pinned}}


def due(catalog: Catalog, rules: Retention, now: datetime, floor: float, evergreen_kinds: Sequence[str] = (),
        namespaces: Sequence[str] = ()) -> Iterator[Due]:
    """What an applied run would erase now (the dry run), streamed."""
    query = due_query(rules, now, floor, evergreen_kinds, namespaces)
    if query is None:
        return
    catalog.refresh()
    for hit in catalog.stream(query, source={"includes": ["namespace", "kind", "status"]}):
        src = hit["_source"]
        yield Due(hit["_id"], src["namespace"], src["kind"], src["status"],
                  "ttl" if src["status"] == "active" else "retired")


def apply(catalog: Catalog, rules: Retention, now: datetime, floor: float, evergreen_kinds: Sequence[str] = (),
          namespaces: Sequence[str] = ()) -> Applied:
    """Erase what the rules name (delete-by-query, refreshed), count again, and audit the run."""
    query = due_query(rules, now, floor, evergreen_kinds, namespaces)
    if query is None:
        return Applied(0, 0, None)
    deleted = left = 0
    for _ in range(_ROUNDS):
        deleted += catalog.delete_matching(query)
        left = catalog.count_matching(query)
        if not left:
            break
    audit_id = catalog.audit({"at": iso(now), "action": "retention", "selector": "policy", "values_sha256": [],
                              "namespaces_sha256": sorted(digest(ns) for ns in namespaces), "deleted": deleted,
                              "remaining": left, "policy": rules.as_dict()})
    return Applied(deleted, left, audit_id)
