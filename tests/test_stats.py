"""Monitoring aggregations on a real index: kinds/statuses, hit analysis, recall age, merges."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from esmem.apps.plots import stats_dashboard
from esmem.apps.stats import collect
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)
BACKGROUND = ["Waters the tomatoes every morning", "Reads science fiction before bed", "Cycles to work when sunny",
              "Keeps a sourdough starter in the fridge", "Plays chess online on Sundays"]


@pytest.fixture
def populated(engine, installed) -> dict[str, str]:
    """Namespace "a": 4 plain memories, a Friday->Monday supersede, a restatement; "b": background."""
    MemoryStore(engine, installed, merge=MergePolicy(enabled=False)).remember_many(
        [MemoryInput(text, "b") for text in BACKGROUND])  # also gives BM25 enough documents to supersede
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    items = {
        "redis": MemoryInput("Product pages are cached in Redis", "a", importance=5, valid_from=NOW - 10 * DAY),
        "kafka": MemoryInput("Catalog invalidation events go through Kafka", "a", importance=5,
                             valid_from=NOW - timedelta(hours=2)),
        "tea": MemoryInput("Prefers green tea in the afternoon", "a", kind="preference", valid_from=NOW - 30 * DAY),
        "hotel": MemoryInput("Looking for a hotel in Hangzhou", "a", kind="intent", valid_from=NOW - DAY),
        "friday": MemoryInput("The team deploys the order service to Kubernetes on Fridays", "a",
                              valid_from=NOW - 5 * DAY),
    }
    ids = dict(zip(items, (r.id for r in store.remember_many(list(items.values())))))
    monday = store.remember("The team deploys the order service to Kubernetes on Mondays", "a")
    assert monday.action == "superseded" and monday.superseded == (ids["friday"],)
    ids["monday"] = monday.id
    # the same words said again later (same text at the same instant would be a retry, not a restatement)
    assert store.remember("The team deploys the order service to Kubernetes on Mondays", "a",
                          valid_from=NOW - timedelta(hours=1)).action == "duplicate"
    for _ in range(3):
        assert store.recall("Redis", "a", 1, now=NOW).items[0].memory.id == ids["redis"]
    assert store.recall("Kafka", "a", 1, now=NOW).items[0].memory.id == ids["kafka"]
    return ids


def test_one_namespace(store: MemoryStore, populated: dict[str, str]) -> None:
    st = collect(store, "a", top=5)
    assert (st.namespace, st.total, st.active, st.namespaces) == ("a", 6, 5, 1)
    assert st.by_status == {"active": 5, "superseded": 1}
    assert st.by_kind == {"fact": {"active": 3, "superseded": 1}, "preference": {"active": 1}, "intent": {"active": 1}}
    assert st.by_importance_rule == {"given": 2, "preference": 1, "default": 2}
    assert (st.recalled, st.never_recalled) == (2, 3)
    assert [(m.id, m.access_count) for m in st.most_recalled] == [(populated["redis"], 3), (populated["kafka"], 1)]
    assert st.most_recalled[0].last_accessed_at == "2026-10-08T12:00:00.000Z"
    # never recalled, oldest first: the candidates to reword or forget
    assert [m.id for m in st.never_recalled_oldest] == [populated[k] for k in ("tea", "hotel", "monday")]
    assert list(st.recall_age) == ["<1h", "1h-1d", "1d-7d", "7d-30d", "30d-90d", "90d-1y", ">=1y"]  # stats template
    assert st.recall_age["7d-30d"] == 1 and st.recall_age["1h-1d"] == 1 and sum(st.recall_age.values()) == 2
    assert (st.superseded, st.superseding, st.restated) == (1, 1, 1)
    assert json.loads(json.dumps(st.as_dict()))["most_recalled"][0]["content"] == "Product pages are cached in Redis"


def test_the_whole_prefix_and_short_hit_lists(store: MemoryStore, populated: dict[str, str]) -> None:
    st = collect(store, top=1)
    assert (st.namespace, st.total, st.active, st.namespaces) == (None, 11, 10, 2)
    assert st.by_kind["fact"] == {"active": 8, "superseded": 1}
    assert [m.id for m in st.most_recalled] == [populated["redis"]] and len(st.never_recalled_oldest) == 1
    assert st.never_recalled == 8


def test_an_empty_namespace_and_bad_arguments(store: MemoryStore) -> None:
    st = collect(store, "nobody")
    assert st.total == 0 and st.by_kind == {} and sum(st.recall_age.values()) == 0 and not st.most_recalled
    with pytest.raises(InvalidInput):
        collect(store, "bad namespace!")
    with pytest.raises(InvalidInput):
        collect(store, top=0)


def test_plot_writes_a_png(store: MemoryStore, populated: dict[str, str], tmp_path) -> None:
    path = stats_dashboard(collect(store, "a"), tmp_path / "stats.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
