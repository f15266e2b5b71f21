"""Erase: delete memories for good (a right-to-erasure request), prove it, and keep an audit record.

`forget` and supersession keep the old text as history; erase removes documents from the index.
A selector names what goes:

- namespaces: every memory of them;
- an entity: every memory that names it as an entity or mentions it in its text (content, the
  neighbour text of conversation turns, applies_to), optionally within namespaces;
- ids: those memories, optionally within namespaces.

Every version linked to a selected memory (supersedes / superseded_by, in both directions) goes with
it: an older version of "Alice lives in Berlin" is the same person's data even when it does not repeat
the name. The delete is refreshed, then the selector is counted again: the proof is that count, 0.
The audit record (the prefix's audit index, outside the memories pattern, so no recall or count
reads it) holds when, which kind of selector, SHA-256 digests of its values, and how many documents
went; never a memory's text.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

from esmem.errors import InvalidInput
from esmem.index.catalog import Catalog
from esmem.values import check_memory_id, check_namespace, iso

_BATCH = 1000  # ids per terms query
_ROUNDS = 3  # delete, count, again: a writer that lands a matching memory meanwhile is caught


@dataclass(frozen=True)
class Erased:
    """What an erase did: the documents it covered, those deleted, and the proof (`remaining`: what
    the selector and the covered ids still match after the refresh; 0 unless a writer raced it)."""

    selector: str
    covered: int
    deleted: int
    remaining: int
    audit_id: str | None = None
    ids: tuple[str, ...] = ()  # the covered ids (listed by a dry run)


def digest(value: str) -> str:
    """How the audit record names a selector value: its SHA-256, so an operator can show that a
    request was carried out without the record holding the name."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def selector_query(namespaces: Sequence[str] = (), entity: str | None = None,
                   ids: Sequence[str] = ()) -> tuple[str, dict[str, Any]]:
    """The selector's kind and the query of the memories it names (before their linked versions)."""
    if entity is not None and ids:
        raise InvalidInput("erase: give an entity or ids, not both")
    filters: list[Any] = []
    if namespaces:
        filters.append({"terms": {"namespace": [check_namespace(ns) for ns in namespaces]}})
    if entity is not None:
        if not isinstance(entity, str) or not entity.strip():
            raise InvalidInput("erase: the entity must be a non-empty string")
        mentions = [{"match_phrase": {field: entity}} for field in ("content", "entities.text", "neighbours",
                                                                    "applies_to")]
        filters.append({"bool": {"should": [{"term": {"entities": entity}}, *mentions], "minimum_should_match": 1}})
        return "entity", {"bool": {"filter": filters}}
    if ids:
        filters.append({"ids": {"values": [check_memory_id(i) for i in ids]}})
        return "ids", {"bool": {"filter": filters}}
    if not namespaces:
        raise InvalidInput("erase: name namespaces, an entity or ids")
    return "namespace", {"bool": {"filter": filters}}


def covered(catalog: Catalog, query: dict[str, Any], namespaces: Sequence[str] = ()) -> set[str]:
    """The ids the query matches, and every version linked to them through the chain fields (within
    `namespaces` when given: a link never takes an erase outside the namespaces it was scoped to)."""
    found: set[str] = set()
    frontier = _links(catalog, query, found)
    scope = [{"terms": {"namespace": list(namespaces)}}] if namespaces else []
    asked: set[str] = set()  # a link out of the scope is never found: ask about each id once
    while frontier:
        asked |= frontier
        batch = sorted(frontier)
        frontier = set()
        for i in range(0, len(batch), _BATCH):
            part = batch[i:i + _BATCH]
            frontier |= _links(catalog, {"bool": {"filter": scope, "should": [
                {"ids": {"values": part}}, {"terms": {"supersedes": part}},
                {"terms": {"superseded_by": part}}], "minimum_should_match": 1}}, found)
        frontier -= asked
    return found


def _links(catalog: Catalog, query: dict[str, Any], found: set[str]) -> set[str]:
    """Add the query's hits to `found`; the ids they link to that are not in it yet."""
    linked: set[str] = set()
    for hit in catalog.stream(query, source={"includes": ["supersedes", "superseded_by"]}):
        found.add(hit["_id"])
        src = hit.get("_source") or {}
        linked |= set(_values(src.get("supersedes"))) | set(_values(src.get("superseded_by")))
    return linked - found


def _values(value: Any) -> Iterable[str]:
    return () if value is None else value if isinstance(value, list) else (value,)


def _by_ids(ids: Sequence[str]) -> dict[str, Any]:
    return {"ids": {"values": list(ids)}}


def _remaining(catalog: Catalog, query: dict[str, Any], ids: Sequence[str]) -> int:
    left = catalog.count_matching(query)
    for i in range(0, len(ids), _BATCH):
        left += catalog.count_matching(_by_ids(ids[i:i + _BATCH]))
    return left


def erase(catalog: Catalog, *, now: datetime, namespaces: Sequence[str] = (), entity: str | None = None,
          ids: Sequence[str] = (), dry_run: bool = False) -> Erased:
    """Delete every memory the selector names and every version linked to them, refreshed; count
    again (the proof) and store the audit record. A dry run only lists what would go."""
    kind, query = selector_query(namespaces, entity, ids)
    catalog.refresh()
    whole = kind == "namespace"  # chains never leave a namespace: the query covers every version
    targets = [] if whole and not dry_run else sorted(covered(catalog, query, namespaces))
    if dry_run:
        return Erased(kind, len(targets), 0, len(targets), ids=tuple(targets))
    deleted = left = 0
    for _ in range(_ROUNDS):
        if whole:
            deleted += catalog.delete_matching(query)
            left = catalog.count_matching(query)
            if not left:
                break
            continue
        for i in range(0, len(targets), _BATCH):
            deleted += catalog.delete_matching(_by_ids(targets[i:i + _BATCH]))
        left = _remaining(catalog, query, targets)
        if not left:
            break
        targets = sorted(set(targets) | covered(catalog, query, namespaces))  # written meanwhile: take it too
    values = [entity] if entity is not None else list(ids) if ids else []
    audit_id = catalog.audit({
        "at": iso(now), "action": "erase", "selector": kind, "values_sha256": sorted(digest(v) for v in values),
        "namespaces_sha256": sorted(digest(ns) for ns in namespaces), "deleted": deleted, "remaining": left})
    return Erased(kind, deleted if whole else len(targets), deleted, left, audit_id)
