"""Reheat write-back behind the answer (esmem/domain/reheat.py), on the real engine: a recall does not
wait for its write-back, queued accesses are written (coalesced) and counted, reads in the process
see them, a failure warns, and an exiting process writes what it queued."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from typing import Any, Sequence

import pytest

from esmem.domain.merge import MergePolicy
from esmem.domain.reheat import Backlog
from esmem.domain.store import MemoryStore
from esmem.domain.types import Memory, MemoryInput
from esmem.errors import EsmemWarning
from esmem.index.catalog import ScriptOp
from esmem.index.engine import Engine
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")


class Held:
    """In front of the real `Catalog.run_scripts`: holds every write-back until `release()`."""

    def __init__(self, store: MemoryStore):
        self.inner = store.catalog.run_scripts
        self.gate = threading.Event()
        self.holding = threading.Event()  # a write-back is being held
        self.calls: list[int] = []
        store.recaller.reheater.run = self

    def __call__(self, ops: Sequence[ScriptOp]) -> list[dict[str, Any]]:
        self.holding.set()
        self.gate.wait(30)
        self.calls.append(len(ops))
        return self.inner(ops)

    def release(self) -> None:
        self.gate.set()


def _stored_count(engine: Engine, store: MemoryStore, ns: str, doc_id: str) -> int:
    """access_count as the engine has it, read past the store (no flush)."""
    return engine.request("GET", f"/{store.alias}/_doc/{doc_id}", params={"routing": ns})["_source"].get(
        "access_count", 0)


def _one_queue(*stores: MemoryStore) -> None:
    """Give the stores a write-back queue of their own (shared among them): the process's queue of the
    index may still hold another test's accesses, written through that test's store."""
    shared = Backlog()
    for store in stores:
        store.recaller.reheater.backlog = shared


def _two_stores_held(engine: Engine, installed: str, content: str,
                     ns: str) -> tuple[MemoryStore, MemoryStore, Memory, Held]:
    """Two stores of one index sharing a queue, a memory of `ns`, and the first store's write-backs held."""
    first = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    second = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    (memory,) = first.remember_many([MemoryInput(content, ns, kind="preference")])
    _one_queue(first, second)
    return first, second, memory, Held(first)


def test_recall_returns_before_its_write_back_and_the_store_then_sees_it(engine: Engine, installed: str) -> None:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    (tea, coffee) = store.remember_many([MemoryInput("prefers green tea in the morning", "rh", kind="preference"),
                                         MemoryInput("drinks coffee after lunch", "rh", kind="preference")])
    _one_queue(store)
    held = Held(store)
    first = store.recall("green tea morning", "rh", 1, now=NOW)  # returns while its write-back is held
    second = store.recall("coffee after lunch", "rh", 1, now=NOW)
    assert [first.items[0].memory.id, second.items[0].memory.id] == [tea.id, coffee.id]
    assert store.recaller.reheater.pending >= 1 and held.calls == []
    assert _stored_count(engine, store, "rh", tea.id) == 0  # nothing written yet: the answer did not wait
    held.release()
    assert store.flush(30)
    assert sum(held.calls) == 2 and len(held.calls) <= 2  # queued accesses go out together when they pile up
    assert store.recaller.reheater.written == 2 and store.recaller.reheater.failed == 0
    assert store.recaller.reheater.pending == 0
    got = store.get("rh", tea.id)
    assert got.access_count == 1 and got.last_accessed_at == NOW


def test_stores_of_one_index_write_back_in_turns_and_a_waiting_store_batches_its_accesses(
        engine: Engine, installed: str) -> None:
    first, second, tea, held = _two_stores_held(engine, installed, "prefers jasmine tea at four", "rh6")
    entered = threading.Event()
    inner, calls = second.catalog.run_scripts, []

    def recorded(ops: Sequence[ScriptOp]) -> list[dict[str, Any]]:
        entered.set()
        calls.append(len(ops))
        return inner(ops)

    second.recaller.reheater.run = recorded
    first.recall("jasmine tea", "rh6", 1, now=NOW)
    assert held.holding.wait(30)
    for _ in range(3):  # the index's one writer is held with the first store's access: these queue behind it
        second.recall("jasmine tea", "rh6", 1, now=NOW)
    assert not entered.wait(2)  # a write-back that did not wait for its turn would have started by now
    held.release()
    assert second.flush(30)
    assert held.calls == [1] and calls == [1]  # the three waited together: one bulk, one update of the memory
    assert second.recaller.reheater.written == 3
    assert second.get("rh6", tea.id).access_count == 4


def test_accesses_of_one_memory_queued_by_several_stores_are_one_update_counted_for_each_store(
        engine: Engine, installed: str) -> None:
    first, second, tea, held = _two_stores_held(engine, installed, "keeps oolong tea in the blue tin", "rh7")
    first.recall("oolong tea", "rh7", 1, now=NOW)
    assert held.holding.wait(30)  # the index's one writer holds this access; the next four queue behind it
    for store in (first, second, first, second):
        store.recall("oolong tea blue tin", "rh7", 1, now=NOW)
    assert (first.recaller.reheater.pending, second.recaller.reheater.pending) == (3, 2)
    held.release()
    assert first.flush(30) and second.flush(30)
    assert held.calls == [1, 1]  # the four accesses of two stores went out as one update of the memory
    assert (first.recaller.reheater.written, second.recaller.reheater.written) == (3, 2)
    stored = engine.request("GET", f"/{first.alias}/_doc/{tea.id}", params={"routing": "rh7"})
    assert stored["_source"]["access_count"] == 5
    assert stored["_version"] == 3  # created, then one update per write-back: two, not five


def test_a_write_back_waits_out_the_linger_after_the_last_unless_the_store_flushes(
        engine: Engine, installed: str) -> None:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    m = store.remember("the parking garage closes at midnight", "rh8", kind="fact")
    inner, calls = store.catalog.run_scripts, []

    def recorded(ops: Sequence[ScriptOp]) -> list[dict[str, Any]]:
        calls.append(len(ops))
        return inner(ops)

    store.recaller.reheater.run = recorded
    store.recaller.reheater.backlog = Backlog(linger=60)
    store.recall("parking garage", "rh8", 1, now=NOW)  # the first write-back goes out at once
    for _ in range(50):
        if calls:
            break
        threading.Event().wait(0.1)
    for _ in range(3):
        store.recall("parking garage midnight", "rh8", 1, now=NOW)
    threading.Event().wait(1)
    assert calls == [1] and store.recaller.reheater.pending == 3  # lingering: the three wait together
    assert store.flush(30)  # ... until a store flushes
    assert calls == [1, 1] and store.recaller.reheater.written == 4
    assert _stored_count(engine, store, "rh8", m.id) == 4


def test_reads_of_the_store_flush_its_queued_accesses(engine: Engine, installed: str) -> None:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    m = store.remember("the standup is at 9:30 every weekday", "rh2", kind="fact")
    for _ in range(3):
        store.recall("when is the standup", "rh2", 1, now=NOW)
    assert store.get("rh2", m.id).access_count == 3  # get() waited for the three queued write-backs


def test_inline_mode_writes_before_recall_returns(engine: Engine, installed: str) -> None:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW,
                        background_reheat=False)
    m = store.remember("the office wifi password rotates monthly", "rh3", kind="fact")
    store.recall("office wifi", "rh3", 1, now=NOW)
    assert _stored_count(engine, store, "rh3", m.id) == 1 and store.recaller.reheater.written == 1


@pytest.mark.plain_http  # the child process connects by URL only
def test_a_process_that_exits_writes_what_it_queued(engine: Engine, installed: str, engine_url: str) -> None:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    m = store.remember("the release train leaves every second Tuesday", "rh4", kind="fact")
    child = textwrap.dedent(f"""
        from esmem.domain.store import MemoryStore
        from esmem.index.engine import Engine
        store = MemoryStore(Engine({engine_url!r}), {installed!r})
        res = store.recall("release train tuesday", "rh4", 1)
        print(res.items[0].memory.id, store.recaller.reheater.pending)
    """)  # no close(), no flush(): the interpreter's exit writes the queue
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == m.id
    assert store.get("rh4", m.id).access_count == 1


def test_a_write_back_that_raises_is_counted_and_the_writer_goes_on(engine: Engine, installed: str) -> None:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    m = store.remember("the on-call phone is in the second drawer", "rh5", kind="fact")
    inner, calls = store.catalog.run_scripts, []

    def fails_once(ops: Sequence[ScriptOp]) -> list[dict[str, Any]]:  # a fault in front of the real engine
        calls.append(len(ops))
        if len(calls) == 1:
            raise RuntimeError("connection reset by a secret-bearing proxy http://user:hunter2@proxy")
        return inner(ops)

    _one_queue(store)
    store.recaller.reheater.run = fails_once
    store.recall("on-call phone", "rh5", 1, now=NOW)
    with pytest.warns(EsmemWarning, match=r"reheat write-back skipped: 1 of 1 accesses not counted: RuntimeError$"):
        store.flush(30)
    assert store.recaller.reheater.failed == 1 and store.get("rh5", m.id).access_count == 0
    store.recall("on-call phone", "rh5", 1, now=NOW)  # the writer thread survived: the next access is written
    assert store.get("rh5", m.id).access_count == 1 and store.recaller.reheater.written == 1
