"""OpenTelemetry spans for remember and recall, when `opentelemetry-api` is installed (esmem[otel]).

Without it, or before the application sets a tracer provider, every span is a no-op. Spans
carry counts, timings and decisions, never memory text, queries, namespaces or credentials: a trace
of a recall says how long the engine and each client stage took and how many candidates there were.
The Elasticsearch client traces its own requests; requests through opensearch-py get an
`esmem.engine` span here (esmem/index/engine.py).
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, ContextManager, Iterator, Mapping, TypeVar, Union

try:
    from opentelemetry import trace as _trace
except ImportError:  # the optional dependency is absent: spans are no-ops
    _trace = None  # type: ignore[assignment]

T = TypeVar("T")


class _Quiet:
    """The span handle when tracing is off: attributes go nowhere."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass


Attribute = Union[str, bool, int, float]  # what a span attribute may hold (OpenTelemetry's primitive types)


def span(name: str, attributes: Mapping[str, Attribute] | None = None, *, client: bool = False) -> ContextManager[Any]:
    """A span named `name` (CLIENT kind with `client`) around a block, with `attributes` (dotted names);
    yields it for more attributes."""
    if _trace is None or not _configured():
        return nullcontext(_Quiet())
    return _started(name, client, dict(attributes or {}))


def _configured() -> bool:
    """Whether the application has set a tracer provider. Until it does, the API hands out spans that
    record nothing, and asking for them cost a recall 0.06-0.12 ms of its 1.2-1.5 ms of client CPU
    (docs/results/tracing-cost.txt)."""
    return not isinstance(_trace.get_tracer_provider(), (_trace.ProxyTracerProvider, _trace.NoOpTracerProvider))


@contextmanager
def _started(name: str, client: bool, attributes: dict[str, Attribute]) -> Iterator[Any]:
    tracer = _trace.get_tracer("esmem")
    kind = _trace.SpanKind.CLIENT if client else _trace.SpanKind.INTERNAL
    with tracer.start_as_current_span(name, kind=kind, attributes=attributes) as current:
        yield current


def carried(fn: Callable[[], T]) -> Callable[[], T]:
    """`fn` bound to the caller's context: spans it starts in a worker thread keep their parent."""
    ctx = contextvars.copy_context()
    return lambda: ctx.run(fn)
