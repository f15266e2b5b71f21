"""Merge decisions on a labelled set of memory pairs, measured through the real write path.

Each pair is an old memory and a new one of the same kind, labelled `update` (the new one replaces
the old: a changed rule, a rescheduled plan, a changed preference) or `different` (both stay true:
another subject, another item, an addition). Every old memory is written into a namespace of its own
under a throwaway prefix, then every new one is written with `dry_run`, so the engine's lookup and
esmem's merge decision decide. A merge is `superseded` or `duplicate`; `uncertain` (both stay active,
linked) counts as not merged, and is reported on its own. With an embedder, each pair's cosine is
reported too, and the write path uses the embedder as a user's store would.
"""
from __future__ import annotations

import json
import math
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from esmem.domain.embedding import Embedder, embed_checked
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput
from esmem.index.engine import Engine
from esmem.index.install import uninstall

MERGES = ("superseded", "duplicate")

LABELS = ("update", "different")


@dataclass(frozen=True)
class Pair:
    old: str
    new: str
    kind: str
    label: str
    lang: str = ""
    type: str = ""


@dataclass(frozen=True)
class Scored:
    pair: Pair
    action: str  # what the write path did with the new memory: superseded, duplicate, uncertain, added ...
    why: str = ""  # the pair reading's reason
    cosine: float | None = None

    @property
    def merged(self) -> bool:
        return self.action in MERGES


def load_pairs(path: Path) -> list[Pair]:
    pairs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            pair = Pair(raw["old"], raw["new"], raw["kind"], raw["label"], raw.get("lang", ""), raw.get("type", ""))
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidInput(f"{path}:{n}: not a pair ({e})") from None
        if pair.label not in LABELS:
            raise InvalidInput(f"{path}:{n}: label must be one of {', '.join(LABELS)}, got {pair.label!r}")
        pairs.append(pair)
    return pairs


def score_pairs(engine: Engine, pairs: Sequence[Pair], embedder: Embedder | None = None,
                policy: MergePolicy | None = None) -> list[Scored]:
    """The write path's decision on each pair (and each pair's cosine with an embedder)."""
    prefix = f"esmem-pairs-{uuid.uuid4().hex[:8]}"
    install(engine, prefix, **({"embedding": _spec(embedder)} if embedder else {}))
    try:
        store = MemoryStore(engine, prefix, merge=policy or MergePolicy(), embedder=embedder)
        store.remember_many([MemoryInput(p.old, f"pair-{i}", kind=p.kind, valid_from="2026-01-01T00:00:00Z")
                             for i, p in enumerate(pairs)])
        store.catalog.refresh()
        results = [store.remember(p.new, f"pair-{i}", kind=p.kind, valid_from="2026-02-01T00:00:00Z", dry_run=True)
                   for i, p in enumerate(pairs)]
    finally:
        uninstall(engine, prefix)
    whys = [_why(r) for r in results]
    if embedder is None:
        return [Scored(p, r.action, why) for p, r, why in zip(pairs, results, whys)]
    vectors = embed_checked(embedder, [t for p in pairs for t in (p.old, p.new)])
    return [Scored(p, r.action, why, _cos(vectors[2 * i], vectors[2 * i + 1]))
            for i, (p, r, why) in enumerate(zip(pairs, results, whys))]


def _spec(embedder: Embedder) -> Any:
    from esmem.domain.hybrid import spec

    return spec(embedder)


def _why(result: Any) -> str:
    """The reading of the candidate the decision acted on (or of the closest one)."""
    if not result.scores:
        return "no candidate found"
    best = max(result.scores.values(), key=lambda s: (s.get("overlap", 0), s.get("jaccard", 0)))
    return f"{best.get('verdict', '')}: {best.get('why', '')} (overlap {best.get('overlap', 0):.2f})"


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


def precision_recall(predicted: Sequence[bool], scored: Sequence[Scored]) -> dict[str, float]:
    """Of the merges made, how many were true updates; of the true updates, how many were merged."""
    truth = [s.pair.label == "update" for s in scored]
    tp = sum(p and t for p, t in zip(predicted, truth))
    made, real = sum(predicted), sum(truth)
    return {"precision": tp / made if made else 1.0, "recall": tp / real if real else 1.0,
            "merges": float(made), "true_updates": float(real), "pairs": float(len(scored)),
            "uncertain": float(sum(s.action == "uncertain" for s in scored))}


def groups(scored: Sequence[Scored]) -> dict[str, list[Scored]]:
    """All pairs, then by language, kind, type and label."""
    out: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        out["all"].append(s)
        for key, value in (("lang", s.pair.lang), ("kind", s.pair.kind), ("type", s.pair.type), ("label", s.pair.label)):
            if value:
                out[f"{key}={value}"].append(s)
    return dict(sorted(out.items(), key=lambda kv: (kv[0] != "all", kv[0])))


def report(scored: Sequence[Scored], thresholds: Sequence[float] = ()) -> list[dict[str, Any]]:
    """One row per criterion: esmem's write decision, then (with cosines) cos >= t and "either"."""
    rows = [{"criterion": "esmem", **precision_recall([s.merged for s in scored], scored)}]
    if any(s.cosine is None for s in scored):
        return rows
    for t in thresholds:
        rows.append({"criterion": f"semantic cos>={t:g}",
                     **precision_recall([(s.cosine or 0) >= t for s in scored], scored)})
        rows.append({"criterion": f"either (esmem or cos>={t:g})",
                     **precision_recall([s.merged or (s.cosine or 0) >= t for s in scored], scored)})
    return rows


def wrong(scored: Sequence[Scored]) -> list[Scored]:
    """Every pair whose decision disagrees with its label (an uncertain update included)."""
    return [s for s in scored if s.merged != (s.pair.label == "update")]
