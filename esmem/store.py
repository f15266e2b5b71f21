"""MemoryStore: the write path and the read path over one installed prefix.

Write: validate -> score importance -> lookup + merge decision -> index (optimistic concurrency on
the memories it supersedes). Read: template params -> one `_msearch/template` call (candidates,
recent-N, per-term explanation) -> MMR -> recent-N -> reheat write-back.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import ranking
from .analysis import truncate_query
from .engine import Engine
from .errors import EngineError, EsmemWarning, InvalidInput, InvalidItem, NotFound
from .importance import Scorer, rule_scorer, score_batch
from .install import Names, installed_policy, require_installed
from .merge import Candidate, Decision, MergePolicy, decide, overlap
from .merge import jaccard as text_jaccard
from .mmr import cosine, jaccard, mmr, similarity_set
from .ranking import KINDS, RecallParams, epoch_ms, iso, parse_time, utcnow
from .pinned import check_applies_to, derive_applies_to, gate
from .resolve import resolve
from .threads import expand, thread_fields, wanted

NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
SOURCES = ("user", "agent", "tool")
MAX_K = 1000
MAX_KEY_CHARS = 512  # ids and idempotency keys (a keyword; the engine refuses terms over 32 KB)
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
    idempotency_key: str | None = None  # a retry with the same key lands on the same memory
    thread: str | None = None  # conversation turns (esmem/threads.py): session, position, neighbour text
    seq: int | None = None
    neighbours: str | None = None
    applies_to: str | Sequence[str] | None = None  # pinned memories: situations they apply to (esmem/pinned.py)


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
    replayed: bool = False  # written before (a re-import or a retry): nothing new was added


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
    neighbour_of: str | None = None  # score inherited from this candidate next to it (esmem/threads.py)
    demoted_by: str | None = None  # put under this newer same-topic memory (esmem/resolve.py)


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
    pinned: tuple[Memory, ...] = ()  # pinned memories that apply and are not in items (esmem/pinned.py)


# -- validation --------------------------------------------------------------------------------
def check_namespace(namespace: Any) -> str:
    # fullmatch: `$` alone would accept a trailing newline ("good\n"), which then became routing
    if not isinstance(namespace, str) or not NAMESPACE_RE.fullmatch(namespace):
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


def _check_choice(name: str, value: Any, known: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in known:
        raise InvalidInput(f"unknown {name} {value!r} (known: {', '.join(known)})")
    return value


def _check_entities(entities: Any) -> list[str]:
    """A list (or tuple) of non-empty strings: a bare string is not split into characters."""
    if isinstance(entities, (str, bytes)) or not isinstance(entities, (list, tuple)):
        raise InvalidInput(f"entities must be a list of strings, got {type(entities).__name__}")
    if len(entities) > 64 or any(not isinstance(e, str) or not e.strip() or len(e) > 256 for e in entities):
        raise InvalidInput("entities: at most 64 non-empty strings of at most 256 characters")
    return list(entities)


def _check_key(name: str, value: Any) -> str:
    """An id from the caller (`id` of a line, external_id, idempotency_key): a short non-empty string."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip() \
            or len(str(value)) > MAX_KEY_CHARS:
        raise InvalidInput(f"{name} must be a non-empty string of at most {MAX_KEY_CHARS} characters, got {value!r}")
    return str(value)


def _check_json(name: str, value: Any) -> Any:
    """Strict JSON (no NaN/Infinity anywhere): the engine rejects them mid-batch otherwise."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"{name} must be JSON-serialisable without NaN/Infinity ({e})") from None
    return value


def _check_embedding(embedding: Any) -> list[float]:
    if isinstance(embedding, (str, bytes)) or not isinstance(embedding, Sequence) or not embedding or any(
            isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in embedding):
        raise InvalidInput("embedding must be a non-empty list of finite numbers")
    return [float(x) for x in embedding]


def memory_id(namespace: str, key: str) -> str:
    """The deterministic document id of a memory: the same input always lands on the same document,
    so a replayed import or a retried write finds its earlier self instead of adding a twin."""
    return hashlib.sha256(f"{namespace}\0{key}".encode("utf-8")).hexdigest()[:32]


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
    def _doc(self, item: MemoryInput, now: datetime) -> tuple[str, dict[str, Any]]:
        """Validate one input into (deterministic id, index document); one check per field, each
        with a typed error. Importance is filled in later if missing."""
        if not isinstance(item, MemoryInput):
            raise InvalidInput(f"expected a MemoryInput, got {type(item).__name__}")
        content = _check_content(item.content, self.max_content_bytes)
        check_namespace(item.namespace)
        _check_choice("kind", item.kind, KINDS)
        _check_choice("source", item.source, SOURCES)
        if item.importance is not None and (isinstance(item.importance, bool)
                                            or not isinstance(item.importance, (int, float))
                                            or not 1 <= item.importance <= 10):
            raise InvalidInput(f"importance must be a number in 1..10, got {item.importance!r}")
        valid_from = parse_time(item.valid_from) if item.valid_from is not None else now
        if valid_from > now + self.max_future:
            raise InvalidInput(f"valid_from {iso(valid_from)} is in the future (more than {self.max_future} ahead)")
        entities = _check_entities(item.entities)
        if not isinstance(item.evergreen, bool):
            raise InvalidInput(f"evergreen must be true or false, got {item.evergreen!r}")
        doc: dict[str, Any] = {
            "namespace": item.namespace, "content": content, "kind": item.kind,
            "importance": None if item.importance is None else float(item.importance),
            "importance_rule": None if item.importance is None else "given",
            "valid_from": iso(valid_from), "recorded_at": iso(now), "anchor_at": epoch_ms(valid_from),
            "status": "active", "access_count": 0, "restated_count": 0, "entities": entities,
            "source": item.source, "evergreen": item.evergreen,
        }
        if item.metadata is not None:
            if not isinstance(item.metadata, Mapping):
                raise InvalidInput(f"metadata must be an object, got {type(item.metadata).__name__}")
            doc["metadata"] = _check_json("metadata", dict(item.metadata))
        if item.external_id is not None:
            doc["external_id"] = _check_key("id", item.external_id)
        if item.embedding is not None:
            doc["embedding"] = _check_embedding(item.embedding)
        doc.update(thread_fields(item.thread, item.seq, item.neighbours))
        if item.applies_to is not None:
            doc["applies_to"] = check_applies_to(item.applies_to)
        if item.supersedes is not None:
            doc["supersedes"] = [_check_key("supersedes", item.supersedes)]
        if item.idempotency_key is not None:
            key = "key\0" + _check_key("idempotency_key", item.idempotency_key)
        elif item.external_id is not None:
            key = "id\0" + doc["external_id"]
        else:
            key = "\0".join(("h", item.kind, content, doc["valid_from"]))
        return memory_id(item.namespace, key), doc

    def _prepare(self, items: Sequence[MemoryInput]) -> list[tuple[str, dict[str, Any]]]:
        """Validate everything and score importance before anything is written."""
        now = self.clock()
        docs = []
        for i, item in enumerate(items):
            try:
                docs.append(self._doc(item, now))
            except (InvalidInput, TypeError, ValueError) as e:
                raise (InvalidItem(i, str(e)) if len(items) > 1 else InvalidInput(str(e))) from None
        todo = [d for _, d in docs if d["importance"] is None]
        if todo:
            for d, (score, rule) in zip(todo, score_batch(self.scorer, [d["content"] for d in todo])):
                d["importance"], d["importance_rule"] = score, rule
        for _, d in docs:
            derive_applies_to(d)
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
        """Write one memory through the merge decision; `dry_run` decides without writing. Pass
        `idempotency_key=` (or `valid_from=`) to make a retry after a failure land on the same memory."""
        return self.remember_many([MemoryInput(content, namespace, **fields)], dry_run=dry_run)[0]

    def remember_many(self, items: Sequence[MemoryInput], *, dry_run: bool = False,
                      batch_size: int = 200, progress: Callable[[int], None] | None = None) -> list[WriteResult]:
        """Write memories in order; look-ups are batched with `_msearch`, writes with `_bulk`.

        Everything is validated before the first write. Each memory has a deterministic id, so
        running the same input again (after a crash, a cut connection, or just twice) converges to
        the state of one clean run; memories already written come back with `replayed=True`.
        Merge decisions follow input order: when an item could merge with an earlier item of the
        same batch, the batch is cut there so the earlier one is searchable first."""
        pairs = self._prepare(items)
        explicit = [(i, d) for i, d in pairs if d.get("supersedes")]
        if explicit:  # an unknown predecessor fails before anything is written (unless already done)
            found = self._existing(explicit)
            for doc_id, d in explicit:
                if doc_id not in found:
                    self._explicit(d, doc_id)
        results: list[WriteResult] = []
        start = 0
        while start < len(pairs):
            done = self._write_batch(pairs[start:self._batch_end(pairs, start, batch_size)], dry_run)
            results.extend(done)
            if progress:
                progress(len(done))
            start += len(done)
        if not self.merge.enabled and not dry_run:
            self.engine.request("POST", f"/{self.alias}/_refresh")  # one refresh, not one per batch
        return results

    def _batch_end(self, pairs: Sequence[tuple[str, Mapping[str, Any]]], start: int, batch_size: int) -> int:
        seen_ids: set[str] = set()
        seen: dict[tuple[str, str], list[str]] = defaultdict(list)
        end = start
        while end < len(pairs) and end - start < batch_size:
            doc_id, d = pairs[end]
            if doc_id in seen_ids:  # the same memory twice: the second is a replay of the first
                break
            seen_ids.add(doc_id)
            if self.merge.enabled:
                key = (d["namespace"], d["kind"])
                same = (text_jaccard, self.merge.dup_overlap) if d["kind"] in self.merge.never_supersede \
                    else (overlap, self.merge.min_overlap)
                if end > start and any(same[0](d["content"], prev) >= same[1] for prev in seen[key]):
                    break
                seen[key].append(d["content"])
            end += 1
        return end

    # The write protocol of one batch (README "Guarantees"):
    #   1. ids already stored are replays: their links are repaired, nothing else is written; ids
    #      that some memory names in `superseded_by` are writes cut after step 2: they resume;
    #   2. targets are retired by the `retire` script (atomic on the target: only an ACTIVE memory
    #      can be retired, and the retire records its successor's id - the durable intent);
    #   3. a write that lost a target to another writer re-decides against what is active now;
    #   4. the new memories are created (create-if-absent), `supersedes` = the targets they retired;
    #      if the engine rejects any, the batch's creates are deleted and its retires undone;
    #   5. duplicates reinforce their target once per write id (`restate` script), outdated memories
    #      are linked from their successor and the settle step runs (`link` script: add, never overwrite).
    def _write_batch(self, pairs: list[tuple[str, dict[str, Any]]], dry_run: bool) -> list[WriteResult]:
        """Decide and write a batch, or the head of it: results for the memories it wrote."""
        if not self.merge.enabled and not any(d.get("supersedes") for _, d in pairs):
            return self._write_plain(pairs, dry_run)
        found = self._existing(pairs)
        restated = self._restated([i for i, _ in pairs if i not in found])
        known = lambda pair: pair[0] in found or pair[0] in restated  # noqa: E731
        if known(pairs[0]):
            head = next((n for n, pair in enumerate(pairs) if not known(pair)), len(pairs))
            return self._replay(pairs[:head], found, restated, dry_run)
        batch = pairs[:next((n for n, pair in enumerate(pairs) if known(pair)), len(pairs))]
        resumed: dict[str, list[str]] = defaultdict(list)
        for winner, loser in self._superseded_by([i for i, _ in batch]):
            resumed[winner].append(loser)
        if self.merge.enabled:
            lines: list[Any] = []
            for _, d in batch:
                lines += [{"routing": d["namespace"]}, self._lookup_body(d)]
            payload = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
            resp = self.engine.request("POST", f"/{self.alias}/_msearch/template", payload)
            decisions = []
            for r in resp["responses"]:
                if "error" in r:
                    raise EngineError(f"merge lookup failed: {r['error']}")
                decisions.append(decide_for(r, batch[len(decisions)][1], self.merge))
        else:
            decisions = [Decision("add") for _ in batch]
        decisions = [self._explicit(d, doc_id) if d.get("supersedes") else
                     Decision("supersede", dec.targets, dec.scores) if dec.action == "duplicate" and resumed.get(doc_id)
                     else dec for (doc_id, d), dec in zip(batch, decisions)]
        targeted: set[str] = set()
        for pos, dec in enumerate(decisions):  # one memory retired twice in a batch: decide the second later
            ids_ = {t.id for t in dec.targets}
            if pos and ids_ & targeted:
                batch, decisions = batch[:pos], decisions[:pos]
                break
            targeted |= ids_
        if dry_run:
            return [self._result(i, d, dry_run=True) for (i, _), d in zip(batch, decisions)]
        return self._commit([(i, d, dec) for (i, d), dec in zip(batch, decisions)], resumed)

    def _write_plain(self, pairs: list[tuple[str, dict[str, Any]]], dry_run: bool) -> list[WriteResult]:
        """No merge: create-if-absent under the deterministic id; a rejected batch is deleted again."""
        if dry_run:
            return [WriteResult("added", i, dry_run=True) for i, _ in pairs]
        actions: list[Any] = []
        for doc_id, d in pairs:
            actions += [{"create": {"_index": self.alias, "_id": doc_id, "routing": d["namespace"]}},
                        {**d, "written_as": "add"}]
        _, existed = self._create(pairs, actions)
        return [WriteResult("added", i, replayed=i in existed) for i, _ in pairs]

    def _create(self, pairs: Sequence[tuple[str, Mapping[str, Any]]], actions: list[Any], *,
                refresh: str | None = None, retired: Sequence[tuple[str, str, str]] = ()) -> tuple[list[str], set[str]]:
        """One `_bulk` of creates: (created ids, ids that already existed). If the engine rejects any
        document, the ones this call created are deleted and the `retired` (namespace, target, winner)
        are made active again: nothing of the batch remains."""
        resp = self.engine.bulk(actions, refresh=refresh)
        created, existed, errors = [], set(), []
        for (doc_id, _), item in zip(pairs, resp["items"]):
            outcome = item["create"]
            if outcome.get("status") in (200, 201):
                created.append(doc_id)
            elif outcome.get("status") == 409:
                existed.add(doc_id)
            else:
                errors.append(outcome.get("error"))
        if errors:
            routing = {i: d["namespace"] for i, d in pairs}
            if created:
                self.engine.bulk([{"delete": {"_index": self.alias, "_id": i, "routing": routing[i]}} for i in created])
            self._scripted([(ns, target, "unretire", {"winner": winner}) for ns, target, winner in retired])
            self.engine.request("POST", f"/{self.alias}/_refresh")
            raise EngineError(f"the engine rejected {len(errors)} of {len(pairs)} memories of a batch "
                              f"({errors[0]}); none of that batch was kept")
        return created, existed

    def _existing(self, pairs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
        """The documents already stored under these ids (a replay, a retry, a resumed import)."""
        if not pairs:
            return {}
        resp = self.engine.request("POST", f"/{self.alias}/_mget", {
            "docs": [{"_id": i, "routing": d["namespace"]} for i, d in pairs]})
        return {doc["_id"]: doc["_source"] for doc in resp["docs"] if doc.get("found")}

    def _restated(self, ids: Sequence[str]) -> dict[str, str]:
        """Ids of earlier writes that were absorbed as duplicates -> the memory they reinforced."""
        if not ids:
            return {}
        resp = self.engine.request("POST", f"/{self.alias}/_search/template", {
            "id": self.names.script("restated"), "params": {"size": len(ids), "ids_json": json.dumps(list(ids))}})
        wanted, out = set(ids), {}
        for h in resp["hits"]["hits"]:
            by = h["_source"].get("restated_by") or []
            for i in (by if isinstance(by, list) else [by]):
                if i in wanted:
                    out[i] = h["_id"]
        return out

    def _replay(self, pairs: list[tuple[str, dict[str, Any]]], found: Mapping[str, dict[str, Any]],
                restated: Mapping[str, str], dry_run: bool) -> list[WriteResult]:
        """Memories written before: the same results again, and their links repaired."""
        if not dry_run:
            self._repair([(i, found[i]) for i, _ in pairs if i in found])
        return [self._replayed(i, found[i], dry_run) if i in found else
                WriteResult("duplicate", restated[i], duplicate_of=restated[i], replayed=True, dry_run=dry_run)
                for i, _ in pairs]

    @staticmethod
    def _replayed(doc_id: str, src: Mapping[str, Any], dry_run: bool) -> WriteResult:
        action = src.get("written_as", "add")
        sup = src.get("supersedes") or []
        if action == "outdated":
            return WriteResult("outdated", doc_id, outdated_by=src.get("superseded_by"), replayed=True, dry_run=dry_run)
        if action == "supersede":
            return WriteResult("superseded", doc_id, tuple(sup if isinstance(sup, list) else [sup]), replayed=True,
                               dry_run=dry_run)
        return WriteResult("added", doc_id, replayed=True, dry_run=dry_run)

    def _commit(self, work: list[tuple[str, dict[str, Any], Decision]],
                resumed: Mapping[str, list[str]]) -> list[WriteResult]:
        """Steps 2-5 of the write protocol for decided memories; `resumed`: targets already retired
        for a memory by an earlier, interrupted run."""
        kept: dict[str, list[str]] = {i: list(resumed.get(i, ())) for i, _, _ in work}
        mems = [(i, d, dec) for i, d, dec in work if dec.action != "duplicate"]
        dups = [(i, d, dec) for i, d, dec in work if dec.action == "duplicate"]
        ops = [(d["namespace"], t.id, "retire", {"winner": doc_id, "invalid_at": d["valid_from"]})
               for doc_id, d, dec in mems if dec.action == "supersede" for t in dec.targets if t.id not in kept[doc_id]]
        lost: set[str] = set()
        for (_, target, _, params), ok in zip(ops, self._scripted(ops)):  # 2. retire
            if ok:
                kept[params["winner"]].append(target)
            else:
                lost.add(params["winner"])
        results: dict[str, WriteResult] = {}
        final: dict[str, Decision] = {}
        for doc_id, d, dec in mems:  # 3. another writer changed a target first: decide again
            outcome = self._redecide(doc_id, d, kept[doc_id]) if doc_id in lost else dec
            if isinstance(outcome, WriteResult):
                results[doc_id] = outcome
            else:
                final[doc_id] = outcome
        actions: list[Any] = []  # 4. create, refreshed so the next look-up sees the batch
        for doc_id, d, _ in mems:
            if doc_id not in final:
                continue
            dec = final[doc_id]
            body = {**d, "written_as": "supersede" if kept[doc_id] and dec.action != "outdated" else dec.action,
                    "supersedes": kept[doc_id] or None}
            if dec.action == "outdated":
                body.update(status="superseded", superseded_by=dec.targets[0].id,
                            invalid_at=dec.targets[0].source["valid_from"])
            actions += [{"create": {"_index": self.alias, "_id": doc_id, "routing": d["namespace"]}}, body]
        creating = [(i, d) for i, d, _ in mems if i in final]
        existed: set[str] = set()
        if actions:
            retired = [(d["namespace"], t, i) for i, d in creating for t in kept[i]]
            _, existed = self._create(creating, actions, refresh="true", retired=retired)
        elif ops:
            self.engine.request("POST", f"/{self.alias}/_refresh")
        for doc_id, d in creating:
            dec = final[doc_id]
            if doc_id in existed:  # another writer with the same id got there first
                results[doc_id] = self._replayed(doc_id, self._existing([(doc_id, d)])[doc_id], False)
            elif dec.action == "outdated":
                self._link(d["namespace"], dec.targets[0].id, doc_id)
                results[doc_id] = self._result(doc_id, dec)
            elif kept[doc_id]:
                results[doc_id] = WriteResult("superseded", doc_id, tuple(kept[doc_id]), scores=dec.scores,
                                              replayed=bool(resumed.get(doc_id)))
            else:
                results[doc_id] = WriteResult("added", doc_id, scores=dec.scores)
        restates = [(d["namespace"], dec.targets[0].id, "restate",
                     {"id": doc_id, "importance": d["importance"], "anchor_at": d["anchor_at"]}) for doc_id, d, dec in dups]
        for (doc_id, d, dec), ok in zip(dups, self._scripted(restates)):  # 5. duplicates, links, settle
            if ok:
                results[doc_id] = self._result(doc_id, dec)
                continue
            outcome = self._redecide(doc_id, d, [])  # its target moved on: decide again
            results[doc_id] = outcome if isinstance(outcome, WriteResult) else \
                self._commit([(doc_id, d, outcome)], {})[0]
        if self.merge.enabled:
            self._settle([(i, d) for i, d in creating if i not in existed and final[i].action != "outdated"])
        return [results[i] for i, _, _ in work]

    def _scripted(self, ops: Sequence[tuple[str, str, str, dict[str, Any]]]) -> list[bool]:
        """Run stored update scripts in one `_bulk`; True where the script applied (now or earlier)."""
        if not ops:
            return []
        actions: list[Any] = []
        for ns, target, script, params in ops:
            actions += [{"update": {"_index": self.alias, "_id": target, "routing": ns, "retry_on_conflict": 8}},
                        {"script": {"id": self.names.script(script), "params": params}}]
        resp = self.engine.bulk(actions)
        out: list[bool] = []
        for (ns, target, script, params), item in zip(ops, resp["items"]):
            outcome = item["update"]
            if outcome.get("status") == 404:
                out.append(False)
            elif outcome.get("error"):
                raise EngineError(f"bulk write failed: {outcome['error']}")
            elif outcome.get("result") == "noop" and script in ("link", "unretire"):  # nothing left to do
                out.append(True)
            elif outcome.get("result") == "noop":  # already done by this write, or the target moved on
                src = self.engine.request("GET", f"/{self.alias}/_doc/{target}", params={"routing": ns})["_source"]
                by = src.get("restated_by") or []
                out.append(src.get("superseded_by") == params["winner"] if script == "retire"
                           else params["id"] in (by if isinstance(by, list) else [by]))
            else:
                out.append(True)
        return out

    def _redecide(self, doc_id: str, doc: dict[str, Any], kept: list[str],
                  attempts: int = 8) -> Decision | WriteResult:
        """Another writer changed a target first: decide again against what is active now. Returns
        the decision to create the memory with (`kept` grows by the targets retired here) or, when
        the write turns out to restate an active memory, its `duplicate` result."""
        ns = doc["namespace"]
        for _ in range(attempts):
            self.engine.request("POST", f"/{self.alias}/_refresh")
            dec = decide(doc["content"], doc["kind"], self._lookup(doc, exclude=doc_id), self.merge, doc["valid_from"])
            if dec.action == "duplicate" and kept:
                dec = Decision("supersede", dec.targets, dec.scores)  # it replaced something: keep it
            if dec.action == "duplicate":
                target = dec.targets[0]
                if self._scripted([(ns, target.id, "restate", {"id": doc_id, "importance": doc["importance"],
                                                                "anchor_at": doc["anchor_at"]})])[0]:
                    return self._result(doc_id, dec)
                continue
            if dec.action in ("add", "outdated"):
                return dec
            ops = [(ns, t.id, "retire", {"winner": doc_id, "invalid_at": doc["valid_from"]}) for t in dec.targets]
            won = [t.id for t, ok in zip(dec.targets, self._scripted(ops)) if ok]
            kept.extend(won)
            if len(won) == len(dec.targets):
                return dec
        raise EngineError(f"gave up merging {doc_id} after {attempts} concurrent conflicts")

    def _superseded_by(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(winner, loser) for every memory whose `superseded_by` is one of `ids`."""
        if not ids:
            return []
        self.engine.request("POST", f"/{self.alias}/_refresh")
        resp = self.engine.request("POST", f"/{self.alias}/_search/template", {
            "id": self.names.script("superseded_by"), "params": {"ids_json": json.dumps(list(ids))}})
        return [(h["_source"]["superseded_by"], h["_id"]) for h in resp["hits"]["hits"]]

    def _repair(self, done: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Make the links of memories written before symmetric again (a cut between a retire and
        its link leaves `superseded_by` without the matching `supersedes` entry)."""
        if not done:
            return
        need: set[tuple[str, str, str]] = set()  # (namespace, winner, loser)
        src_of = dict(done)
        for doc_id, src in done:
            if src.get("superseded_by"):
                need.add((src["namespace"], src["superseded_by"], doc_id))
        for winner, loser in self._superseded_by(list(src_of)):
            need.add((src_of[winner]["namespace"], winner, loser))
        missing = []
        if need:
            winners = sorted({(ns, w) for ns, w, _ in need})
            resp = self.engine.request("POST", f"/{self.alias}/_mget", {
                "docs": [{"_id": w, "routing": ns} for ns, w in winners]})
            links = {d["_id"]: d["_source"].get("supersedes") or [] for d in resp["docs"] if d.get("found")}
            missing = [(ns, w, l) for ns, w, l in sorted(need) if w in links
                       and l not in (links[w] if isinstance(links[w], list) else [links[w]])]
        self._scripted([(ns, w, "link", {"loser": l}) for ns, w, l in missing])

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

    def _retire(self, namespace: str, loser: str, winner: str) -> None:
        """Mark `loser` superseded by `winner` (atomic: only if still active) and link it from the winner."""
        try:
            win = self.engine.request("GET", f"/{self.alias}/_doc/{winner}", params={"routing": namespace})
        except NotFound:
            return
        if win["_source"]["status"] != "active":
            return  # another writer settled it already
        ok = self._scripted([(namespace, loser, "retire", {"winner": winner,
                                                           "invalid_at": win["_source"]["valid_from"]})])
        if ok[0]:
            self._link(namespace, winner, loser)

    def _link(self, namespace: str, winner: str, loser: str) -> None:
        """Add `loser` to the winner's `supersedes` (the `link` script: an add, so no link is lost)."""
        self._scripted([(namespace, winner, "link", {"loser": loser})])

    def _explicit(self, doc: Mapping[str, Any], doc_id: str) -> Decision:
        """A caller-named predecessor: it must be an active memory of the same namespace (or one
        this very write retired before it was cut)."""
        target = doc["supersedes"][0]
        try:
            got = self.engine.request("GET", f"/{self.alias}/_doc/{target}", params={"routing": doc["namespace"]})
        except NotFound:
            got = {"found": False}
        if not got.get("found") or got["_source"]["namespace"] != doc["namespace"] \
                or got["_source"]["status"] != "active" and got["_source"].get("superseded_by") != doc_id:
            raise InvalidInput(f"supersedes={target!r}: no active memory with that id in {doc['namespace']!r}")
        return Decision("supersede", (Candidate(target, 0.0, got["_source"], got["_seq_no"], got["_primary_term"]),))

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
        if p.pinned:
            searches += [header, {"id": self.names.script("pinned"), "params": {
                "namespace": namespace, "query": query, "size": p.pinned + k,
                "importance_floor": p.importance_floor}}]
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
        def rel(h: Mapping[str, Any]) -> float:  # the engine's relevance behind a fused score
            return ranking.invert_rel(float(h["_score"]), ranking.recency(h["_source"], p, now_t),
                                      float(h["_source"].get("importance", 1.0)), p)

        if p.pinned:  # pinned memories that match too little go to the pinned section (esmem/pinned.py)
            hits = gate(hits, rel, p.importance_floor, p.pinned_min_share)
        if p.resolve and as_of_t is None:  # the older of two same-topic candidates under the newer (esmem/resolve.py)
            resolved = resolve(hits, query, p.resolve_overlap, p.resolve_factor, p.resolve_ratio, rel)
            hits, demoted = resolved.hits, resolved.demoted_by
        else:
            demoted = {}
        hits, raised = self._neighbours(hits, namespace, p, now_t)
        items = self._rank(hits, k, p, now_t, terms_by_id, raised, demoted)
        recent: tuple[Memory, ...] = ()
        if p.recent_n:
            chosen = {r.memory.id for r in items}
            newest = [Memory.from_hit(h["_id"], h["_source"]) for h in resp["responses"][1]["hits"]["hits"]
                      if h["_id"] not in chosen][:p.recent_n]
            recent = tuple(sorted(newest, key=lambda m: m.valid_from))
        if touch and items:
            self._touch_or_warn(namespace, [r.memory.id for r in items], now_t, p.rho)
        pinned: tuple[Memory, ...] = ()
        if p.pinned:
            chosen = {r.memory.id for r in items}
            pinned = tuple(Memory.from_hit(h["_id"], h["_source"]) for h in
                           resp["responses"][2 if p.recent_n else 1]["hits"]["hits"] if h["_id"] not in chosen)[:p.pinned]
        engine_ms = float(sum(r.get("took", 0) for r in resp["responses"]))
        return RecallResult(query, namespace, now_t, p, tuple(items), recent,
                            (time.perf_counter() - started) * 1000, engine_ms, pinned)

    def _neighbours(self, hits: list[Mapping[str, Any]], namespace: str, p: RecallParams,
                    now: datetime) -> tuple[list[Mapping[str, Any]], dict[str, str]]:
        """Neighbour expansion (esmem/threads.py): one more search, only when a candidate is a turn."""
        at = wanted(hits) if p.neighbour_prev or p.neighbour_next else []
        if not at:
            return hits, {}
        resp = self.engine.request("POST", f"/{self.alias}/_search/template", {
            "id": self.names.script("neighbours"), "params": {"namespace": namespace, "at": at, "size": len(at)}},
            {"routing": namespace})

        def parts(h: Mapping[str, Any]) -> tuple[float, float]:
            return ranking.recency(h["_source"], p, now), float(h["_source"].get("importance", 1.0))

        done = expand(hits, resp["hits"]["hits"], p.neighbour_prev, p.neighbour_next,
                      rel=lambda h: ranking.invert_rel(float(h["_score"]), *parts(h), p),
                      score=lambda h, r: ranking.fuse(r, *parts(h), p))
        return done.hits, done.neighbour_of

    def _rank(self, hits: list[Mapping[str, Any]], k: int, p: RecallParams, now: datetime,
              terms_by_id: Mapping[str, Mapping[str, float]], raised: Mapping[str, str] = {},
              demoted: Mapping[str, str] = {}) -> list[Recalled]:
        if not hits:
            return []
        order = list(range(len(hits)))
        penalties = [0.0] * len(hits)
        if p.mmr and len(hits) > 1:
            srcs = [h["_source"] for h in hits]
            if all(s.get("embedding") for s in srcs):
                sim = lambda i, j: cosine(srcs[i]["embedding"], srcs[j]["embedding"])  # noqa: E731
            else:
                sets = [similarity_set(s["content"], p.mmr_similarity) for s in srcs]
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
                terms=terms_by_id.get(h["_id"], {}), neighbour_of=raised.get(h["_id"]),
                demoted_by=demoted.get(h["_id"])))
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

    def _touch_or_warn(self, namespace: str, ids: list[str], now: datetime, rho: float) -> None:
        """The recall is computed already: a failed write-back costs one access count, not the answer."""
        try:
            self.touch(namespace, ids, now, rho)
        except EngineError as e:
            warnings.warn(f"reheat write-back skipped: {e}", EsmemWarning, stacklevel=3)

    # -- history -------------------------------------------------------------------------------
    def history(self, namespace: str, memory_id: str) -> list[Memory]:
        """Every version linked to `memory_id` through `supersedes`/`superseded_by` (a memory can
        replace several, e.g. after concurrent writers settled), oldest first."""
        current = self.get(namespace, memory_id)
        found = {current.id: current}
        todo = [current]
        while todo:
            m = todo.pop()
            for other in (*m.supersedes, *((m.superseded_by,) if m.superseded_by else ())):
                if other in found:
                    continue
                try:
                    found[other] = self.get(namespace, other)
                except NotFound:
                    continue
                todo.append(found[other])
        return sorted(found.values(), key=lambda m: (m.valid_from, m.recorded_at or m.valid_from, m.id))

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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_jsonl(path: str, default_namespace: str = "default") -> tuple[list[MemoryInput], list[int]]:
    """Memories from a JSONL file (one object per line: content, namespace, kind, importance,
    valid_from, entities, evergreen, source, metadata, id -> external_id) and the line number of
    each. Every line is checked before anything is written; an error names the line. A line's
    `id` (or, without one, the line itself) is its identity: importing a file again is a replay."""
    items: list[MemoryInput] = []
    lines: list[int] = []
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
            obj = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except UnicodeDecodeError:
            raise InvalidInput(f"{where}: invalid UTF-8") from None
        except json.JSONDecodeError as e:
            raise InvalidInput(f"{where}: invalid JSON ({e.msg})") from None
        except ValueError as e:
            raise InvalidInput(f"{where}: invalid JSON ({e})") from None
        if not isinstance(obj, dict) or obj.get("type", "memory") != "memory":
            raise InvalidInput(f"{where}: expected a memory object")
        unknown = sorted(set(obj) - MEMORY_FIELDS)
        if unknown or "content" not in obj:
            raise InvalidInput(f"{where}: " + (f"unknown field(s) {unknown}" if unknown else "missing \"content\""))
        fields = {k: v for k, v in obj.items() if k not in ("type", "id")}
        fields.setdefault("namespace", default_namespace)
        if "id" in obj:
            fields.setdefault("external_id", obj["id"])
        elif "idempotency_key" not in fields:  # no id: the line itself is the identity (a re-import is a replay)
            fields["idempotency_key"] = "line:" + hashlib.sha256(
                json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
        items.append(MemoryInput(**fields))
        lines.append(n)
    return items, lines


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
