"""The async store seen through a small sync bridge, so the contract tests run on both stores.

`AsyncFace(AsyncMemoryStore)` answers every call a test makes of a `MemoryStore`: the async store's own
methods run to completion on the face's event loop, and the objects that send requests (the engine,
catalog, writer, recaller) come wrapped, so a test reading `store.engine.request(...)` or recording
`store.catalog.msearch` reaches them through the same bridge the async store uses.
"""
from __future__ import annotations

import asyncio
import inspect
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import greenlet

from esmem.domain.async_store import AsyncMemoryStore
from esmem.domain.recaller import Recaller
from esmem.domain.writer import Writer
from esmem.index.bridge import _Bridged, run
from esmem.index.catalog import Catalog
from esmem.index.engine import Engine

_SENDERS = (Engine, Catalog, Writer, Recaller)


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # the loop runs on a thread of its own: the test's thread may be running another loop already
        # (Playwright's sync API keeps one running there)
        self.thread = ThreadPoolExecutor(1)

    def complete(self, awaitable: Any) -> Any:
        return self.thread.submit(self.loop.run_until_complete, awaitable).result()

    def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn` run through the bridge (directly when already inside a bridged call)."""
        if isinstance(greenlet.getcurrent(), _Bridged):
            return fn(*args, **kwargs)
        return self.complete(run(fn, *args, **kwargs))

    def wrap(self, value: Any) -> Any:
        if isinstance(value, _SENDERS):
            return _Sender(self, value)
        if inspect.ismethod(value) and isinstance(value.__self__, _SENDERS):
            return lambda *a, **k: self.call(value, *a, **k)
        return value


class _Sender:
    """An engine, catalog, writer or recaller of the async store, its calls bridged."""

    def __init__(self, loop: _Loop, target: Any) -> None:
        object.__setattr__(self, "_loop", loop)
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name: str) -> Any:
        return self._loop.wrap(self._loop.call(getattr, self._target, name))

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._target, name)


class AsyncFace:
    """A sync face of an `AsyncMemoryStore` (one event loop per face)."""

    def __init__(self, engine: Engine, prefix: str, **options: Any) -> None:
        self._loop = _Loop()
        self.async_store = AsyncMemoryStore(engine, prefix, **options)

    def __getattr__(self, name: str) -> Any:
        if inspect.iscoroutinefunction(getattr(AsyncMemoryStore, name, None)) and name != "alias":
            method = getattr(self.async_store, name)
            return lambda *a, **k: self._loop.complete(method(*a, **k))
        return self._loop.wrap(self._loop.call(getattr, self.async_store.store, name))

    def close(self) -> None:
        self._loop.complete(self.async_store.close())
        self._loop.call(self.async_store.engine.close)
        self._loop.thread.submit(self._loop.loop.close).result()
        self._loop.thread.shutdown()
