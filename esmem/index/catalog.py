"""The stored templates and scripts of one installed prefix, one typed call each.

This module and `install` are the only places that know REST paths and request bodies of the
memories index: the domain layer asks for "the recall template with these parameters" or "retire
this memory", never for `POST /x/_msearch/template`. Per-item failures (a failed search of an
`_msearch`, a rejected bulk item) become typed errors here, with the engine's reason kept.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import quote

from esmem.errors import EngineError, InvalidInput, NotFound
from esmem.index.engine import Engine, ndjson, parameter_error
from esmem.index.install import Names, require_installed
from esmem.index.refresh import Checkpoint, refreshes
from esmem.index.scripted import scripted_bulk


@dataclass(frozen=True)
class Search:
    """One call of a stored search template: its stem (`recall`, `recent`, `lookup`, ...), its
    parameters, the namespace it is routed to, and whether the engine explains each hit."""

    template: str
    params: Mapping[str, Any]
    routing: str | None = None
    explain: bool = False


@dataclass(frozen=True)
class ScriptOp:
    """A stored update script (`retire`, `link`, `restate`, `unretire`, `reheat`) run on one memory."""

    namespace: str
    target: str
    script: str
    params: Mapping[str, Any] = field(default_factory=dict)
    retry_on_conflict: int = 8


@dataclass(frozen=True)
class Created:
    """What a bulk create did: ids created, ids that existed already (409), and the engine's reasons
    for the documents it rejected (in input order)."""

    created: list[str]
    existed: set[str]
    errors: list[Any]
    seq_nos: list[int | None] = field(default_factory=list)  # of the creates, where the engine said


# The audit index: when, which selector (digests only), how many; never a memory's text.
# delete-by-query: documents per scroll batch, and per call (50 batches: see Catalog.delete_matching)
DELETE_BATCH = 1000
FORCE_MERGE_SECONDS = 1800.0  # merging 100k memories with their vectors into one segment: minutes on 2 cores
DELETE_CALL = 50 * DELETE_BATCH

AUDIT_INDEX = {
    "settings": {"index": {"number_of_shards": 1, "auto_expand_replicas": "0-1"}},
    "mappings": {"dynamic": "strict", "properties": {
        "at": {"type": "date"}, "action": {"type": "keyword"}, "selector": {"type": "keyword"},
        "values_sha256": {"type": "keyword"}, "namespaces_sha256": {"type": "keyword"},
        "deleted": {"type": "long"}, "remaining": {"type": "long"}, "policy": {"type": "object", "enabled": False}}},
}


class Catalog:
    """Typed calls on an installed prefix. Constructing one does no I/O; `alias` checks the
    installation on first use (`NotInstalled` if `esmem install` has not run)."""

    def __init__(self, engine: Engine, prefix: str):
        self.engine = engine
        self.names = Names(prefix)
        self._alias: str | None = None

    @property
    def alias(self) -> str:
        if self._alias is None:
            self._alias = require_installed(self.engine, self.names.prefix)
        return self._alias

    # -- searches ------------------------------------------------------------------------------
    def _body(self, s: Search) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.names.script(s.template), "params": dict(s.params)}
        if s.explain:
            body["explain"] = True
        return body

    def search(self, s: Search, *, scroll: str | None = None) -> dict[str, Any]:
        """One stored template, through `_search/template`."""
        params = {k: v for k, v in (("routing", s.routing), ("scroll", scroll)) if v}
        resp: dict[str, Any] = self.engine.request("POST", f"/{self.alias}/_search/template", self._body(s),
                                                   params or None)
        return resp

    def msearch(self, searches: Sequence[Search], what: str = "search") -> list[dict[str, Any]]:
        """Several stored templates in one round trip; any failed search raises (`what` names it)."""
        lines: list[Any] = []
        for s in searches:
            lines += [{"routing": s.routing} if s.routing else {}, self._body(s)]
        responses: list[dict[str, Any]] = self.engine.request("POST", f"/{self.alias}/_msearch/template",
                                                              ndjson(lines))["responses"]
        for r in responses:
            if "error" in r:
                raise (parameter_error(what, r.get("status"), r["error"])
                       or EngineError(f"{what} failed: {r['error']}", r.get("status"), r["error"]))
        return responses

    def scroll(self, s: Search, page: int) -> Iterator[dict[str, Any]]:
        """Every page of a stored template's hits (pages of `page`), the scroll cleared at the end."""
        resp = self.search(s, scroll="1m")
        try:
            while True:
                yield resp
                if len(resp["hits"]["hits"]) < page:
                    return
                resp = self.engine.request("POST", "/_search/scroll", {"scroll": "1m", "scroll_id": resp["_scroll_id"]})
        finally:
            self.engine.request("DELETE", "/_search/scroll", {"scroll_id": [resp["_scroll_id"]]})

    # -- documents -----------------------------------------------------------------------------
    def get(self, namespace: str, doc_id: str) -> dict[str, Any] | None:
        """One stored document (`_source`, `_seq_no`, ...) or None. The id is quoted into the path: any
        string names a document, never another endpoint."""
        try:
            resp = self.engine.request("GET", f"/{self.alias}/_doc/{quote(doc_id, safe='')}",
                                       params={"routing": namespace})
        except NotFound:
            return None
        return resp if resp.get("found") else None

    def mget(self, keys: Sequence[tuple[str, str]]) -> dict[str, dict[str, Any]]:
        """The `_source` of the documents that exist among (id, namespace) pairs; a document the engine
        failed to read (refused, a shard down) raises rather than counting as absent."""
        if not keys:
            return {}
        resp = self.engine.request("POST", f"/{self.alias}/_mget", {
            "docs": [{"_id": i, "routing": ns} for i, ns in keys]})
        failed = next((doc for doc in resp["docs"] if "error" in doc), None)
        if failed:
            raise EngineError(f"reading memory {failed['_id']} failed: {failed['error']}")
        return {doc["_id"]: doc["_source"] for doc in resp["docs"] if doc.get("found")}

    def create(self, docs: Sequence[tuple[str, Mapping[str, Any]]], *, refresh: str | None = None) -> Created:
        """Create-if-absent under deterministic ids (one `_bulk`)."""
        actions: list[Any] = []
        for doc_id, d in docs:
            actions += [{"create": {"_index": self.alias, "_id": doc_id, "routing": d["namespace"]}}, d]
        resp = self.engine.bulk(actions, refresh=refresh)
        out = Created([], set(), [])
        for (doc_id, _), item in zip(docs, resp["items"]):
            outcome = item["create"]
            if outcome.get("status") in (200, 201):
                out.created.append(doc_id)
                out.seq_nos.append(outcome.get("_seq_no"))
            elif outcome.get("status") == 409:
                out.existed.add(doc_id)
            else:
                out.errors.append(outcome.get("error"))
        return out

    def delete(self, keys: Sequence[tuple[str, str]]) -> None:
        """Delete (id, namespace) pairs: undoing the creates of a rejected batch."""
        if keys:
            self.engine.bulk([{"delete": {"_index": self.alias, "_id": i, "routing": ns}} for i, ns in keys])

    def run_scripts(self, ops: Sequence[ScriptOp]) -> list[dict[str, Any]]:
        """Stored update scripts in one `_bulk`; the per-item outcomes, in order."""
        if not ops:
            return []
        actions: list[Any] = []
        for op in ops:
            actions += [{"update": {"_index": self.alias, "_id": op.target, "routing": op.namespace,
                                    "retry_on_conflict": op.retry_on_conflict}},
                        {"script": {"id": self.names.script(op.script), "params": dict(op.params)}}]
        # update_by_query where the engine refuses updates under DLS (an agent from `esmem grant`)
        return [item["update"] for item in scripted_bulk(self.engine, actions)["items"]]

    def update_fields(self, updates: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
        """Partial updates (namespace, id, fields) in one `_bulk`; the per-item outcomes, in order."""
        if not updates:
            return []
        actions: list[Any] = []
        for ns, doc_id, fields in updates:
            actions += [{"update": {"_index": self.alias, "_id": doc_id, "routing": ns, "retry_on_conflict": 3}},
                        {"doc": dict(fields)}]
        return [item["update"] for item in self.engine.bulk(actions)["items"]]

    def update_each(self, s: Search, page: int, fields: Callable[[list[dict[str, Any]]], Sequence[Mapping[str, Any]]],
                    progress: Callable[[int, int], None] | None = None) -> int:
        """Partial updates of every hit of a stored template (hits carrying `namespace`), a page at a
        time: `fields` gives each hit of a page its new fields. The pages come from a scroll, a snapshot
        these writes do not move; a failed update stops the pass (EngineError). Returns how many were
        updated, refreshed."""
        done, total = 0, 0
        for resp in self.scroll(s, page):
            hits = resp["hits"]["hits"]
            total = total or int(resp["hits"]["total"]["value"])
            if not hits:
                break
            outcomes = self.update_fields([(h["_source"]["namespace"], h["_id"], f)
                                           for h, f in zip(hits, fields(hits), strict=True)])
            errors = [o["error"] for o in outcomes if o.get("error")]
            if errors:
                raise EngineError(f"updating the hits of {s.template} failed: {errors[0]}")
            done += len(hits)
            if progress:
                progress(done, total)
        self.refresh()
        return done

    def set_fields(self, namespace: str, doc_id: str, changes: Mapping[str, Any]) -> None:
        """A partial update of one memory, refreshed (restore / undo of a merge)."""
        self.engine.request("POST", f"/{self.alias}/_update/{quote(doc_id, safe='')}", {"doc": dict(changes)},
                            {"routing": namespace, "refresh": "true", "retry_on_conflict": 3})

    def refresh(self) -> Checkpoint | None:
        """Make every write acknowledged so far searchable (refreshes shared with the process's other
        callers: esmem/index/refresh.py); the checkpoint read just before the refresh started."""
        return refreshes(self.engine, self.alias)()

    def visible(self) -> Checkpoint | None:
        """Every write numbered up to its `seen` is searchable, as a recent refresh of this process made
        it (None: none recent, or the cluster does not say)."""
        return refreshes(self.engine, self.alias).visible()

    # -- whole-index reads and deletes (export, erase, retention) -------------------------------
    def count_matching(self, query: Mapping[str, Any]) -> int:
        """How many documents match a query now (refreshed first: the proof after a delete)."""
        self.refresh()
        return int(self.engine.request("POST", f"/{self.alias}/_count", {"query": dict(query)})["count"])

    def stream(self, query: Mapping[str, Any], *, page: int = 500, source: Mapping[str, Any] | bool = True,
               after_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Every hit (`_id`, `_source`) matching `query`, read in pages under one point in time (a
        consistent view while others write) with search_after on a unique sort: constant memory.
        Where the engine refuses a point in time (OpenSearch without the privilege), search_after
        alone: documents written meanwhile may or may not be included. On OpenSearch the order is by
        `_id`, and `after_id` starts after that id (`ids_ordered` says whether this engine can)."""
        if after_id is not None and not self.ids_ordered:
            raise InvalidInput(f"{self.engine.info} streams in shard order, not by id: it cannot start after an id")
        pit = self._open_pit()
        opensearch = self.engine.info.family == "opensearch"
        body: dict[str, Any] = {"size": page, "query": dict(query), "_source": source, "track_total_hits": False,
                                "sort": [{"_id": "asc"} if opensearch else {"_shard_doc": "asc"}]}
        after: list[Any] | None = [after_id] if after_id is not None else None
        try:
            while True:
                if after is not None:
                    body["search_after"] = after
                if pit:
                    body["pit"] = {"id": pit, "keep_alive": "2m"}
                    resp = self.engine.request("POST", "/_search", body)
                    pit = resp.get("pit_id") or pit  # Elasticsearch may hand back a new id
                else:
                    resp = self.engine.request("POST", f"/{self.alias}/_search", body)
                hits = resp["hits"]["hits"]
                yield from hits
                if len(hits) < page:
                    return
                after = hits[-1]["sort"]
        finally:
            if pit:
                self._close_pit(pit)

    @property
    def ids_ordered(self) -> bool:
        """Whether `stream` reads in `_id` order (OpenSearch; Elasticsearch refuses to sort on `_id`)."""
        return self.engine.info.family == "opensearch"

    def _open_pit(self) -> str | None:
        try:
            pit: str
            if self.engine.info.family == "opensearch":
                pit = self.engine.request("POST", f"/{self.alias}/_search/point_in_time",
                                          params={"keep_alive": "2m"})["pit_id"]
            else:
                pit = self.engine.request("POST", f"/{self.alias}/_pit", params={"keep_alive": "2m"})["id"]
            return pit
        except EngineError as e:
            if self.engine.info.family == "opensearch" and e.status in (400, 403, 404, 405):
                return None
            raise

    def _close_pit(self, pit: str) -> None:
        if self.engine.info.family == "opensearch":
            self.engine.request("DELETE", "/_search/point_in_time", {"pit_id": [pit]})
        else:
            self.engine.request("DELETE", "/_pit", {"id": pit})

    def delete_matching(self, query: Mapping[str, Any]) -> int:
        """Delete every document matching `query` (delete-by-query, sliced per shard), refreshed;
        how many were deleted. A document another writer changed meanwhile is skipped, not fatal:
        callers count what is left and run it again.

        At most `DELETE_CALL` documents per call: OpenSearch answers a delete-by-query with one
        TASK_RESOURCE_USAGE header per scroll batch, and an HTTP client refuses a response of more
        than 100 headers (Python's http.client does; the client then sends the call again, which
        finds nothing left and reports 0 deleted)."""
        deleted = 0
        while True:
            resp = self.engine.request("POST", f"/{self.alias}/_delete_by_query", {"query": dict(query)}, {
                "slices": "auto", "conflicts": "proceed", "refresh": "true", "wait_for_completion": "true",
                "max_docs": DELETE_CALL, "scroll_size": DELETE_BATCH})
            deleted += int(resp.get("deleted", 0))
            if int(resp.get("deleted", 0)) < DELETE_CALL:
                return deleted

    def audit(self, record: Mapping[str, Any]) -> str:
        """Store one audit record (no memory content) in the prefix's audit index; its id."""
        name = self.names.audit
        try:
            self.engine.request("PUT", f"/{name}", AUDIT_INDEX)
        except EngineError as e:
            if e.status != 400 or "resource_already_exists" not in str(e.body):
                raise
        record_id: str = self.engine.request("POST", f"/{name}/_doc", dict(record), {"refresh": "true"})["_id"]
        return record_id

    def audit_records(self, size: int = 100) -> list[dict[str, Any]]:
        """The newest audit records, newest first (none before the first erase)."""
        try:
            resp = self.engine.request("POST", f"/{self.names.audit}/_search",
                                       {"size": size, "sort": [{"at": "desc"}]})
        except NotFound:
            return []
        return [h["_source"] for h in resp["hits"]["hits"]]

    # -- index statistics (benchmarks) ---------------------------------------------------------
    def store_stats(self, *, force_merge: bool = False) -> dict[str, Any]:
        """The primaries' `docs` and `store` sections, after a refresh (and a merge to one segment)."""
        if force_merge:  # the call returns when the merge is done: it waits longer than any other
            patient = Engine(self.engine.config, timeout=FORCE_MERGE_SECONDS) if self.engine.config else self.engine
            try:
                patient.request("POST", f"/{self.alias}/_forcemerge", params={"max_num_segments": 1})
            finally:
                if patient is not self.engine:
                    patient.close()
        self.refresh()
        primaries: dict[str, Any] = self.engine.request("GET", f"/{self.alias}/_stats/store,docs")["_all"]["primaries"]
        return primaries
