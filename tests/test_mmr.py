"""MMR as a pure function, and on the engine with Jaccard or, when memories carry vectors, cosine."""
from __future__ import annotations

import pytest

from esmem.domain.analysis import token_set
from esmem.domain.merge import MergePolicy
from esmem.domain.mmr import cosine, jaccard, mmr
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.values import parse_time

NOTES = ["writing TypeScript backend with Express for REST API",
         "building TypeScript backend API using Express framework",
         "creating TypeScript REST API service with Express",
         "analyzing data with Python TypeScript integration pipeline"]


def test_seed_000_worked_example() -> None:
    sets = [token_set(n) for n in NOTES]
    rel = [0.125, 0.143, 0.143, 0.143]  # Jaccard to the query, as in the seed's table
    sim = lambda i, j: jaccard(sets[i], sets[j])  # noqa: E731
    plain, _ = mmr(rel, sim, 3, lambda_=1.0)
    assert 3 in plain  # ties on relevance: pure relevance keeps index order among equals
    diverse, penalties = mmr(rel, sim, 3, lambda_=0.6)
    assert diverse[0] == 1 and 3 in diverse
    assert penalties[0] == 0.0 and all(p >= 0 for p in penalties)


def test_lambda_one_is_plain_ranking_and_k_bounds() -> None:
    rel = [0.9, 0.5, 0.7, 0.1]
    order, pen = mmr(rel, lambda i, j: 1.0, 3, lambda_=1.0)
    assert order == [0, 2, 1] and pen == [0.0, 0.0, 0.0]
    assert mmr(rel, lambda i, j: 0.0, 10)[0] == [0, 2, 1, 3]
    assert mmr([], lambda i, j: 0.0, 3) == ([], [])


def test_a_similarity_below_the_threshold_is_no_redundancy() -> None:
    rel = [1.0, 0.8, 0.7]
    sims = {(1, 0): 0.25, (2, 0): 0.0, (2, 1): 0.0}
    sim = lambda i, j: sims[(max(i, j), min(i, j))]  # noqa: E731
    # 0.65 * 0.8 - 0.35 * 0.25 < 0.65 * 0.7: counted, the shared words push the second below the third
    assert mmr(rel, sim, 3, lambda_=0.65)[0] == [0, 2, 1]
    order, penalties = mmr(rel, sim, 3, lambda_=0.65, threshold=0.3)
    assert order == [0, 1, 2] and penalties == [0.0, 0.0, 0.0]
    sims[(1, 0)] = 0.3  # at the threshold it counts
    assert mmr(rel, sim, 3, lambda_=0.65, threshold=0.3)[0] == [0, 2, 1]


def test_cosine() -> None:
    assert cosine([1, 0], [1, 0]) == pytest.approx(1.0)
    assert cosine([1, 0], [0, 2]) == pytest.approx(0.0)
    assert cosine([0, 0], [1, 1]) == 0.0


def test_recall_uses_cosine_when_asked_and_memories_carry_vectors(engine, installed) -> None:
    now = parse_time("2026-10-08T12:00:00Z")
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: now)
    store.remember_many([
        MemoryInput("espresso machine descaling every month", "vec", kind="note", embedding=[1.0, 0.0, 0.0]),
        MemoryInput("espresso beans from the corner roaster", "vec", kind="note", embedding=[1.0, 0.0, 0.0]),
        MemoryInput("espresso tastes sour when the grind is coarse", "vec", kind="note", embedding=[0.0, 1.0, 0.0]),
    ])
    plain = store.recall("espresso machine beans", "vec", 2, params=RecallParams(mmr=False), now=now, touch=False)
    assert {r.memory.content for r in plain.items} == {"espresso machine descaling every month",
                                                      "espresso beans from the corner roaster"}
    diverse = store.recall("espresso machine beans", "vec", 2, params=RecallParams(mmr_lambda=0.5, mmr_similarity="cosine"),
                           now=now, touch=False)
    # the two look-alikes have identical vectors: cosine 1, so the second one gives way
    assert diverse.items[1].memory.content == "espresso tastes sour when the grind is coarse"
    # the default (index tokens, chosen on LoCoMo for hybrid too, docs/results/hybrid.md): the look-alikes
    # share only the word "espresso", so the vectors are not read and both stay
    words = store.recall("espresso machine beans", "vec", 2, params=RecallParams(mmr_lambda=0.5), now=now, touch=False)
    assert {r.memory.content for r in words.items} == {r.memory.content for r in plain.items}
