"""Concurrent writers for the contention tests: each chunk of work on its own thread with its own
MemoryStore, so nothing but the engine orders the writes."""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence


def run_writers(make_store: Callable[[], Any], chunks: Sequence[Sequence[Any]],
                write: Callable[[Any, Any], Any]) -> tuple[list[Any], list[Exception]]:
    """(every `write(store, job)` result, the exceptions that stopped a writer)."""
    results: list[Any] = []
    errors: list[Exception] = []

    def writer(chunk: Sequence[Any]) -> None:
        store = make_store()  # one store per thread: no shared lock, only the engine
        try:
            for job in chunk:
                results.append(write(store, job))
        except Exception as e:  # noqa: BLE001 - returned to the test, which asserts there are none
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(c,)) for c in chunks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors
