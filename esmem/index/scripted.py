"""Stored update scripts that also run for an agent confined by document-level security.

The OpenSearch security plugin refuses every partial update (`_update`, a bulk `update`) from a user
whose role carries a DLS query ("Update is not supported when FLS or DLS ... is activated"), so an
agent made by `esmem grant` could neither reheat what it recalls nor supersede an old memory.
`_update_by_query` is allowed, and it keeps the write protocol's guarantees:

- it runs the same stored Painless script (retire, link, restate, unretire, reheat) in the engine;
- its search is filtered by the DLS query, so it can only change memories the agent can read;
- it writes each document back with the sequence number and primary term it read (compare-and-set):
  a document changed in between is a version conflict, never a lost update; we re-read and retry,
  as `retry_on_conflict` does for `_update`.

Its search sees the index as of the last refresh, so each operation refreshes first, and a `noop`
(the script found nothing to do) counts only when the document's sequence number was the same
before and after it, i.e. the script looked at the current version. `scripted_bulk` tries the bulk
`update` first and switches to this path for an engine once the engine refused it for DLS; it
returns bulk-shaped items either way, so the write protocol keeps one code path.
"""
from __future__ import annotations

import weakref
from typing import Any, Sequence

from esmem.index.engine import Engine
from esmem.errors import EngineError, NotFound

DLS_REFUSAL = "Update is not supported when FLS or DLS"

_by_query_engines: weakref.WeakSet[Engine] = weakref.WeakSet()  # engines that refused `update` for DLS


def scripted_bulk(engine: Engine, actions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`_bulk` of scripted `update` actions (action line, {"script": ...} line pairs); the response's
    items have the bulk shape whichever way the engine ran them."""
    if engine not in _by_query_engines:
        try:
            return engine.bulk(actions)
        except EngineError as e:
            if DLS_REFUSAL not in str(e):
                raise
            _by_query_engines.add(engine)
    items = [update_by_query(engine, meta["update"], body["script"]) for meta, body in zip(actions[::2], actions[1::2])]
    return {"errors": any("error" in it["update"] for it in items), "items": items}


def _seq(engine: Engine, index: str, doc_id: str, routing: str | None) -> tuple[int, int] | None:
    try:
        got = engine.request("GET", f"/{index}/_doc/{doc_id}", params={"routing": routing} if routing else None)
    except NotFound:
        return None
    return (got["_seq_no"], got["_primary_term"]) if got.get("found") else None


def update_by_query(engine: Engine, meta: dict[str, Any], script: dict[str, Any]) -> dict[str, Any]:
    """One scripted update of one document through `_update_by_query`, as a bulk `update` item."""
    index, doc_id, routing = meta["_index"], meta["_id"], meta.get("routing")
    item = {"_index": index, "_id": doc_id}
    for _ in range(int(meta.get("retry_on_conflict", 0)) + 1):
        engine.request("POST", f"/{index}/_refresh")
        before = _seq(engine, index, doc_id, routing)
        if before is None:
            return {"update": {**item, "status": 404, "error": {
                "type": "document_missing_exception", "reason": f"[{doc_id}]: document missing"}}}
        resp = engine.request("POST", f"/{index}/_update_by_query",
                              {"query": {"ids": {"values": [doc_id]}}, "script": script},
                              {"routing": routing, "conflicts": "proceed"} if routing else {"conflicts": "proceed"})
        if resp.get("failures"):
            return {"update": {**item, "status": 500, "error": resp["failures"][0]}}
        if resp.get("updated"):
            return {"update": {**item, "status": 200, "result": "updated"}}
        if resp.get("noops"):
            engine.request("POST", f"/{index}/_refresh")
            if _seq(engine, index, doc_id, routing) == before:  # the script saw the current version
                return {"update": {**item, "status": 200, "result": "noop"}}
        # a version conflict, or the document changed around the search: read it again
    return {"update": {**item, "status": 409, "error": {
        "type": "version_conflict_engine_exception", "reason": f"[{doc_id}]: changed by another writer every time"}}}
