"""MemoryStore: the write path and the read path over one installed prefix.

Write: validate -> score importance -> lookup + merge decision -> index (optimistic concurrency on
the memories it supersedes). Read: template params -> one `_msearch/template` call (candidates,
recent-N, per-term explanation) -> MMR -> recent-N -> reheat write-back.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import ranking
from .analysis import token_set, truncate_query
from .engine import Engine
from .errors import EngineError, InvalidInput, NotFound, VersionConflict
from .importance import Scorer, rule_scorer, score_batch
from .install import Names, installed_policy, require_installed
from .merge import Candidate, Decision, MergePolicy, decide, overlap
from .merge import jaccard as text_jaccard
from .mmr import cosine, jaccard, mmr
from .ranking import KINDS, RecallParams, epoch_ms, iso, parse_time, utcnow

NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
SOURCES = ("user", "agent", "tool")
MAX_K = 1000
MAX_QUERY_TERMS = 200  # the recall query repeats the terms in 4 clauses; the engine allows 1024 in all
POLICY_TTL = 5.0  # seconds a store keeps its copy of the installed ranking policy


# -- value types -------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryInput:
    """One memory to write; everything but content has a default."""

    content: str | bytes
    namespace: str = "default"
    kind: str = "fact"
    importance: float | None = None
    valid_from: str | datetime | None = None
    entities: Sequence[str] = ()
    source: str = "user"
    evergreen: bool = False
    metadata: Mapping[str, Any] | None = None
    external_id: str | None = None
    embedding: Sequence[float] | None = None
    supersedes: str | None = None  # the caller knows this replaces a memory: skip the lookup


@dataclass(frozen=True)
class Memory:
    id: str
    namespace: str
    content: str
    kind: str
    importance: float
    valid_from: datetime
    status: str
    recorded_at: datetime | None = None
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    supersedes: tuple[str, ...] = ()
    access_count: int = 0
    last_accessed_at: datetime | None = None
    entities: tuple[str, ...] = ()
    source: str = "user"
    evergreen: bool = False
    external_id: str | None = None
    importance_rule: str | None = None
    metadata: Mapping[str, Any] | None = None

    @classmethod
    def from_hit(cls, doc_id: str, src: Mapping[str, Any]) -> "Memory":
        def t(key: str) -> datetime | None:
            return parse_time(src[key]) if src.get(key) is not None else None

        sup = src.get("supersedes") or []
        return cls(id=doc_id, namespace=src["namespace"], content=src["content"], kind=src["kind"],
                   importance=float(src["importance"]), valid_from=parse_time(src["valid_from"]),
                   status=src["status"], recorded_at=t("recorded_at"), invalid_at=t("invalid_at"),
                   superseded_by=src.get("superseded_by"),
                   supersedes=tuple(sup) if isinstance(sup, list) else (sup,),
                   access_count=int(src.get("access_count") or 0), last_accessed_at=t("last_accessed_at"),
                   entities=tuple(src.get("entities") or ()), source=src.get("source", "user"),
                   evergreen=bool(src.get("evergreen")), external_id=src.get("external_id"),
                   importance_rule=src.get("importance_rule"), metadata=src.get("metadata"))


@dataclass(frozen=True)
class WriteResult:
    """What `remember` did: `added`, `superseded` (ids it replaced), `duplicate` (of id) or
    `outdated` (stored as history: a newer active memory on the same topic exists)."""

    action: str
    id: str
    superseded: tuple[str, ...] = ()
    duplicate_of: str | None = None
    outdated_by: str | None = None
    scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    dry_run: bool = False


@dataclass(frozen=True)
class Recalled:
    """A recalled memory with its final score and the components that made it."""

    memory: Memory
    score: float
    rel: float
    recency: float
    importance_part: float  # multiply: the factor (1 + c*imp); weighted: gamma*(imp-1)/9; blend: 0
    reheat: float
    mmr_penalty: float = 0.0
    rank_before_mmr: int = 0
    terms: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RecallResult:
    query: str
    namespace: str
    now: datetime
    params: RecallParams
    items: tuple[Recalled, ...]
    recent: tuple[Memory, ...] = ()
    took_ms: float = 0.0
    engine_took_ms: float = 0.0


# -- validation --------------------------------------------------------------------------------
def check_namespace(namespace: Any) -> str:
    if not isinstance(namespace, str) or not NAMESPACE_RE.match(namespace):
        raise InvalidInput(f"invalid namespace {namespace!r}: 1-128 characters from A-Z a-z 0-9 _ . : @ -, "
                           "starting with a letter or digit")
    return namespace


def _check_content(content: Any, max_bytes: int) -> str:
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidInput(f"content is not valid UTF-8 (byte {e.start})") from None
    if not isinstance(content, str):
        raise InvalidInput(f"content must be text, got {type(content).__name__}")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput("content is not valid UTF-8 (lone surrogate)") from None
    if not content.strip():
        raise InvalidInput("content is empty")
    if size > max_bytes:
        raise InvalidInput(f"content is {size} bytes, over the {max_bytes}-byte cap")
    return content.strip()


class MemoryStore:
    """Memories of every namespace under one installed prefix."""

    def __init__(self, engine: Engine, prefix: str = "esmem", *, params: RecallParams | None = None,
                 merge: MergePolicy | None = None, scorer: Scorer = rule_scorer,
                 max_content_bytes: int = 64 * 1024, max_future: timedelta = timedelta(days=1),
                 clock: Callable[[], datetime] = utcnow):
        self.engine = engine
        self.names = Names(prefix)
        self.alias = require_installed(engine, prefix)
        self.params = params  # None: the ranking policy installed in the cluster
        self._installed: tuple[float, RecallParams] | None = None
        self.merge = merge or MergePolicy()
        self.scorer = scorer
        self.max_content_bytes = max_content_bytes
        self.max_future = max_future
        self.clock = clock

    # -- write path ----------------------------------------------------------------------------
    def _doc(self, item: MemoryInput, now: datetime) -> dict[str, Any]:
        """Validate one input into an index document (importance filled in later if missing)."""
        content = _check_content(item.content, self.max_content_bytes)
        check_namespace(item.namespace)
        if item.kind not in KINDS:
            raise InvalidInput(f"unknown kind {item.kind!r} (known: {', '.join(KINDS)})")
        if item.source not in SOURCES:
            raise InvalidInput(f"unknown source {item.source!r} (known: {', '.join(SOURCES)})")
        if item.importance is not None and (isinstance(item.importance, bool)
                                            or not isinstance(item.importance, (int, float))
                                            or not 1 <= item.importance <= 10):
            raise InvalidInput(f"importance must be a number in 1..10, got {item.importance!r}")
        valid_from = parse_time(item.valid_from) if item.valid_from is not None else now
        if valid_from > now + self.max_future:
            raise InvalidInput(f"valid_from {iso(valid_from)} is in the future (more than {self.max_future} ahead)")
        entities = [str(e) for e in item.entities]
        if len(entities) > 64 or any(not e.strip() or len(e) > 256 for e in entities):
            raise InvalidInput("entities: at most 64 non-empty strings of at most 256 characters")
        doc: dict[str, Any] = {
            "namespace": item.namespace, "content": content, "kind": item.kind,
            "importance": None if item.importance is None else float(item.importance),
            "importance_rule": None if item.importance is None else "given",
            "valid_from": iso(valid_from), "recorded_at": iso(now), "anchor_at": epoch_ms(valid_from),
            "status": "active", "access_count": 0, "restated_count": 0, "entities": entities,
            "source": item.source, "evergreen": bool(item.evergreen),
        }
        if item.metadata is not None:
            try:
                json.dumps(item.metadata)
            except (TypeError, ValueError):
                raise InvalidInput("metadata must be JSON-serialisable") from None
            doc["metadata"] = dict(item.metadata)
        if item.external_id is not None:
            doc["external_id"] = str(item.external_id)
        if item.embedding is not None:
            doc["embedding"] = [float(x) for x in item.embedding]
        if item.supersedes is not None:
            doc["supersedes"] = [str(item.supersedes)]
        return doc

    def _prepare(self, items: Sequence[MemoryInput]) -> list[dict[str, Any]]:
        """Validate everything and score importance before anything is written."""
        now = self.clock()
        docs = []
        for i, item in enumerate(items):
            try:
                docs.append(self._doc(item, now))
            except (InvalidInput, TypeError, ValueError) as e:
                raise InvalidInput(f"memory #{i + 1}: {e}" if len(items) > 1 else str(e)) from None
        todo = [d for d in docs if d["importance"] is None]
        if todo:
            for d, (score, rule) in zip(todo, score_batch(self.scorer, [d["content"] for d in todo])):
                d["importance"], d["importance_rule"] = score, rule
        return docs

    def _lookup_body(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        return {"id": self.names.script("lookup"), "params": {
            "namespace": doc["namespace"], "query": truncate_query(doc["content"], MAX_QUERY_TERMS),
            "size": self.merge.candidates, "kinds": [doc["kind"]]}}

    @staticmethod
    def _candidates(resp: Mapping[str, Any], exclude: str | None = None) -> list[Candidate]:
        return [Candidate(h["_id"], h["_score"], h["_source"], h["_seq_no"], h["_primary_term"])
                for h in resp["hits"]["hits"] if h["_id"] != exclude]

    def _lookup(self, doc: Mapping[str, Any], exclude: str | None = None) -> list[Candidate]:
        resp = self.engine.request("POST", f"/{self.alias}/_search/template", self._lookup_body(doc),
                                   {"routing": doc["namespace"]})
        return self._candidates(resp, exclude)

    def remember(self, content: str | bytes, namespace: str = "default", *, dry_run: bool = False,
                 **fields: Any) -> WriteResult:
        """Write one memory through the merge decision; `dry_run` decides without writing."""
        return self.remember_many([MemoryInput(content, namespace, **fields)], dry_run=dry_run)[0]

    def remember_many(self, items: Sequence[MemoryInput], *, dry_run: bool = False,
                      batch_size: int = 200, progress: Callable[[int], None] | None = None) -> list[WriteResult]:
        """Write memories in order; look-ups are batched with `_msearch`, writes with `_bulk`.

        Merge decisions follow input order: when an item could merge with an earlier item of the
        same batch, the batch is cut there so the earlier one is searchable first."""
        docs = self._prepare(items)
        for d in docs:
            if d.get("supersedes"):
                self._explicit(d)  # an unknown predecessor fails before anything is written
        results: list[WriteResult] = []
        start = 0
        while start < len(docs):
            done = self._write_batch(docs[start:self._batch_end(docs, start, batch_size)], dry_run)
            results.extend(done)
            if progress:
                progress(len(done))
            start += len(done)
        if not self.merge.enabled and not dry_run:
            self.engine.request("POST", f"/{self.alias}/_refresh")  # one refresh, not one per batch
        return results

    def _batch_end(self, docs: Sequence[Mapping[str, Any]], start: int, batch_size: int) -> int:
        if not self.merge.enabled:
            return min(len(docs), start + batch_size)
        seen: dict[tuple[str, str], list[str]] = defaultdict(list)
        end = start
        while end < len(docs) and end - start < batch_size:
            d = docs[end]
            key = (d["namespace"], d["kind"])
            same = (text_jaccard, self.merge.dup_overlap) if d["kind"] in self.merge.never_supersede \
                else (overlap, self.merge.min_overlap)
            if end > start and any(same[0](d["content"], prev) >= same[1] for prev in seen[key]):
                break
            seen[key].append(d["content"])
            end += 1
        return end

    def _write_batch(self, batch: list[dict[str, Any]], dry_run: bool) -> list[WriteResult]:
        """Decide and write a batch, or the head of it: results for the memories it wrote."""
        if self.merge.enabled:
            lines: list[Any] = []
            for d in batch:
                lines += [{"routing": d["namespace"]}, self._lookup_body(d)]
            payload = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
            resp = self.engine.request("POST", f"/{self.alias}/_msearch/template", payload)
            decisions = []
            for r in resp["responses"]:
                if "error" in r:
                    raise EngineError(f"merge lookup failed: {r['error']}")
                decisions.append(decide_for(r, batch[len(decisions)], self.merge))
        else:
            decisions = [Decision("add") for _ in batch]
        decisions = [self._explicit(d) if d.get("supersedes") else dec for d, dec in zip(batch, decisions)]
        targeted: set[str] = set()
        for pos, dec in enumerate(decisions):  # two updates of one memory in a bulk: the second would 409
            ids_ = {t.id for t in dec.targets}
            if pos and ids_ & targeted:
                batch, decisions = batch[:pos], decisions[:pos]
                break
            targeted |= ids_
        ids = [uuid.uuid4().hex for _ in batch]
        if dry_run:
            return [self._result(i, d, dry_run=True) for i, d in zip(ids, decisions)]
        actions: list[Any] = []
        owners: list[tuple[int, str | None]] = []  # per bulk item: (batch position, target id of an update)
        for pos, (doc_id, d, dec) in enumerate(zip(ids, batch, decisions)):
            if dec.action == "supersede":
                d["supersedes"] = [t.id for t in dec.targets]
            if dec.action == "outdated":
                d.update(status="superseded", superseded_by=dec.targets[0].id,
                         invalid_at=dec.targets[0].source["valid_from"])
            if dec.action != "duplicate":
                actions += [{"create": {"_index": self.alias, "_id": doc_id, "routing": d["namespace"]}}, d]
                owners.append((pos, None))
            for t in (dec.targets if dec.action != "outdated" else ()):
                actions += [{"update": {"_index": self.alias, "_id": t.id, "routing": d["namespace"],
                                        "if_seq_no": t.seq_no, "if_primary_term": t.primary_term}},
                            {"doc": self._target_update(dec.action, t, doc_id, d)}]
                owners.append((pos, t.id))
        # with merge the next lookup must see this batch now; without, remember_many refreshes once
        resp = self.engine.bulk(actions, refresh="true" if self.merge.enabled else None) if actions else {"items": []}
        failed: dict[int, set[str]] = defaultdict(set)
        for (pos, target), item in zip(owners, resp["items"]):
            outcome = next(iter(item.values()))
            if outcome.get("status") == 409 and target is not None:
                failed[pos].add(target)
            elif outcome.get("error"):
                raise EngineError(f"bulk write failed: {outcome['error']}")
        results = [self._resolve_conflict(doc_id, d, dec, failed[pos]) if pos in failed else self._result(doc_id, dec)
                   for pos, (doc_id, d, dec) in enumerate(zip(ids, batch, decisions))]
        for r, d in zip(results, batch):
            if r.action == "outdated":
                self._link(d["namespace"], r.outdated_by, r.id)
        if self.merge.enabled:
            self._settle([(r.id, d) for r, d in zip(results, batch) if r.action in ("added", "superseded")])
        return results

    def _settle(self, written: list[tuple[str, dict[str, Any]]]) -> None:
        """Concurrent writers can each add the same topic before seeing the other's write. Look
        again now that the writes are searchable: of two active same-topic memories the newer by
        (valid_from, recorded_at, id) supersedes the other, the same choice every writer makes."""
        if not written:
            return
        lines: list[Any] = []
        for _, d in written:
            lines += [{"routing": d["namespace"]}, self._lookup_body(d)]
        payload = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
        resp = self.engine.request("POST", f"/{self.alias}/_msearch/template", payload)
        for (doc_id, d), r in zip(written, resp["responses"]):
            if "error" in r:
                raise EngineError(f"merge lookup failed: {r['error']}")
            twins = decide(d["content"], d["kind"], self._candidates(r, exclude=doc_id), self.merge).targets
            for twin in twins:
                mine = (d["valid_from"], d["recorded_at"], doc_id)
                theirs = (twin.source["valid_from"], twin.source.get("recorded_at", ""), twin.id)
                winner, loser = (doc_id, twin.id) if mine > theirs else (twin.id, doc_id)
                self._retire(d["namespace"], loser, winner)

    def _retire(self, namespace: str, loser: str, winner: str, attempts: int = 8) -> None:
        """Mark `loser` superseded by `winner` (compare-and-set) and link it from the winner."""
        for _ in range(attempts):
            got = self.engine.request("GET", f"/{self.alias}/_doc/{loser}", params={"routing": namespace})
            win = self.engine.request("GET", f"/{self.alias}/_doc/{winner}", params={"routing": namespace})
            if got["_source"]["status"] != "active" or win["_source"]["status"] != "active":
                return  # another writer settled it already
            try:
                self.engine.request("POST", f"/{self.alias}/_update/{loser}", {"doc": {
                    "status": "superseded", "superseded_by": winner, "invalid_at": win["_source"]["valid_from"]}},
                    {"routing": namespace, "if_seq_no": got["_seq_no"], "if_primary_term": got["_primary_term"],
                     "refresh": "true"})
            except VersionConflict:
                continue
            self._link(namespace, winner, loser)
            return
        raise EngineError(f"gave up settling {loser} -> {winner} after {attempts} concurrent conflicts")

    def _link(self, namespace: str, winner: str, loser: str, attempts: int = 8) -> None:
        """Append `loser` to the winner's `supersedes` (compare-and-set, so no link is lost)."""
        for _ in range(attempts):
            win = self.engine.request("GET", f"/{self.alias}/_doc/{winner}", params={"routing": namespace})
            linked = win["_source"].get("supersedes") or []
            if loser in linked:
                return
            try:
                self.engine.request("POST", f"/{self.alias}/_update/{winner}", {"doc": {"supersedes": [*linked, loser]}},
                                    {"routing": namespace, "if_seq_no": win["_seq_no"],
                                     "if_primary_term": win["_primary_term"], "refresh": "true"})
                return
            except VersionConflict:
                continue
        raise EngineError(f"gave up linking {loser} from {winner} after {attempts} concurrent conflicts")

    def _explicit(self, doc: Mapping[str, Any]) -> Decision:
        """A caller-named predecessor: it must be an active memory of the same namespace."""
        target = doc["supersedes"][0]
        try:
            got = self.engine.request("GET", f"/{self.alias}/_doc/{target}", params={"routing": doc["namespace"]})
        except NotFound:
            got = {"found": False}
        if not got.get("found") or got["_source"]["namespace"] != doc["namespace"] \
                or got["_source"]["status"] != "active":
            raise InvalidInput(f"supersedes={target!r}: no active memory with that id in {doc['namespace']!r}")
        return Decision("supersede", (Candidate(target, 0.0, got["_source"], got["_seq_no"], got["_primary_term"]),))

    @staticmethod
    def _target_update(action: str, target: Candidate, new_id: str, doc: Mapping[str, Any]) -> dict[str, Any]:
        if action == "duplicate":
            src = target.source
            return {"importance": max(float(src["importance"]), doc["importance"]),
                    "restated_count": int(src.get("restated_count") or 0) + 1,
                    "anchor_at": max(int(src.get("anchor_at") or 0), doc["anchor_at"])}
        return {"status": "superseded", "superseded_by": new_id, "invalid_at": doc["valid_from"]}

    @staticmethod
    def _result(doc_id: str, dec: Decision, dry_run: bool = False) -> WriteResult:
        if dec.action == "duplicate":
            return WriteResult("duplicate", dec.targets[0].id, duplicate_of=dec.targets[0].id,
                               scores=dec.scores, dry_run=dry_run)
        if dec.action == "supersede":
            return WriteResult("superseded", doc_id, tuple(t.id for t in dec.targets), scores=dec.scores,
                               dry_run=dry_run)
        if dec.action == "outdated":
            return WriteResult("outdated", doc_id, outdated_by=dec.targets[0].id, scores=dec.scores,
                               dry_run=dry_run)
        return WriteResult("added", doc_id, scores=dec.scores, dry_run=dry_run)

    def _resolve_conflict(self, doc_id: str, doc: dict[str, Any], dec: Decision,
                          failed: set[str], attempts: int = 8) -> WriteResult:
        """Another writer changed a target first: decide again against what is active now (OCC)."""
        ns = doc["namespace"]
        indexed = dec.action != "duplicate"  # a supersede already indexed the new memory
        kept = [t.id for t in dec.targets if t.id not in failed]
        for _ in range(attempts):
            self.engine.request("POST", f"/{self.alias}/_refresh")
            new_dec = decide(doc["content"], doc["kind"], self._lookup(doc, exclude=doc_id), self.merge,
                             doc["valid_from"])
            if indexed and new_dec.action == "duplicate":  # it exists now: let it replace the twin
                new_dec = Decision("supersede", new_dec.targets, new_dec.scores)
            if new_dec.action == "outdated":
                if not indexed:
                    self._index(doc_id, doc)
                self._retire(ns, doc_id, new_dec.targets[0].id)
                return self._result(doc_id, new_dec)
            try:
                if new_dec.action != "duplicate" and not indexed:
                    self._index(doc_id, doc)
                    indexed = True
                for t in new_dec.targets:
                    self.engine.request("POST", f"/{self.alias}/_update/{t.id}",
                                        {"doc": self._target_update(new_dec.action, t, doc_id, doc)},
                                        {"routing": ns, "if_seq_no": t.seq_no, "if_primary_term": t.primary_term,
                                         "refresh": "true"})
            except VersionConflict:
                continue
            if indexed:
                replaced = kept + [t.id for t in new_dec.targets]
                self._set(doc_id, ns, {"supersedes": replaced or None})
                if replaced:
                    return WriteResult("superseded", doc_id, tuple(replaced), scores=new_dec.scores)
            return self._result(doc_id, new_dec)
        raise EngineError(f"gave up merging {doc_id} after {attempts} concurrent conflicts")

    def _index(self, doc_id: str, doc: Mapping[str, Any]) -> None:
        self.engine.request("PUT", f"/{self.alias}/_create/{doc_id}", dict(doc),
                            {"routing": doc["namespace"], "refresh": "true"})

    def _set(self, doc_id: str, namespace: str, changes: Mapping[str, Any]) -> None:
        self.engine.request("POST", f"/{self.alias}/_update/{doc_id}", {"doc": dict(changes)},
                            {"routing": namespace, "refresh": "true", "retry_on_conflict": 3})

    # -- reads ---------------------------------------------------------------------------------
    def get(self, namespace: str, memory_id: str) -> Memory:
        check_namespace(namespace)
        try:
            resp = self.engine.request("GET", f"/{self.alias}/_doc/{memory_id}", params={"routing": namespace})
        except NotFound:
            raise NotFound(f"no memory {memory_id!r} in namespace {namespace!r}") from None
        if not resp.get("found") or resp["_source"].get("namespace") != namespace:
            raise NotFound(f"no memory {memory_id!r} in namespace {namespace!r}")
        return Memory.from_hit(resp["_id"], resp["_source"])

    def installed_params(self) -> RecallParams:
        """The ranking policy installed in the cluster (`esmem install --policy`), re-read at most
        every POLICY_TTL seconds: the engine applies a new policy to the next recall at once, this
        copy drives the client-side knobs (MMR, recent-N, reheat) and the score breakdown."""
        now = time.monotonic()
        if self._installed is None or now - self._installed[0] > POLICY_TTL:
            self._installed = (now, installed_policy(self.engine, self.names.prefix).params)
        return self._installed[1]

    def ranking_params(self) -> RecallParams:
        """The knobs a recall without explicit `params` uses: the store's, else the installed policy."""
        return self.params or self.installed_params()

    def recall(self, query: str, namespace: str, k: int = 5, *, params: RecallParams | None = None,
               now: datetime | str | None = None, as_of: datetime | str | None = None,
               touch: bool = True, explain: bool = False) -> RecallResult:
        """Top-k memories of `namespace` for `query`, ranked in the engine, diversified by MMR.

        The stored `recall` template is called as any client calls it: namespace, query, size,
        now (and as_of); explicit `params` (or the store's) are passed as plain overrides, else the
        installed defaults rank."""
        started = time.perf_counter()
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query is empty")
        check_namespace(namespace)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InvalidInput(f"k must be an integer in 1..{MAX_K}, got {k!r}")
        explicit = params or self.params
        p = explicit or self.installed_params()
        now_t = parse_time(now) if now is not None else self.clock()
        as_of_t = parse_time(as_of) if as_of is not None else None
        size = max(k, p.window) if p.mmr else k
        query = truncate_query(query, MAX_QUERY_TERMS)
        tp: dict[str, Any] = {"namespace": namespace, "query": query, "size": size, "now": epoch_ms(now_t),
                              **(ranking.template_overrides(explicit) if explicit else {})}
        if as_of_t is not None:
            tp["as_of"] = iso(as_of_t)
        header = {"routing": namespace}
        searches: list[Any] = [header, {"id": self.names.script("recall"), "params": tp}]
        if p.recent_n:
            searches += [header, {"id": self.names.script("recent"), "params": {  # k more: de-dup may drop k
                "namespace": namespace, "size": p.recent_n + k, **({"as_of": tp["as_of"]} if as_of_t else {})}}]
        if explain:
            searches += [header, {"id": self.names.script("recall"), "explain": True,
                                  "params": {**tp, "rel_only": True}}]
        payload = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in searches)
        resp = self.engine.request("POST", f"/{self.alias}/_msearch/template", payload)
        for r in resp["responses"]:
            if "error" in r:
                raise EngineError(f"recall failed: {r['error']}")
        main = resp["responses"][0]
        hits = main["hits"]["hits"]
        terms_by_id: dict[str, dict[str, float]] = {}
        if explain:
            for h in resp["responses"][-1]["hits"]["hits"]:
                terms_by_id[h["_id"]] = term_contributions(h.get("_explanation", {}))
        items = self._rank(hits, k, p, now_t, terms_by_id)
        recent: tuple[Memory, ...] = ()
        if p.recent_n:
            chosen = {r.memory.id for r in items}
            newest = [Memory.from_hit(h["_id"], h["_source"]) for h in resp["responses"][1]["hits"]["hits"]
                      if h["_id"] not in chosen][:p.recent_n]
            recent = tuple(sorted(newest, key=lambda m: m.valid_from))
        if touch and items:
            self.touch(namespace, [r.memory.id for r in items], now_t, p.rho)
        engine_ms = float(sum(r.get("took", 0) for r in resp["responses"]))
        return RecallResult(query, namespace, now_t, p, tuple(items), recent,
                            (time.perf_counter() - started) * 1000, engine_ms)

    def _rank(self, hits: list[Mapping[str, Any]], k: int, p: RecallParams, now: datetime,
              terms_by_id: Mapping[str, Mapping[str, float]]) -> list[Recalled]:
        if not hits:
            return []
        order = list(range(len(hits)))
        penalties = [0.0] * len(hits)
        if p.mmr and len(hits) > 1:
            srcs = [h["_source"] for h in hits]
            if all(s.get("embedding") for s in srcs):
                sim = lambda i, j: cosine(srcs[i]["embedding"], srcs[j]["embedding"])  # noqa: E731
            else:
                sets = [token_set(s["content"]) for s in srcs]
                sim = lambda i, j: jaccard(sets[i], sets[j])  # noqa: E731
            order, pen = mmr([h["_score"] for h in hits], sim, k, p.mmr_lambda)
            for i, v in zip(order, pen):
                penalties[i] = v
        out = []
        for i in order[:k]:
            h = hits[i]
            src = h["_source"]
            rec = ranking.recency(src, p, now)
            imp = float(src.get("importance", 1.0))
            out.append(Recalled(
                memory=Memory.from_hit(h["_id"], src), score=float(h["_score"]),
                rel=ranking.invert_rel(float(h["_score"]), rec, imp, p), recency=rec,
                importance_part=ranking.importance_part(imp, p),
                reheat=ranking.reheat_factor(src, p, now), mmr_penalty=penalties[i], rank_before_mmr=i + 1,
                terms=terms_by_id.get(h["_id"], {})))
        return out

    def touch(self, namespace: str, ids: Iterable[str], now: datetime, rho: float) -> None:
        """Reheat write-back: one bulk call through the stored update script, retried on conflict."""
        script = {"id": self.names.script("reheat"), "params": {"now": iso(now), "now_ms": epoch_ms(now), "rho": rho}}
        actions: list[Any] = []
        for doc_id in ids:
            actions += [{"update": {"_index": self.alias, "_id": doc_id, "routing": namespace,
                                    "retry_on_conflict": 5}}, {"script": script}]
        resp = self.engine.bulk(actions)
        errors = [it["update"]["error"] for it in resp["items"] if it["update"].get("error")]
        if errors:
            raise EngineError(f"reheat write-back failed: {errors[0]}")

    # -- history -------------------------------------------------------------------------------
    def history(self, namespace: str, memory_id: str) -> list[Memory]:
        """The version chain through `memory_id`, oldest first."""
        current = self.get(namespace, memory_id)
        chain = [current]
        seen = {current.id}
        back = current
        while back.supersedes:
            prev_id = back.supersedes[0]
            if prev_id in seen:
                break
            try:
                back = self.get(namespace, prev_id)
            except NotFound:
                break
            chain.insert(0, back)
            seen.add(back.id)
        fwd = current
        while fwd.superseded_by and fwd.superseded_by not in seen:
            try:
                fwd = self.get(namespace, fwd.superseded_by)
            except NotFound:
                break
            chain.append(fwd)
            seen.add(fwd.id)
        return chain

    def restore(self, namespace: str, memory_id: str, *, retire_successor: bool = True) -> Memory:
        """Undo a merge: reactivate a superseded memory; its successor is retired (or kept active
        with its `supersedes` link dropped when `retire_successor=False`)."""
        old = self.get(namespace, memory_id)
        if old.status == "active":
            raise InvalidInput(f"memory {memory_id} is already active")
        if old.superseded_by:
            succ = self.get(namespace, old.superseded_by)
            if retire_successor:
                self._set(succ.id, namespace, {"status": "retired", "invalid_at": iso(self.clock())})
            else:
                self._set(succ.id, namespace, {"supersedes": [s for s in succ.supersedes if s != old.id] or None})
        self._set(old.id, namespace, {"status": "active", "superseded_by": None, "invalid_at": None})
        return self.get(namespace, memory_id)

    def count(self, namespace: str | None = None, status: str | None = "active") -> int:
        """Memories of a namespace (all without one) with a status (any with None): stored `count`."""
        params = {k: v for k, v in (("namespace", namespace), ("status", status)) if v}
        self.engine.request("POST", f"/{self.alias}/_refresh")
        resp = self.engine.request("POST", f"/{self.alias}/_search/template",
                                   {"id": self.names.script("count"), "params": params},
                                   {"routing": namespace} if namespace else None)
        return int(resp["hits"]["total"]["value"])


MEMORY_FIELDS = {f for f in MemoryInput.__dataclass_fields__} | {"type", "id"}


def read_jsonl(path: str, default_namespace: str = "default") -> list[MemoryInput]:
    """Memories from a JSONL file (one object per line: content, namespace, kind, importance,
    valid_from, entities, evergreen, source, metadata, id -> external_id). Every line is checked
    before anything is written; an error names the line."""
    items: list[MemoryInput] = []
    try:
        with open(path, "rb") as fh:
            raw_lines = fh.read().split(b"\n")
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror}") from None
    for n, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        where = f"{path}:{n}"
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise InvalidInput(f"{where}: invalid UTF-8") from None
        except json.JSONDecodeError as e:
            raise InvalidInput(f"{where}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict) or obj.get("type", "memory") != "memory":
            raise InvalidInput(f"{where}: expected a memory object")
        unknown = sorted(set(obj) - MEMORY_FIELDS)
        if unknown or "content" not in obj:
            raise InvalidInput(f"{where}: " + (f"unknown field(s) {unknown}" if unknown else "missing \"content\""))
        fields = {k: v for k, v in obj.items() if k not in ("type", "id")}
        fields.setdefault("namespace", default_namespace)
        if "id" in obj:
            fields.setdefault("external_id", str(obj["id"]))
        if "entities" in fields:
            fields["entities"] = tuple(fields["entities"])
        items.append(MemoryInput(**fields))
    return items


def decide_for(resp: Mapping[str, Any], doc: Mapping[str, Any], policy: MergePolicy) -> Decision:
    return decide(doc["content"], doc["kind"], MemoryStore._candidates(resp), policy, doc["valid_from"])


_WEIGHT = re.compile(r"^weight\(([\w.]+):(.+?) in \d+\)")


def term_contributions(expl: Mapping[str, Any]) -> dict[str, float]:
    """Per-term BM25 contributions from an explanation tree: {"content:输出": 2.1, ...}."""
    out: dict[str, float] = {}
    must_not_miss = False

    def walk(node: Mapping[str, Any]) -> None:
        nonlocal must_not_miss
        desc = node.get("description", "")
        m = _WEIGHT.match(desc)
        if m:
            key = f"{m.group(1)}:{m.group(2)}"
            out[key] = out.get(key, 0.0) + float(node.get("value", 0.0))
            return
        if desc.startswith("field value function:"):  # must-not-miss: boost * importance / 10
            must_not_miss = True
            return
        for child in node.get("details", []):
            walk(child)

    walk(expl)
    if must_not_miss:  # the memory matched no term: the whole relevance is must-not-miss's
        out["must_not_miss"] = float(expl.get("value", 0.0)) - sum(out.values())
    return out
