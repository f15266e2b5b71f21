"""Pinned memories: a bounded, relevance-gated section instead of ranked slots (esmem/pinned.py)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from esmem.apps.context import PINNED, RELEVANT, build_context
from esmem.errors import InvalidInput
from esmem.domain.merge import MergePolicy
from esmem.domain.pinned import TRIGGERS, check_applies_to, derive_applies_to, gate
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput

NOW = datetime(2026, 11, 29, 12, tzinfo=timezone.utc)
PENICILLIN = "I am allergic to penicillin"
PEANUTS = "My daughter Emma is allergic to peanuts"
DIABETES = "Diagnosed with type 2 diabetes last year, keep sugar low"
OPS = ["接口返回 HTTP 429 时按指数退避加 jitter 重试，最多 5 次",
       "PowerShell 的输出用 Set-Content 写进文件再读回来",
       "Kubernetes pods of the api service are limited to 512Mi memory",
       "The ramen place on Main Street has a great lunch menu"]


def test_applies_to_is_derived_from_the_content_then_the_rule() -> None:
    doc = {"content": PENICILLIN, "importance_rule": "health:allergy"}
    derive_applies_to(doc)
    assert "antibiotic" in doc["applies_to"] and "takeout" not in doc["applies_to"]
    doc = {"content": "我对海鲜过敏", "importance_rule": "health:allergy"}
    derive_applies_to(doc)
    assert "外卖" in doc["applies_to"] and "抗生素" not in doc["applies_to"]
    doc = {"content": "allergic to cats", "importance_rule": "health:allergy"}
    derive_applies_to(doc)
    assert doc["applies_to"] == TRIGGERS["health:allergy"]
    doc = {"content": "likes tea", "importance_rule": "default"}
    derive_applies_to(doc)
    assert "applies_to" not in doc
    doc = {"content": PENICILLIN, "importance_rule": "health:allergy", "applies_to": "given"}
    derive_applies_to(doc)
    assert doc["applies_to"] == "given"


@pytest.mark.parametrize("bad", [3, [1, 2], b"x", "x" * 3000])
def test_bad_applies_to_is_refused(bad) -> None:
    with pytest.raises(InvalidInput):
        check_applies_to(bad)


def test_gate_keeps_pinned_memories_only_from_a_share_of_the_top_relevance() -> None:
    hits = [{"_id": "a", "rel": 10.0, "_source": {"importance": 3}},
            {"_id": "b", "rel": 6.0, "_source": {"importance": 10}},
            {"_id": "c", "rel": 4.0, "_source": {"importance": 10}},
            {"_id": "d", "rel": 1.0, "_source": {"importance": 2, "evergreen": True}},
            {"_id": "e", "rel": 1.0, "_source": {"importance": 2}}]
    kept = gate(hits, lambda h: h["rel"], 8.0, 0.5)
    assert [h["_id"] for h in kept] == ["a", "b", "e"]


@pytest.fixture
def pinned(engine, installed) -> MemoryStore:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    store.remember_many([
        MemoryInput(PENICILLIN, "p", valid_from=datetime(2024, 1, 1, tzinfo=timezone.utc)),
        MemoryInput(PEANUTS, "p"), MemoryInput(DIABETES, "p"),
        MemoryInput("Never deploy on Fridays", "p", kind="rule", importance=9, applies_to=["release", "上线"]),
        *[MemoryInput(text, "p", kind="rule") for text in OPS],
        MemoryInput(PEANUTS, "q"),  # another namespace: never pinned into p's recalls
    ])
    return store


def _recall(store: MemoryStore, query: str, **params) -> tuple[list[str], list[str]]:
    res = store.recall(query, "p", 3, params=RecallParams(**params), now=NOW, touch=False)
    return [r.memory.content for r in res.items], [m.content for m in res.pinned]


@pytest.mark.parametrize("query", ["429 怎么重试", "PowerShell 命令没有输出", "api pods keep hitting the memory limit"])
def test_no_pinned_memory_in_an_unrelated_ranked_top_k(pinned: MemoryStore, query: str) -> None:
    ranked, section = _recall(pinned, query)
    assert ranked and not {PENICILLIN, PEANUTS, DIABETES} & set(ranked)
    assert not {PENICILLIN, PEANUTS} & set(section)
    # before (must-not-miss slots, no section): the allergies took ranked slots
    old_ranked, old_section = _recall(pinned, query, must_not_miss=True, pinned=0)
    assert {PENICILLIN, PEANUTS, DIABETES} & set(old_ranked) and not old_section


def test_a_single_incidental_word_does_not_earn_a_pinned_memory_a_ranked_slot(pinned: MemoryStore) -> None:
    ranked, section = _recall(pinned, "api pods keep hitting the memory limit")
    assert DIABETES not in ranked and DIABETES in section  # matched "keep" only
    assert DIABETES in _recall(pinned, "api pods keep hitting the memory limit", pinned=0)[0]


@pytest.mark.parametrize("query, must", [
    ("the doctor wants to prescribe antibiotics", PENICILLIN), ("order takeout tonight", PEANUTS),
    ("bake a cake for the party", DIABETES), ("明天上线新版本", "Never deploy on Fridays"),
])
def test_a_pinned_memory_reaches_the_context_when_it_applies(pinned: MemoryStore, query: str, must: str) -> None:
    res = pinned.recall(query, "p", 3, now=NOW, touch=False)
    assert must in [m.content for m in res.pinned] and len(res.pinned) <= res.params.pinned
    assert all(m.namespace == "p" for m in res.pinned)
    ctx = build_context(pinned, res, budget_chars=2000)
    assert ctx.text.startswith(PINNED) and must in ctx.text.split(RELEVANT)[0]


def test_the_section_is_bounded_and_off_with_zero(pinned: MemoryStore) -> None:
    _, section = _recall(pinned, "order takeout and a cake, then see the doctor for antibiotics", pinned=1)
    assert len(section) == 1
    assert _recall(pinned, "order takeout tonight", pinned=0)[1] == []


def test_a_lexically_relevant_pinned_memory_stays_ranked(pinned: MemoryStore) -> None:
    ranked, section = _recall(pinned, "penicillin allergy")
    assert ranked[0] == PENICILLIN and PENICILLIN not in section
