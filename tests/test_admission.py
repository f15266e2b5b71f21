"""Admission: with `recalls_in_flight` a process's recalls wait their turn, in arrival order, and its
writes never wait behind them; the ranking is the same with and without a limit."""
from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace

import pytest
from click.testing import CliRunner

from esmem import AsyncMemoryStore, MemoryStore
from esmem.cli.main import cli
from esmem.errors import ConfigError
from esmem.index.admission import Admission
from esmem.index.connection import ConnectionConfig
from esmem.index.bridge import run
from esmem.index.engine import Engine


def test_at_most_the_limit_is_in_flight() -> None:
    gate = Admission(2)
    inside, peak = [0], [0]
    lock = threading.Lock()

    def recall() -> None:
        with gate.admitted():
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.01)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=recall) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak[0] == 2 and gate.in_flight == 0


def test_places_are_given_in_arrival_order() -> None:
    gate = Admission(1)
    order: list[int] = []

    def enter(n: int) -> None:
        with gate.admitted():
            order.append(n)

    with gate.admitted():  # the one place is held while eight recalls queue, in this order
        waiting = []
        for n in range(8):
            t = threading.Thread(target=enter, args=(n,))
            t.start()
            waiting.append(t)
            while len(gate._waiting) < n + 1:
                time.sleep(0.001)
        assert order == []
    for t in waiting:
        t.join(10)
    assert order == list(range(8)) and gate.in_flight == 0


def test_a_limit_is_a_positive_integer_from_code_from_the_environment_and_in_the_cli(engine: Engine) -> None:
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ConfigError, match="recalls_in_flight must be a positive integer"):
            ConnectionConfig(url="http://127.0.0.1:9200", recalls_in_flight=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            Admission(bad)  # type: ignore[arg-type]
    assert ConnectionConfig.from_env({"ESMEM_URL": "http://h:9200", "ESMEM_RECALLS_IN_FLIGHT": "3"}).recalls_in_flight == 3
    assert ConnectionConfig.from_env({"ESMEM_URL": "http://h:9200", "ESMEM_RECALLS_IN_FLIGHT": ""}).recalls_in_flight is None
    with pytest.raises(ConfigError, match="ESMEM_RECALLS_IN_FLIGHT takes an integer"):
        ConnectionConfig.from_env({"ESMEM_URL": "http://h:9200", "ESMEM_RECALLS_IN_FLIGHT": "many"})
    given = Engine.from_client(engine._client, recalls_in_flight=2)  # a client the caller configured
    assert given.admission.limit == 2 and Engine.from_client(engine._client).admission.limit is None
    with pytest.raises(ConfigError):
        Engine.from_client(engine._client, recalls_in_flight=0)
    out = CliRunner().invoke(cli, ["--url", engine.url, "recall", "anything", "-n", "gate"],
                           env={"ESMEM_RECALLS_IN_FLIGHT": "0"})
    assert out.exit_code == 2 and len(out.output.strip().splitlines()) == 1
    assert "recalls_in_flight must be a positive integer" in out.output


def test_a_write_goes_on_while_every_place_is_held_and_the_waiting_recall_then_sees_it(
        engine: Engine, installed: str) -> None:
    assert engine.config is not None
    limited = Engine(replace(engine.config, recalls_in_flight=1))
    try:
        store = MemoryStore(limited, installed)
        store.remember("The build server is named orca", "gate")
        before = [r.memory.content for r in store.recall("build server", "gate", 3, touch=False).items]
        done = threading.Event()
        seen: list[list[str]] = []

        def recall() -> None:
            seen.append([r.memory.content for r in store.recall("build server staging deploys", "gate", 3,
                                                                 touch=False).items])
            done.set()

        with limited.admission.admitted():  # the one place is taken
            waiting = threading.Thread(target=recall)
            waiting.start()
            while not limited.admission._waiting:
                pass
            written = store.remember("Deploys to staging happen every Tuesday", "gate")  # not gated
            assert written.action == "added" and not done.is_set()
        waiting.join(30)
        assert done.is_set() and before == ["The build server is named orca"]
        assert "Deploys to staging happen every Tuesday" in seen[0]
        unlimited = MemoryStore(engine, installed).recall("build server staging deploys", "gate", 3, touch=False)
        assert seen[0] == [r.memory.content for r in unlimited.items]
    finally:
        limited.close()


def test_an_async_store_waits_its_turn_on_the_loop_with_the_same_answers(engine: Engine, installed: str) -> None:
    assert engine.config is not None
    sync = MemoryStore(engine, installed)
    for i in range(6):
        sync.remember(f"Team {i} owns the service catalogue shard {i}", "gated-async")
    queries = [f"service catalogue shard {i}" for i in range(6)]
    expected = [[r.memory.id for r in sync.recall(q, "gated-async", 3, touch=False).items] for q in queries]
    flying, peak = [0], [0]

    async def main() -> list[list[str]]:
        limited = Engine(replace(engine.config, recalls_in_flight=2), asynchronous=True)
        transport = limited._client.transport
        real = transport.perform_request

        async def counted(method, url, *args, **kwargs):  # the recalls the engine holds at once
            recall = "_msearch" in url
            flying[0] += recall
            peak[0] = max(peak[0], flying[0])
            try:
                return await real(method, url, *args, **kwargs)
            finally:
                flying[0] -= recall

        transport.perform_request = counted
        async with AsyncMemoryStore.connect(limited, installed) as store:
            found = await asyncio.gather(*(store.recall(q, "gated-async", 3, touch=False) for q in queries))
        await run(limited.close)
        return [[r.memory.id for r in res.items] for res in found]

    assert asyncio.run(main()) == expected
    assert peak[0] == 2  # six recalls at once, two in the engine at a time
