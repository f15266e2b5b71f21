"""How long an AsyncMemoryStore with an embedder keeps its event loop from other work.

One loop: a heartbeat task that sleeps 1 ms and records how late it wakes (the loop's lag), beside
(1) 8 tasks recalling hybrid, 200 distinct queries in all (no query vector cached), and (2) one task
writing 200 memories with `remember_many` (one batch of passages for the model). Prints the recalls'
rate and the heartbeat's lag p50 / p99 / max for each. Run it on two checkouts to compare.

    python docs/results/async_embedding.py $ESMEM_URL e5-small-q
"""
from __future__ import annotations

import asyncio
import statistics
import sys
import time
from dataclasses import replace

from esmem import AsyncMemoryStore, MemoryInput
from esmem.apps import bench
from esmem.domain.embedding import embed_checked, load_embedder
from esmem.domain.hybrid import spec
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index.bridge import run
from esmem.index.engine import Engine
from esmem.index.install import uninstall

TASKS = 8


async def heartbeat(lags: list[float], done: asyncio.Event) -> None:
    while not done.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append((time.perf_counter() - started) * 1000 - 1.0)


def lag(lags: list[float]) -> str:
    ordered = sorted(lags)
    return (f"loop lag p50 {statistics.median(ordered):.1f} ms, p99 {ordered[int(0.99 * (len(ordered) - 1))]:.1f} ms, "
            f"max {ordered[-1]:.1f} ms")


async def measure(url: str, prefix: str, model: object, queries: list[bench.Probe], writes: list[MemoryInput]) -> None:
    engine = Engine(url, asynchronous=True)
    async with AsyncMemoryStore.connect(engine, prefix, embedder=model, merge=MergePolicy(enabled=False)) as store:
        await store.recall(queries[0].text, queries[0].namespace, 5, touch=False)  # warm: the index check
        lags: list[float] = []
        done = asyncio.Event()
        beat = asyncio.create_task(heartbeat(lags, done))
        await asyncio.sleep(0.01)  # the heartbeat is beating before the work starts

        async def recaller(mine: list[bench.Probe]) -> None:
            for q in mine:
                await store.recall(q.text, q.namespace, 5, touch=False)

        started = time.perf_counter()
        await asyncio.gather(*(recaller(queries[1 + i::TASKS]) for i in range(TASKS)))
        seconds = time.perf_counter() - started
        done.set()
        await beat
        print(f"{TASKS} tasks recalling: {(len(queries) - 1) / seconds:.0f} recalls/s, {lag(lags)}")
        lags.clear()
        done.clear()
        beat = asyncio.create_task(heartbeat(lags, done))
        await asyncio.sleep(0.01)
        started = time.perf_counter()
        await store.remember_many(writes)
        seconds = time.perf_counter() - started
        done.set()
        await beat
        print(f"remember_many of {len(writes)}: {seconds:.2f} s, {lag(lags)}")
    await run(engine.close)


def main(url: str, model_name: str) -> None:
    sync, prefix = Engine(url), "async-embedding"
    model = load_embedder(model_name)
    corpus = bench.generate(2000, 20, 0)
    items = corpus.inputs()
    uninstall(sync, prefix)
    install(sync, prefix, embedding=spec(model))
    try:
        vectors = embed_checked(model, [i.content for i in items])
        MemoryStore(sync, prefix, merge=MergePolicy(enabled=False)).remember_many(
            [replace(i, embedding=v) for i, v in zip(items, vectors)])
        sync.request("POST", f"/{prefix}-memories/_refresh")
        queries = bench.make_queries(corpus, 201, 1)
        writes = [MemoryInput(f"{i.content} (restated)", "async-writes") for i in items[:200]]
        asyncio.run(measure(url, prefix, model, queries, writes))
    finally:
        uninstall(sync, prefix)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
