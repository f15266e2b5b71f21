"""esmem as a LangGraph long-term memory store (extra `esmem[langgraph]`: langgraph-checkpoint only).

LangGraph's docs put long-term memory in a `BaseStore` (`graph.compile(store=...)`, `runtime.store`
in nodes and tools, LangMem's memory tools): JSON values under a namespace tuple and a key, with
`search(namespace, query=...)`. `EsmemStore` implements it on a MemoryStore:

- namespace tuple -> one esmem namespace, parts joined by ":" (`("memories", "u1")` -> `memories:u1`);
  a search covers exactly that namespace: esmem never searches across namespaces, so a prefix
  shorter than a stored namespace finds nothing there.
- put(ns, key, value): `value["content"]` (a string) is the memory; a value without a string
  `content` (LangMem stores `{"content": {...}}` for structured memories) is stored as the JSON text
  of its `content`, or of the whole value, so its words still rank. Optional `importance`,
  `entities`, `valid_from` in the value are used too, and `kind` when it is one of esmem's kinds
  (another `kind`, such as LangMem's schema names, stays only in the value). The whole value is kept
  and returned by get/search. Putting a key again supersedes its previous value (kept as history,
  `MemoryStore.history`); a value on the same topic under another key may supersede that one too
  (esmem's merge).
- search with `query` is `recall` (ranked in the engine, reheats what it returns); without a query it
  lists the newest memories. `filter` matches value fields by equality, after ranking.
- delete (`put(ns, key, None)`) is esmem's forget: a tombstone supersedes the key's memory, so get
  and search no longer return it while `MemoryStore.history` keeps it (and `restore` brings it back).
- over an `AsyncMemoryStore` the async methods (`abatch`, and so `aget`, `aput`, `asearch`, ...) await
  it on the running loop; the sync ones are refused there (`Unsupported`). Over a MemoryStore the
  async methods run the sync ones in a thread.
- a time-to-live is refused (`Unsupported`; `supports_ttl` is False): esmem keeps memories until they
  are superseded or forgotten, and lets old ones fade in ranking instead.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any, Iterable

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from esmem.domain.async_store import AsyncMemoryStore
from esmem.domain.recaller import MAX_K
from esmem.domain.store import MemoryStore
from esmem.domain.types import Memory
from esmem.errors import InvalidInput, Unsupported
from esmem.index.bridge import run
from esmem.index.catalog import Search
from esmem.values import KINDS, check_namespace

SEP = ":"
VALUE_FIELDS = ("importance", "entities", "valid_from")


def esmem_namespace(namespace: tuple[str, ...]) -> str:
    if not namespace or any(not isinstance(p, str) or not p or SEP in p for p in namespace):
        raise InvalidNamespaceError(f"namespace {namespace!r}: non-empty strings without {SEP!r}")
    try:
        return check_namespace(SEP.join(namespace))
    except InvalidInput as e:
        raise InvalidNamespaceError(str(e)) from None


class EsmemStore(BaseStore):
    """LangGraph's BaseStore over esmem: put = remember (with merge), search = recall, delete = forget."""

    supports_ttl = False

    def __init__(self, store: MemoryStore | AsyncMemoryStore, *, touch: bool = True):
        self.async_store = store if isinstance(store, AsyncMemoryStore) else None
        self.store = store.store if isinstance(store, AsyncMemoryStore) else store  # the one implementation
        self.touch = touch

    # -- operations --------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.async_store is not None:
            raise Unsupported("this EsmemStore is over an AsyncMemoryStore: use its async methods (abatch, aget, "
                              "aput, asearch, ...)")
        return self._batch(ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.async_store is not None:
            return await run(self._batch, list(ops))
        return await asyncio.to_thread(self._batch, list(ops))

    def _batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                raise InvalidInput(f"unsupported store operation {type(op).__name__}")
        return results

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        m = self._by_key(esmem_namespace(namespace), key)
        return self._item(m, namespace) if m and not _tombstone(m) else None

    def _put(self, op: PutOp) -> None:
        ns = esmem_namespace(op.namespace)
        if op.ttl is not None:
            raise Unsupported("esmem keeps memories until they are superseded or forgotten: no time-to-live "
                              "(old memories fade in ranking instead); put without ttl")
        previous = self._by_key(ns, op.key)
        if op.value is None:  # the tombstone keeps the key: a later put supersedes it, history keeps all
            if previous is not None and not _tombstone(previous):
                self.store.forget(ns, previous.id, reason=f"deleted key {op.key!r}")
            return
        value = dict(op.value)
        fields: dict[str, Any] = {k: value[k] for k in VALUE_FIELDS if value.get(k) is not None}
        if "entities" in fields:
            fields["entities"] = tuple(fields["entities"])
        if value.get("kind") in KINDS:
            fields["kind"] = value["kind"]
        # a key names a mutable item: each put is a new version, so its identity is the key, the
        # version it replaces and the value (external_id alone would make a second put a replay)
        version = hashlib.sha256(json.dumps([op.key, previous.id if previous else None, value], sort_keys=True,
                                            default=str).encode("utf-8")).hexdigest()
        self.store.remember(_text(value, op.key), ns, external_id=op.key, metadata={"langgraph": value},
                            supersedes=previous.id if previous else None, idempotency_key=f"langgraph:{version}",
                            **fields)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        ns = esmem_namespace(op.namespace_prefix)
        want = op.limit + op.offset
        found: list[tuple[Memory, float | None]]
        if op.query:
            res = self.store.recall(op.query, ns, max(1, min(want, MAX_K)), touch=self.touch)
            found = [(r.memory, r.score) for r in res.items]
        else:
            found = [(m, None) for m in self._newest(ns, want)]
        items = [self._item(m, op.namespace_prefix, score) for m, score in found if not _tombstone(m)]
        if op.filter:
            items = [i for i in items if all(i.value.get(k) == v for k, v in op.filter.items())]
        return items[op.offset:op.offset + op.limit]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = {tuple(ns.split(SEP)) for ns, by_status in self.store.recaller.namespaces().items()
                  if by_status.get("active")}
        spaces = {s for s in spaces if all(_matches(s, c) for c in op.match_conditions or ())}
        if op.max_depth is not None:
            spaces = {s[:op.max_depth] for s in spaces}
        return sorted(spaces)[op.offset:op.offset + op.limit]

    # -- engine look-ups (active memories of one namespace, routed to its shard) ---------------
    def _active(self, template: str, params: dict[str, Any]) -> list[Memory]:
        resp = self.store.catalog.search(Search(template, params, routing=params["namespace"]))
        return [Memory.from_hit(h["_id"], h["_source"]) for h in resp["hits"]["hits"]]

    def _by_key(self, ns: str, key: str) -> Memory | None:
        found = self._active("by_key", {"namespace": ns, "key": key})
        return found[0] if found else None

    def _newest(self, ns: str, size: int) -> list[Memory]:
        return self._active("recent", {"namespace": ns, "size": size})

    @staticmethod
    def _item(m: Memory, namespace: tuple[str, ...], score: float | None = None) -> SearchItem:
        value = dict((m.metadata or {}).get("langgraph") or {"content": m.content, "kind": m.kind})
        created = m.recorded_at or m.valid_from
        return SearchItem(namespace=tuple(namespace), key=m.external_id or m.id, value=value,
                          created_at=created, updated_at=created, score=score)


def _tombstone(m: Memory) -> bool:
    return bool((m.metadata or {}).get("tombstone"))


def _text(value: dict[str, Any], key: str) -> str:
    """The memory text of a value: its string `content`, else the JSON of its `content` or of itself."""
    content = value.get("content")
    if isinstance(content, str):
        return content
    try:
        return json.dumps(value if content is None else content, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"value for key {key!r} is not JSON: {e}") from None


def _matches(ns: tuple[str, ...], cond: MatchCondition) -> bool:
    path = tuple(cond.path)
    part = ns[:len(path)] if cond.match_type == "prefix" else ns[-len(path):] if path else ()
    return len(ns) >= len(path) and all(p == "*" or p == q for p, q in zip(path, part))
