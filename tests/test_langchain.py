"""The LangChain retriever and the LangGraph store on the real engine, and the examples of
docs/guides/langchain.md."""
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.store.base import InvalidNamespaceError, PutOp

from esmem.apps.langchain import EsmemRetriever, query_from_messages
from esmem.apps.langgraph_store import EsmemStore
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput, Unsupported

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "langchain.md"
OLD_RULE = "On HTTP 429 wait 1 second and retry, at most 3 times, then skip the step"
NEW_RULE = "On HTTP 429 now back off exponentially with random jitter and retry, at most 5 times, then skip the step"
PAYMENTS = "Payments are capped at 100 requests per minute per key"


def guide_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), re.S | re.M)


def run_block(code: str, engine, prefix: str) -> str:
    env = {**os.environ, "ESMEM_URL": engine.url, "ESMEM_PREFIX": prefix}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_guide_retriever_example_returns_the_expected_documents_in_order(engine, installed: str) -> None:
    blocks = guide_blocks()
    assert len(blocks) == 2
    lines = run_block(blocks[0], engine, installed).splitlines()
    assert lines[0] == "superseded"
    docs = [re.fullmatch(r"(\d)\. \[(\w+)\] (.*) \(score ([\d.]+) = rel ([\d.]+), recency ([\d.]+)\)", line)
            for line in lines[1:3]]
    assert [(d[1], d[2], d[3]) for d in docs] == [("1", "rule", NEW_RULE), ("2", "fact", PAYMENTS)]
    for d in docs:  # blend: score = 0.9 * rel / (rel + 5) + 0.1 * recency (printed to 3 / 2 decimals)
        score, rel, rec = float(d[4]), float(d[5]), float(d[6])
        assert score == pytest.approx(0.9 * rel / (rel + 5) + 0.1 * rec, abs=0.004)
    assert lines[3:] == ["System: What you remember about the user, most relevant first:",
                         f"- {NEW_RULE}", f"- {PAYMENTS}",
                         "Human: the payment API answered HTTP 429, how do we retry?"]
    store = MemoryStore(engine, installed)  # the old rule is history, in the test's own prefix
    assert store.count("carol") == 3 and store.count("carol", status="superseded") == 1


def test_guide_store_example_prints_the_newer_value(engine, installed: str) -> None:
    out = run_block(guide_blocks()[1], engine, installed).splitlines()
    newer = "On HTTP 429 back off with jitter and retry, at most 5 times"
    assert out[0] == newer
    assert len(out) == 2 and out[1].startswith("retry-429 ") and out[1].endswith(newer)


@pytest.fixture
def seeded(store: MemoryStore) -> MemoryStore:
    store.remember_many([MemoryInput(PAYMENTS, "carol"), MemoryInput("Deploys go out on Thursdays", "carol"),
                         MemoryInput(OLD_RULE, "carol", kind="rule", valid_from="2026-07-05T09:00:00Z"),
                         MemoryInput(f"{NEW_RULE} (mallory's copy)", "mallory", kind="rule")])
    store.remember(NEW_RULE, "carol", kind="rule", valid_from="2026-08-21T13:00:00Z")
    return store


def test_documents_carry_the_recall_and_its_score_components(seeded: MemoryStore) -> None:
    retriever = EsmemRetriever(store=seeded, namespace="carol", k=3, touch=False)
    docs = retriever.invoke("retry HTTP 429 payments")
    ref = seeded.recall("retry HTTP 429 payments", "carol", 3, touch=False)
    assert [d.id for d in docs] == [r.memory.id for r in ref.items] and len(docs) == 2
    for rank, (d, r) in enumerate(zip(docs, ref.items), 1):
        assert d.page_content == r.memory.content and d.metadata["rank"] == rank
        assert d.metadata["score"] == pytest.approx(r.score) and d.metadata["rel"] == pytest.approx(r.rel)
        assert d.metadata["recency"] == r.recency and d.metadata["kind"] == r.memory.kind
    assert "mallory" not in " ".join(d.page_content for d in docs)  # the namespace is the retriever's
    assert OLD_RULE not in [d.page_content for d in docs]  # superseded
    facts = EsmemRetriever(store=seeded, namespace="carol", kinds=("fact",), touch=False).invoke("retry HTTP 429 payments")
    assert [d.page_content for d in facts] == [PAYMENTS]


def test_retriever_async_and_touch(seeded: MemoryStore) -> None:
    retriever = EsmemRetriever(store=seeded, namespace="carol", k=1)
    docs = asyncio.run(retriever.ainvoke("how do we retry a 429"))
    assert [d.page_content for d in docs] == [NEW_RULE]
    assert seeded.get("carol", docs[0].id).access_count == 1  # recall counts as use (reheat)


def test_retriever_refuses_bad_input(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput, match="invalid namespace"):
        EsmemRetriever(store=store, namespace="a b")
    with pytest.raises(InvalidInput, match="query is empty"):
        EsmemRetriever(store=store, namespace="carol").invoke("  ")


def test_query_from_messages_drops_fillers_and_system_turns() -> None:
    history = [SystemMessage("You are helpful."), HumanMessage("我们的 Redis 缓存老是把热点 key 淘汰掉，该怎么配？"),
               AIMessage("先看 maxmemory-policy。"), HumanMessage("好的，继续")]
    q = query_from_messages(history)
    assert "Redis" in q and "好的" not in q and "helpful" not in q


def test_store_put_get_supersede_search_filter(store: MemoryStore) -> None:
    lg = EsmemStore(store, touch=False)
    ns = ("memories", "dave")
    lg.put(ns, "retry", {"content": OLD_RULE, "kind": "rule", "valid_from": "2026-07-05T09:00:00Z"})
    lg.put(ns, "pay", {"content": PAYMENTS, "team": "billing"})
    lg.put(ns, "deploy", {"content": "Deploys go out on Thursdays", "team": "platform"})
    first = lg.get(ns, "retry")
    lg.put(ns, "retry", {"content": NEW_RULE, "kind": "rule", "entities": ["HTTP 429"]})
    item = lg.get(ns, "retry")
    assert item.value == {"content": NEW_RULE, "kind": "rule", "entities": ["HTTP 429"]} and item.key == "retry"
    assert item.namespace == ns and item.created_at >= first.created_at
    new = store.recall("429", "memories:dave", 1, touch=False).items[0].memory
    assert [m.content for m in store.history("memories:dave", new.id)] == [OLD_RULE, NEW_RULE]
    assert new.importance and new.entities == ("HTTP 429",) and new.kind == "rule"
    assert lg.get(ns, "nope") is None and lg.get(("memories", "erin"), "retry") is None

    hits = lg.search(ns, query="retry HTTP 429 payments", limit=5)
    assert [h.key for h in hits] == ["retry", "pay"] and hits[0].score > hits[1].score > 0
    assert [h.key for h in lg.search(ns, query="retry HTTP 429 payments", limit=1, offset=1)] == ["pay"]
    assert [h.key for h in lg.search(ns, query="retry HTTP 429 payments", filter={"team": "billing"})] == ["pay"]
    newest = lg.search(ns)  # no query: newest first
    assert [h.key for h in newest] == ["retry", "deploy", "pay"] and all(h.score is None for h in newest)
    assert lg.search(("memories",), query="429") == []  # no prefix search across namespaces
    assert lg.list_namespaces(prefix=("memories",)) == [ns]
    assert lg.list_namespaces(max_depth=1) == [("memories",)]
    got = asyncio.run(lg.asearch(ns, query="Thursdays"))
    assert [h.key for h in got] == ["deploy"]


def test_store_delete_is_forget_and_a_later_put_continues_the_key(store: MemoryStore) -> None:
    lg = EsmemStore(store, touch=False)
    ns, esmem_ns = ("memories", "dave"), "memories:dave"
    lg.put(ns, "pay", {"content": PAYMENTS})
    lg.put(ns, "deploy", {"content": "Deploys go out on Thursdays"})
    first = store.recall("payments capped", esmem_ns, 1, touch=False).items[0].memory
    lg.delete(ns, "pay")
    assert lg.get(ns, "pay") is None
    assert [h.key for h in lg.search(ns, query="payments capped per minute")] == []
    assert [h.key for h in lg.search(ns)] == ["deploy"]
    versions = store.history(esmem_ns, first.id)  # history keeps it: superseded by a tombstone
    assert [(m.content, m.status) for m in versions][0] == (PAYMENTS, "superseded")
    assert versions[1].metadata == {"tombstone": True} and versions[1].status == "active"
    lg.delete(ns, "pay")  # deleting again, or a key never put, changes nothing
    lg.delete(ns, "never")
    assert store.count(esmem_ns, status=None) == 3

    lg.put(ns, "pay", {"content": PAYMENTS})  # the same value again: a new version, not a replay
    assert lg.get(ns, "pay").value == {"content": PAYMENTS}
    assert [m.status for m in store.history(esmem_ns, first.id)] == ["superseded", "superseded", "active"]
    assert [h.key for h in lg.search(ns, query="payments capped per minute")] == ["pay"]


def test_store_values_without_string_content_are_json_text_that_ranks(store: MemoryStore) -> None:
    lg = EsmemStore(store, touch=False)
    ns = ("profile", "erin")
    lg.put(ns, "food", {"likes": "pizza margherita", "city": "Naples"})
    lg.put(ns, "tools", {"content": {"editor": "helix", "shell": "fish"}, "kind": "Memory"})  # LangMem's shape
    lg.put(ns, "music", {"content": "Listens to jazz while coding", "kind": "preference"})
    assert lg.get(ns, "food").value == {"likes": "pizza margherita", "city": "Naples"}
    assert [h.key for h in lg.search(ns, query="pizza in Naples")][0] == "food"
    assert [h.key for h in lg.search(ns, query="which editor, helix?")][0] == "tools"
    by_key = {m.external_id: m for m in store.recent("profile:erin", 10)}
    assert by_key["food"].content == '{"city": "Naples", "likes": "pizza margherita"}'
    assert by_key["tools"].content == '{"editor": "helix", "shell": "fish"}'
    # a kind esmem knows is used; another (LangMem's schema name) stays only in the value
    assert (by_key["tools"].kind, by_key["music"].kind) == ("fact", "preference")
    assert lg.get(ns, "tools").value["kind"] == "Memory"


def test_store_refuses_ttl_and_bad_values(store: MemoryStore) -> None:
    lg = EsmemStore(store)
    ns = ("memories", "dave")
    lg.put(ns, "pay", {"content": PAYMENTS})
    with pytest.raises(NotImplementedError, match="TTL"):
        lg.put(ns, "x", {"content": "ok"}, ttl=5)
    with pytest.raises(Unsupported, match="no time-to-live"):
        lg.batch([PutOp(ns, "x", {"content": "ok"}, ttl=5.0)])
    with pytest.raises(InvalidInput, match="importance"):
        lg.put(ns, "x", {"content": "ok", "importance": 99})
    with pytest.raises(InvalidInput, match="not JSON"):
        lg.put(ns, "x", {"content": {"n": float("nan")} | {"s": {1, 2}}})
    with pytest.raises(InvalidNamespaceError):
        lg.put(("a:b",), "x", {"content": "ok"})
    with pytest.raises(InvalidNamespaceError):
        lg.put(("bad space",), "x", {"content": "ok"})
    assert lg.get(ns, "pay").value == {"content": PAYMENTS} and store.count("memories:dave", status=None) == 1
