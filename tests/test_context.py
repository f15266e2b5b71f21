"""Context assembly on real recalls: sections, dates, budget to the character, de-duplication."""
from __future__ import annotations

from datetime import timedelta

import pytest

from esmem.apps.context import RECENT, RELEVANT, TRUNCATED, build_context, estimate_tokens, namespace_chars, when
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)
PARAMS = RecallParams(recent_n=2, must_not_miss=False)


@pytest.fixture
def plain(engine, installed) -> MemoryStore:
    return MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)


def _caching_memories(ns: str = "ctx") -> list[MemoryInput]:
    return [
        MemoryInput("The order service caches product pages in Redis with a 10 minute TTL", ns,
                    kind="fact", importance=5, valid_from=NOW - 21 * DAY),
        MemoryInput("The user prefers Redis over Memcached for caching", ns, kind="preference",
                    importance=5, valid_from=NOW - 3 * DAY),
        MemoryInput("Cache invalidation for the catalog goes through a Kafka topic", ns, kind="fact",
                    importance=5, valid_from=NOW - 40 * DAY),
        MemoryInput("Booked a dentist appointment for Thursday", ns, kind="event", importance=4,
                    valid_from=NOW - timedelta(hours=2)),
        MemoryInput("Is looking for a hotel in Hangzhou for the conference", ns, kind="intent", importance=4,
                    valid_from=NOW - timedelta(hours=5)),
    ]


def test_sections_dates_and_the_namespace_total(plain: MemoryStore) -> None:
    plain.remember_many(_caching_memories())
    plain.remember("Redis runs on three nodes in another team's namespace", "other", importance=5)
    res = plain.recall("Redis caching", "ctx", 3, params=PARAMS, now=NOW, touch=False)
    ctx = build_context(plain, res, budget_chars=2000)
    relevant, recent = ctx.text.split("\n\n")
    assert relevant.splitlines()[0] == RELEVANT and recent.splitlines()[0] == RECENT
    assert "- [fact, 3 weeks ago (2026-09-17)] The order service caches product pages in Redis" in relevant
    assert "- [preference, 3 days ago (2026-10-05)] The user prefers Redis over Memcached" in relevant
    # recent-N: the two newest memories not already recalled, oldest first, with a time of day
    assert recent.splitlines()[1:] == [
        "- [intent, 5 hours ago (2026-10-08 07:00 UTC)] Is looking for a hotel in Hangzhou for the conference",
        "- [event, 2 hours ago (2026-10-08 10:00 UTC)] Booked a dentist appointment for Thursday"]
    assert ctx.chars == len(ctx.text) and ctx.tokens == estimate_tokens(ctx.text)
    assert ctx.namespace_chars == sum(len(m.content) for m in _caching_memories())  # "other" not counted
    assert 0 < ctx.reduction < 1 or ctx.chars >= ctx.namespace_chars
    assert set(ctx.included) == {r.memory.id for r in res.items} | {m.id for m in res.recent}


def test_the_namespace_total_counts_active_memories_in_code_points(engine, installed) -> None:
    store = MemoryStore(engine, installed)  # merge on: the Friday memory gets superseded
    MemoryStore(engine, installed, merge=MergePolicy(enabled=False)).remember_many(  # IDF for the supersede
        [MemoryInput(t, "bg") for t in ["Waters the tomatoes", "Reads sci-fi", "Cycles to work", "Plays chess"]])
    store.remember("The team deploys the order service to Kubernetes on Fridays", "tot")
    store.remember("The team deploys the order service to Kubernetes on Mondays", "tot")
    store.remember("我对花生过敏 😀", "tot")  # the emoji is one code point (two UTF-16 units)
    assert store.count("tot", status="superseded") == 1
    expected = len("The team deploys the order service to Kubernetes on Mondays") + len("我对花生过敏 😀")
    assert namespace_chars(store, "tot") == expected
    assert namespace_chars(store, "empty") == 0


def test_the_budget_is_honoured_to_the_character_and_no_memory_is_cut(plain: MemoryStore) -> None:
    plain.remember_many(_caching_memories())
    res = plain.recall("Redis caching catalog", "ctx", 5, params=PARAMS, now=NOW, touch=False)
    everything = build_context(plain, res, budget_chars=10_000)
    assert not everything.omitted
    lines = {line for line in everything.text.splitlines() if line.startswith("- ")}
    widest = max(len(RELEVANT) + 1 + len(line) for line in lines)  # the largest one-memory block
    for budget in range(widest, len(everything.text) + 2, 7):
        ctx = build_context(plain, res, budget_chars=budget)
        assert ctx.chars == len(ctx.text) <= budget
        assert TRUNCATED not in ctx.text and not ctx.truncated  # every memory fits an empty block...
        assert set(ctx.included) | set(ctx.omitted) == set(everything.included)
        for line in ctx.text.splitlines():  # ...so every line is a whole memory from the full rendering
            assert line in lines or line in (RELEVANT, RECENT, "")
        assert sum(line.startswith("- ") for line in ctx.text.splitlines()) == len(ctx.included)
    # a budget that holds all but the last line drops exactly that memory
    cut = everything.text.rfind("\n")
    assert len(build_context(plain, res, budget_chars=cut).omitted) == 1


def test_a_memory_longer_than_the_whole_budget_is_truncated_with_a_marker(plain: MemoryStore) -> None:
    long = "Runbook for the Redis failover: " + " ".join(f"step {i} check replica lag" for i in range(80))
    w = plain.remember(long, "long", importance=5, valid_from=NOW - 10 * DAY)
    plain.remember("Redis failover drills happen monthly", "long", importance=5, valid_from=NOW - DAY)
    res = plain.recall("Redis failover runbook", "long", 2, params=PARAMS.with_(recent_n=0), now=NOW, touch=False)
    assert res.items[0].memory.id == w.id
    ctx = build_context(plain, res, budget_chars=300)
    assert ctx.truncated == (w.id,) and ctx.chars == 300  # filled to the character
    first = ctx.text.splitlines()[1]
    assert first.endswith(TRUNCATED) and long[:100] in first
    assert "monthly" not in ctx.text and ctx.omitted == (res.items[1].memory.id,)


def test_a_token_budget_caps_the_estimate_too(plain: MemoryStore) -> None:
    plain.remember_many([MemoryInput(f"用户在杭州的第{i}个项目用 Redis 做缓存，集群有{i + 2}个节点", "tok",
                                     importance=5, valid_from=NOW - i * DAY) for i in range(6)])
    res = plain.recall("Redis 缓存", "tok", 6, params=PARAMS.with_(recent_n=0, mmr=False), now=NOW, touch=False)
    ctx = build_context(plain, res, budget_chars=5000, budget_tokens=60)
    assert ctx.tokens == estimate_tokens(ctx.text) <= 60 and ctx.omitted and ctx.included
    assert estimate_tokens("用户 likes Redis") == 2 + 3  # 2 CJK + ceil(12 / 4)


def test_orderings(plain: MemoryStore) -> None:
    plain.remember_many(_caching_memories())
    res = plain.recall("Redis caching catalog", "ctx", 3, params=PARAMS.with_(recent_n=0), now=NOW, touch=False)
    by_rank = build_context(plain, res, order="relevance").text.splitlines()[1:]
    by_time = build_context(plain, res, order="chronological").text.splitlines()[1:]
    rank_contents = [r.memory.content for r in res.items]
    assert [next(c for c in rank_contents if c in line) for line in by_rank] == rank_contents
    times = sorted(res.items, key=lambda r: r.memory.valid_from)
    assert [next(r.memory.content for r in times if r.memory.content in line) for line in by_time] == \
        [r.memory.content for r in times]


def test_duplicates_are_rendered_once(plain: MemoryStore) -> None:
    plain.remember("The user prefers dark mode in every editor", "dup", kind="preference", importance=5)
    plain.remember("The user prefers  dark mode in every editor", "dup", kind="fact", importance=5)
    res = plain.recall("dark mode editor", "dup", 5, params=PARAMS, now=NOW, touch=False)
    assert len(res.items) == 2
    ctx = build_context(plain, res)
    assert ctx.text.count("dark mode") == 1 and ctx.duplicates == 1 and len(ctx.included) == 1


@pytest.mark.parametrize("ago, text", [
    (timedelta(seconds=20), "just now (2026-10-08 11:59 UTC)"),
    (timedelta(minutes=1), "1 minute ago (2026-10-08 11:59 UTC)"),
    (timedelta(hours=2, minutes=5), "2 hours ago (2026-10-08 09:55 UTC)"),
    (timedelta(days=1, hours=3), "1 day ago (2026-10-07 09:00 UTC)"),
    (timedelta(days=9), "9 days ago (2026-09-29)"),
    (timedelta(days=21), "3 weeks ago (2026-09-17)"),
    (timedelta(days=95), "3 months ago (2026-07-05)"),
    (timedelta(days=800), "2 years ago (2024-07-30)"),
    (-timedelta(hours=3), "in 3 hours (2026-10-08 15:00 UTC)"),
])
def test_dates_are_relative_to_the_recall_and_absolute(ago: timedelta, text: str) -> None:
    assert when(NOW - ago, NOW) == text


def test_bad_arguments_are_invalid_input(plain: MemoryStore) -> None:
    plain.remember("Redis is the cache", "bad", importance=5)
    res = plain.recall("Redis", "bad", params=PARAMS, now=NOW, touch=False)
    for kwargs in ({"budget_chars": 0}, {"budget_tokens": -1}, {"order": "random"}):
        with pytest.raises(InvalidInput):
            build_context(plain, res, **kwargs)
