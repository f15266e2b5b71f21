"""AsyncMemoryStore: MemoryStore for asyncio, with one implementation of the logic.

Each call runs MemoryStore's own code (esmem/domain/store.py) through the greenlet bridge
(esmem/index/bridge.py) over the family's async client (`AsyncOpenSearch`, `AsyncElasticsearch`):
where that code sends a request, the event loop awaits it, so many calls of one loop interleave at
their requests and none blocks the loop on I/O. An embedder's model, a merge judge and an importance
scorer you give run on a worker thread the loop awaits (`off_loop`), so they do not block it either. Reheat write-backs are written in
line with the recall (no background thread: its requests would need the loop's thread), and a write's
last step is not overlapped with planning the next batch, which a sync write does in a thread.
"""
from __future__ import annotations

from contextlib import asynccontextmanager
from datetime import datetime
from typing import IO, Any, AsyncIterator, Callable, Iterable, Sequence

from esmem.domain import erase as erasing
from esmem.domain import export as exporting
from esmem.domain import retention
from esmem.domain.hybrid import Fusion
from esmem.domain.merge_judge import MergeJudge
from esmem.domain.policy import DecayPolicy
from esmem.domain.ranking import RecallParams
from esmem.domain.repair import Finding
from esmem.domain.review import Pending
from esmem.domain.store import MemoryStore
from esmem.domain.types import Memory, MemoryInput, RecallResult, WriteResult
from esmem.errors import InvalidInput
from esmem.index.bridge import run
from esmem.index.connection import ConnectionConfig
from esmem.index.engine import Engine


class AsyncMemoryStore:
    """Memories of every namespace under one installed prefix, for asyncio; each method awaits what
    the `MemoryStore` method of the same name does. Constructing one does no I/O."""

    def __init__(self, engine: Engine, prefix: str = "esmem", **options: Any):
        """`engine`: over an async client (`Engine(target, asynchronous=True)`, or `Engine.from_client`
        of an `AsyncOpenSearch` / `AsyncElasticsearch`); `options` as `MemoryStore` takes them."""
        if not engine.asynchronous:
            raise InvalidInput("AsyncMemoryStore needs an engine over an async client: "
                               "Engine(target, asynchronous=True) or Engine.from_client(AsyncOpenSearch(...))")
        if options.get("background_reheat"):
            raise InvalidInput("AsyncMemoryStore writes reheats in line with the recall (background_reheat=False)")
        self.store = MemoryStore(engine, prefix, **{**options, "background_reheat": False})

    @classmethod
    @asynccontextmanager
    async def connect(cls, target: "str | ConnectionConfig | Engine | None" = None, prefix: str = "esmem",
                      **options: Any) -> AsyncIterator["AsyncMemoryStore"]:
        """`async with AsyncMemoryStore.connect() as store:` the one-line way in, as `MemoryStore.connect`
        (None reads ESMEM_URL and the other ESMEM_* connection variables); the engine it opened is
        closed on the way out (a given Engine stays open)."""
        if isinstance(target, Engine):
            engine = target
        else:
            engine = Engine(target if isinstance(target, ConnectionConfig) else ConnectionConfig.from_env(url=target),
                            asynchronous=True)
        try:
            if "embedder" not in options:
                from esmem.domain.hybrid import embedder_for

                options["embedder"] = await run(embedder_for, engine, prefix)
            store = cls(engine, prefix, **options)
            try:
                yield store
            finally:
                await store.close()
        finally:
            if engine is not target:
                await run(engine.close)

    @property
    def engine(self) -> Engine:
        return self.store.engine

    @property
    def params(self) -> RecallParams | None:
        """The store's own ranking knobs; None: the policy installed in the cluster ranks."""
        return self.store.params

    async def close(self) -> None:
        await run(self.store.close)

    async def flush(self, timeout: float | None = None) -> bool:
        return await run(self.store.flush, timeout)

    async def alias(self) -> str:
        """The memories alias (checks the installation on first use: `NotInstalled`)."""
        return await run(lambda: self.store.alias)

    async def remember(self, content: str | bytes, namespace: str = "default", *, dry_run: bool = False,
                       **fields: Any) -> WriteResult:
        return await run(self.store.remember, content, namespace, dry_run=dry_run, **fields)

    async def remember_many(self, items: Sequence[MemoryInput], *, dry_run: bool = False, batch_size: int = 200,
                            progress: Callable[[int], None] | None = None) -> list[WriteResult]:
        return await run(self.store.remember_many, items, dry_run=dry_run, batch_size=batch_size, progress=progress)

    async def recall(self, query: str, namespace: str, k: int = 5, *, params: RecallParams | None = None,
                     now: datetime | str | None = None, as_of: datetime | str | None = None,
                     touch: bool = True, explain: bool = False, fusion: Fusion | None = None) -> RecallResult:
        return await run(self.store.recall, query, namespace, k, params=params, now=now, as_of=as_of, touch=touch,
                         explain=explain, fusion=fusion)

    async def installed_params(self) -> RecallParams:
        return await run(self.store.installed_params)

    async def ranking_params(self) -> RecallParams:
        return await run(self.store.ranking_params)

    async def touch(self, namespace: str, ids: Iterable[str], now: datetime, rho: float) -> None:
        await run(self.store.touch, namespace, ids, now, rho)

    async def get(self, namespace: str, memory_id: str) -> Memory:
        return await run(self.store.get, namespace, memory_id)

    async def history(self, namespace: str, memory_id: str) -> list[Memory]:
        return await run(self.store.history, namespace, memory_id)

    async def recent(self, namespace: str, limit: int = 20) -> list[Memory]:
        return await run(self.store.recent, namespace, limit)

    async def forget(self, namespace: str, memory_id: str, *, reason: str | None = None) -> Memory:
        return await run(self.store.forget, namespace, memory_id, reason=reason)

    async def count(self, namespace: str | None = None, status: str | None = "active") -> int:
        return await run(self.store.count, namespace, status)

    async def review(self, namespace: str) -> list[Pending]:
        return await run(self.store.review, namespace)

    async def settle(self, namespace: str, older_id: str, newer_id: str, verdict: str, *, by: str = "person") -> None:
        await run(self.store.settle, namespace, older_id, newer_id, verdict, by=by)

    async def review_with(self, judge: MergeJudge, namespace: str) -> dict[str, int]:
        return await run(self.store.review_with, judge, namespace)

    async def repair(self, namespace: str, *, apply: bool = False) -> list[Finding]:
        return await run(self.store.repair, namespace, apply=apply)

    async def restore(self, namespace: str, memory_id: str, *, retire_successor: bool = True) -> Memory:
        return await run(self.store.restore, namespace, memory_id, retire_successor=retire_successor)

    async def export(self, out: IO[str], namespaces: Sequence[str], *, all_versions: bool = False,
                     vectors: bool = True, progress: Callable[[int], None] | None = None) -> int:
        return await run(self.store.export, out, namespaces, all_versions=all_versions, vectors=vectors,
                         progress=progress)

    async def export_to(self, path: str, namespaces: Sequence[str], *, all_versions: bool = False,
                        vectors: bool = True, resume: bool = False, progress: Callable[[int], None] | None = None,
                        start: Callable[[exporting.Resume], None] | None = None) -> int:
        return await run(self.store.export_to, path, namespaces, all_versions=all_versions, vectors=vectors,
                         resume=resume, progress=progress, start=start)

    async def restore_export(self, path: str, *, progress: Callable[[int], None] | None = None,
                             total: Callable[[int], None] | None = None) -> exporting.Restored:
        return await run(self.store.restore_export, path, progress=progress, total=total)

    async def erase(self, *, namespaces: Sequence[str] = (), entity: str | None = None, ids: Sequence[str] = (),
                    dry_run: bool = False) -> erasing.Erased:
        return await run(self.store.erase, namespaces=namespaces, entity=entity, ids=ids, dry_run=dry_run)

    async def retention_due(self, policy: DecayPolicy, namespaces: Sequence[str] = ()) -> list[retention.Due]:
        """The memories the policy's [retention] rules erase now (pinned ones never), all read."""
        return await run(lambda: list(self.store.retention_due(policy, namespaces)))

    async def apply_retention(self, policy: DecayPolicy, namespaces: Sequence[str] = ()) -> retention.Applied:
        return await run(self.store.apply_retention, policy, namespaces)
