"""Write-time supersede-merge: decide whether a new memory restates or updates an active one.

Seed 002: decay cannot fix "the same thing said twice" without hurting everything else; merging at
write time can. A candidate comes from the `lookup` template (BM25 of the new content against the
namespace's active memories, same analysis as recall). The decision:

- duplicate  : same kind and token Jaccard >= dup_overlap -> nothing new is indexed; the old memory
               is reinforced (importance = max, restated_count + 1, recency anchor moved to the new time)
- supersede  : same kind, BM25 >= min_bm25 and token overlap >= min_overlap -> the new memory is
               indexed active with `supersedes`, the old one becomes superseded (never deleted)
- outdated   : a supersede whose active match is NEWER than the new memory (an old statement
               arriving late, e.g. a re-import): the new memory is stored as history, superseded by
               that match, instead of replacing it
- add        : anything else

Both measures use the two memories' search-analyzer token sets (CJK bigrams, stemmed words).
"Overlap" is the overlap coefficient |A & B| / min(|A|, |B|): an update restates most of the old
terms and adds or changes details, which Jaccard punishes for the added words (on the rule-store
dataset true updates score 0.68-0.77 with it, unrelated rules at most 0.14; Jaccard gave 0.41-0.56
vs 0.07). Jaccard, symmetric and strict, decides pure restatements. Kinds listed in `never_supersede` (events: two similar happenings are both true) are only
ever de-duplicated, not superseded.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence

from esmem.domain.analysis import tokens
from esmem.errors import ConfigError


@dataclass(frozen=True)
class MergePolicy:
    enabled: bool = True
    min_bm25: float = 4.0
    min_overlap: float = 0.5
    dup_overlap: float = 0.9
    candidates: int = 5
    never_supersede: tuple[str, ...] = ("event",)

    def __post_init__(self) -> None:
        if not 0 < self.min_overlap <= 1 or not 0 < self.dup_overlap <= 1:
            raise ConfigError("merge overlaps must be in (0, 1]")
        if self.min_bm25 < 0 or not 1 <= self.candidates <= 100:
            raise ConfigError("min_bm25 must be >= 0 and candidates in 1..100")


@dataclass(frozen=True)
class Candidate:
    """An active memory the lookup returned (`source`: content, kind, valid_from, recorded_at)."""

    id: str
    bm25: float
    source: Mapping[str, Any]


@dataclass(frozen=True)
class Decision:
    action: str  # "add" | "supersede" | "duplicate" | "outdated"
    targets: tuple[Candidate, ...] = ()
    scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # id -> {bm25, overlap}


@lru_cache(maxsize=8192)
def _token_set(text: str) -> frozenset[str]:
    return frozenset(tokens(text, query=True))


def _sets(a: str, b: str) -> tuple[frozenset[str], frozenset[str]]:
    """Search-token sets, cached: a batch compares each memory with many others."""
    return _token_set(a), _token_set(b)


def overlap(a: str, b: str) -> float:
    """Overlap coefficient of search-analyzer token sets."""
    ta, tb = _sets(a, b)
    return len(ta & tb) / min(len(ta), len(tb)) if ta and tb else 0.0


def jaccard(a: str, b: str) -> float:
    """Jaccard of search-analyzer token sets."""
    ta, tb = _sets(a, b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


def could_merge(a: str, b: str, kind: str, policy: MergePolicy) -> bool:
    """Whether `decide`'s lexical rules could merge two memories of `kind` with these contents, whatever
    their BM25: a restatement (Jaccard >= dup_overlap) or, for a kind that can be superseded, an update
    (overlap >= min_overlap). The write path keeps such pairs out of one batch and looks up again, in the
    settle step, only memories with such a pair among what was written since."""
    ta, tb = _sets(a, b)
    return bool(ta and tb) and _merges(len(ta & tb), len(ta), len(tb), kind, policy)


def _merges(common: int, a: int, b: int, kind: str, policy: MergePolicy) -> bool:
    """The lexical rules on two token sets of sizes a and b sharing `common` tokens (both non-empty)."""
    return common / (a + b - common) >= policy.dup_overlap or (
        kind not in policy.never_supersede and common / min(a, b) >= policy.min_overlap)


class Mergeable:
    """Contents of one kind, indexed by search token, so `could_merge` of a new memory against all of
    them costs its shared tokens' postings rather than one comparison per content (#18: a long write
    asks it of every memory against every earlier one of its group). A content added under a `key`
    can be discarded again (a memory the write retired) and comes back when added again."""

    def __init__(self, kind: str, policy: MergePolicy):
        self.kind, self.policy = kind, policy
        self._sizes: list[int] = []
        self._postings: dict[str, list[int]] = defaultdict(list)
        self._at: dict[str, int] = {}
        self._gone: set[int] = set()

    def add(self, content: str, key: str | None = None) -> None:
        if key is not None and key in self._at:
            self._gone.discard(self._at[key])
            return
        ta = _token_set(content)
        for t in ta:
            self._postings[t].append(len(self._sizes))
        if key is not None:
            self._at[key] = len(self._sizes)
        self._sizes.append(len(ta))

    def discard(self, key: str) -> None:
        if key in self._at:
            self._gone.add(self._at[key])

    def any(self, content: str) -> bool:
        """Whether `could_merge(content, c, kind, policy)` holds for some added content c not discarded."""
        ta = _token_set(content)
        common = Counter(i for t in ta for i in self._postings.get(t, ()))
        return any(_merges(n, len(ta), self._sizes[i], self.kind, self.policy)
                   for i, n in common.items() if i not in self._gone)


def decide(content: str, kind: str, candidates: Sequence[Candidate], policy: MergePolicy,
           valid_from: str | None = None, verdicts: Mapping[str, bool] | None = None) -> Decision:
    """Pure decision over the lookup's candidates (already same namespace, active, same kind).
    `valid_from` (ISO, as stored) lets a late-arriving older statement become history. `verdicts`
    (candidate id -> is an update; a merge judge's answers, esmem/domain/merge_judge.py) replace
    the lexical supersede rule when given."""
    if not policy.enabled:
        return Decision("add")
    scores = {c.id: {"bm25": c.bm25, "overlap": overlap(content, c.source["content"]),
                     "jaccard": jaccard(content, c.source["content"])} for c in candidates}
    same_kind = [c for c in candidates if c.source.get("kind") == kind]
    dups = [c for c in same_kind if scores[c.id]["jaccard"] >= policy.dup_overlap]
    if dups:
        best = max(dups, key=lambda c: (scores[c.id]["jaccard"], c.bm25))
        return Decision("duplicate", (best,), scores)
    if kind in policy.never_supersede:
        return Decision("add", (), scores)
    hits = tuple(c for c in same_kind if verdicts.get(c.id, False)) if verdicts is not None else \
        tuple(c for c in same_kind if c.bm25 >= policy.min_bm25 and scores[c.id]["overlap"] >= policy.min_overlap)
    newer = [c for c in hits if valid_from is not None and c.source.get("valid_from", "") > valid_from]
    if newer:
        return Decision("outdated", (max(newer, key=lambda c: c.source["valid_from"]),), scores)
    if hits:
        return Decision("supersede", hits, scores)
    return Decision("add", (), scores)


def judgeable(content: str, kind: str, candidates: Sequence[Candidate], policy: MergePolicy) -> list[Candidate]:
    """The candidates a merge judge is asked about: same kind, when the memory can supersede at all
    and restates none of them (a restatement is a duplicate without asking)."""
    if not policy.enabled or kind in policy.never_supersede:
        return []
    same_kind = [c for c in candidates if c.source.get("kind") == kind]
    if any(jaccard(content, c.source["content"]) >= policy.dup_overlap for c in same_kind):
        return []
    return same_kind
