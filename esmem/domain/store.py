"""MemoryStore: the one object an application holds — a writer and a recaller over one installed prefix.

Write: validate -> score importance -> lookup + merge decision -> bulk write (`writer`).
Read: template params -> one `_msearch/template` call -> MMR -> recent-N -> reheat (`recaller`).
"""
from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

from esmem.domain.embedding import Embedder
from esmem.domain.hybrid import Fusion, Semantic
from esmem.domain.importance import Scorer, rule_scorer
from esmem.domain.merge_judge import MergeJudge
from esmem.domain.merge import MergePolicy
from esmem.domain.policy import DecayPolicy
from esmem.domain.ranking import RecallParams
from esmem.domain.recaller import MAX_K, Recaller
from esmem.domain import erase as erasing
from esmem.domain import export as exporting
from esmem.domain import repair, retention, review
from esmem.domain.reheat import flush_all
from esmem.domain.repair import Finding
from esmem.domain.review import Pending
from esmem.domain.types import Memory, MemoryInput, RecallResult, WriteResult
from esmem.domain.validate import Limits
from esmem.domain.writer import Writer
from esmem.errors import InvalidInput
from esmem.index.catalog import Catalog, Search
from esmem.index.connection import ConnectionConfig
from esmem.index.engine import Engine
from esmem.values import utcnow

TOMBSTONE = "Forgotten at the user's request"  # how a tombstone of `forget` begins (counted by growth)


class MemoryStore:
    """Memories of every namespace under one installed prefix. Constructing one does no I/O."""

    def __init__(self, engine: Engine, prefix: str = "esmem", *, params: RecallParams | None = None,
                 merge: MergePolicy | None = None, scorer: Scorer = rule_scorer,
                 max_content_bytes: int = 64 * 1024, max_future: timedelta = timedelta(days=1),
                 clock: Callable[[], datetime] = utcnow, embedder: Embedder | None = None,
                 fusion: Fusion | None = None, merge_judge: MergeJudge | None = None,
                 background_reheat: bool = True):
        self.engine = engine
        self.catalog = Catalog(engine, prefix)
        self.names = self.catalog.names
        self.merge = merge or MergePolicy()
        self.scorer, self.clock = scorer, clock
        # optional semantic leg (esmem/domain/hybrid.py): vectors on write, kNN leg fused into recall
        self.semantic = Semantic(self.catalog, embedder, fusion) if embedder is not None else None
        self.writer = Writer(self.catalog, self.merge, scorer, Limits(max_content_bytes, max_future), clock,
                             self.semantic, merge_judge)  # merge_judge: esmem/domain/merge_judge.py
        self.recaller = Recaller(self.catalog, params, clock, self.semantic, background_reheat)
        # tombstones skip the merge look-up: each supersedes exactly the memory it names, and two
        # tombstones never merge with each other or with a real memory
        self._tombstones = Writer(self.catalog, MergePolicy(enabled=False), scorer, Limits(max_content_bytes, max_future),
                                  clock, self.semantic)

    @classmethod
    def connect(cls, target: "str | ConnectionConfig | Engine | None" = None, prefix: str = "esmem",
                **options: Any) -> "MemoryStore":
        """The one-line way in: a store over the cluster at `target` (a URL, a ConnectionConfig or an
        Engine); None reads ESMEM_URL and the other ESMEM_* connection variables, as the CLI does. A URL
        keeps the credentials and TLS options of the environment. An index installed with an embedder
        gets it loaded (as the CLI does) unless `embedder=` is given; `options` go to the constructor."""
        from esmem.domain.hybrid import embedder_for

        if isinstance(target, Engine):
            engine = target
        else:
            engine = Engine(target if isinstance(target, ConnectionConfig) else ConnectionConfig.from_env(url=target))
        if "embedder" not in options:
            options["embedder"] = embedder_for(engine, prefix)
        return cls(engine, prefix, **options)

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Write what recalls queued (reheat write-back, esmem/domain/reheat.py); the engine stays open."""
        self.flush()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the queued reheat write-backs of every store of this process (False if `timeout`
        passed first), so reads see them; failures warn."""
        return flush_all(timeout)

    @property
    def params(self) -> RecallParams | None:
        """The store's own ranking knobs; None: the policy installed in the cluster ranks."""
        return self.recaller.params

    @property
    def alias(self) -> str:
        """The memories alias (checks the installation on first use: `NotInstalled`)."""
        return self.catalog.alias

    def remember(self, content: str | bytes, namespace: str = "default", *, dry_run: bool = False,
                 **fields: Any) -> WriteResult:
        """Write one memory through the merge decision; `dry_run` decides without writing. Pass
        `idempotency_key=` (or `valid_from=`) to make a retry after a failure land on the same memory."""
        return self.writer.write([MemoryInput(content, namespace, **fields)], dry_run=dry_run)[0]

    def remember_many(self, items: Sequence[MemoryInput], *, dry_run: bool = False, batch_size: int = 200,
                      progress: Callable[[int], None] | None = None) -> list[WriteResult]:
        """Write memories in input order, idempotently (see `Writer.write`)."""
        return self.writer.write(items, dry_run=dry_run, batch_size=batch_size, progress=progress)

    def recall(self, query: str, namespace: str, k: int = 5, *, params: RecallParams | None = None,
               now: datetime | str | None = None, as_of: datetime | str | None = None,
               touch: bool = True, explain: bool = False, fusion: Fusion | None = None) -> RecallResult:
        """Top-k memories of `namespace` for `query`, ranked in the engine, diversified by MMR
        (`fusion`: how the kNN leg joins, with an embedder; default the store's)."""
        return self.recaller.recall(query, namespace, k, params=params, now=now, as_of=as_of, touch=touch,
                                    explain=explain, fusion=fusion)

    def installed_params(self) -> RecallParams:
        """The ranking policy installed in the cluster (re-read at most every few seconds)."""
        return self.recaller.installed_params()

    def ranking_params(self) -> RecallParams:
        """The knobs a recall without explicit `params` uses: the store's, else the installed policy."""
        return self.recaller.ranking_params()

    def touch(self, namespace: str, ids: Iterable[str], now: datetime, rho: float) -> None:
        self.recaller.touch(namespace, ids, now, rho)

    # Reads flush the process's queued accesses first: a process always sees its own reheats.
    def get(self, namespace: str, memory_id: str) -> Memory:
        self.flush()
        return self.recaller.get(namespace, memory_id)

    def history(self, namespace: str, memory_id: str) -> list[Memory]:
        self.flush()
        return self.recaller.history(namespace, memory_id)

    def recent(self, namespace: str, limit: int = 20) -> list[Memory]:
        """The `limit` (1..1000) newest active memories of a namespace, newest first (no reheat)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_K:
            raise InvalidInput(f"limit must be an integer in 1..{MAX_K}, got {limit!r}")
        self.flush()
        resp = self.catalog.search(Search("recent", {"namespace": namespace, "size": limit}, routing=namespace))
        return [Memory.from_hit(h["_id"], h["_source"]) for h in resp["hits"]["hits"]]

    def forget(self, namespace: str, memory_id: str, *, reason: str | None = None) -> Memory:
        """Stop recalling a memory: a tombstone supersedes it (nothing is deleted), so recall and
        context no longer return it, `history` still shows it and `restore` brings it back. Returns
        the tombstone, which keeps the memory's `external_id` (a caller's key then names the tombstone).
        Only an active memory can be forgotten (`InvalidInput` otherwise)."""
        target = self.get(namespace, memory_id)
        if target.status != "active":
            raise InvalidInput(f"memory {memory_id} is {target.status}, not active: nothing to forget")
        note = f"{TOMBSTONE}{': ' + reason.strip() if reason and reason.strip() else ''}"
        r = self._tombstones.write([MemoryInput(note, namespace, kind=target.kind, importance=1, source="agent",
                                                supersedes=memory_id, metadata={"tombstone": True},
                                                external_id=target.external_id)])[0]
        return self.get(namespace, r.id)

    def count(self, namespace: str | None = None, status: str | None = "active") -> int:
        self.flush()
        return self.recaller.count(namespace, status)

    def review(self, namespace: str) -> list[Pending]:
        """The merge decisions the write path left uncertain in a namespace, still open, newest first."""
        self.flush()
        return review.pending(self.catalog, namespace)

    def settle(self, namespace: str, older_id: str, newer_id: str, verdict: str, *, by: str = "person") -> None:
        """Settle an open uncertain pair: `replaces` (the older memory is superseded by the newer) or
        `coexists` (both stay, unlinked); the verdict is recorded on both memories."""
        review.settle(self.catalog, namespace, older_id, newer_id, verdict, by=by, now=self.clock(),
                      run=self.writer.scripted)

    def review_with(self, judge: MergeJudge, namespace: str) -> dict[str, int]:
        """Let a merge judge settle the open pairs of a namespace (its None leaves a pair open)."""
        self.flush()
        return review.judge_all(self.catalog, namespace, judge, now=self.clock(), run=self.writer.scripted)

    def repair(self, namespace: str, *, apply: bool = False) -> list[Finding]:
        """The supersessions of a namespace today's merge decision would not make (esmem/domain/repair.py);
        with `apply`, each is undone: the older memory active again (linked for review when uncertain)."""
        self.flush()
        found = list(repair.findings(self.catalog, namespace, self.merge))
        if apply:
            repair.apply(self.catalog, found, now=self.clock(), run=self.writer.scripted)
        return found

    def restore(self, namespace: str, memory_id: str, *, retire_successor: bool = True) -> Memory:
        """Undo a merge: reactivate a superseded memory (its successor retired, or only unlinked)."""
        old = self.get(namespace, memory_id)
        successor = self.get(namespace, old.superseded_by) if old.superseded_by and old.status != "active" else None
        self.writer.restore(old, successor, retire_successor=retire_successor)
        return self.get(namespace, memory_id)

    # -- lifecycle: export / restore ------------------------------------------------------------
    def export(self, out: IO[str], namespaces: Sequence[str], *, all_versions: bool = False, vectors: bool = True,
               progress: Callable[[int], None] | None = None) -> int:
        """Write the namespaces' memories to `out` in the export format (esmem/domain/export.py),
        streamed; active ones only unless `all_versions`. How many memories were written."""
        self.flush()
        return exporting.export(self.catalog, out, namespaces, now=self.clock(), all_versions=all_versions,
                                vectors=vectors, progress=progress)

    def export_to(self, path: str, namespaces: Sequence[str], *, all_versions: bool = False, vectors: bool = True,
                  resume: bool = False, progress: Callable[[int], None] | None = None,
                  start: Callable[[exporting.Resume], None] | None = None) -> int:
        """`export` into the file at `path`; with `resume`, continue an interrupted export of the same
        namespaces and options in that file (no line twice, none missing: a truncated last line is
        written again; `start(point)` is told where it continues). How many memories the file holds."""
        point = exporting.resume_point(path, namespaces, all_versions=all_versions, vectors=vectors) if resume \
            else exporting.Resume(None, 0, 0, False)
        if point.after_id is not None and not self.catalog.ids_ordered:
            raise InvalidInput(f"{self.engine.info} exports in shard order, not by id: an interrupted export "
                               "cannot resume there; export again")
        if start:
            start(point)
        self.flush()
        if point.offset:
            os.truncate(path, point.offset)
        with open(path, "a" if point.offset else "w", encoding="utf-8") as out:
            return exporting.export(self.catalog, out, namespaces, now=self.clock(), all_versions=all_versions,
                                    vectors=vectors, progress=progress, resume=point)

    def restore_export(self, path: str, *, progress: Callable[[int], None] | None = None,
                       total: Callable[[int], None] | None = None) -> exporting.Restored:
        """Create the memories of an export file exactly as exported (ids, links, statistics), no merge;
        the file is checked whole first (`total`: how many it holds), and running it again resumes."""
        return exporting.restore(self.catalog, path, progress=progress, total=total)

    # -- lifecycle: erase -----------------------------------------------------------------------
    def erase(self, *, namespaces: Sequence[str] = (), entity: str | None = None, ids: Sequence[str] = (),
              dry_run: bool = False) -> erasing.Erased:
        """Delete for good every memory the selector names (namespaces; an entity, named or mentioned;
        ids) and every version linked to them, then count again (`remaining`, 0: the proof) and keep
        an audit record without content (esmem/domain/erase.py). A dry run only lists them."""
        self.flush()  # queued reheat write-backs land before the delete, not against deleted documents
        return erasing.erase(self.catalog, now=self.clock(), namespaces=namespaces, entity=entity, ids=ids,
                             dry_run=dry_run)

    # -- lifecycle: retention -------------------------------------------------------------------
    def retention_due(self, policy: DecayPolicy, namespaces: Sequence[str] = ()) -> Iterator[retention.Due]:
        """The memories the policy's [retention] rules erase now (pinned ones never), streamed."""
        self.flush()
        return retention.due(self.catalog, policy.retention_rules, self.clock(), policy.params().importance_floor,
                             policy.evergreen_kinds, namespaces)

    def apply_retention(self, policy: DecayPolicy, namespaces: Sequence[str] = ()) -> retention.Applied:
        """Erase what `retention_due` lists (delete-by-query, sliced), count again and audit the run."""
        self.flush()
        return retention.apply(self.catalog, policy.retention_rules, self.clock(),
                               policy.params().importance_floor, policy.evergreen_kinds, namespaces)
