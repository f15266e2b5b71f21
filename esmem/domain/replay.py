"""Writes seen before: what makes running the same input again converge to one clean run's state.

An id already stored is a replay (its result is the stored one); an id some memory names in
`restated_by` was absorbed as a duplicate; an id some memory names in `superseded_by` is a write cut
after its retires, which resumes. A cut between a retire and its link leaves a one-way link, made
symmetric again when the write is replayed.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from esmem.index.catalog import Catalog, ScriptOp, Search


def restated_search(ids: Sequence[str], namespaces: set[str]) -> Search:
    return Search("restated", {"size": len(ids), "ids": list(ids), "namespaces": sorted(namespaces)})


def restated_in(resp: Mapping[str, Any], ids: Sequence[str]) -> dict[str, str]:
    """Ids of earlier writes that were absorbed as duplicates -> the memory they reinforced."""
    wanted, out = set(ids), {}
    for h in resp["hits"]["hits"]:
        by = h["_source"].get("restated_by") or []
        for i in (by if isinstance(by, list) else [by]):
            if i in wanted:
                out[i] = h["_id"]
    return out


def superseded_by_search(ids: Sequence[str], namespaces: set[str]) -> Search:
    return Search("superseded_by", {"ids": list(ids), "namespaces": sorted(namespaces)})


def superseded_in(resp: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(winner, loser) for every memory retired in favour of one of the searched ids."""
    return [(h["_source"]["superseded_by"], h["_id"]) for h in resp["hits"]["hits"]]


def missing_links(catalog: Catalog, done: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ScriptOp]:
    """The `link` scripts that make the links of memories written before symmetric again (a cut
    between a retire and its link leaves `superseded_by` without the matching `supersedes` entry)."""
    if not done:
        return []
    need: set[tuple[str, str, str]] = set()  # (namespace, winner, loser)
    src_of = dict(done)
    for doc_id, src in done:
        if src.get("superseded_by"):
            need.add((src["namespace"], src["superseded_by"], doc_id))
    catalog.refresh()
    found = catalog.search(superseded_by_search(list(src_of), {src["namespace"] for src in src_of.values()}))
    for winner, loser in superseded_in(found):
        need.add((src_of[winner]["namespace"], winner, loser))
    if not need:
        return []
    winners = sorted({(ns, w) for ns, w, _ in need})
    links = {w: src.get("supersedes") or [] for w, src in catalog.mget([(w, ns) for ns, w in winners]).items()}
    return [ScriptOp(ns, w, "link", {"loser": l}) for ns, w, l in sorted(need) if w in links
            and l not in (links[w] if isinstance(links[w], list) else [links[w]])]
