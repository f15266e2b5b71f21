"""Write-time supersede-merge: what a new memory does to the active memories it resembles.

Seed 002: decay cannot fix "the same thing said twice" without hurting everything else; merging at
write time can. Candidates come from the `lookup` template (BM25 of the new content against the
namespace's active memories of the same kind); BM25 only finds them. Each candidate and the new memory
are read as a pair (esmem/domain/pairs.py: the two texts alone, so a decision never depends on what
else the index holds, on batch boundaries or on shard statistics), older text first:

- duplicate  : the new memory restates one -> nothing new is indexed; the old memory is reinforced
               (importance = max, restated_count + 1, recency anchor moved to the new time)
- supersede  : the new memory replaces one -> it is indexed active with `supersedes`, the old one
               becomes superseded (never deleted)
- outdated   : a replacement whose active match is NEWER than the new memory (an old statement
               arriving late, e.g. a re-import): the new memory is stored as history, superseded by it
- uncertain  : the pair may be an update, nothing says so -> both stay active and the new memory
               records the link: `possibly_updates` (the older one) or, when it arrives late,
               `possibly_updated_by` (the newer one)
- add        : anything else (coexists with every candidate)

A merge judge (esmem/domain/merge_judge.py) is asked about the uncertain pairs only; its True makes
the pair a replacement, False a coexistence, None (cannot tell, or a bad answer) leaves it uncertain.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping, Sequence

from esmem.domain import pairs
from esmem.domain.pairs import Reading, topic
from esmem.errors import ConfigError


@dataclass(frozen=True)
class MergePolicy:
    """`min_overlap`: the topic overlap (Reading.overlap) a replacement without a change cue needs;
    `dup_overlap`: the Jaccard a restatement needs; `events`: kinds of happenings, replaced only by a
    reschedule or a cancellation; `never_supersede`: kinds only ever de-duplicated; `same_meaning`:
    with an embedder, the cosine at which a text with a change cue is on the candidate's topic
    however few words they share (pairs.read)."""

    enabled: bool = True
    min_overlap: float = 0.5
    dup_overlap: float = 0.9
    candidates: int = 5
    events: tuple[str, ...] = ("event",)
    never_supersede: tuple[str, ...] = ()
    same_meaning: float = 0.75

    def __post_init__(self) -> None:
        if not 0 < self.min_overlap <= 1 or not 0 < self.dup_overlap <= 1:
            raise ConfigError("merge overlaps must be in (0, 1]")
        if not 0 < self.same_meaning <= 1:
            raise ConfigError("merge same_meaning must be in (0, 1]")
        if not 1 <= self.candidates <= 100:
            raise ConfigError("merge candidates must be in 1..100")

    @property
    def reach(self) -> float:
        """The least topic overlap of a pair that can be anything but `coexists`."""
        return self.min_overlap / 2


@dataclass(frozen=True)
class Candidate:
    """An active memory the lookup returned (`source`: content, kind, valid_from, recorded_at;
    `cosine`: of its vector and the new memory's, when the kNN leg found it)."""

    id: str
    bm25: float
    source: Mapping[str, Any]
    cosine: float | None = None


@dataclass(frozen=True)
class Decision:
    action: str  # "add" | "supersede" | "duplicate" | "outdated" | "uncertain"
    targets: tuple[Candidate, ...] = ()
    scores: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # id -> the pair's reading


def later(valid_from: str | None, c: Candidate) -> bool:
    """Whether the candidate is newer than a memory valid from `valid_from` (which then arrives late)."""
    return valid_from is not None and str(c.source.get("valid_from", "")) > valid_from


def ordered(content: str, valid_from: str | None, c: Candidate) -> tuple[str, str]:
    """(older text, newer text) of a new memory and a candidate."""
    return (content, str(c.source["content"])) if later(valid_from, c) else (str(c.source["content"]), content)


def read(content: str, kind: str, valid_from: str | None, c: Candidate, policy: MergePolicy) -> tuple[Reading, bool]:
    """The reading of the pair (new memory, candidate), older text first; True when the candidate is
    the newer (a late-arriving older statement)."""
    old, new = ordered(content, valid_from, c)
    return pairs.read(old, new, kind, dup_overlap=policy.dup_overlap, min_overlap=policy.min_overlap,
                      events=policy.events, cosine=c.cosine, same_meaning=policy.same_meaning), later(valid_from, c)


def could_merge(a: str, b: str, kind: str, policy: MergePolicy, semantic: bool = False) -> bool:
    """Whether `decide` could read two memories of `kind` as anything but coexisting, by the reading's
    first test alone (cheap: token sets): their topic overlap reaches `min_overlap`, or `reach` when
    one of them reaches far, or both state one attribute (pairs.topic); with an embedder (`semantic`),
    any pair of which one reaches far (their cosine may say one topic)."""
    (ta, far_a, attr_a), (tb, far_b, attr_b) = topic(a), topic(b)
    far = far_a or far_b
    return bool(ta and tb) and ((semantic and far) or (attr_a is not None and attr_a == attr_b)
                                or _merges(len(ta & tb), len(ta), len(tb), far, policy))


@lru_cache(maxsize=1 << 16)  # a long write asks it of the same pairs batch after batch
def conflict(a: str, b: str, kind: str, policy: MergePolicy, semantic: bool = False,
             a_from: str | None = None, b_from: str | None = None) -> bool:
    """Whether `decide` would do anything but add `a` with `b` as its candidate: `could_merge`, then
    (without an embedder, whose cosine the client does not have) the pair reading itself, older text
    first by the two `valid_from` (either order when one is not known). The write path keeps such
    pairs out of one batch, looks up again in the settle step only memories with such a pair among
    what was written since, and skips the look-up of a memory of a new group that has no such pair
    (novelty.py). Memories of one template with other values ("Ana prefers vim for Apollo", "Ben
    prefers emacs for Zeus") share a topic but read as two facts: they are written in one batch."""
    if not could_merge(a, b, kind, policy, semantic):
        return False
    if semantic:
        return True
    if a_from is not None and b_from is not None:
        orders = [ordered(a, a_from, Candidate("", 0.0, {"content": b, "valid_from": b_from}))]
    else:
        orders = [(a, b), (b, a)]
    return any(_reading(old, new, kind, policy).verdict != pairs.COEXISTS for old, new in orders)


def _reading(old: str, new: str, kind: str, policy: MergePolicy) -> Reading:
    return pairs.read(old, new, kind, dup_overlap=policy.dup_overlap, min_overlap=policy.min_overlap,
                      events=policy.events)


def _merges(common: int, a: int, b: int, far: bool, policy: MergePolicy) -> bool:
    """The rule above on two token sets of sizes a and b sharing `common` tokens (both non-empty)."""
    return common / min(a, b) >= (policy.reach if far else policy.min_overlap)


class Mergeable:
    """Contents of one kind, indexed by pair token, so `conflict` of a new memory against all of them
    costs its shared tokens' postings (and a reading of the few that share a topic) rather than one
    comparison per content (a long write asks it of every memory against every earlier one of its
    group). A content added under a `key` can be discarded again (a memory the write retired) and
    comes back when added again."""

    def __init__(self, kind: str, policy: MergePolicy, semantic: bool = False):
        self.kind, self.policy, self.semantic = kind, policy, semantic
        self._contents: list[tuple[str, str | None]] = []  # (content, valid_from)
        self._sizes: list[int] = []
        self._far: list[bool] = []
        self._postings: dict[str, list[int]] = defaultdict(list)
        self._stating: dict[tuple[tuple[str, ...], str], list[int]] = defaultdict(list)  # attribute -> contents
        self._at: dict[str, int] = {}
        self._gone: set[int] = set()

    def add(self, content: str, key: str | None = None, valid_from: str | None = None) -> None:
        if key is not None and key in self._at:
            self._gone.discard(self._at[key])
            return
        ta, far, attribute = topic(content)
        for t in ta:
            self._postings[t].append(len(self._sizes))
        if key is not None:
            self._at[key] = len(self._sizes)
        self._contents.append((content, valid_from))
        self._sizes.append(len(ta))
        self._far.append(far)
        if attribute is not None:
            self._stating[attribute].append(len(self._far) - 1)

    def discard(self, key: str) -> None:
        if key in self._at:
            self._gone.add(self._at[key])

    def any(self, content: str, valid_from: str | None = None, reads: int | None = None) -> bool:
        """Whether `conflict(content, c, ...)` holds for some added content c not discarded; with
        `reads`, also (a "maybe") when more than that many share a topic with it, so that the answer
        costs at most that many pair readings."""
        ta, far, attribute = topic(content)
        if self.semantic and ta and any(self._sizes[i] and (far or self._far[i])
                                        for i in range(len(self._sizes)) if i not in self._gone):
            return True
        common = Counter(i for t in ta for i in self._postings.get(t, ()))
        near = {i for i, n in common.items()
                if i not in self._gone and _merges(n, len(ta), self._sizes[i], far or self._far[i], self.policy)}
        if attribute is not None and ta:  # statements of one attribute, whatever else they share
            near.update(i for i in self._stating.get(attribute, ()) if i not in self._gone and self._sizes[i])
        if self.semantic or (reads is not None and len(near) > reads):
            return bool(near)
        return any(conflict(content, self._contents[i][0], self.kind, self.policy, False, valid_from,
                            self._contents[i][1]) for i in near)


def decide(content: str, kind: str, candidates: Sequence[Candidate], policy: MergePolicy,
           valid_from: str | None = None, verdicts: Mapping[str, bool | None] | None = None,
           turn: bool = False) -> Decision:
    """Pure decision over the lookup's candidates (already same namespace, active, same kind).
    `valid_from` (ISO, as stored) lets a late-arriving older statement become history. `verdicts`
    (candidate id -> True replaces / False coexists / None cannot tell; a merge judge's answers)
    settle the pairs the reading left uncertain. A conversation turn (`turn`, or a candidate with a
    `thread`) is a record of what was said, not a state: it is only ever de-duplicated."""
    if not policy.enabled:
        return Decision("add")
    same_kind = [c for c in candidates if c.source.get("kind") == kind]
    readings = {c.id: read(content, kind, valid_from, c, policy) for c in same_kind}
    scores: dict[str, dict[str, Any]] = {
        c.id: {"bm25": c.bm25, "overlap": r.overlap, "jaccard": r.jaccard, "verdict": r.verdict, "why": r.why,
               **({"cosine": c.cosine} if c.cosine is not None else {})}
        for c in same_kind for r, _ in [readings[c.id]]}
    verdict: dict[str, str] = {}
    for c in same_kind:
        v = readings[c.id][0].verdict
        if v in (pairs.REPLACES, pairs.UNCERTAIN) and (kind in policy.never_supersede or turn or c.source.get("thread")):
            v = pairs.COEXISTS
        if v == pairs.UNCERTAIN and verdicts is not None and verdicts.get(c.id) is not None:
            v = pairs.REPLACES if verdicts[c.id] else pairs.COEXISTS
            scores[c.id]["judge"] = bool(verdicts[c.id])
        verdict[c.id] = scores[c.id]["verdict"] = v
    # the closest candidate; one whose statement opens with the same subject first
    by = lambda c: (not readings[c.id][0].renamed, scores[c.id]["overlap"], scores[c.id]["jaccard"], c.bm25)  # noqa: E731
    dups = [c for c in same_kind if verdict[c.id] == pairs.RESTATES]
    if dups:
        return Decision("duplicate", (max(dups, key=lambda c: (scores[c.id]["jaccard"], c.bm25)),), scores)
    hits = [c for c in same_kind if verdict[c.id] == pairs.REPLACES]
    if hits:
        best = max(hits, key=by)
        if readings[best.id][1]:
            return Decision("outdated", (best,), scores)
        # and every other version of that same statement (concurrent writers can leave several active for
        # a moment): a candidate the closest one restates or replaces
        return Decision("supersede", (best, *(c for c in hits if c is not best and not readings[c.id][1]
                                               and _versions(best, c, kind, policy))), scores)
    unsure = [c for c in same_kind if verdict[c.id] == pairs.UNCERTAIN]
    if unsure:
        return Decision("uncertain", (max(unsure, key=by),), scores)
    return Decision("add", (), scores)


def _versions(a: Candidate, b: Candidate, kind: str, policy: MergePolicy) -> bool:
    """Two stored memories are versions of one statement: the newer restates or replaces the older."""
    old, new = sorted((a, b), key=lambda c: str(c.source.get("valid_from", "")))
    return pairs.read(str(old.source["content"]), str(new.source["content"]), kind, dup_overlap=policy.dup_overlap,
                      min_overlap=policy.min_overlap, events=policy.events).verdict in (pairs.RESTATES, pairs.REPLACES)


def judgeable(content: str, kind: str, candidates: Sequence[Candidate], policy: MergePolicy,
              valid_from: str | None = None, turn: bool = False) -> list[Candidate]:
    """The candidates a merge judge is asked about: those the reading leaves uncertain, when the new
    memory restates and replaces none of them (never about conversation turns)."""
    if not policy.enabled or kind in policy.never_supersede or turn:
        return []
    candidates = [c for c in candidates if not c.source.get("thread")]
    same_kind = [c for c in candidates if c.source.get("kind") == kind]
    readings = [(c, *read(content, kind, valid_from, c, policy)) for c in same_kind]
    if any(r.verdict in (pairs.RESTATES, pairs.REPLACES) for _, r, _ in readings):
        return []
    return [c for c, r, _ in readings if r.verdict == pairs.UNCERTAIN]
