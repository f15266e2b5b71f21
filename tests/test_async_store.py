"""AsyncMemoryStore: MemoryStore's behaviour on an event loop, its requests awaited, never in a thread,
an embedder's model, a merge judge and an importance scorer run on a worker thread.

The contract suite runs on both stores (tests/conftest.py `face`); these tests check what only the
async store has: the loop stays free while it waits on the engine or a model, concurrent calls interleave, its
methods are MemoryStore's, and `connect` reads the environment as MemoryStore.connect does.
"""
from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

from esmem import AsyncMemoryStore, MemoryInput, MemoryStore
from esmem.errors import AsyncOnly, InvalidInput
from esmem.index.bridge import run
from esmem.domain.merge import MergePolicy
from esmem.index.engine import Engine
from semantic_support import minilm


def test_every_public_method_of_the_store_is_an_async_method_with_the_same_parameters() -> None:
    sync_only = {"connect", "alias"}  # connect: an async context manager; alias: a property that reads
    for name, method in inspect.getmembers(MemoryStore, inspect.isfunction):
        if name.startswith("_") or name in sync_only:
            continue
        twin = getattr(AsyncMemoryStore, name, None)
        assert inspect.iscoroutinefunction(twin), name
        assert list(inspect.signature(twin).parameters.values()) == \
            list(inspect.signature(method).parameters.values()), name


def test_the_async_store_refuses_a_sync_engine_and_the_bridge_refuses_a_call_outside_it(engine, installed) -> None:
    with pytest.raises(InvalidInput, match="async client"):
        AsyncMemoryStore(engine, installed)
    with pytest.raises(AsyncOnly):
        Engine(engine.config, asynchronous=True).request("GET", "/")


def test_a_store_is_built_without_a_request_so_an_async_one_can_be_built_outside_the_loop(engine, installed) -> None:
    """Construction sends nothing: the engine is asked on first use (inside an async store's call)."""
    sent: list[str] = []
    async_engine = Engine(engine.config, asynchronous=True, recorder=lambda method, path, *_: sent.append(path))
    store = AsyncMemoryStore(async_engine, installed)
    MemoryStore(Engine(engine.config, recorder=lambda method, path, *_: sent.append(path)), installed)
    assert sent == []


    async def main() -> int:
        try:
            return await store.count("nobody")
        finally:
            await store.close()
            await run(async_engine.close)

    assert asyncio.run(main()) == 0 and sent


def test_the_loop_stays_free_while_writes_and_recalls_wait_on_the_engine(engine, installed) -> None:
    """A ticker on the same loop keeps ticking through a multi-batch write and 20 concurrent recalls,
    every request sent from the loop's own thread (no worker thread), with the sync store's outcomes."""
    texts = [f"Service {i} deploys on weekday {i % 5} from branch release-{i}" for i in range(240)]

    async def main() -> tuple[int, list, list, set]:
        ticks, threads = 0, set()
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        given = Engine(engine.config, asynchronous=True)
        async with AsyncMemoryStore.connect(given, installed) as store:
            real = given._send

            def send(*args):  # every request of the async store: from which thread
                threads.add(threading.get_ident())
                return real(*args)

            given._send = send
            tick = asyncio.create_task(ticker())
            written = await store.remember_many([MemoryInput(t, "async") for t in texts], batch_size=50)
            found = await asyncio.gather(*(store.recall(f"release-{i}", "async", 3, touch=False) for i in range(20)))
            done.set()
            await tick
        await run(given.close)  # a given engine stays open after `connect`
        return ticks, written, found, threads

    ticks, written, found, threads = asyncio.run(main())
    assert threads == {threading.get_ident()}
    assert ticks > 20  # the loop ran other work while requests were in flight
    same = MemoryStore(engine, installed).remember_many([MemoryInput(t, "sync") for t in texts], batch_size=50)
    assert [r.action for r in written] == [r.action for r in same]
    assert all(res.items and {r.memory.namespace for r in res.items} == {"async"} for res in found)


class Gate:
    """A model call that does its work only once a coroutine of the loop has let it (`release`), and
    records the thread it ran on: on the loop's own thread it would wait for ever (failing after 30 s)."""

    def __init__(self) -> None:
        self.started, self.released = threading.Event(), threading.Event()
        self.threads: list[int] = []

    def wait(self) -> None:
        self.threads.append(threading.get_ident())
        self.started.set()
        if not self.released.wait(timeout=30):
            raise RuntimeError("the loop did not run while the model ran")

    async def release(self) -> None:
        while not self.started.is_set():
            await asyncio.sleep(0.001)
        self.released.set()

    def again(self) -> None:
        self.started.clear(), self.released.clear()


def test_the_loop_serves_other_calls_while_a_call_embeds(engine, installed_semantic) -> None:
    """The model runs on a worker thread: an embedder that waits for a coroutine of the same loop
    finishes, for a write's passages and a recall's query, and the memory is found by the hybrid recall."""
    model, gate = minilm(), Gate()

    class Gated:  # MiniLM itself, which does its work only once the loop has run the releaser
        name, dimensions = model.name, model.dimensions

        def embed(self, texts):
            gate.wait()
            return model.embed(texts)

    async def main() -> tuple[int, list]:
        async with AsyncMemoryStore.connect(Engine(engine.config, asynchronous=True), installed_semantic,
                                            embedder=Gated(), merge=MergePolicy(enabled=False)) as store:
            await asyncio.gather(store.remember("The user adopted a kitten named Miso.", "pets"), gate.release())
            gate.again()
            found, _ = await asyncio.gather(store.recall("which pet did they adopt", "pets", 1, touch=False),
                                            gate.release())
            return threading.get_ident(), [r.memory.content for r in found.items]

    loop_thread, found = asyncio.run(main())
    assert len(gate.threads) == 2 and loop_thread not in gate.threads
    assert found == ["The user adopted a kitten named Miso."]


def test_the_loop_serves_other_calls_while_a_merge_judge_or_an_importance_scorer_runs(engine, installed) -> None:
    """A judge and a scorer you give may call a model over the network: each runs on a worker thread,
    so one that waits for a coroutine of the same loop completes (on the loop it would time out), and
    the judge's answer decides the write as in a sync store."""
    judging, scoring = Gate(), Gate()

    def judge(questions):
        judging.wait()
        return [True for _ in questions]

    def scorer(texts):
        scoring.wait()
        return [(7.0, "mine") for _ in texts]

    async def main() -> tuple[int, list]:
        async with AsyncMemoryStore.connect(Engine(engine.config, asynchronous=True), installed, merge_judge=judge,
                                            scorer=scorer) as store:
            first, _ = await asyncio.gather(store.remember("We plan to tile the bathroom floor with slate.", "judged"),
                                            scoring.release())
            scoring.again()
            second, _, _ = await asyncio.gather(
                store.remember("We plan to tile the bathroom floor with marble.", "judged"),
                judging.release(), scoring.release())
            return threading.get_ident(), [first, second]

    loop_thread, (first, second) = asyncio.run(main())
    assert judging.threads and scoring.threads and loop_thread not in judging.threads + scoring.threads
    assert second.action == "superseded" and second.superseded == (first.id,)


def test_connect_reads_the_environment_and_closes_the_engine_it_opened(engine, installed, monkeypatch) -> None:
    monkeypatch.setenv("ESMEM_URL", engine.config.url)

    async def main() -> tuple[str, int, Engine]:
        async with AsyncMemoryStore.connect(prefix=installed) as store:
            r = await store.remember("The backup runs nightly at 02:00.", "env", kind="fact")
            return r.action, await store.count("env"), store.engine

    action, count, opened = asyncio.run(main())
    assert (action, count) == ("added", 1)
    assert opened._client.transport.connection_pool.connections[0].session is None  # closed (it had one)


def test_the_langgraph_store_awaits_an_async_store_and_refuses_its_sync_calls(engine, installed) -> None:
    pytest.importorskip("langgraph.store.base")
    from esmem.apps.langgraph_store import EsmemStore
    from esmem.errors import Unsupported

    async def main() -> tuple[dict, list[str]]:
        async with AsyncMemoryStore.connect(engine.config.url, installed) as store:
            memories = EsmemStore(store)
            await memories.aput(("users", "u1"), "diet", {"content": "Prefers vegetarian food at team dinners"})
            item = await memories.aget(("users", "u1"), "diet")
            found = await memories.asearch(("users", "u1"), query="vegetarian dinner")
            with pytest.raises(Unsupported, match="async methods"):
                memories.get(("users", "u1"), "diet")
            return item.value, [f.key for f in found]

    value, keys = asyncio.run(main())
    assert value["content"] == "Prefers vegetarian food at team dinners" and keys == ["diet"]
    assert MemoryStore(engine, installed).count("users:u1") == 1
