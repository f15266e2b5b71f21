"""Async I/O under esmem's one implementation of the logic, the way SQLAlchemy's asyncio extension does it.

`run(fn, ...)` calls the ordinary (sync) code of the store in a greenlet; where that code sends a
request through an engine over an async client, `wait(awaitable)` switches back to the event loop,
which awaits the request and switches its answer (or error) back in. So the logic is written once and
the loop is never blocked on I/O: no thread, no copy of the write or recall path. Only code run by
`run` may wait on an async client; anything else gets `AsyncOnly`. Work that lets go of the GIL for
long (a model's forward pass, a merge judge's call to a model over the network) goes through
`off_loop`: within such a call it runs on a worker thread while the loop serves the other calls.
"""
from __future__ import annotations

import asyncio
import sys
from typing import Any, Awaitable, Callable, TypeVar

import greenlet

from esmem.errors import AsyncOnly

T = TypeVar("T")


class _Bridged(greenlet.greenlet):  # type: ignore[misc]  # greenlet has no type hints: its class is Any
    """The greenlet of one async call: `driver` is the loop's side, to switch awaitables to."""

    def __init__(self, fn: Callable[..., Any], driver: greenlet.greenlet):
        super().__init__(fn, driver)
        self.driver = driver
        self.gr_context = driver.gr_context  # the caller's context variables (tracing spans) carry on


def wait(awaitable: Awaitable[T]) -> T:
    """The result of `awaitable`, from sync code that `run` is running (the loop awaits it)."""
    current = greenlet.getcurrent()
    if not isinstance(current, _Bridged):
        close = getattr(awaitable, "close", None)
        if close:
            close()  # never awaited: no "coroutine was never awaited" warning
        raise AsyncOnly("an engine over an async client is used outside an async store's call")
    result: T = current.driver.switch(awaitable)  # what the loop's side switches back: the awaitable's result
    return result


def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)`: on a worker thread, awaited by the loop, when called from code `run` is running
    (an embedding takes milliseconds, a judge's model call up to seconds, that the loop would otherwise
    spend blocked); else right here."""
    if isinstance(greenlet.getcurrent(), _Bridged):
        return wait(asyncio.to_thread(fn, *args))
    return fn(*args)


async def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call `fn(*args, **kwargs)` (sync code) so that its `wait`s are awaited on the running loop."""
    bridged = _Bridged(fn, greenlet.getcurrent())
    step = bridged.switch(*args, **kwargs)
    while not bridged.dead:
        try:
            value = await step
        except BaseException:  # the request's error is raised where the sync code waited
            step = bridged.throw(*sys.exc_info())
        else:
            step = bridged.switch(value)
    result: T = step  # the greenlet's last switch out: fn's return value
    return result
