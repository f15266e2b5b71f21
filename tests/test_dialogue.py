"""Query building from a conversation: fillers out, the newest user turn decides the topic."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from esmem.apps.dialogue import build_query, is_filler, read_messages, strip_filler
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput

REDIS_Q = {"role": "user", "content": "我们的 Redis 缓存老是把热点 key 淘汰掉，maxmemory-policy 该怎么配？"}
REDIS_A = {"role": "assistant",
           "content": "热点数据多的话，Redis 的 maxmemory-policy 用 allkeys-lfu 比 allkeys-lru 更合适。"}
HIKE_Q = {"role": "user", "content": "对了，周末想去爬山，北京周边有什么推荐的徒步路线？"}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


@pytest.mark.parametrize("text", ["嗯", "好的", "继续", "好的，继续", "ok", "OK, thanks!", "thanks", "谢谢",
                                  "你好！", "Hi there", "早上好", "Got it — thanks!", "k", "👍", "为什么？",
                                  "that helps", "Sure, let me continue.", "好的，我继续。", "Here's more:"])
def test_fillers_greetings_and_very_short_turns_are_filler(text: str) -> None:
    assert is_filler(text)


@pytest.mark.parametrize("text, kept", [
    ("Redis 怎么设置过期时间？", "Redis 怎么设置过期时间"),
    ("好的，那 Redis 持久化呢？", "那 Redis 持久化呢"),  # the acknowledgement phrase is stripped
    ("I'll use Redis. Thanks!", "I'll use Redis"),
    ("Next.js or Remix?", "Next.js or Remix"),  # a dot inside a word does not split the phrase
    ("Go?", "Go"),
])
def test_substantive_turns_keep_their_words(text: str, kept: str) -> None:
    assert strip_filler(text) == kept


def test_last_turn_filler_after_a_redis_question_queries_redis_on_the_engine(engine, installed) -> None:
    query = build_query([REDIS_Q, REDIS_A, user("好的，继续")])
    assert "Redis" in query and "继续" not in query and "好的" not in query
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False))
    store.remember_many([
        MemoryInput("订单服务的缓存用 Redis 7，maxmemory-policy 配的是 allkeys-lru", "dlg", importance=5),
        MemoryInput("用户周末喜欢去徒步，偏爱越野路线", "dlg", kind="preference", importance=5),
    ])
    top = store.recall(query, "dlg", 1, touch=False).items[0].memory
    assert "Redis" in top.content


def test_a_topic_switch_drops_the_old_topic(engine, installed) -> None:
    query = build_query([REDIS_Q, REDIS_A, HIKE_Q])
    assert "徒步" in query and "Redis" not in query and "maxmemory" not in query
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False))
    store.remember_many([
        MemoryInput("订单服务的缓存用 Redis 7，maxmemory-policy 配的是 allkeys-lru", "dlg", importance=5),
        MemoryInput("用户周末喜欢去徒步，偏爱越野路线", "dlg", kind="preference", importance=5),
    ])
    got = [r.memory.content for r in store.recall(query, "dlg", 5, touch=False).items]
    assert got and "徒步" in got[0]
    assert not any("Redis" in c for c in got)  # the old topic no longer matches at all


def test_older_turns_sharing_a_topic_word_stay() -> None:
    query = build_query([REDIS_Q, REDIS_A, user("嗯"), assistant("好的，我继续。"), user("那 Redis 持久化呢？")])
    # fillers do not count against the window: the question and answer about Redis are still in it
    assert query.startswith("我们的 Redis 缓存") and query.endswith("那 Redis 持久化呢")
    assert "allkeys-lfu" in query


def test_the_window_counts_substantive_turns_only() -> None:
    msgs = [user("PostgreSQL 的连接池怎么配置？"), assistant("常用 PgBouncer。"), user("好的"),
            user("PgBouncer 和 PostgreSQL 自带的连接池比呢？")]
    assert "连接池怎么配置" not in build_query(msgs, n=2)
    assert "连接池怎么配置" in build_query(msgs, n=3)


def test_only_fillers_give_an_empty_query_and_system_messages_are_skipped() -> None:
    assert build_query([{"role": "system", "content": "You are a helpful assistant about Redis."},
                        user("你好"), assistant("你好！"), user("嗯嗯")]) == ""


def test_long_turns_are_capped() -> None:
    long_answer = "Redis " + "x" * 5000
    assert len(build_query([user("Redis 的内存怎么看？"), assistant(long_answer)], max_turn_chars=100)) <= 100 + 20


@pytest.mark.parametrize("messages, needle", [
    ("not a list", "list"),
    ([{"role": "user"}], "message #1"),
    ([user("hi"), {"role": "narrator", "content": "..."}], "message #2 has role 'narrator'"),
])
def test_malformed_messages_are_invalid_input(messages, needle: str) -> None:
    with pytest.raises(InvalidInput, match=needle):
        build_query(messages)


def test_n_must_be_positive() -> None:
    with pytest.raises(InvalidInput, match="n must be"):
        build_query([user("Redis")], n=0)


def test_read_messages_accepts_a_list_or_an_openai_style_body(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([REDIS_Q]), encoding="utf-8")
    (tmp_path / "b.json").write_text(json.dumps({"model": "x", "messages": [REDIS_Q]}), encoding="utf-8")
    assert read_messages(tmp_path / "a.json") == read_messages(tmp_path / "b.json") == [REDIS_Q]
    (tmp_path / "bad.json").write_text("[{", encoding="utf-8")
    with pytest.raises(InvalidInput, match="not valid JSON"):
        read_messages(tmp_path / "bad.json")
    with pytest.raises(InvalidInput, match="cannot read"):
        read_messages(tmp_path / "missing.json")
