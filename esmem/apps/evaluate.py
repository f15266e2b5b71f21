"""Retrieval evaluation on a real engine: P@1, R@k, MRR, nDCG@5, stale@1, context saving, latency.

Dataset: JSONL in file order (docs/guides/evaluation.md): `memory` lines go through the normal write
path (merge on unless disabled), `query` lines are recalled read-only at their own `now`. Each run
installs into a throwaway prefix and removes it afterwards, so evaluation never touches user data.
"""
from __future__ import annotations

import json
import math
import re
import statistics
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from esmem.apps.context import namespace_chars
from esmem.apps.timing import percentiles
from esmem.domain.installation import install
from esmem.domain.jsonl import memory_input
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams, params_from_strings
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput, Recalled
from esmem.errors import ConfigError, InvalidInput
from esmem.index.catalog import Search
from esmem.index.engine import Engine
from esmem.index.install import uninstall
from esmem.values import iso, parse_bool, parse_time
from esmem.domain.embedding import Embedder
from esmem.domain.hybrid import FUSION_KEYS, LEXICAL, Fusion, fusion_from_strings, spec
from esmem.domain.threads import neighbour_text
from esmem.apps.classes import class_metrics

BASELINES = ("recency", "bm25")
MERGE_KEYS = {"min_overlap": float, "dup_overlap": float, "same_meaning": float, "merge": bool}


@dataclass(frozen=True)
class Query:
    id: str
    namespace: str
    text: str
    now: datetime
    gold: tuple[str, ...]
    stale: tuple[str, ...] = ()
    group: str = "all"
    must_reach: tuple[str, ...] = ()  # class checks (esmem/classes.py)
    not_ranked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dataset:
    memories: tuple[tuple[str, MemoryInput], ...]  # (dataset id, input)
    queries: tuple[Query, ...]


def _require(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise InvalidInput(f"{where}: missing required field {key!r}")
    if not isinstance(obj[key], kind):
        raise InvalidInput(f"{where}: field {key!r} must be {kind.__name__}")
    return obj[key]


def parse_dataset(lines: Iterable[str], name: str = "dataset") -> Dataset:
    """Parse and validate every line before anything is written; errors name the line number."""
    raw: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise InvalidInput(f"{name}:{n}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict) or obj.get("type") not in ("memory", "query"):
            raise InvalidInput(f"{name}:{n}: each line needs \"type\": \"memory\" or \"query\"")
        raw.append((n, obj))
    first_q = next(((n, o["now"]) for n, o in raw if o["type"] == "query" and "now" in o), None)
    first_now = None
    if first_q:
        try:
            first_now = parse_time(first_q[1])
        except InvalidInput as e:
            raise InvalidInput(f"{name}:{first_q[0]}: {e}") from None
    memories: list[tuple[str, MemoryInput]] = []
    queries: list[Query] = []
    ids: set[str] = set()
    for n, obj in raw:
        where = f"{name}:{n}"
        mid = _require(obj, "id", str, where)
        try:
            if obj["type"] == "memory":
                if mid in ids:
                    raise InvalidInput(f"{where}: duplicate memory id {mid!r}")
                ids.add(mid)
                _require(obj, "content", str, where)
                valid_from = obj.get("valid_from") or first_now
                fields = {**obj, "valid_from": parse_time(valid_from) if valid_from is not None else None}
                memories.append((mid, memory_input(fields, where)))  # the same rules as `esmem import`
            else:
                gold = tuple(obj.get("gold", ()))
                if not gold and not obj.get("must_reach"):
                    raise InvalidInput(f"{where}: a query needs a non-empty \"gold\" (or \"must_reach\") list")
                queries.append(Query(mid, obj.get("namespace", "default"), _require(obj, "text", str, where),
                                     parse_time(_require(obj, "now", str, where)), gold,
                                     tuple(obj.get("stale", ())), str(obj.get("group", "all")),
                                     tuple(obj.get("must_reach", ())), tuple(obj.get("not_ranked", ()))))
        except InvalidInput as e:
            raise InvalidInput(str(e) if str(e).startswith(where) else f"{where}: {e}") from None
    for q in queries:
        missing = [g for g in q.gold + q.stale + q.must_reach + q.not_ranked if g not in ids]
        if missing:
            raise InvalidInput(f"{name}: query {q.id} names unknown memory ids {missing}")
    return Dataset(tuple(memories), tuple(queries))


def load_dataset(path: Path) -> Dataset:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInput(f"cannot read {path}: {e}") from None
    return parse_dataset(text.splitlines(), Path(path).name)


# -- metrics -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueryOutcome:
    query: Query
    ranked: tuple[frozenset[str], ...]  # dataset ids behind each ranked memory
    context_chars: int
    namespace_chars: int
    latency_ms: float
    top: Recalled | None = None
    pinned: tuple[frozenset[str], ...] = ()  # the recall's pinned section (esmem/pinned.py)
    k: int = 5


def _first_hit(q: Query, ranked: Sequence[frozenset[str]]) -> int | None:
    gold = set(q.gold)
    return next((i for i, ids in enumerate(ranked) if ids & gold), None)


def metrics(outcomes: Sequence[QueryOutcome]) -> dict[str, float]:
    """Binary-relevance metrics over queries; any gold id counts for P@1 and MRR."""
    if not outcomes:
        return {}
    out: dict[str, list[float]] = {k: [] for k in ("p@1", "r@3", "r@5", "r@10", "mrr", "ndcg@5", "stale@1")}
    for o in outcomes:
        if not o.query.gold:  # a class-check query only (esmem/classes.py)
            continue
        gold = set(o.query.gold)
        first = _first_hit(o.query, o.ranked)
        out["p@1"].append(1.0 if first == 0 else 0.0)
        for k in (3, 5, 10):
            found = set().union(*o.ranked[:k]) & gold if o.ranked[:k] else set()
            out[f"r@{k}"].append(len(found) / len(gold))
        out["mrr"].append(1.0 / (first + 1) if first is not None else 0.0)
        seen: set[str] = set()
        dcg = 0.0
        for i, ids in enumerate(o.ranked[:5]):
            new = (ids & gold) - seen
            if new:
                dcg += 1.0 / math.log2(i + 2)
                seen |= new
        idcg = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 5)))
        out["ndcg@5"].append(dcg / idcg)
        out["stale@1"].append(1.0 if o.ranked and o.ranked[0] & set(o.query.stale) else 0.0)
    result = {k: statistics.fmean(v) if v else math.nan for k, v in out.items()}
    ctx = statistics.fmean(o.context_chars for o in outcomes)
    full = statistics.fmean(o.namespace_chars for o in outcomes)
    pct = percentiles([o.latency_ms for o in outcomes])
    result.update({"queries": float(len(outcomes)), "context_chars": ctx, "namespace_chars": full,
                   "saving": 1 - ctx / full if full else 0.0,
                   "p50_ms": pct["p50"], "p95_ms": pct["p95"]})
    result.update(class_metrics(outcomes))
    return result


# -- running -------------------------------------------------------------------------------------
@dataclass
class RunConfig:
    params: RecallParams = field(default_factory=RecallParams)
    merge: MergePolicy = field(default_factory=MergePolicy)
    k: int = 5
    baseline: str | None = None
    fusion: Fusion | None = None  # with an embedder: how the kNN leg joins (None = lexical esmem)

    def as_dict(self) -> dict[str, Any]:
        return {"k": self.k, "baseline": self.baseline, "merge": self.merge.__dict__ | {
            "never_supersede": list(self.merge.never_supersede), "events": list(self.merge.events)},
            "recall": self.params.as_dict(),
            **({"fusion": self.fusion.__dict__} if self.fusion else {})}


def split_overrides(pairs: Mapping[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
    """Separate merge-policy keys (min_overlap, dup_overlap, merge) from recall keys."""
    recall, merge = {}, {}
    for k, v in pairs.items():
        if k in MERGE_KEYS:
            try:
                merge["enabled" if k == "merge" else k] = parse_bool(v, k) if MERGE_KEYS[k] is bool else float(v)
            except ConfigError:
                raise
            except ValueError:
                raise InvalidInput(f"{k} takes a number, got {v!r}") from None
        else:
            recall[k] = v
    return recall, merge


def plan_runs(sets: Mapping[str, str], k: int, *, sweep: str | None = None, baseline: str | None = None,
              merge: bool = True, locomo: bool = False, semantic: Fusion | None = None) -> list[tuple[str, RunConfig]]:
    """The labelled runs of one `esmem eval`: the `--set` overrides, each value of a `--sweep key=v1,v2`,
    or esmem beside the plain BM25 baseline on LoCoMo. `semantic` (an embedder is given: its default
    fusion, hybrid.default_fusion): also esmem hybrid (and on LoCoMo the kNN leg alone); `knn_weight`,
    `fusion`, `rrf_k`, `keep_top`, `knn_window` set or sweep the fusion."""
    pairs = dict(sets)
    fusion_pairs = {key: pairs.pop(key) for key in list(pairs) if key in FUSION_KEYS}
    if (fusion_pairs or (sweep or "").split("=")[0].strip() in FUSION_KEYS) and not semantic:
        raise InvalidInput("knn_weight / fusion / rrf_k need --embedder")
    fusion = fusion_from_strings(semantic, fusion_pairs) if semantic else None
    recall_pairs, merge_pairs = split_overrides(pairs)
    if not merge:
        merge_pairs["enabled"] = False
    base = RunConfig(params_from_strings(RecallParams(), recall_pairs), MergePolicy(**merge_pairs), k, baseline,
                     fusion)
    if sweep:
        key, _, values = sweep.partition("=")
        if not values:
            raise InvalidInput("--sweep takes key=v1,v2,...")
        runs = []
        for v in values.split(","):
            if key.strip() in FUSION_KEYS:
                runs.append((f"{key}={v}", replace(base, fusion=fusion_from_strings(fusion or Fusion(),
                                                                                    {key.strip(): v.strip()}))))
                continue
            r_pairs, m_pairs = split_overrides({key.strip(): v.strip()})
            runs.append((f"{key}={v}", RunConfig(params_from_strings(base.params, r_pairs),
                                                  MergePolicy(**{**base.merge.__dict__, **m_pairs}), k, baseline,
                                                  fusion)))
        return runs
    lexical = replace(base, fusion=None)
    if locomo and not baseline:
        return [("esmem", lexical)] + ([("esmem hybrid", base), ("kNN leg alone", replace(base, fusion=Fusion(weight=1.0, keep_top=False)))]
                                       if semantic else []) + [("bm25 baseline", RunConfig(base.params, base.merge, k, "bm25"))]
    return [(baseline or "esmem", lexical)] + ([("esmem hybrid", base)] if semantic and not baseline else [])


class Evaluation:
    """Ingest a dataset once per merge policy into a throwaway prefix; run queries per config."""

    def __init__(self, engine: Engine, dataset: Dataset, prefix: str | None = None, embedder: Embedder | None = None):
        self.engine = engine
        self.dataset = dataset
        self.embedder = embedder  # memories get vectors; runs with a `fusion` add the kNN leg
        self.base_prefix = prefix or "esmem-eval"
        self._stores: dict[tuple[tuple[str, Any], ...], tuple[MemoryStore, dict[str, frozenset[str]], dict[str, int]]] = {}

    def _store(self, merge: MergePolicy) -> tuple[MemoryStore, dict[str, frozenset[str]], dict[str, int]]:
        key = tuple(sorted(merge.__dict__.items()))
        if key in self._stores:
            return self._stores[key]
        prefix = f"{self.base_prefix}-{uuid.uuid4().hex[:8]}"
        install(self.engine, prefix, embedding=spec(self.embedder) if self.embedder else None)
        first_now = min((q.now for q in self.dataset.queries), default=datetime.now(timezone.utc))
        store = MemoryStore(self.engine, prefix, merge=merge, clock=lambda: first_now,
                            max_future=timedelta(days=36500), embedder=self.embedder)
        results = store.remember_many([m for _, m in self.dataset.memories])
        by_doc: dict[str, set[str]] = {}
        for (mid, _), res in zip(self.dataset.memories, results):
            by_doc.setdefault(res.id, set()).add(mid)
        store.catalog.refresh()
        chars = self._namespace_chars(store)
        entry = (store, {k: frozenset(v) for k, v in by_doc.items()}, chars)
        self._stores[key] = entry
        return entry

    def _namespace_chars(self, store: MemoryStore) -> dict[str, int]:
        """Characters of all active memories per namespace: the 'paste everything' context."""
        return {ns: namespace_chars(store, ns) for ns in {q.namespace for q in self.dataset.queries}}

    def run(self, config: RunConfig, *, explain_misses: bool = False,
            progress: Callable[[], None] | None = None) -> list[QueryOutcome]:
        store, by_doc, ns_chars = self._store(replace(config.merge, enabled=False)
                                              if config.baseline else config.merge)
        outcomes = []
        depth = max(config.k, 10)  # ranked deep enough for R@10; the context is the top k
        for q in self.dataset.queries:
            pinned: tuple[frozenset[str], ...] = ()
            if config.baseline == "recency":
                hits, took = self._recency(store, q, depth)
            elif config.baseline == "bm25":
                hits, took = self._bm25(store, q, depth)
            else:
                res = store.recall(q.text, q.namespace, depth, params=config.params, now=q.now, touch=False,
                                   fusion=config.fusion or LEXICAL)
                hits, took = [(r.memory.id, r.memory.content) for r in res.items], res.took_ms
                pinned = tuple(by_doc.get(m.id, frozenset()) for m in res.pinned)
            ranked = tuple(by_doc.get(doc_id, frozenset()) for doc_id, _ in hits)
            top = None
            if explain_misses and not config.baseline and not (ranked and ranked[0] & set(q.gold)):
                explained = store.recall(q.text, q.namespace, config.k, params=config.params, now=q.now,
                                         touch=False, explain=True, fusion=config.fusion or LEXICAL)
                top = explained.items[0] if explained.items else None
            outcomes.append(QueryOutcome(q, ranked, sum(len(c) for _, c in hits[:config.k]),
                                         ns_chars.get(q.namespace, 0), took, top, pinned, config.k))
            if progress:
                progress()
        return outcomes

    def _search(self, store: MemoryStore, q: Query, template: str,
                params: dict[str, Any]) -> tuple[list[tuple[str, str]], float]:
        import time

        t0 = time.perf_counter()
        resp = store.catalog.search(Search(template, {"namespace": q.namespace, **params}, routing=q.namespace))
        took = (time.perf_counter() - t0) * 1000
        return [(h["_id"], h["_source"]["content"]) for h in resp["hits"]["hits"]], took

    def _recency(self, store: MemoryStore, q: Query, k: int) -> tuple[list[tuple[str, str]], float]:
        return self._search(store, q, "newest", {"size": k, "now": iso(q.now)})

    def _bm25(self, store: MemoryStore, q: Query, k: int) -> tuple[list[tuple[str, str]], float]:
        return self._search(store, q, "bm25", {"size": k, "query": q.text})

    def close(self) -> None:
        for store, _, _ in self._stores.values():
            uninstall(self.engine, store.names.prefix)
        self._stores.clear()


def report(outcomes: Sequence[QueryOutcome]) -> dict[str, Any]:
    groups: dict[str, list[QueryOutcome]] = {}
    for o in outcomes:
        groups.setdefault(o.query.group, []).append(o)
    return {"overall": metrics(outcomes), "groups": {g: metrics(v) for g, v in sorted(groups.items())}}


def misses(outcomes: Sequence[QueryOutcome], dataset: Dataset) -> list[dict[str, Any]]:
    """Every query whose top-1 is not gold: the query, gold, the winner and its per-term scores."""
    content = {mid: m.content for mid, m in dataset.memories}
    out = []
    for o in outcomes:
        if not o.query.gold or (o.ranked and o.ranked[0] & set(o.query.gold)):
            continue
        top = o.top
        out.append({"query": o.query.id, "text": o.query.text, "group": o.query.group,
                    "gold": {g: content[g] for g in o.query.gold},
                    "gold_rank": (_first_hit(o.query, o.ranked) or -1) + 1,
                    "top1": sorted(o.ranked[0]) if o.ranked else [],
                    "top1_content": top.memory.content if top else None,
                    "top1_terms": dict(top.terms) if top else {}, "top1_score": top.score if top else None})
    return out


# -- LoCoMo --------------------------------------------------------------------------------------
_LOCOMO_TIME = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})\s*$", re.I)
_MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"], 1)}


def _locomo_time(text: str) -> datetime:
    m = _LOCOMO_TIME.match(text)
    if not m or m.group(5).lower() not in _MONTHS:
        raise InvalidInput(f"unrecognised LoCoMo session time {text!r}")
    hour = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0)
    return datetime(int(m.group(6)), _MONTHS[m.group(5).lower()], int(m.group(4)), hour, int(m.group(2)),
                    tzinfo=timezone.utc)


_EVIDENCE_ID = re.compile(r"D:?(\d+):(\d+)")


def locomo_evidence(evidence: Sequence[str]) -> tuple[list[str], list[str]]:
    """A question's evidence as dialogue ids, and the pieces that are not one.

    The annotations separate ids with ';', ',' or spaces, zero-pad some (`D30:05`) and mistype some
    (`D:11:26`); every piece that names a dialogue turn is kept, normalised to `D<session>:<turn>`."""
    ids: list[str] = []
    bad: list[str] = []
    for piece in re.split(r"[;,\s]+", " ".join(evidence)):
        if not piece:
            continue
        m = _EVIDENCE_ID.fullmatch(piece)
        if m:
            ids.append(f"D{int(m.group(1))}:{int(m.group(2))}")
        else:
            bad.append(piece)
    return list(dict.fromkeys(ids)), bad


def locomo_records(directory: Path, dropped: list[str] | None = None) -> list[dict[str, Any]]:
    """LoCoMo conversations -> dataset records: each turn a memory, each answerable question a query.

    Evidence that names no turn of the conversation is left out of the gold and described in
    `dropped` (when given), so a run can say what it could not score."""
    records: list[dict[str, Any]] = []
    files = sorted(Path(directory).glob("*.json"))
    if not files:
        raise InvalidInput(f"no LoCoMo conversation files (*.json) in {directory}")
    for path in files:
        conv = json.loads(path.read_text(encoding="utf-8"))
        ns = path.stem
        last = None
        n = 1
        while f"session_{n}_date_time" in conv:
            turns = conv.get(f"session_{n}") or []
            when = _locomo_time(conv[f"session_{n}_date_time"])
            contents = [f"{t['speaker']}: {t['text']}" + (f" [shares a photo: {t['blip_caption']}]"
                                                          if t.get("blip_caption") else "") for t in turns]
            for i, turn in enumerate(turns):  # a session is a thread: its turns know their neighbours
                records.append({"type": "memory", "id": f"{ns}/{turn['dia_id']}", "namespace": ns,
                                "content": contents[i], "kind": "event", "entities": [turn["speaker"]],
                                "valid_from": iso(when + timedelta(seconds=i)), "thread": f"{ns}/session_{n}",
                                "seq": i, "neighbours": neighbour_text(contents, i)})
            if turns:
                last = when
            n += 1
        known = {r["id"] for r in records if r["type"] == "memory"}
        for j, qa in enumerate(conv.get("qa", [])):
            if qa.get("category") == 5:
                continue
            ids, bad = locomo_evidence(qa.get("evidence", []))
            gold = [g for g in (f"{ns}/{i}" for i in ids) if g in known]
            if dropped is not None:
                dropped += [f"{ns} q{j}: unparseable evidence {b!r}" for b in bad]
                dropped += [f"{ns} q{j}: no turn {i}" for i in ids if f"{ns}/{i}" not in known]
                if not gold:
                    dropped.append(f"{ns} q{j}: no gold left, question skipped")
            if not gold:
                continue
            records.append({"type": "query", "id": f"{ns}/q{j}", "namespace": ns, "text": qa["question"],
                            "now": iso((last or datetime.now(timezone.utc)) + timedelta(days=1)),
                            "gold": gold, "group": f"cat{qa['category']}"})
    return records


def locomo_dataset(directory: Path, dropped: list[str] | None = None) -> Dataset:
    return parse_dataset((json.dumps(r, ensure_ascii=False) for r in locomo_records(directory, dropped)), "locomo")
