"""Conversation turns as memories: neighbour context at write time, neighbour expansion at recall.

A dialogue turn is short ("Super good! Rich and creamy") and the question that finds it names the
topic of the turn before it ("What did Nate think of the coconut milk ice cream?"). Two measured
remedies (docs/concepts/ranking.md, "Conversation turns"), both lexical:

1. Write time: a turn carries `thread` (its session), `seq` (its position) and `neighbours` (the
   text of the previous and next turn). `neighbours` is its own field, matched by recall with the
   low boost `neighbour_boost`, so a turn is found by what was said around it without its own
   words being diluted; `content` stays exactly what was said.
2. Recall: a candidate's neighbours in its thread inherit a share of its relevance,
       rel(n) = max(own rel of n, factor * rel(candidate)),   score(n) = fuse(rel(n), rec(n), imp(n))
   with factor `neighbour_next` for the turn after the candidate (the reply usually holds the
   answer) and `neighbour_prev` for the turn before. Neighbours outside the candidate window are
   fetched with the stored `neighbours` template. `neighbour_rel` is the reference.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from esmem.errors import InvalidInput

MAX_NEIGHBOUR_CHARS = 2000  # each neighbour's share of the field; a long turn is cut, not refused
MAX_THREAD_CHARS = 512


def neighbour_text(contents: Sequence[str], i: int, max_chars: int = MAX_NEIGHBOUR_CHARS) -> str:
    """The `neighbours` field of turn `i` of a thread: the previous and the next turn's text."""
    return "\n".join(contents[j][:max_chars] for j in (i - 1, i + 1) if 0 <= j < len(contents))


def thread_fields(thread: Any, seq: Any, neighbours: Any) -> dict[str, Any]:
    """Validated index fields of a turn (all three optional; `seq` only makes sense with `thread`)."""
    out: dict[str, Any] = {}
    if thread is not None:
        if not isinstance(thread, str) or not thread.strip() or len(thread) > MAX_THREAD_CHARS:
            raise InvalidInput(f"thread must be a non-empty string of at most {MAX_THREAD_CHARS} characters")
        out["thread"] = thread
    if seq is not None:
        if thread is None:
            raise InvalidInput("seq needs a thread (the position of a turn in its thread)")
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < 2**31:
            raise InvalidInput(f"seq must be a non-negative integer, got {seq!r}")
        out["seq"] = seq
    if neighbours is not None:
        if not isinstance(neighbours, str):
            raise InvalidInput("neighbours must be a string")
        out["neighbours"] = neighbours[:2 * MAX_NEIGHBOUR_CHARS + 1]
    return out


def neighbour_rel(own: float | None, parent: float, factor: float) -> float:
    """Reference: a neighbour's relevance is its own or its candidate's share, whichever is higher."""
    return max(own if own is not None else 0.0, factor * parent)


# Turns after a candidate that inherit its relevance: the reply, and the reply to it (an answer often
# comes two turns on, after the other speaker asks about what was said), each hop at `neighbour_next`.
REPLIES = 2


def shares(prev_factor: float, next_factor: float) -> list[tuple[int, float]]:
    """(offset from a candidate, share of its relevance) of every neighbour that inherits one: the turn
    before at `prev_factor`, the turn `hop` places on at `next_factor ** hop`."""
    offsets = [(-1, prev_factor), *((hop, next_factor ** hop) for hop in range(1, REPLIES + 1))]
    return [(delta, factor) for delta, factor in offsets if factor > 0]


def wanted(hits: Sequence[Mapping[str, Any]], prev_factor: float, next_factor: float) -> list[dict[str, Any]]:
    """(thread, seq) of every neighbour of a threaded candidate that would inherit a share and is not a
    candidate itself."""
    have = {(h["_source"].get("thread"), h["_source"].get("seq")) for h in hits}
    out: dict[tuple[str, int], None] = {}
    offsets = shares(prev_factor, next_factor)
    for h in hits:
        src = h["_source"]
        if src.get("thread") is None or src.get("seq") is None:
            continue
        for delta, _ in offsets:
            s = src["seq"] + delta
            if s >= 0 and (src["thread"], s) not in have:
                out[(src["thread"], s)] = None
    return [{"thread": t, "seq": s} for t, s in out]


@dataclass(frozen=True)
class Expanded:
    """Candidates after expansion, best first, and the candidate each raised turn inherited from."""

    hits: list[Mapping[str, Any]]
    neighbour_of: dict[str, str]


def expand(hits: Sequence[Mapping[str, Any]], fetched: Sequence[Mapping[str, Any]], prev_factor: float,
           next_factor: float, rel: Callable[[Mapping[str, Any]], float],
           score: Callable[[Mapping[str, Any], float], float]) -> Expanded:
    """Raise every neighbour of a candidate that inherits a share (`shares`) to `neighbour_rel`;
    fetched neighbours join the list.

    The share is taken of relevance, not of the fused score: `rel(hit)` recovers a candidate's
    relevance from its score, `score(hit, rel)` fuses a relevance with that turn's own recency and
    importance (esmem/ranking.py). Only the engine's candidates spread relevance (never an
    inherited one), so a thread cannot carry a score along by itself."""
    pool: dict[str, dict[str, Any]] = {h["_id"]: dict(h) for h in hits}
    for h in fetched:
        pool.setdefault(h["_id"], {**h, "_score": None})
    by_pos = {(h["_source"].get("thread"), h["_source"].get("seq")): i for i, h in pool.items()
              if h["_source"].get("thread") is not None and h["_source"].get("seq") is not None}
    own = {h["_id"]: rel(h) for h in hits}
    offsets = shares(prev_factor, next_factor)
    best: dict[str, float] = {}
    raised: dict[str, str] = {}
    for h in hits:
        src = h["_source"]
        if src.get("thread") is None or src.get("seq") is None:
            continue
        for delta, factor in offsets:
            n = by_pos.get((src["thread"], src["seq"] + delta))
            if n is None:
                continue
            new = neighbour_rel(own.get(n), own[h["_id"]], factor)
            if new > max(best.get(n, 0.0), own.get(n, 0.0)):
                best[n] = new
                raised[n] = h["_id"]
    for n, r in best.items():
        if n in raised:
            pool[n]["_score"] = score(pool[n], r)
    ordered = sorted((i for i in pool if pool[i]["_score"] is not None), key=lambda i: -pool[i]["_score"])
    return Expanded([pool[i] for i in ordered], raised)
