"""The read path: one `_msearch/template` call (the stored `recall` template, recent-N, the per-term
explanation) -> MMR over the candidate window -> recent-N -> reheat write-back; plus get, history, count.
"""
from __future__ import annotations

import re
import time
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping

from esmem.domain import ranking
from esmem.domain import hybrid
from esmem.domain.analysis import truncate_query
from esmem.domain.hybrid import Fusion, Semantic
from esmem.domain.installation import installed_policy
from esmem.domain.mmr import cosine, jaccard, mmr, similarity_set
from esmem.domain.pinned import gate, is_pinned
from esmem.domain.reheat import Reheater, backlog
from esmem.domain.resolve import resolve
from esmem.domain.threads import expand, wanted
from esmem.domain.when import TimeCues, time_cues
from esmem.domain.ranking import RecallParams
from esmem.domain.types import Memory, Recalled, RecallResult
from esmem.domain.lookup import MAX_QUERY_TERMS
from esmem.errors import EngineError, InvalidInput, NotFound
from esmem.index.catalog import Catalog, ScriptOp, Search
from esmem.tracing import span
from esmem.values import check_memory_id, check_namespace, epoch_ms, iso, parse_time

MAX_K = 1000
POLICY_TTL = 5.0  # seconds a store keeps its copy of the installed ranking policy


class Recaller:
    """Reads memories of any namespace under one installed prefix."""

    def __init__(self, catalog: Catalog, params: RecallParams | None, clock: Callable[[], datetime],
                 semantic: Semantic | None = None, background_reheat: bool = True):
        self.catalog = catalog
        self.reheater = Reheater(catalog.run_scripts, background_reheat,  # write-back off the answer's path
                                 backlog(catalog.engine, catalog.names.prefix))
        self.semantic = semantic  # optional kNN leg (esmem/domain/hybrid.py)
        self.params = params  # None: the ranking policy installed in the cluster
        self.clock = clock
        self._installed: tuple[float, RecallParams] | None = None

    def get(self, namespace: str, memory_id: str) -> Memory:
        check_namespace(namespace)
        check_memory_id(memory_id)
        resp = self.catalog.get(namespace, memory_id)
        if resp is None or resp["_source"].get("namespace") != namespace:
            raise NotFound(f"no memory {memory_id!r} in namespace {namespace!r}")
        return Memory.from_hit(resp["_id"], resp["_source"])

    def installed_params(self) -> RecallParams:
        """The ranking policy installed in the cluster (`esmem install --policy`), re-read at most
        every POLICY_TTL seconds: the engine applies a new policy to the next recall at once, this
        copy drives the client-side knobs (MMR, recent-N, reheat) and the score breakdown."""
        now = time.monotonic()
        if self._installed is None or now - self._installed[0] > POLICY_TTL:
            self._installed = (now, installed_policy(self.catalog.engine, self.catalog.names.prefix).params)
        return self._installed[1]

    def ranking_params(self) -> RecallParams:
        """The knobs a recall without explicit `params` uses: the store's, else the installed policy."""
        return self.params or self.installed_params()

    def recall(self, query: str, namespace: str, k: int = 5, *, params: RecallParams | None = None,
               now: datetime | str | None = None, as_of: datetime | str | None = None,
               touch: bool = True, explain: bool = False, fusion: Fusion | None = None) -> RecallResult:
        """Top-k memories of `namespace` for `query`, ranked in the engine, diversified by MMR.

        The stored `recall` template is called as any client calls it: namespace, query, size,
        now (and as_of); explicit `params` (or the store's) are passed as plain overrides, else the
        installed defaults rank."""
        with span("esmem.recall", {"esmem.k": k if isinstance(k, int) else -1}) as traced:
            result = self._recall(query, namespace, k, params, now, as_of, touch, explain, fusion)
            traced.set_attribute("esmem.results", len(result.items))
            traced.set_attribute("esmem.engine_took_ms", result.engine_took_ms)
            return result

    def _recall(self, query: str, namespace: str, k: int, params: RecallParams | None,
                now: datetime | str | None, as_of: datetime | str | None, touch: bool, explain: bool,
                fusion: Fusion | None) -> RecallResult:
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
        cues = time_cues(query)
        tp.update(cues.template_params())
        if 0 < p.rescore_window < size:  # the fusion must reach every result asked for
            tp["rescore_window"] = size
        if p.mmr_similarity == "cosine":  # MMR compares the stored vectors: hits bring them
            tp["with_vectors"] = True
        searches = [Search("recall", tp, routing=namespace)]
        if p.recent_n:  # k more: de-dup may drop k
            searches.append(Search("recent", {"namespace": namespace, "size": p.recent_n + k,
                                              **({"as_of": tp["as_of"]} if as_of_t else {})}, routing=namespace))
        if p.pinned:
            searches.append(Search("pinned", {"namespace": namespace, "query": query, "size": p.pinned + k,
                                              "importance_floor": p.importance_floor}, routing=namespace))
        if explain:
            searches.append(Search("recall", {**tp, "rel_only": True}, routing=namespace, explain=True))
        fuse = (fusion or self.semantic.fusion) if self.semantic else None
        if self.semantic and fuse and not fuse.lexical_only:  # the kNN leg, last in the same round trip
            searches.append(self.semantic.search(tp, query, routing=namespace, fusion=fuse))
        with span("esmem.recall.search", {"esmem.searches": len(searches)}) as traced:
            with self.catalog.engine.admission.admitted():  # a write's searches do not wait here
                responses = self.catalog.msearch(searches, "recall")
            traced.set_attribute("esmem.engine_took_ms", float(sum(r.get("took", 0) for r in responses)))
            traced.set_attribute("esmem.candidates", len(responses[0]["hits"]["hits"]))
        with span("esmem.recall.rank") as traced:
            return self._ranked(query, namespace, k, p, now_t, as_of_t, touch, explain, fuse, size, responses,
                                started, traced, cues)

    def _ranked(self, query: str, namespace: str, k: int, p: RecallParams, now_t: datetime,
                as_of_t: datetime | None, touch: bool, explain: bool, fuse: Fusion | None, size: int,
                responses: list[dict[str, Any]], started: float, traced: Any,
                cues: TimeCues) -> RecallResult:
        """The client stages after the engine's answer: pinned gate, same-topic resolve, neighbours,
        the kNN leg's fusion, MMR, recent-N, pinned section, reheat."""
        knn = responses.pop()["hits"]["hits"] if fuse and not fuse.lexical_only else None
        hits = responses[0]["hits"]["hits"]
        terms_by_id: dict[str, dict[str, float]] = {}
        if explain:
            for h in responses[-1]["hits"]["hits"]:
                terms_by_id[h["_id"]] = term_contributions(h.get("_explanation", {}))
        def rel(h: Mapping[str, Any]) -> float:
            return _rel(h, p, now_t)

        if p.pinned:  # pinned memories that match too little go to the pinned section (domain/pinned.py)
            hits = gate(hits, rel, p.importance_floor, p.pinned_min_share)
        demoted: dict[str, str] = {}
        if p.resolve and as_of_t is None:  # the older of two same-topic candidates under the newer (domain/resolve.py)
            resolved = resolve(hits, query, p.resolve_overlap, p.resolve_factor, p.resolve_ratio, rel)
            hits, demoted = resolved.hits, resolved.demoted_by
        hits, raised = self._neighbours(hits, namespace, p, now_t, cues)
        if fuse and knn is not None:  # the client-side stages above work on the lexical leg; then the kNN leg joins
            if p.pinned:  # a pinned memory earns a ranked slot through the lexical gate only (the pinned section has it)
                kept = {h["_id"] for h in hits}
                knn = [h for h in knn if h["_id"] in kept or not is_pinned(h["_source"], p.importance_floor)]
            exhausted = len(responses[0]["hits"]["hits"]) < size
            hits = hybrid.fuse(hits, knn, fuse, exhausted)[:max(size, len(hits))]
        items = self._rank(hits, k, p, now_t, cues, terms_by_id, raised, demoted)
        recent: tuple[Memory, ...] = ()
        if p.recent_n:
            chosen = {r.memory.id for r in items}
            newest = [Memory.from_hit(h["_id"], h["_source"]) for h in responses[1]["hits"]["hits"]
                      if h["_id"] not in chosen][:p.recent_n]
            recent = tuple(sorted(newest, key=lambda m: m.valid_from))
        if touch and items:
            self.reheater.submit(_reheat_ops(namespace, [r.memory.id for r in items], now_t, p.rho))
        pinned: tuple[Memory, ...] = ()
        if p.pinned:
            chosen = {r.memory.id for r in items}
            pinned = tuple(Memory.from_hit(h["_id"], h["_source"]) for h in
                           responses[2 if p.recent_n else 1]["hits"]["hits"] if h["_id"] not in chosen)[:p.pinned]
        engine_ms = float(sum(r.get("took", 0) for r in responses))
        traced.set_attribute("esmem.demoted", len(demoted))
        traced.set_attribute("esmem.neighbours_raised", len(raised))
        traced.set_attribute("esmem.results", len(items))
        return RecallResult(query, namespace, now_t, p, tuple(items), recent,
                            (time.perf_counter() - started) * 1000, engine_ms, pinned)

    def _neighbours(self, hits: list[Mapping[str, Any]], namespace: str, p: RecallParams, now: datetime,
                    cues: TimeCues) -> tuple[list[Mapping[str, Any]], dict[str, str]]:
        """Neighbour expansion (domain/threads.py): one more search, only when a candidate is a turn."""
        at = wanted(hits, p.neighbour_prev, p.neighbour_next)
        if not at:
            return hits, {}
        resp = self.catalog.msearch([Search("neighbours", {"namespace": namespace, "at": at, "size": len(at)},
                                            routing=namespace)], "neighbours")[0]

        # relevance before the memory's own factors: the reply to a turn that asks inherits its whole match
        done = expand(hits, resp["hits"]["hits"], p.neighbour_prev, p.neighbour_next,
                      rel=lambda h: _undamped(_rel(h, p, now), h, p, cues),
                      score=lambda h, r: ranking.fuse(r * _damping(h, p, cues), *_parts(h, p, now), p))
        return done.hits, done.neighbour_of

    def _rank(self, hits: list[Mapping[str, Any]], k: int, p: RecallParams, now: datetime,
              cues: TimeCues, terms_by_id: Mapping[str, Mapping[str, float]], raised: Mapping[str, str] = {},
              demoted: Mapping[str, str] = {}) -> list[Recalled]:
        if not hits:
            return []
        order = list(range(len(hits)))
        penalties = [0.0] * len(hits)
        if p.mmr and len(hits) > 1:
            srcs = [h["_source"] for h in hits]
            if p.mmr_similarity == "cosine" and all(s.get("embedding") for s in srcs):  # else Jaccard
                sim = lambda i, j: cosine(srcs[i]["embedding"], srcs[j]["embedding"])  # noqa: E731
            else:
                sets = [similarity_set(s["content"], p.mmr_similarity) for s in srcs]
                sim = lambda i, j: jaccard(sets[i], sets[j])  # noqa: E731
            order, pen = mmr([h["_score"] for h in hits], sim, k, p.mmr_lambda, p.mmr_threshold)
            for i, v in zip(order, pen):
                penalties[i] = v
        out = []
        for i in order[:k]:
            h = hits[i]
            src = h["_source"]
            rec = ranking.recency(src, p, now)
            imp = float(src.get("importance", 1.0))
            engine_score = float(h.get("_engine_score", h["_score"]))  # hybrid: a leg's score, not the fused one
            out.append(Recalled(
                memory=Memory.from_hit(h["_id"], src), score=float(h["_score"]),
                rel=_undamped(ranking.invert_rel(engine_score, rec, imp, p), h, p, cues), recency=rec,
                answer=ranking.answer_factor(src, p), period=ranking.period_factor(src, cues, p),
                when=ranking.when_factor(src, cues, p),
                importance_part=ranking.importance_part(imp, p),
                reheat=ranking.reheat_factor(src, p, now), mmr_penalty=penalties[i], rank_before_mmr=i + 1,
                terms=terms_by_id.get(h["_id"], {}), legs=h.get("_legs", {}), neighbour_of=raised.get(h["_id"]),
                demoted_by=demoted.get(h["_id"])))
        return out

    def touch(self, namespace: str, ids: Iterable[str], now: datetime, rho: float) -> None:
        """Reheat write-back now: one bulk call through the stored update script, retried on conflict."""
        outcomes = self.catalog.run_scripts(_reheat_ops(namespace, ids, now, rho))
        errors = [o["error"] for o in outcomes if o.get("error")]
        if errors:
            raise EngineError(f"reheat write-back failed: {errors[0]}")

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

    def count(self, namespace: str | None = None, status: str | None = "active") -> int:
        """Memories of a namespace (stored `count`), or of every namespace (stored `namespaces`), with a
        status (any with None)."""
        self.catalog.refresh()
        if namespace is None:
            buckets = self.catalog.search(Search("namespaces", {}))["aggregations"]["status"]["buckets"]
            return sum(b["doc_count"] for b in buckets if status is None or b["key"] == status)
        params = {k: v for k, v in (("namespace", namespace), ("status", status)) if v}
        resp = self.catalog.search(Search("count", params, routing=namespace))
        return int(resp["hits"]["total"]["value"])

    def namespaces(self) -> dict[str, dict[str, int]]:
        """Every namespace that holds a memory (at most 10,000), with its count per status."""
        resp = self.catalog.search(Search("namespaces", {}))
        return {b["key"]: {s["key"]: s["doc_count"] for s in b["status"]["buckets"]}
                for b in resp["aggregations"]["ns"]["buckets"]}


def _reheat_ops(namespace: str, ids: Iterable[str], now: datetime, rho: float) -> list[ScriptOp]:
    params = {"now": iso(now), "now_ms": epoch_ms(now), "rho": rho}
    return [ScriptOp(namespace, i, "reheat", params, retry_on_conflict=5) for i in ids]


def _parts(h: Mapping[str, Any], p: RecallParams, now: datetime) -> tuple[float, float]:
    """A hit's recency and importance, as the engine used them."""
    return ranking.recency(h["_source"], p, now), float(h["_source"].get("importance", 1.0))


def _rel(h: Mapping[str, Any], p: RecallParams, now: datetime) -> float:
    """The engine's relevance behind a hit's fused score (the inverse of the mode's fusion)."""
    return ranking.invert_rel(float(h["_score"]), *_parts(h, p, now), p)


def _damping(h: Mapping[str, Any], p: RecallParams, cues: TimeCues) -> float:
    """What the engine multiplied a hit's relevance by: its answer factor and the query's time cues' factor."""
    return ranking.answer_factor(h["_source"], p) * ranking.time_factor(h["_source"], cues, p)


def _undamped(rel: float, h: Mapping[str, Any], p: RecallParams, cues: TimeCues) -> float:
    """A hit's relevance before the answer and time factors (0 when they make it 0)."""
    factor = _damping(h, p, cues)
    return rel / factor if factor > 0 else 0.0


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
        if desc.startswith("script score function") and "must_not_miss'" in desc:  # boost * importance / 10
            must_not_miss = True
            return
        for child in node.get("details", []):
            walk(child)

    walk(expl)
    if must_not_miss:  # the memory matched no term: the whole relevance is must-not-miss's
        out["must_not_miss"] = float(expl.get("value", 0.0)) - sum(out.values())
    return out
