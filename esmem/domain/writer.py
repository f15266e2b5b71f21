"""The write path: validate -> score importance -> look up candidates -> merge decision -> bulk write.

The protocol of one batch (docs/concepts/guarantees.md) makes writes idempotent and safe to retry: ids are
deterministic, documents are created if absent, and every change to an existing memory is a stored
update script (`retire`, `link`, `restate`, `unretire`) that is atomic on that memory. Speed devices
with a module of their own: the collector pause (esmem/domain/collector.py) and skipped look-ups in
new groups (esmem/domain/novelty.py).
"""
from __future__ import annotations

from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from esmem.domain.analysis import truncate_query
from esmem.domain.hybrid import Semantic
from esmem.domain.importance import Scorer, score_batch
from esmem.domain.pinned import derive_applies_to
from esmem.domain.collector import paused_collector
from esmem.domain.merge import Candidate, Decision, Mergeable, MergePolicy, could_merge, decide
from esmem.domain.novelty import Novelty
from esmem.domain.merge_judge import MergeJudge, verdicts
from esmem.domain.types import Memory, MemoryInput, WriteResult
from esmem.domain.validate import Limits, differences, document
from esmem.errors import EngineError, IdTaken, InvalidInput, InvalidItem
from esmem.index.catalog import Catalog, ScriptOp, Search
from esmem.tracing import carried, span
from esmem.values import iso

MAX_QUERY_TERMS = 140  # the recall query repeats the terms in up to 7 clauses; the engine allows 1024 in all


def candidates(resp: Mapping[str, Any], exclude: str | None = None) -> list[Candidate]:
    """Merge candidates from a `lookup` response."""
    return [Candidate(h["_id"], h["_score"], h["_source"])
            for h in resp["hits"]["hits"] if h["_id"] != exclude]


class Writer:
    """Writes memories of any namespace under one installed prefix."""

    def __init__(self, catalog: Catalog, merge: MergePolicy, scorer: Scorer, limits: Limits,
                 clock: Callable[[], datetime], semantic: Semantic | None = None, judge: MergeJudge | None = None):
        self.catalog = catalog
        self.semantic = semantic  # optional (esmem/domain/hybrid.py): every memory gets a vector
        self.judge = judge  # optional (esmem/domain/merge_judge.py): decides supersede instead of the lexical rule
        self._known: dict[tuple[str, str], bool] = {}  # the judge's answers within one write
        self._novelty: Novelty | None = None  # within one long write, without a judge
        self._mine: set[int] | None = set()  # sequence numbers this write used lately (None: not known)
        self._clean: int | None = None  # every write up to this number is this one's or searchable (`_quiet`)
        self.merge = merge
        self.scorer = scorer
        self.limits = limits
        self.clock = clock

    def _prepare(self, items: Sequence[MemoryInput]) -> list[tuple[str, dict[str, Any]]]:
        """Validate everything and score importance before anything is written."""
        now = self.clock()
        docs = []
        for i, item in enumerate(items):
            try:
                docs.append(document(item, now, self.limits))
            except (InvalidInput, TypeError, ValueError) as e:
                raise (InvalidItem(i, str(e)) if len(items) > 1 else InvalidInput(str(e))) from None
        todo = [d for _, d in docs if d["importance"] is None]
        if todo:
            for d, (score, rule) in zip(todo, score_batch(self.scorer, [d["content"] for d in todo])):
                d["importance"], d["importance_rule"] = score, rule
        for _, d in docs:
            derive_applies_to(d)
        if self.semantic:
            self.semantic.fill([d for _, d in docs])
        return docs

    def _lookup_search(self, doc: Mapping[str, Any], after_seq_no: int | None = None) -> Search:
        params = {"namespace": doc["namespace"], "query": truncate_query(doc["content"], MAX_QUERY_TERMS),
                  "size": self.merge.candidates, "kinds": [doc["kind"]]}
        if after_seq_no is not None:
            params["after_seq_no"] = after_seq_no
        return Search("lookup", params, routing=doc["namespace"])

    def _lookups(self, doc: Mapping[str, Any], after_seq_no: int | None = None) -> list[Search]:
        """The merge lookup of a document: BM25 (`lookup`), and with an embedder the kNN leg (`lookup_knn`)
        that finds a paraphrased update sharing few words with what it replaces; `after_seq_no`: only
        memories written after that sequence number (the settle step)."""
        lexical = self._lookup_search(doc, after_seq_no)
        if not (self.semantic and doc.get("embedding")):
            return [lexical]
        params = {"namespace": doc["namespace"], "vector": doc["embedding"], "size": self.merge.candidates,
                  "kinds": [doc["kind"]]}
        if after_seq_no is not None:
            params["after_seq_no"] = after_seq_no
        return [lexical, Search("lookup_knn", params, routing=doc["namespace"])]

    @staticmethod
    def _candidates(responses: Sequence[Mapping[str, Any]], exclude: str | None = None) -> list[Candidate]:
        """The lookup legs' candidates, BM25's first; one only the kNN leg found has bm25 0. The kNN
        leg's score is (1 + cosine) / 2 (cosine similarity, OpenSearch's lucene engine and
        Elasticsearch alike): each candidate it found carries its cosine to the new memory, for the
        reading of a reworded change (pairs.read). No responses: a look-up the write skipped."""
        if not responses:
            return []
        out = {c.id: c for c in candidates(responses[0], exclude)}
        for resp in responses[1:]:
            for c in candidates(resp, exclude):
                cosine = round(2 * c.bm25 - 1, 6)
                out[c.id] = replace(out.get(c.id, replace(c, bm25=0.0)), cosine=cosine)
        return list(out.values())

    def _decide(self, items: Sequence[tuple[Mapping[str, Any], list[Candidate]]]) -> list[Decision]:
        """merge.decide per (document, candidates); with a judge, its answers settle the pairs the reading
        left uncertain (asked once for the batch, checked before anything is written)."""
        judged: list[dict[str, bool | None] | None] = list(verdicts(
            self.judge, [(d["content"], d["kind"], d["valid_from"], c) for d, c in items],
            self.merge, self._known, [bool(d.get("thread")) for d, _ in items])) if self.judge else [None] * len(items)
        return [decide(d["content"], d["kind"], c, self.merge, d["valid_from"], v, turn=bool(d.get("thread")))
                for (d, c), v in zip(items, judged)]

    def lookup(self, doc: Mapping[str, Any], exclude: str | None = None) -> list[Candidate]:
        """The merge candidates of a document: same namespace and kind, ranked by the `lookup` template
        (and the kNN leg's nearest with an embedder)."""
        return self._candidates(self.catalog.msearch(self._lookups(doc), "merge lookup"), exclude)

    def write(self, items: Sequence[MemoryInput], *, dry_run: bool = False,
              batch_size: int = 200, progress: Callable[[int], None] | None = None) -> list[WriteResult]:
        """Write memories in order; look-ups are batched with `_msearch`, writes with `_bulk`.

        Everything is validated before the first write. Each memory has a deterministic id, so
        running the same input again (after a crash, a cut connection, or just twice) converges to
        the state of one clean run; memories already written come back with `replayed=True`.
        `progress(n)`: n more of the leading memories are written (a prefix of the input, so an
        interrupted import can say up to which line everything is durable; later ones may be too).
        Merge decisions follow input order: a memory's look-up sees every earlier memory it could
        merge with. One that could merge with an earlier memory of its batch (or repeats its id)
        waits for the next batch, with every later one that could merge with it; the others stay
        (cutting the batch there instead made batches of ~50 on a corpus of restatements)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInput(f"batch_size must be a positive integer, got {batch_size!r}")
        with span("esmem.remember", **{"esmem.memories": len(items), "esmem.dry_run": dry_run}) as traced, \
                paused_collector() if len(items) > batch_size else nullcontext():
            results = self._write(items, dry_run, batch_size, progress)
            for action in ("added", "superseded", "duplicate", "outdated", "uncertain"):
                traced.set_attribute(f"esmem.outcome.{action}", sum(r.action == action for r in results))
            traced.set_attribute("esmem.replayed", sum(r.replayed for r in results))
            return results

    def _write(self, items: Sequence[MemoryInput], dry_run: bool, batch_size: int,
               progress: Callable[[int], None] | None) -> list[WriteResult]:
        with span("esmem.remember.validate"):
            pairs = self._prepare(items)
        self._known, self._mine, self._clean = {}, set(), None
        self._novelty = Novelty(self.merge, {(d["namespace"], d["kind"]) for _, d in pairs},
                                min(10 * batch_size + 100, 10_000), self.semantic is not None) \
            if self.merge.enabled and self.judge is None and len(pairs) > batch_size else None
        explicit = [(i, d) for i, d in pairs if d.get("supersedes")]
        if explicit:  # an unknown predecessor fails before anything is written (unless already done)
            found = self._existing(explicit)
            for doc_id, d in explicit:
                if doc_id not in found:
                    self._explicit(d, doc_id)
        if not self.merge.enabled and not explicit and not dry_run:
            return self._write_plain_all(pairs, batch_size, progress)
        results: dict[int, WriteResult] = {}
        todo = list(range(len(pairs)))
        durable = 0  # every memory before this position is written
        # A batch's last step (refresh, settle) runs in a thread while the next batch is planned: that
        # step is the engine's, planning (tokens, the merge measure) the client's. The next batch
        # sends nothing before the step is over, so the engine sees the requests in the same order.
        with ThreadPoolExecutor(max_workers=1) as pool:
            finishing: Future[None] | None = None
            while todo:
                batch = self._batch(pairs, todo, batch_size)
                if finishing:
                    finishing.result()
                done, finish = self._write_batch([pairs[n] for n in batch], dry_run)
                durable = self._took(pairs, batch, done, results, durable, progress)
                ahead = 4 * batch_size  # a batch comes from the first `ahead` of todo (_batch)
                todo = [n for n in todo[:ahead] if n not in results] + todo[ahead:]
                finishing = pool.submit(carried(finish)) if finish and todo else None
                if finish and not todo:  # the last batch (a single one starts no thread)
                    finish()
        if not self.merge.enabled and not dry_run:
            self.catalog.refresh()  # one refresh, not one per batch
        return [results[n] for n in range(len(pairs))]

    def _took(self, pairs: Sequence[tuple[str, dict[str, Any]]], batch: Sequence[int],
              done: Sequence[tuple[str, WriteResult]], results: dict[int, WriteResult], durable: int,
              progress: Callable[[int], None] | None) -> int:
        """Record a batch's results (and what the novelty learns from them), report the memories now
        durable in input order; returns the new durable position."""
        at = {pairs[n][0]: n for n in batch}  # ids are unique within a batch
        results.update((at[doc_id], result) for doc_id, result in done)
        if self._novelty:
            for doc_id, result in done:
                doc = pairs[at[doc_id]][1]
                if result.action in ("added", "superseded", "uncertain"):
                    self._novelty.learn(doc_id, doc, written=not result.replayed)
                if not result.replayed:
                    self._novelty.forget(doc, result.superseded)
        before = durable
        while durable in results:
            durable += 1
        if progress and durable > before:
            progress(durable - before)
        return durable

    def _write_plain_all(self, pairs: list[tuple[str, dict[str, Any]]], batch_size: int,
                         progress: Callable[[int], None] | None) -> list[WriteResult]:
        """Without merge, batches are independent: two `_bulk` calls in flight, so the engine indexes one
        while the client encodes the next. A batch that repeats an earlier id (its replay) waits
        for every batch before it; `progress` counts batches in input order; one refresh at the end."""
        results: list[WriteResult] = []
        pending: deque[tuple[int, Future[list[WriteResult]]]] = deque()

        def land() -> None:  # the oldest batch in flight; on an error, the other lands first
            size, fut = pending.popleft()
            try:
                results.extend(fut.result())
            except BaseException:
                wait([f for _, f in pending])
                raise
            if progress:
                progress(size)

        with ThreadPoolExecutor(max_workers=2) as pool:
            seen: set[str] = set()
            start = 0
            while start < len(pairs):
                batch = self._batch(pairs, range(start, len(pairs)), batch_size)
                if any(pairs[n][0] in seen for n in batch):
                    while pending:
                        land()
                seen.update(pairs[n][0] for n in batch)
                while len(pending) >= 2:
                    land()
                pending.append((len(batch), pool.submit(self._write_plain, [pairs[n] for n in batch], False)))
                start = batch[-1] + 1
            while pending:
                land()
        self.catalog.refresh()  # one refresh, not one per batch
        return results

    def _batch(self, pairs: Sequence[tuple[str, Mapping[str, Any]]], todo: Sequence[int], batch_size: int) -> list[int]:
        """The next batch: positions of `todo` (in input order, the first always in it) of which none could
        merge with an earlier one, by the measure the decision uses; what could waits, and so does every
        later memory that could merge with one waiting. Looks at most 4 x batch_size memories ahead."""
        ids: set[str] = set()
        looked_at: dict[tuple[str, str], Mergeable] = {}  # per group: the memories taken or waiting
        batch: list[int] = []
        for looked, n in enumerate(todo):
            if len(batch) == batch_size or looked == 4 * batch_size:  # bounded: all alike is one at a time
                break
            doc_id, d = pairs[n]
            if self.merge.enabled:
                key = (d["namespace"], d["kind"])
                group = looked_at.get(key) or looked_at.setdefault(
                    key, Mergeable(d["kind"], self.merge, self.semantic is not None))
                waits = doc_id in ids or group.any(d["content"])
                group.add(d["content"])
                if waits:
                    ids.add(doc_id)
                    continue
            elif doc_id in ids:  # the same memory twice: the second is a replay of the first
                break
            ids.add(doc_id)
            batch.append(n)
        return batch

    # The write protocol of one batch (docs/concepts/guarantees.md):
    #   1. ids already stored are replays: their links are repaired, nothing else is written; ids
    #      that some memory names in `superseded_by` are writes cut after step 2: they resume;
    #   2. targets are retired by the `retire` script (atomic on the target: only an ACTIVE memory
    #      can be retired, and the retire records its successor's id - the durable intent);
    #   3. a write that lost a target to another writer re-decides against what is active now;
    #   4. the new memories are created (create-if-absent), `supersedes` = the targets they retired;
    #      if the engine rejects any, the batch's creates are deleted and its retires undone;
    #   5. duplicates reinforce their target once per write id (`restate` script), outdated memories
    #      are linked from their successor and the settle step runs (`link` script: add, never overwrite).
    def _write_batch(self, pairs: list[tuple[str, dict[str, Any]]],
                     dry_run: bool) -> tuple[list[tuple[str, WriteResult]], Callable[[], None] | None]:
        """Decide and write a batch, or part of it: (id, result) of the memories it wrote, and the step
        that must run before the next batch (`_commit`'s refresh and settle; None: nothing left)."""
        if not self.merge.enabled and not any(d.get("supersedes") for _, d in pairs):
            return list(zip([i for i, _ in pairs], self._write_plain(pairs, dry_run))), None
        found = self._existing(pairs)
        for doc_id, d in pairs:  # a stored id is a replay only if it holds what this write would store
            if doc_id in found and (fields := differences(found[doc_id], d)):
                raise IdTaken(doc_id, fields)
        fresh = [i for i, _ in pairs if i not in found]
        head = pairs[:next((n for n, (i, _) in enumerate(pairs) if i in found), len(pairs))]
        # One round trip for what the batch needs to know: writes absorbed as duplicates, retires
        # an interrupted run left behind, and the merge candidates of every memory up to the first replay.
        searches = [self._restated_search(fresh, {d["namespace"] for i, d in pairs if i in fresh})] if fresh else []
        legs: list[list[Search]] = []
        novelty, skipped = self._novelty, False
        if head:
            searches.append(self._superseded_by_search([i for i, _ in head], {d["namespace"] for _, d in head}))
            if self.merge.enabled:
                legs = [[] if novelty and novelty.skips(d) else self._lookups(d) for _, d in head]
                skipped = any(not group for group in legs)
                searches += [s for group in legs for s in group]
                if novelty:
                    searches.append(novelty.search())
        # Every write numbered up to `seen` is in the look-ups below (read before the refresh): the settle
        # step then needs to look only at what was written after it (None: look at everything).
        # After a quiet settle step nothing was written since the last refresh: neither is needed.
        clean, self._clean = self._clean, None
        if clean is None and self.merge.enabled and head:
            point = self.catalog.checkpoint()
            seen = point.seen if point else None
        else:
            seen = clean if self.merge.enabled and head else None
        if searches and clean is None:
            self.catalog.refresh()  # the retires and restates of earlier batches are searchable
        with span("esmem.remember.lookup", **{"esmem.searches": len(searches)}):
            responses = self.catalog.msearch(searches, "merge lookup") if searches else []
        # A batch that skipped look-ups decided on what was known up to the novelty's cover: its settle
        # step looks at what was written after that.
        settle_from = novelty.cover if skipped and novelty else seen
        if novelty and head:  # (a novelty exists only with merge on)
            if seen is not None and novelty.read(responses[-1]):
                novelty.cover = seen
            else:
                self._novelty = None
        restated = self._restated_in(responses[0], fresh) if fresh else {}
        known = lambda pair: pair[0] in found or pair[0] in restated  # noqa: E731
        if known(pairs[0]):
            end = next((n for n, pair in enumerate(pairs) if not known(pair)), len(pairs))
            return list(zip([i for i, _ in pairs[:end]], self._replay(pairs[:end], found, restated, dry_run))), None
        batch = pairs[:next((n for n, pair in enumerate(pairs) if known(pair)), len(pairs))]  # a prefix of head
        in_batch = {i for i, _ in batch}
        resumed: dict[str, list[str]] = defaultdict(list)
        for winner, loser in self._superseded_in(responses[1]):
            if winner in in_batch:
                resumed[winner].append(loser)
        if self.merge.enabled:
            found_at = _groups(responses[2:], [len(g) for g in legs])
            with span("esmem.remember.decide", **{"esmem.memories": len(batch)}) as traced:
                candidates = [(d, self._candidates(r, exclude=doc_id)) for (doc_id, d), r in zip(batch, found_at)]
                decisions = self._decide(candidates)
                traced.set_attribute("esmem.candidates", sum(len(c) for _, c in candidates))
                for action in {dec.action for dec in decisions}:
                    traced.set_attribute(f"esmem.decision.{action}", sum(dec.action == action for dec in decisions))
            # A look-up that finds the memory itself: another writer created it since `found` was read. It
            # is no candidate of its own (it would retire itself); the create will find it: a replay.
            decisions = [Decision("add") if any(h["_id"] == doc_id for resp in r for h in resp["hits"]["hits"])
                         else dec for (doc_id, _), r, dec in zip(batch, found_at, decisions)]
        else:
            decisions = [Decision("add") for _ in batch]
        decisions = [self._explicit(d, doc_id) if d.get("supersedes") else
                     Decision("supersede", dec.targets, dec.scores) if dec.action == "duplicate" and resumed.get(doc_id)
                     else dec for (doc_id, d), dec in zip(batch, decisions)]
        targeted: set[str] = set()
        keep = []  # one memory targeted twice in a batch: the later one waits and decides again
        for pair, dec in zip(batch, decisions):  # (no two memories of a batch can merge with each other)
            ids_ = {t.id for t in dec.targets}
            if not ids_ & targeted:
                keep.append((pair, dec))
            targeted |= ids_
        batch, decisions = [p for p, _ in keep], [d for _, d in keep]
        if dry_run:
            return [(i, self._result(i, dec, dry_run=True, doc=d)) for (i, d), dec in zip(batch, decisions)], None
        done, finish = self._commit([(i, d, dec) for (i, d), dec in zip(batch, decisions)], resumed, settle_from)
        return list(zip([i for i, _ in batch], done)), finish

    def _write_plain(self, pairs: list[tuple[str, dict[str, Any]]], dry_run: bool) -> list[WriteResult]:
        """No merge: create-if-absent under the deterministic id; a rejected batch is deleted again."""
        if dry_run:
            return [WriteResult("added", i, dry_run=True) for i, _ in pairs]
        existed = self._create([(doc_id, {**d, "written_as": "add"}) for doc_id, d in pairs])
        return [WriteResult("added", i, replayed=i in existed) for i, _ in pairs]

    def _create(self, docs: Sequence[tuple[str, Mapping[str, Any]]], *, refresh: str | None = None,
                retired: Sequence[tuple[str, str, str]] = ()) -> dict[str, dict[str, Any]]:
        """Create-if-absent in one `_bulk`: the stored documents of the ids that already existed, each
        one what this write would store (a replay). If the engine rejects any document, or an id holds
        another document or one these credentials cannot read (`IdTaken`), the ones this call created
        are deleted and the `retired` (namespace, target, winner) are made active again: nothing of
        the batch remains."""
        out = self.catalog.create(docs, refresh=refresh)
        for seq_no in out.seq_nos:
            self._wrote(seq_no)
        mine = dict(docs)
        existed = self.catalog.mget([(i, mine[i]["namespace"]) for i in sorted(out.existed)])
        taken = next(((i, differences(existed[i], mine[i]) if i in existed else []) for i in sorted(out.existed)
                      if i not in existed or differences(existed[i], mine[i])), None)
        if out.errors or taken:
            self.catalog.delete([(i, mine[i]["namespace"]) for i in out.created])
            self.scripted([ScriptOp(ns, target, "unretire", {"winner": winner}) for ns, target, winner in retired])
            self.catalog.refresh()
            if taken:
                raise IdTaken(*taken)
            raise EngineError(f"the engine rejected {len(out.errors)} of {len(docs)} memories of a batch "
                              f"({out.errors[0]}); none of that batch was kept")
        return existed

    def _existing(self, pairs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
        """The documents already stored under these ids (a replay, a retry, a resumed import)."""
        return self.catalog.mget([(i, d["namespace"]) for i, d in pairs])

    @staticmethod
    def _restated_search(ids: Sequence[str], namespaces: set[str]) -> Search:
        return Search("restated", {"size": len(ids), "ids": list(ids), "namespaces": sorted(namespaces)})

    @staticmethod
    def _restated_in(resp: Mapping[str, Any], ids: Sequence[str]) -> dict[str, str]:
        """Ids of earlier writes that were absorbed as duplicates -> the memory they reinforced."""
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
        if action in ("supersede", "explicit"):  # explicit: the caller named the predecessor
            return WriteResult("superseded", doc_id, tuple(sup if isinstance(sup, list) else [sup]), replayed=True,
                               dry_run=dry_run)
        if action == "uncertain":
            return WriteResult("uncertain", doc_id, possibly_updates=tuple(_listed(src.get("possibly_updates"))),
                               possibly_updated_by=(_listed(src.get("possibly_updated_by")) or [None])[0],
                               replayed=True, dry_run=dry_run)
        return WriteResult("added", doc_id, replayed=True, dry_run=dry_run)

    def _commit(self, work: list[tuple[str, dict[str, Any], Decision]], resumed: Mapping[str, list[str]],
                seen: int | None = None) -> tuple[list[WriteResult], Callable[[], None]]:
        """Steps 2-5 of the write protocol for decided memories; `resumed`: targets already retired
        for a memory by an earlier, interrupted run; `seen`: the checkpoint the decisions' look-ups saw.
        Returns the results and the last step, to run before anything else is written: the refresh
        and the settle step."""
        kept: dict[str, list[str]] = {i: list(resumed.get(i, ())) for i, _, _ in work}
        mems = [(i, d, dec) for i, d, dec in work if dec.action != "duplicate"]
        dups = [(i, d, dec) for i, d, dec in work if dec.action == "duplicate"]
        ops = [ScriptOp(d["namespace"], t.id, "retire", {"winner": doc_id, "invalid_at": d["valid_from"]})
               for doc_id, d, dec in mems if dec.action == "supersede" for t in dec.targets if t.id not in kept[doc_id]]
        lost: set[str] = set()
        for op, ok in zip(ops, self.scripted(ops)):  # 2. retire
            if ok:
                kept[op.params["winner"]].append(op.target)
            else:
                lost.add(op.params["winner"])
        results: dict[str, WriteResult] = {}
        final: dict[str, Decision] = {}
        for doc_id, d, dec in mems:  # 3. another writer changed a target first: decide again
            outcome = self._redecide(doc_id, d, kept[doc_id]) if doc_id in lost else dec
            if isinstance(outcome, WriteResult):
                results[doc_id] = outcome
            else:
                final[doc_id] = outcome
        docs: list[tuple[str, dict[str, Any]]] = []  # 4. create, refreshed so the next look-up sees the batch
        for doc_id, d, _ in mems:
            if doc_id not in final:
                continue
            dec = final[doc_id]
            written_as = "supersede" if kept[doc_id] and dec.action != "outdated" else dec.action
            body = {**d, "written_as": "explicit" if d.get("supersedes") and written_as == "supersede" else written_as,
                    "supersedes": kept[doc_id] or None}
            if dec.action == "outdated":
                body.update(status="superseded", superseded_by=dec.targets[0].id,
                            invalid_at=dec.targets[0].source["valid_from"])
            elif dec.action == "uncertain" and not kept[doc_id]:
                body.update(_uncertain_link(d, dec.targets[0]))
            docs.append((doc_id, body))
        creating = [(i, d) for i, d, _ in mems if i in final]
        existed: dict[str, dict[str, Any]] = {}
        if docs:
            retired = [(d["namespace"], t, i) for i, d in creating for t in kept[i]]
            existed = self._create(docs, retired=retired)
        # Another writer created the same id first (the same memory: `_create` checked it): this write is a
        # replay of what it stored. What this write retired for the id before it learnt so is linked
        # from the stored memory, which the retire names as successor (`link` adds, never overwrites).
        self.scripted([ScriptOp(d["namespace"], i, "link", {"loser": t}) for i, d in creating if i in existed
                        for t in kept[i]])
        for doc_id, d in creating:
            dec = final[doc_id]
            if doc_id in existed:
                results[doc_id] = self._replayed(doc_id, existed[doc_id], False)
            elif dec.action == "outdated":
                self._link(d["namespace"], dec.targets[0].id, doc_id)
                results[doc_id] = self._result(doc_id, dec)
            elif kept[doc_id]:
                results[doc_id] = WriteResult("superseded", doc_id, tuple(kept[doc_id]), scores=dec.scores,
                                              replayed=bool(resumed.get(doc_id)))
            elif dec.action == "uncertain":
                results[doc_id] = self._result(doc_id, dec, doc=d)
            else:
                results[doc_id] = WriteResult("added", doc_id, scores=dec.scores)
        restates = [ScriptOp(d["namespace"], dec.targets[0].id, "restate",
                     {"id": doc_id, "importance": d["importance"], "anchor_at": d["anchor_at"]}) for doc_id, d, dec in dups]
        for (doc_id, d, dec), ok in zip(dups, self.scripted(restates)):  # 5. duplicates, links, settle
            if ok:
                results[doc_id] = self._result(doc_id, dec)
                continue
            outcome = self._redecide(doc_id, d, [])  # its target moved on: decide again
            if isinstance(outcome, WriteResult):
                results[doc_id] = outcome
            else:
                (results[doc_id],), then = self._commit([(doc_id, d, outcome)], {})
                then()
        written = [(i, d) for i, d in creating if i not in existed and final[i].action != "outdated"]

        def finish() -> None:
            if docs or ops or restates:  # one refresh: the next look-up sees this batch (one segment, not two)
                self.catalog.refresh()
            if self.merge.enabled:
                self._settle(written, seen)
        return [results[i] for i, _, _ in work], finish

    def scripted(self, ops: Sequence[ScriptOp]) -> list[bool]:
        """The one compare-and-set step of the protocol: stored update scripts (atomic per memory,
        retried on version conflicts) in one `_bulk`; True where the script applied (now or earlier)."""
        out: list[bool] = []
        for op, outcome in zip(ops, self.catalog.run_scripts(ops)):
            if outcome.get("result") == "updated":
                self._wrote(outcome.get("_seq_no"))
            if outcome.get("status") == 404:
                out.append(False)
            elif outcome.get("error"):
                raise EngineError(f"bulk write failed: {outcome['error']}")
            elif outcome.get("result") == "noop" and op.script in ("link", "unretire"):  # nothing left to do
                out.append(True)
            elif outcome.get("result") == "noop":  # already done by this write, or the target moved on
                got = self.catalog.get(op.namespace, op.target)
                src = got["_source"] if got else {}
                by = src.get("restated_by") or []
                out.append(src.get("superseded_by") == op.params["winner"] if op.script == "retire"
                           else op.params["id"] in (by if isinstance(by, list) else [by]))
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
            self.catalog.refresh()
            dec = self._decide([(doc, self.lookup(doc, exclude=doc_id))])[0]
            if dec.action == "duplicate" and kept:
                dec = Decision("supersede", dec.targets, dec.scores)  # it replaced something: keep it
            if dec.action == "duplicate":
                target = dec.targets[0]
                if self.scripted([ScriptOp(ns, target.id, "restate", {"id": doc_id, "importance": doc["importance"],
                                                                        "anchor_at": doc["anchor_at"]})])[0]:
                    return self._result(doc_id, dec)
                continue
            if dec.action in ("add", "outdated", "uncertain"):
                return dec
            ops = [ScriptOp(ns, t.id, "retire", {"winner": doc_id, "invalid_at": doc["valid_from"]}) for t in dec.targets]
            won = [t.id for t, ok in zip(dec.targets, self.scripted(ops)) if ok]
            kept.extend(won)
            if len(won) == len(dec.targets):
                return dec
        raise EngineError(f"gave up merging {doc_id} after {attempts} concurrent conflicts")

    @staticmethod
    def _superseded_by_search(ids: Sequence[str], namespaces: set[str]) -> Search:
        return Search("superseded_by", {"ids": list(ids), "namespaces": sorted(namespaces)})

    @staticmethod
    def _superseded_in(resp: Mapping[str, Any]) -> list[tuple[str, str]]:
        """(winner, loser) for every memory retired in favour of one of the searched ids."""
        return [(h["_source"]["superseded_by"], h["_id"]) for h in resp["hits"]["hits"]]

    def _superseded_by(self, ids: Sequence[str], namespaces: set[str]) -> list[tuple[str, str]]:
        if not ids:
            return []
        self.catalog.refresh()
        return self._superseded_in(self.catalog.search(self._superseded_by_search(ids, namespaces)))

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
        for winner, loser in self._superseded_by(list(src_of), {src["namespace"] for src in src_of.values()}):
            need.add((src_of[winner]["namespace"], winner, loser))
        missing = []
        if need:
            winners = sorted({(ns, w) for ns, w, _ in need})
            links = {w: src.get("supersedes") or [] for w, src in self.catalog.mget([(w, ns) for ns, w in winners]).items()}
            missing = [(ns, w, l) for ns, w, l in sorted(need) if w in links
                       and l not in (links[w] if isinstance(links[w], list) else [links[w]])]
        self.scripted([ScriptOp(ns, w, "link", {"loser": l}) for ns, w, l in missing])

    def _settle(self, written: list[tuple[str, dict[str, Any]]], seen: int | None = None) -> None:
        """Concurrent writers can each add the same topic before seeing the other's write. Look
        again now that the writes are searchable: of two active same-topic memories the newer by
        (valid_from, recorded_at, id) supersedes the other, the same choice every writer makes.
        A twin the decision did not see was written after `seen` (the global checkpoint read before
        the decision's look-up), so only memories written since are looked at: a small set, where
        the first look-up scored the whole namespace."""
        written = self._may_have_twins(written, seen)
        if not written:
            return
        legs = [self._lookups(d, seen) for _, d in written]
        found_at = _groups(self.catalog.msearch([s for group in legs for s in group], "merge lookup"),
                           [len(g) for g in legs])
        pairs = [(doc_id, d, c) for (doc_id, d), r in zip(written, found_at) for c in self._candidates(r, exclude=doc_id)]
        # each twin on its own: a memory may have several (three writers wrote one topic at once)
        for (doc_id, d, twin), dec in zip(pairs, self._decide([(d, [c]) for _, d, c in pairs])):
            if dec.action not in ("supersede", "duplicate", "outdated"):
                continue
            mine = (d["valid_from"], d["recorded_at"], doc_id)
            theirs = (twin.source["valid_from"], twin.source.get("recorded_at", ""), twin.id)
            winner, loser = (doc_id, twin.id) if mine > theirs else (twin.id, doc_id)
            self._retire(d["namespace"], loser, winner)

    def _may_have_twins(self, written: list[tuple[str, dict[str, Any]]],
                        seen: int | None) -> list[tuple[str, dict[str, Any]]]:
        """The written memories whose settle look-up could find a twin. Without a judge a twin is a
        same-kind memory written since `seen` that `merge.could_merge` accepts, so one read of those rules
        out the rest and their look-ups are skipped, with the same outcome. A full page: look everything up."""
        if self.judge is not None or seen is None or not written:
            return written
        if self._quiet(seen):
            return []
        size = min(10 * len(written) + 100, 10_000)
        hits = self.catalog.search(Search("written_since", {  # without the batch's own: no two of them could merge
            "namespaces": sorted({d["namespace"] for _, d in written}), "after_seq_no": seen, "size": size,
            "exclude": [doc_id for doc_id, _ in written]}))["hits"]["hits"]
        if len(hits) >= size:
            return written
        since: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for h in hits:
            since[(h["_source"]["namespace"], h["_source"]["kind"])].append((h["_id"], h["_source"]["content"]))
        return [(doc_id, d) for doc_id, d in written if any(
            other != doc_id and could_merge(d["content"], content, d["kind"], self.merge, self.semantic is not None)
            for other, content in since[(d["namespace"], d["kind"])])]

    def _wrote(self, seq_no: int | None) -> None:
        """A sequence number this write used (None: the engine did not say, e.g. `update_by_query`)."""
        if self._mine is not None:
            if seq_no is None:
                self._mine = None
            else:
                self._mine.add(seq_no)

    def _quiet(self, since: int) -> bool:
        """After this write's refresh: was every write numbered after `since` one of this write's own?
        Then no other writer added a twin, and the settle read is skipped (one search per batch).
        The answer also tells the next batch that everything written so far is searchable (`_clean`),
        so its look-ups need no checkpoint read or refresh of their own. `since` never decreases
        over a write, so older numbers are dropped."""
        if self._mine is None:
            return False
        self._mine = {n for n in self._mine if n > since}
        point = self.catalog.checkpoint()
        if point is None or point.last is None or point.seen != point.last:
            return False
        if sum(1 for n in self._mine if n <= point.last) != point.last - since:
            return False
        self._clean = point.last
        return True

    def _retire(self, namespace: str, loser: str, winner: str) -> None:
        """Mark `loser` superseded by `winner` (atomic: only if still active) and link it from the winner."""
        win = self.catalog.get(namespace, winner)
        if win is None or win["_source"]["status"] != "active":
            return  # another writer settled it already
        ok = self.scripted([ScriptOp(namespace, loser, "retire", {"winner": winner,
                                                                   "invalid_at": win["_source"]["valid_from"]})])
        if ok[0]:
            self._link(namespace, winner, loser)

    def _link(self, namespace: str, winner: str, loser: str) -> None:
        """Add `loser` to the winner's `supersedes` (the `link` script: an add, so no link is lost)."""
        self.scripted([ScriptOp(namespace, winner, "link", {"loser": loser})])

    def _explicit(self, doc: Mapping[str, Any], doc_id: str) -> Decision:
        """A caller-named predecessor: it must be an active memory of the same namespace (or one
        this very write retired before it was cut)."""
        target = doc["supersedes"][0]
        got = self.catalog.get(doc["namespace"], target)
        if got is None or got["_source"]["namespace"] != doc["namespace"] \
                or got["_source"]["status"] != "active" and got["_source"].get("superseded_by") != doc_id:
            raise InvalidInput(f"supersedes={target!r}: no active memory with that id in {doc['namespace']!r}")
        return Decision("supersede", (Candidate(target, 0.0, got["_source"]),))

    @staticmethod
    def _result(doc_id: str, dec: Decision, dry_run: bool = False, doc: Mapping[str, Any] | None = None) -> WriteResult:
        if dec.action == "duplicate":
            return WriteResult("duplicate", dec.targets[0].id, duplicate_of=dec.targets[0].id,
                               scores=dec.scores, dry_run=dry_run)
        if dec.action == "supersede":
            return WriteResult("superseded", doc_id, tuple(t.id for t in dec.targets), scores=dec.scores,
                               dry_run=dry_run)
        if dec.action == "outdated":
            return WriteResult("outdated", doc_id, outdated_by=dec.targets[0].id, scores=dec.scores,
                               dry_run=dry_run)
        if dec.action == "uncertain":
            link = _uncertain_link(doc, dec.targets[0]) if doc is not None else {}
            return WriteResult("uncertain", doc_id, possibly_updates=tuple(link.get("possibly_updates", ())),
                               possibly_updated_by=(link.get("possibly_updated_by") or [None])[0],
                               scores=dec.scores, dry_run=dry_run)
        return WriteResult("added", doc_id, scores=dec.scores, dry_run=dry_run)

    def restore(self, old: Memory, successor: Memory | None, *, retire_successor: bool = True) -> None:
        """Undo a merge: reactivate a superseded memory; its successor is retired (or kept active
        with its `supersedes` link dropped when `retire_successor=False`)."""
        if old.status == "active":
            raise InvalidInput(f"memory {old.id} is already active")
        ns = old.namespace
        if successor is not None:
            if retire_successor:
                self.catalog.set_fields(ns, successor.id, {"status": "retired", "invalid_at": iso(self.clock())})
            else:
                self.catalog.set_fields(ns, successor.id,
                                        {"supersedes": [s for s in successor.supersedes if s != old.id] or None})
        self.catalog.set_fields(ns, old.id, {"status": "active", "superseded_by": None, "invalid_at": None})


def _uncertain_link(doc: Mapping[str, Any], target: Candidate) -> dict[str, list[str]]:
    """The link an uncertain memory records on itself: the older memory it may update or, arriving
    late, the newer one that may update it. It is written with the memory (one create: no link can be
    lost to a cut), so the newer of the pair carries it when written second and the older otherwise."""
    if str(target.source.get("valid_from", "")) > doc["valid_from"]:
        return {"possibly_updated_by": [target.id]}
    return {"possibly_updates": [target.id]}


def _listed(value: Any) -> list[str]:
    """A keyword field as a list (the engine returns one value unwrapped when it was written so)."""
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def _groups(items: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
    """`items` cut into consecutive groups of `sizes` (the legs of each document's lookup)."""
    out, at = [], 0
    for n in sizes:
        out.append(list(items[at:at + n]))
        at += n
    return out
