"""The pure merge decision and its measures."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from esmem.domain.merge import Candidate, Mergeable, MergePolicy, could_merge, decide, jaccard, overlap
from esmem.errors import ConfigError


def cand(cid: str, content: str, bm25: float, kind: str = "rule") -> Candidate:
    return Candidate(cid, bm25, {"content": content, "kind": kind})


OLD = "接口返回 HTTP 429 限流时固定等 1 秒再重试，最多重试 3 次"
NEW = "接口返回 HTTP 429 限流时按指数退避加随机 jitter 再重试，最多重试 5 次"


def test_overlap_is_the_overlap_coefficient_and_jaccard_is_symmetric() -> None:
    assert overlap("redis cache", "redis cache warmup script") == 1.0
    assert jaccard("redis cache", "redis cache warmup script") == 0.5
    assert overlap("a", "") == 0.0
    assert jaccard(OLD, NEW) == jaccard(NEW, OLD)


def test_update_supersedes_when_both_thresholds_pass() -> None:
    d = decide(NEW, "rule", [cand("old", OLD, 12.0)], MergePolicy())
    assert d.action == "supersede" and [t.id for t in d.targets] == ["old"]
    assert d.scores["old"]["overlap"] >= 0.5


@pytest.mark.parametrize("bm25, policy", [(3.9, MergePolicy()), (12.0, MergePolicy(min_overlap=0.95))])
def test_either_threshold_failing_adds(bm25: float, policy: MergePolicy) -> None:
    assert decide(NEW, "rule", [cand("old", OLD, bm25)], policy).action == "add"


def test_restatement_is_a_duplicate_and_kinds_must_match() -> None:
    same = "每天最多发布一篇文章"
    assert decide(same, "rule", [cand("x", same, 9.0)], MergePolicy()).action == "duplicate"
    assert decide(same, "fact", [cand("x", same, 9.0)], MergePolicy()).action == "add"


def test_events_are_never_superseded_only_deduplicated() -> None:
    a, b = "went hiking on Mount Tai with Anna on Saturday", "went hiking on Mount Tai with Anna on Sunday"
    assert decide(b, "event", [cand("x", a, 9.0, "event")], MergePolicy()).action == "add"
    assert decide(a, "event", [cand("x", a, 9.0, "event")], MergePolicy()).action == "duplicate"


def test_disabled_policy_always_adds_and_bad_policy_is_refused() -> None:
    assert decide(OLD, "rule", [cand("x", OLD, 99.0)], MergePolicy(enabled=False)).action == "add"
    with pytest.raises(ConfigError):
        MergePolicy(min_overlap=0)
    with pytest.raises(ConfigError):
        MergePolicy(candidates=0)


WORDS = ["deploy", "friday", "billing", "window", "redis", "cache", "部署", "缓存", "18:00", "20:00", "team", "coffee"]


@given(a=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), b=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
       kind=st.sampled_from(["rule", "event"]), min_overlap=st.sampled_from([0.3, 0.5, 0.95]),
       dup_overlap=st.sampled_from([0.4, 0.9]))
def test_could_merge_is_exactly_when_decide_merges_on_words(a, b, kind, min_overlap, dup_overlap) -> None:
    """The write path's batching and settle filter (could_merge) agree with decide whenever BM25 passes:
    a pair it rules out is never merged, a pair it lets through is."""
    policy = MergePolicy(min_overlap=min_overlap, dup_overlap=dup_overlap)
    new, old = " ".join(a), " ".join(b)
    merged = decide(new, kind, [cand("o", old, 100.0, kind)], policy).action != "add"
    assert could_merge(new, old, kind, policy) == merged


@given(earlier=st.lists(st.lists(st.sampled_from(WORDS), max_size=6), max_size=8),
       new=st.lists(st.sampled_from(WORDS), max_size=6), kind=st.sampled_from(["rule", "event"]),
       min_overlap=st.sampled_from([0.3, 0.5, 0.95]), dup_overlap=st.sampled_from([0.4, 0.9]),
       gone=st.sets(st.integers(0, 7)), back=st.sets(st.integers(0, 7)))
def test_mergeable_answers_could_merge_against_every_added_content(earlier, new, kind, min_overlap, dup_overlap,
                                                                   gone, back) -> None:
    """The token index a long write keeps per group (#18) says yes exactly when some pair would, leaving
    out what was discarded (a memory the write retired) unless it was added again."""
    policy = MergePolicy(min_overlap=min_overlap, dup_overlap=dup_overlap)
    index = Mergeable(kind, policy)
    for n, words in enumerate(earlier):
        index.add(" ".join(words), f"m{n}")
    for n in gone:
        index.discard(f"m{n}")
    for n in back:
        index.add(" ".join(earlier[n]) if n < len(earlier) else "", f"m{n}")
    alive = [w for n, w in enumerate(earlier) if n not in gone or n in back]
    assert index.any(" ".join(new)) == any(could_merge(" ".join(new), " ".join(w), kind, policy) for w in alive)
