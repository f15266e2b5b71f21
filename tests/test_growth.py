"""Growth numbers on a real index, checked against the engine's own statistics and counts."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from esmem.apps.growth import growth
from esmem.cli.main import cli
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput
from esmem.index.engine import Engine
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)
BACKGROUND = ["Waters the tomatoes every morning", "Reads science fiction before bed", "Cycles to work when sunny",
              "Keeps a sourdough starter in the fridge", "Plays chess online on Sundays"]


@pytest.fixture
def history(engine: Engine, installed: str) -> MemoryStore:
    """"b": 5 plain memories. "a": Fridays superseded by Mondays, an older Wednesdays written outdated,
    a tea preference forgotten, one plain memory: 3 active (Mondays, the tombstone, Redis), 3 dead."""
    MemoryStore(engine, installed, merge=MergePolicy(enabled=False)).remember_many(
        [MemoryInput(text, "b") for text in BACKGROUND])
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    deploy = "The team deploys the order service to Kubernetes on {}"
    assert store.remember(deploy.format("Fridays"), "a", valid_from=NOW - 5 * DAY).action == "added"
    assert store.remember(deploy.format("Mondays"), "a", valid_from=NOW - DAY).action == "superseded"
    assert store.remember(deploy.format("Wednesdays"), "a", valid_from=NOW - 9 * DAY).action == "outdated"
    tea = store.remember("Prefers green tea in the afternoon", "a", kind="preference")
    store.forget("a", tea.id, reason="changed taste")
    store.remember("Product pages are cached in Redis", "a")
    return store


def _engine_numbers(engine: Engine, store: MemoryStore) -> tuple[int, int]:
    """(docs.count, store.size_in_bytes) of the primaries, asked of the engine directly."""
    prim = engine.request("GET", f"/{store.catalog.alias}/_stats")["_all"]["primaries"]
    return prim["docs"]["count"], prim["store"]["size_in_bytes"]


def _count(engine: Engine, store: MemoryStore, **terms: str) -> int:
    query = {"bool": {"filter": [{"term": {k: v}} for k, v in terms.items()]}}
    return engine.request("POST", f"/{store.catalog.alias}/_count", {"query": query})["count"]


def test_versions_and_bytes_match_the_engines_own_numbers(engine: Engine, history: MemoryStore) -> None:
    g = growth(history, project=1000)
    docs, size = _engine_numbers(engine, history)
    assert (g.index_documents, g.store_bytes) == (docs, size) and docs == 11
    assert g.bytes_per_document == pytest.approx(size / docs)
    a, b = g.namespaces
    assert (a.namespace, a.active, a.superseded, a.outdated, a.forgotten, a.other) == ("a", 3, 1, 1, 1, 0)
    assert a.versions == _count(engine, history, namespace="a") == 6
    assert a.active == _count(engine, history, namespace="a", status="active")
    assert a.versions_per_active == pytest.approx(2.0)
    assert a.bytes_per_memory == pytest.approx(6 * size / docs / 3)
    assert (b.namespace, b.active, b.versions, b.versions_per_active) == ("b", 5, 5, 1.0)
    assert (g.active, g.versions) == (8, 11)
    assert g.bytes_per_memory == pytest.approx(size / 8)  # every byte of the index over the active memories
    assert g.projected_bytes == pytest.approx(1000 * size / 8)
    assert growth(history, rate=100, days=30).projected_rate_bytes == pytest.approx(size + 3000 * size / docs)


def test_every_write_but_a_duplicate_adds_one_document(engine: Engine, history: MemoryStore) -> None:
    """The premise of the projection by write rate: a new memory and a supersede add one document each
    (the replaced version stays), a duplicate adds none."""
    before = growth(history).index_documents
    first = history.remember("The build server runs on a Mac mini in the office", "b", kind="fact", valid_from=NOW - DAY)
    moved = history.remember("The build server now runs on a rented Linux box in the office", "b", kind="fact",
                             valid_from=NOW - DAY / 2)
    again = history.remember("The build server now runs on a rented Linux box in the office", "b", kind="fact")
    assert (first.action, moved.action, again.action) == ("added", "superseded", "duplicate")
    assert growth(history).index_documents == before + 2


def test_one_namespace_and_the_cli(engine: Engine, installed: str, history: MemoryStore) -> None:
    g = growth(history, "b")
    assert [n.namespace for n in g.namespaces] == ["b"] and g.projected_bytes is None
    assert g.index_documents == 11  # the index is shared: bytes per document are the whole index's
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "stats", "--growth", "--project",
                                   "500", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["projected_memories"] == 500 and [n["namespace"] for n in out["namespaces"]] == ["a", "b"]
    text = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "stats", "--growth", "-n", "a"])
    assert text.exit_code == 0 and "versions/active" in text.stdout
    line = next(ln for ln in text.stdout.splitlines() if ln.startswith("a "))
    assert line.split()[1:7] == ["3", "1", "1", "1", "0", "2.00"]
    assert "green tea" not in text.stdout and "Redis" not in text.stdout  # counts only, never a memory


def test_bad_arguments(engine: Engine, installed: str, store: MemoryStore) -> None:
    with pytest.raises(InvalidInput):
        growth(store, project=0)
    with pytest.raises(InvalidInput):
        growth(store, "bad namespace!")
    with pytest.raises(InvalidInput):
        growth(store, rate=0)
    with pytest.raises(InvalidInput):
        growth(store, rate=10, days=0)
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "stats", "--project", "5"])
    assert res.exit_code == 2 and "--growth" in res.output
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "stats", "--growth", "--rate", "-1"])
    assert res.exit_code == 2 and "--rate" in res.output
    empty = growth(store)
    assert empty.namespaces == () and empty.bytes_per_memory == 0.0
