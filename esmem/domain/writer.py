"""The write protocol: validate -> decide -> retire, then create -> settle.

The protocol of one batch (docs/concepts/guarantees.md) makes writes idempotent and safe to retry: ids are
deterministic, documents are created if absent, and every change to an existing memory is a stored
update script (`retire`, `link`, `restate`, `unretire`) that is atomic on that memory. What it reads
and answers lives beside it: the look-up (lookup.py), writes seen before (replay.py), the answers
(outcomes.py), batches (batching.py). Speed devices, each in a module of its own with the measurement
that justifies it: the collector pause (collector.py), skipped look-ups in new groups (novelty.py),
the lone writer's skipped checkpoint reads (lone_writer.py) and the settle step's twin filter (twins.py).
"""
from __future__ import annotations

from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from esmem.domain import lookup, outcomes, replay
from esmem.domain.batching import next_batch, write_plain_all
from esmem.domain.collector import paused_collector
from esmem.domain.embedding import on_merge_scale
from esmem.domain.hybrid import Semantic
from esmem.domain.importance import Scorer, score_batch
from esmem.domain.lone_writer import LoneWriter
from esmem.domain.merge import Candidate, Decision, MergePolicy, decide
from esmem.domain.merge_judge import MergeJudge, verdicts
from esmem.domain.novelty import Novelty
from esmem.domain.pinned import derive_applies_to
from esmem.domain.twins import may_have_twins
from esmem.domain.types import Memory, MemoryInput, WriteResult
from esmem.domain.validate import Limits, differences, document
from esmem.errors import EngineError, IdTaken, InvalidInput, InvalidItem
from esmem.index.catalog import Catalog, ScriptOp, Search
from esmem.index.refresh import Checkpoint
from esmem.tracing import carried, span
from esmem.values import iso


class Writer:
    """Writes memories of any namespace under one installed prefix."""

    def __init__(self, catalog: Catalog, merge: MergePolicy, scorer: Scorer, limits: Limits,
                 clock: Callable[[], datetime], semantic: Semantic | None = None, judge: MergeJudge | None = None):
        self.catalog = catalog
        self.semantic = semantic  # optional (esmem/domain/hybrid.py): every memory gets a vector
        self.judge = judge  # optional (esmem/domain/merge_judge.py): decides supersede instead of the lexical rule
        self._known: dict[tuple[str, str], bool | None] = {}  # the judge's answers within one write (None: no answer)
        self._novelty: Novelty | None = None  # within one long write, without a judge
        self._lone = LoneWriter()  # within one write: what its own sequence numbers prove
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
        return self._combined(self.catalog.msearch(self._lookups(doc), "merge lookup"), exclude)

    def _combined(self, responses: Sequence[Mapping[str, Any]], exclude: str | None) -> list[Candidate]:
        """`lookup.combined`, the kNN leg's cosines on the merge's scale."""
        if self.semantic is None:
            return lookup.combined(responses, exclude)
        embedder = self.semantic.embedder
        return lookup.combined(responses, exclude, lambda cosine: on_merge_scale(embedder, cosine))

    def _lookups(self, doc: Mapping[str, Any], after_seq_no: int | None = None) -> list[Search]:
        return lookup.searches(doc, self.merge, self.semantic is not None, after_seq_no)

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
        with span("esmem.remember", {"esmem.memories": len(items), "esmem.dry_run": dry_run}) as traced, \
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
        self._known, self._lone = {}, LoneWriter()
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
            written = write_plain_all(pairs, batch_size, lambda batch: self._write_plain(batch, False), progress,
                                      in_flight=1 if self.catalog.engine.asynchronous else 2)
            self.catalog.refresh()  # one refresh, not one per batch
            return written
        results: dict[int, WriteResult] = {}
        todo = list(range(len(pairs)))
        durable = 0  # every memory before this position is written
        # A batch's last step (refresh, settle) runs in a thread while the next batch is planned: that
        # step is the engine's, planning (tokens, the merge measure) the client's. The next batch
        # sends nothing before the step is over, so the engine sees the requests in the same order.
        # Over an async client every request waits on the loop's thread: the step runs in line.
        overlap = not self.catalog.engine.asynchronous
        with ThreadPoolExecutor(max_workers=1) as pool:
            finishing: Future[None] | None = None
            while todo:
                batch = next_batch(pairs, todo, batch_size, self.merge, self.semantic is not None)
                if finishing:
                    finishing.result()
                done, finish = self._write_batch([pairs[n] for n in batch], dry_run)
                durable = self._took(pairs, batch, done, results, durable, progress)
                ahead = 4 * batch_size  # a batch comes from the first `ahead` of todo (_batch)
                todo = [n for n in todo[:ahead] if n not in results] + todo[ahead:]
                finishing = pool.submit(carried(finish)) if finish and todo and overlap else None
                if finish and not finishing:  # the last batch (a single one starts no thread)
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
        # Every write numbered up to `seen.seen` is in the look-ups below: the settle step then needs to
        # look only at what was written after it (None: look at everything). A recent refresh of this
        # process gives that point (esmem/index/refresh.py); without one, the look-ups refresh first.
        seen = self.catalog.visible() if fresh or head else None
        if (fresh or head) and seen is None:
            seen = self.catalog.refresh()  # the retires and restates of earlier writes are searchable
        if not (self.merge.enabled and head):
            seen = None
        if self._novelty and head and (seen is None or self._novelty.cover and self._novelty.cover.index != seen.index):
            self._novelty = None  # what it knows is of another index (the alias moved), or of nothing
        # One round trip for what the batch needs to know: writes absorbed as duplicates, retires
        # an interrupted run left behind, and the merge candidates of every memory up to the first replay.
        searches = [replay.restated_search(fresh, {d["namespace"] for i, d in pairs if i in fresh})] if fresh else []
        legs: list[list[Search]] = []
        novelty, skipped = self._novelty, False
        if head:
            searches.append(replay.superseded_by_search([i for i, _ in head], {d["namespace"] for _, d in head}))
            if self.merge.enabled:
                legs = [[] if novelty and novelty.skips(d) else self._lookups(d) for _, d in head]
                skipped = any(not group for group in legs)
                searches += [s for group in legs for s in group]
                if novelty:
                    searches.append(novelty.search())
        with span("esmem.remember.lookup", {"esmem.searches": len(searches)}):
            responses = self.catalog.msearch(searches, "merge lookup") if searches else []
        # A batch that skipped look-ups decided on what was known up to the novelty's cover: its settle
        # step looks at what was written after that.
        settle_from = novelty.cover if skipped and novelty else seen
        if novelty and head:  # (a novelty exists only with merge on)
            if seen is not None and novelty.read(responses[-1]):
                novelty.cover = seen
            else:
                self._novelty = None
        restated = replay.restated_in(responses[0], fresh) if fresh else {}
        def known(pair: tuple[str, dict[str, Any]]) -> bool:
            return pair[0] in found or pair[0] in restated

        if known(pairs[0]):
            end = next((n for n, pair in enumerate(pairs) if not known(pair)), len(pairs))
            return list(zip([i for i, _ in pairs[:end]], self._replay(pairs[:end], found, restated, dry_run))), None
        batch = pairs[:next((n for n, pair in enumerate(pairs) if known(pair)), len(pairs))]  # a prefix of head
        in_batch = {i for i, _ in batch}
        resumed: dict[str, list[str]] = defaultdict(list)
        for winner, loser in replay.superseded_in(responses[1]):
            if winner in in_batch:
                resumed[winner].append(loser)
        if self.merge.enabled:
            found_at = lookup.grouped(responses[2:], [len(g) for g in legs])
            with span("esmem.remember.decide", {"esmem.memories": len(batch)}) as traced:
                candidates = [(d, self._combined(r, doc_id)) for (doc_id, d), r in zip(batch, found_at)]
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
            return [(i, outcomes.result(i, dec, dry_run=True, doc=d)) for (i, d), dec in zip(batch, decisions)], None
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
            self._lone.wrote(seq_no)
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

    def _replay(self, pairs: list[tuple[str, dict[str, Any]]], found: Mapping[str, dict[str, Any]],
                restated: Mapping[str, str], dry_run: bool) -> list[WriteResult]:
        """Memories written before: the same results again, and their links repaired."""
        if not dry_run:
            self.scripted(replay.missing_links(self.catalog, [(i, found[i]) for i, _ in pairs if i in found]))
        return [outcomes.replayed(i, found[i], dry_run) if i in found else
                WriteResult("duplicate", restated[i], duplicate_of=restated[i], replayed=True, dry_run=dry_run)
                for i, _ in pairs]

    def _existing(self, pairs: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
        """The documents already stored under these ids (a replay, a retry, a resumed import)."""
        return self.catalog.mget([(i, d["namespace"]) for i, d in pairs])

    def _commit(self, work: list[tuple[str, dict[str, Any], Decision]], resumed: Mapping[str, list[str]],
                seen: Checkpoint | None = None) -> tuple[list[WriteResult], Callable[[], None]]:
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
                body.update(outcomes.uncertain_link(d, dec.targets[0]))
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
                results[doc_id] = outcomes.replayed(doc_id, existed[doc_id], False)
            elif dec.action == "outdated":
                self._link(d["namespace"], dec.targets[0].id, doc_id)
                results[doc_id] = outcomes.result(doc_id, dec)
            elif kept[doc_id]:
                results[doc_id] = WriteResult("superseded", doc_id, tuple(kept[doc_id]), scores=dec.scores,
                                              replayed=bool(resumed.get(doc_id)))
            elif dec.action == "uncertain":
                results[doc_id] = outcomes.result(doc_id, dec, doc=d)
            else:
                results[doc_id] = WriteResult("added", doc_id, scores=dec.scores)
        restates = [ScriptOp(d["namespace"], dec.targets[0].id, "restate",
                     {"id": doc_id, "importance": d["importance"], "anchor_at": d["anchor_at"]}) for doc_id, d, dec in dups]
        for (doc_id, d, dec), ok in zip(dups, self.scripted(restates)):  # 5. duplicates, links, settle
            if ok:
                results[doc_id] = outcomes.result(doc_id, dec)
                continue
            outcome = self._redecide(doc_id, d, [])  # its target moved on: decide again
            if isinstance(outcome, WriteResult):
                results[doc_id] = outcome
            else:
                (results[doc_id],), then = self._commit([(doc_id, d, outcome)], {})
                then()
        written = [(i, d) for i, d in creating if i not in existed and final[i].action != "outdated"]

        def finish() -> None:
            # one refresh: the next look-up sees this batch (one segment, not two)
            point = self.catalog.refresh() if docs or ops or restates else None
            if self.merge.enabled:  # (a point of another index than the look-ups' says nothing of them)
                self._settle(written, seen.seen if seen and point and seen.index == point.index else None, point)
        return [results[i] for i, _, _ in work], finish

    def scripted(self, ops: Sequence[ScriptOp]) -> list[bool]:
        """The one compare-and-set step of the protocol: stored update scripts (atomic per memory,
        retried on version conflicts) in one `_bulk`; True where the script applied (now or earlier)."""
        out: list[bool] = []
        for op, outcome in zip(ops, self.catalog.run_scripts(ops)):
            if outcome.get("result") == "updated":
                self._lone.wrote(outcome.get("_seq_no"))
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
                    return outcomes.result(doc_id, dec)
                continue
            if dec.action in ("add", "outdated", "uncertain"):
                return dec
            ops = [ScriptOp(ns, t.id, "retire", {"winner": doc_id, "invalid_at": doc["valid_from"]}) for t in dec.targets]
            won = [t.id for t, ok in zip(dec.targets, self.scripted(ops)) if ok]
            kept.extend(won)
            if len(won) == len(dec.targets):
                return dec
        raise EngineError(f"gave up merging {doc_id} after {attempts} concurrent conflicts")

    def _settle(self, written: list[tuple[str, dict[str, Any]]], seen: int | None = None,
                point: Checkpoint | None = None) -> None:
        """Concurrent writers can each add the same topic before seeing the other's write. Look
        again now that the writes are searchable: of two active same-topic memories the newer by
        (valid_from, recorded_at, id) supersedes the other, the same choice every writer makes.
        A twin the decision did not see was written after `seen` (a global checkpoint: every write up
        to it was searchable before the decision's look-up), so only memories written since are looked
        at: a small set, where the first look-up scored the whole namespace. `point`: the checkpoint
        read before the refresh that made `written` searchable."""
        if self.judge is None and seen is not None and written:
            written = [] if point and self._lone.quiet(point, seen) else \
                may_have_twins(self.catalog, self.merge, self.semantic is not None, written, seen)
        if not written:
            return
        legs = [self._lookups(d, seen) for _, d in written]
        found_at = lookup.grouped(self.catalog.msearch([s for group in legs for s in group], "merge lookup"),
                           [len(g) for g in legs])
        pairs = [(doc_id, d, c) for (doc_id, d), r in zip(written, found_at) for c in self._combined(r, doc_id)]
        # each twin on its own: a memory may have several (three writers wrote one topic at once)
        for (doc_id, d, twin), dec in zip(pairs, self._decide([(d, [c]) for _, d, c in pairs])):
            if dec.action not in ("supersede", "duplicate", "outdated"):
                continue
            mine = (d["valid_from"], d["recorded_at"], doc_id)
            theirs = (twin.source["valid_from"], twin.source.get("recorded_at", ""), twin.id)
            winner, loser = (doc_id, twin.id) if mine > theirs else (twin.id, doc_id)
            self._retire(d["namespace"], loser, winner)

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

