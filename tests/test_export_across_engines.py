"""Export on one OpenSearch major, restore on the other (2 <-> 3): a namespace with version chains, a
tombstone, pinned memories and reheat counts gives the same history of every memory and the same
recall top-10 (and pinned section) for 50 queries; with equal index statistics, the same scores
within float noise.

The other major's engine is this run's (CI runs both embedded flavours in one ESMEM_HOME, and the suite
once on each, so both directions run), one running in ESMEM_HOME, or a temporary one (the `other_major`
fixture)."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from esmem.domain.installation import install
from esmem.domain.store import MemoryStore
from esmem.domain.types import Memory, MemoryInput
from esmem.index.engine import Engine
from esmem.index.install import uninstall
from esmem.values import parse_time

NOW = parse_time("2026-11-01T12:00:00Z")
NS = "x:roundtrip"
DATASETS = Path(__file__).resolve().parent.parent / "datasets"


def _lines(*names: str) -> list[dict]:
    return [json.loads(line) for name in names for line in (DATASETS / name).read_text("utf-8").splitlines()
            if line.strip()]


CORPUS = _lines("updates.jsonl", "pinned.jsonl", "diversity.jsonl")
MEMORIES = [MemoryInput(m["content"], NS, kind=m["kind"], valid_from=m["valid_from"], importance=m.get("importance"),
                        entities=tuple(m.get("entities") or ()), idempotency_key=m["id"])
            for m in CORPUS if m["type"] == "memory"]
QUERIES = [q["text"] for q in CORPUS if q["type"] == "query"][:50]
# explicit updates of corpus memories (chains) and one standing instruction (evergreen: pinned)
UPDATES = [("The team stand-up moved to 10:15, still every weekday", "standup-old"),
           ("On HTTP 429 back off exponentially with jitter, at most five retries", "r429-old")]


def _empty_prefix(engine: Engine) -> Iterator[str]:
    name = f"t{uuid.uuid4().hex[:12]}"
    install(engine, name)
    yield name
    uninstall(engine, name)


@pytest.fixture
def elsewhere(other_major: Engine) -> Iterator[str]:
    """An installed, empty prefix on the other major's engine."""
    yield from _empty_prefix(other_major)


@pytest.fixture
def here(engine: Engine) -> Iterator[str]:
    """An installed, empty prefix on this engine."""
    yield from _empty_prefix(engine)


def _written(store: MemoryStore) -> None:
    results = store.remember_many(MEMORIES)
    by_key = {m.idempotency_key: r.id for m, r in zip(MEMORIES, results)}
    store.remember_many([MemoryInput(text, NS, kind="rule" if "429" in text else "event", supersedes=by_key[old],
                                     valid_from="2026-10-20T09:00:00Z") for text, old in UPDATES])
    store.remember("Always answer in the language the user wrote in", NS, kind="rule", evergreen=True,
                   valid_from="2026-01-01T00:00:00Z")
    store.forget(NS, by_key["manager-old"], reason="wrong person")
    for q in QUERIES[::5]:  # reheat counts
        store.recall(q, NS, 3, now=NOW)
    store.flush(30)


def _history(store: MemoryStore) -> dict[str, list[Memory]]:
    """Every memory's history, each version whole (text, status, links, statistics, times)."""
    ids = [h["_id"] for h in store.catalog.stream({"term": {"namespace": NS}})]
    return {i: store.history(NS, i) for i in ids}


def _recalls(store: MemoryStore) -> dict[str, tuple[list[tuple[str, float]], list[str]]]:
    """Each query's top 10 (id, score) and its pinned section's ids."""
    out = {}
    for q in QUERIES:
        r = store.recall(q, NS, 10, now=NOW, touch=False)
        out[q] = ([(x.memory.id, x.score) for x in r.items], [m.id for m in r.pinned])
    return out


def _ids(recalls: dict[str, tuple[list[tuple[str, float]], list[str]]]) -> dict[str, tuple[list[str], list[str]]]:
    return {q: ([i for i, _ in top], pinned) for q, (top, pinned) in recalls.items()}


def _sets(recalls: dict[str, tuple[list[tuple[str, float]], list[str]]]) -> dict[str, tuple[set[str], list[str]]]:
    return {q: ({i for i, _ in top}, pinned) for q, (top, pinned) in recalls.items()}


def _export(store: MemoryStore, path: Path) -> int:
    with path.open("w", encoding="utf-8") as fh:
        return store.export(fh, [NS], all_versions=True)


@pytest.mark.slow
def test_an_export_restored_on_the_other_major_has_the_same_history_and_recall(
        engine: Engine, other_major: Engine, installed: str, here: str, elsewhere: str, tmp_path: Path) -> None:
    assert {engine.info.major, other_major.info.major} == {2, 3}
    source = MemoryStore(engine, installed, clock=lambda: NOW)
    _written(source)
    path = tmp_path / "export.jsonl"
    count = _export(source, path)
    history = _history(source)
    rows = [row for chain in history.values() for row in chain]
    assert count == len(history) > len(MEMORIES)
    assert any(m.status == "superseded" for m in rows) and any((m.metadata or {}).get("tombstone") for m in rows)
    assert any(m.access_count > 0 for m in rows) and any(m.evergreen for m in rows)  # reheat counts, evergreen
    recalls = _recalls(source)
    assert len(recalls) == 50 and any(pinned for _, pinned in recalls.values())

    there = MemoryStore(other_major, elsewhere, clock=lambda: NOW)
    assert there.restore_export(str(path)).restored == count
    assert _history(there) == history
    # The written index keeps its updates' deleted versions in its BM25 statistics (a shard's retention
    # lease holds them), a restored one does not: scores move a little and near-ties may swap, so the
    # written index's top 10 are compared as sets; order and scores are compared between two restores
    # of the same file, one here and one there, whose statistics are equal.
    got = _recalls(there)
    assert _sets(got) == _sets(recalls)
    local = MemoryStore(engine, here, clock=lambda: NOW)
    local.restore_export(str(path))
    want = _recalls(local)
    assert sum(1 for top, pinned in got.values() if top or pinned) == 50, [q for q in QUERIES if not got[q][0]]
    for q in QUERIES:
        assert _sets(got)[q] == _sets(want)[q], (q, want[q], got[q])
        assert all(abs(a - b) <= 1e-4 for (_, a), (_, b) in zip(want[q][0], got[q][0])), (
            q, want[q][0], got[q][0])
        # the same order, but for memories whose scores tie within float noise (the engines may list
        # tied hits in another order)
        score = dict(want[q][0])
        for (w, ws), (g, _) in zip(want[q][0], got[q][0]):
            assert w == g or abs(score[g] - ws) <= 1e-4, (q, want[q][0], got[q][0])

