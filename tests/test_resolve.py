"""Query-time resolution of updates merge cannot see (esmem/resolve.py), on the engine."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams
from esmem.domain.resolve import reads_as_update, resolve, same_topic
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput

NOW = datetime(2026, 11, 1, tzinfo=timezone.utc)
MARCH = datetime(2026, 3, 1, tzinfo=timezone.utc)
SEPT = datetime(2026, 9, 1, tzinfo=timezone.utc)


def _hit(i: str, score: float, content: str, kind: str = "event", when: str = "2026-03-01T00:00:00.000Z",
         **src) -> dict:
    return {"_id": i, "_score": score, "_source": {"content": content, "kind": kind, "valid_from": when, **src}}


def test_reference_demotes_the_older_same_topic_candidate_under_the_newer() -> None:
    hits = [_hit("old", 8.0, "The team stand-up is at 9:30 every weekday"),
            _hit("other", 7.0, "Stand-up notes are kept in the wiki", kind="note", when="2026-10-01T00:00:00.000Z"),
            _hit("new", 5.0, "Stand-up moved to 10:00 from next week", when="2026-09-01T00:00:00.000Z")]
    got = resolve(hits, "what time is the stand-up", 0.5, 0.9, 0.5, lambda h: h["_score"])
    assert [h["_id"] for h in got.hits] == ["other", "new", "old"]
    assert got.demoted_by == {"old": "new"}
    assert next(h for h in got.hits if h["_id"] == "old")["_score"] == pytest.approx(0.9 * 5.0)
    # a conversation turn is a transcript: never resolved
    turns = [dict(h, _source={**h["_source"], "thread": "s1"}) for h in hits]
    assert resolve(turns, "what time is the stand-up", 0.5, 0.9, 0.5, lambda h: h["_score"]).demoted_by == {}


def test_two_rules_that_share_one_query_word_are_not_versions_of_each_other() -> None:
    assert same_topic(frozenset({"文章", "隐私"}), frozenset({"文章"}), 0.5)
    # ... but the newer one neither says it changes anything nor matches as well: no demotion
    assert not reads_as_update("文章开头的 front matter 必须写全四个字段", 2.2, 5.6, 0.5)
    assert reads_as_update("周会改到周四上午 10 点了", 1.0, 5.0, 0.5)
    assert reads_as_update("On 429 back off with jitter", 3.7, 7.1, 0.5)
    assert not reads_as_update("Redis failover drills happen monthly", 4.0, 5.0, 0.5, "fact")  # facts: say so
    assert reads_as_update("Alice now reports to Carol", 1.0, 5.0, 0.5, "fact")
    assert not same_topic(frozenset({"a"}), frozenset(), 0.5)


UPDATES = [
    MemoryInput("The team stand-up is at 9:30 every weekday", "u", kind="event", valid_from=MARCH),
    MemoryInput("On HTTP 429 wait 1 s and retry three times", "u", kind="rule", valid_from=MARCH),
    MemoryInput("每周五下午 4 点开周会", "u", kind="event", valid_from=MARCH),
    MemoryInput("Stand-up moved to 10:00 from next week", "u", kind="event", valid_from=SEPT),
    MemoryInput("On 429 back off with jitter", "u", kind="rule", valid_from=SEPT),
    MemoryInput("周会改到周四上午 10 点了", "u", kind="event", valid_from=SEPT),
]


@pytest.fixture
def updates(engine, installed) -> MemoryStore:
    """Both versions of each topic active (merge off): resolution is what puts the newer first."""
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    store.remember_many(UPDATES)
    return store


def test_with_merge_on_the_updates_that_say_so_are_superseded_at_write_time(engine, installed) -> None:
    store = MemoryStore(engine, installed, merge=MergePolicy(), clock=lambda: NOW)
    actions = [r.action for r in store.remember_many(UPDATES)]
    # "moved to" and 改到 say what changed; "back off with jitter" shares too little with the 429 rule
    assert actions == ["added", "added", "added", "superseded", "added", "superseded"]


@pytest.mark.parametrize("query, new, old", [
    ("what time is the stand-up", "Stand-up moved to 10:00 from next week", "The team stand-up is at 9:30 every weekday"),
    ("what to do on 429", "On 429 back off with jitter", "On HTTP 429 wait 1 s and retry three times"),
    ("周会什么时候开", "周会改到周四上午 10 点了", "每周五下午 4 点开周会"),
])
def test_the_update_ranks_first_and_the_old_version_stays_below_it(updates: MemoryStore, query, new, old) -> None:
    res = updates.recall(query, "u", 5, now=NOW, touch=False)
    ranked = [r.memory.content for r in res.items]
    assert ranked[0] == new and old in ranked  # both active, the old one demoted
    top, stale = res.items[0], next(r for r in res.items if r.memory.content == old)
    assert stale.demoted_by == top.memory.id and stale.score == pytest.approx(0.9 * top.score)
    off = updates.recall(query, "u", 5, now=NOW, touch=False, params=RecallParams(resolve=False))
    assert not any(r.demoted_by for r in off.items)
    assert [r.score for r in off.items] == sorted((r.score for r in off.items), reverse=True)
    past = updates.recall(query, "u", 5, now=NOW, touch=False, as_of=datetime(2026, 6, 1, tzinfo=timezone.utc))
    past_ranked = [r.memory.content for r in past.items]
    assert past_ranked[0] == old and new not in past_ranked  # as_of sees the world before the update


def test_explain_says_which_newer_memory_an_old_one_was_put_under(updates: MemoryStore) -> None:
    from click.testing import CliRunner

    from esmem.cli.main import cli

    res = CliRunner().invoke(cli, ["--url", updates.engine.url, "--prefix", updates.names.prefix, "recall",
                                   "what time is the stand-up", "-n", "u", "--now", "2026-11-01T00:00:00Z",
                                   "--no-touch", "--explain"])
    assert res.exit_code == 0, res.output
    assert "put under the newer" in res.stdout
