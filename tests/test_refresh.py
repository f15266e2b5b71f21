"""Concurrent refreshes of one index share the engine's refreshes, and each caller still sees every
write it made before asking (real engine: visibility is checked with searches, which only a refresh
makes current)."""
from __future__ import annotations

import threading

import pytest

from esmem.domain.store import MemoryStore
from esmem.index.catalog import Catalog
from esmem.index.engine import Engine
from esmem.index.refresh import RECENT_SECONDS, checkpoint, refreshes

THREADS = 16


def test_concurrent_writers_share_refreshes_and_each_sees_its_write(engine: Engine, installed: str) -> None:
    catalog = Catalog(engine, installed)
    sent: list[str] = []
    start = threading.Barrier(THREADS)
    unseen: list[str] = []

    def writer(n: int) -> None:
        doc_id = f"refresh-{n}"
        catalog.create([(doc_id, {"namespace": "rf", "content": f"writer {n}", "kind": "fact", "importance": 1,
                                  "valid_from": "2026-01-01T00:00:00Z", "status": "active"})])
        start.wait()
        Catalog(engine, installed).refresh()  # another store's catalog: the group is the process's
        hits = engine.request("POST", f"/{catalog.alias}/_search", {"query": {"ids": {"values": [doc_id]}}})
        if hits["hits"]["total"]["value"] != 1:
            unseen.append(doc_id)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
    recorder, engine.recorder = engine.recorder, lambda method, path, *_: sent.append(path)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        engine.recorder = recorder
    assert unseen == []
    refreshed = [p for p in sent if p.endswith("/_refresh")]
    assert 1 <= len(refreshed) < THREADS / 2  # one in flight, one more for everyone who asked meanwhile


def test_a_failed_refresh_is_the_senders_error_and_the_next_call_sends_again(engine: Engine, installed: str) -> None:
    group = refreshes(engine, MemoryStore(engine, installed).alias)
    send, calls = group.send, []

    def fails_once() -> object:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("refresh failed")
        return send()

    group.send = fails_once
    try:
        with pytest.raises(RuntimeError, match="refresh failed"):
            group()
        group()
    finally:
        group.send = send
    assert len(calls) == 2


def test_a_refresh_s_checkpoint_stands_for_what_is_searchable_while_it_is_recent(engine: Engine, installed: str,
                                                                               monkeypatch) -> None:
    """Each refresh reads the index's checkpoint before it starts: once it completes, every write numbered
    up to it is searchable, and a look-up made within RECENT_SECONDS of that read relies on it; later
    the point is no longer offered and a remember refreshes before its look-up."""
    store = MemoryStore(engine, installed)
    group = refreshes(engine, store.alias)
    now = [1000.0]
    monkeypatch.setattr(group, "clock", lambda: now[0])
    store.remember("the staging cluster runs on three nodes", "recent")  # numbered after any earlier point
    point = group()
    assert point is not None and point.seen == checkpoint(engine, store.alias).seen
    hits = engine.request("POST", f"/{store.alias}/_search", {"query": {"term": {"namespace": "recent"}}})
    assert hits["hits"]["total"]["value"] == 1  # searchable without a refresh of the search's own
    assert group.visible() == point
    now[0] += RECENT_SECONDS - 0.1
    assert group.visible() == point
    now[0] += 0.2
    assert group.visible() is None
    sent: list[str] = []
    recorder, engine.recorder = engine.recorder, lambda method, path, *_: sent.append(f"{method} {path}")
    try:
        store.remember("the billing service deploys on Fridays", "recent")
    finally:
        engine.recorder = recorder
    first_search = next(n for n, call in enumerate(sent) if "_msearch" in call)
    assert any(call.endswith("/_refresh") for call in sent[:first_search])
    later = group.visible()
    assert later is not None and later.index == point.index and later.seen > point.seen
