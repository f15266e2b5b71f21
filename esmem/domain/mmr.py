"""Maximal Marginal Relevance over the engine's candidate window (seed 000).

    MMR(d) = lambda * rel(d) - (1 - lambda) * max_{s in selected} sim(d, s)

Recency and importance are already inside rel (the engine's fused score, scaled to [0, 1]); MMR
only trades relevance against redundancy. A pure function over indices, like elasticsearch-py's
vectorstore helper, so it is testable without an engine.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

from esmem.domain.analysis import token_sets

SIMILARITIES = ("words", "tokens", "cosine")  # cosine: over stored vectors (hybrid only)


def similarity_set(text: str, similarity: str) -> frozenset[str]:
    """What Jaccard compares. "tokens": the index tokens, CJK unigrams and bigrams: a Chinese
    restatement shares more of them than of its bigrams alone, and the single characters two notes on
    different topics share (的, 了, 是...) stay under MMR's threshold. "words": stemmed words and CJK
    bigrams (the search analyzer's tokens). "cosine" compares stored vectors; a candidate without one
    falls back to words."""
    return token_sets(text)[0 if similarity == "tokens" else 1]  # cached: once per memory and process


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def mmr(relevance: Sequence[float], similarity: Callable[[int, int], float], k: int,
        lambda_: float = 0.7, threshold: float = 0.0) -> tuple[list[int], list[float]]:
    """Pick k indices greedily; also return each pick's redundancy penalty (1 - lambda) * max sim.
    A similarity below `threshold` counts as none: two memories that share a topic's words are not
    redundant, and penalising them for it reorders what the engine ranked (docs/concepts/mmr.md)."""
    top = max(relevance, default=0.0)
    rel = [r / top if top > 0 else 0.0 for r in relevance]
    remaining = list(range(len(rel)))
    chosen: list[int] = []
    penalties: list[float] = []
    max_sim = [0.0] * len(rel)
    while remaining and len(chosen) < k:
        best = max(remaining, key=lambda i: (lambda_ * rel[i] - (1 - lambda_) * max_sim[i], -i))
        chosen.append(best)
        penalties.append((1 - lambda_) * max_sim[best])
        remaining.remove(best)
        for i in remaining:
            sim = similarity(i, best)
            if sim >= threshold:
                max_sim[i] = max(max_sim[i], sim)
    return chosen, penalties
