"""Merge decisions on a labelled set of memory pairs: lexical (esmem's supersede-merge) vs semantic
(cosine of the two memories' vectors) vs either.

Each pair is an old memory and a new one of the same kind, labelled `update` (the new one replaces
the old: a paraphrased rule change, a rescheduled plan, a changed preference) or `different` (same
topic, both true: "likes coffee" / "likes tea"). The lexical decision is the real one: the old
memory is written into its own namespace of a throwaway prefix and the new one is written with
`dry_run`, so the engine's lookup and esmem's merge policy decide (supersede or duplicate = merge).
The semantic decision is cos(old, new) >= threshold. datasets/merge_pairs.jsonl is the set.
"""
from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from esmem.domain.embedding import Embedder, embed_checked
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput
from esmem.index.engine import Engine
from esmem.index.install import install, uninstall

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
    lexical: bool   # esmem's merge policy merges the new memory into the old one
    cosine: float


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


def score_pairs(engine: Engine, pairs: Sequence[Pair], embedder: Embedder,
                policy: MergePolicy | None = None) -> list[Scored]:
    """The lexical decision on the engine and the cosine of each pair."""
    prefix = f"esmem-pairs-{uuid.uuid4().hex[:8]}"
    install(engine, prefix)
    try:
        store = MemoryStore(engine, prefix, merge=policy or MergePolicy())
        store.remember_many([MemoryInput(p.old, f"pair-{i}", kind=p.kind, valid_from="2026-01-01T00:00:00Z")
                             for i, p in enumerate(pairs)])
        store.catalog.refresh()
        lexical = [store.remember(p.new, f"pair-{i}", kind=p.kind, valid_from="2026-02-01T00:00:00Z",
                                  dry_run=True).action in ("superseded", "duplicate") for i, p in enumerate(pairs)]
    finally:
        uninstall(engine, prefix)
    vectors = embed_checked(embedder, [t for p in pairs for t in (p.old, p.new)])
    cosines = [_cos(vectors[2 * i], vectors[2 * i + 1]) for i in range(len(pairs))]
    return [Scored(p, lex, c) for p, lex, c in zip(pairs, lexical, cosines)]


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


def precision_recall(predicted: Sequence[bool], scored: Sequence[Scored]) -> dict[str, float]:
    """Of the merges made, how many were true updates; of the true updates, how many were merged."""
    truth = [s.pair.label == "update" for s in scored]
    tp = sum(p and t for p, t in zip(predicted, truth))
    made, real = sum(predicted), sum(truth)
    return {"precision": tp / made if made else 1.0, "recall": tp / real if real else 1.0,
            "merges": float(made), "true_updates": float(real)}


def report(scored: Sequence[Scored], thresholds: Sequence[float]) -> list[dict[str, Any]]:
    """One row per criterion: lexical, then semantic and lexical-or-semantic at each threshold."""
    rows = [{"criterion": "lexical", **precision_recall([s.lexical for s in scored], scored)}]
    for t in thresholds:
        rows.append({"criterion": f"semantic cos>={t:g}", **precision_recall([s.cosine >= t for s in scored], scored)})
        rows.append({"criterion": f"both (lexical or cos>={t:g})",
                     **precision_recall([s.lexical or s.cosine >= t for s in scored], scored)})
    return rows
