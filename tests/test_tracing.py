"""OpenTelemetry spans on the real engine, read with the SDK's in-memory exporter: a recall is one
trace whose stages (the engine round trip, the client's ranking) carry their times and counts, a
remember shows its validation, look-up and merge decision, and no span holds memory text, the query
or the namespace."""
from __future__ import annotations

from typing import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.index.engine import Engine
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")
_EXPORTER = InMemorySpanExporter()
_ATTACHED: list[TracerProvider] = []  # the provider the exporter is attached to (once: else spans come twice)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the process's first SDK provider (set once per process)
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if provider not in _ATTACHED:
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        _ATTACHED.append(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _by_name(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name == name]


def _children(finished: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[str]:
    """The stages under `parent`, in order (its own engine requests left out)."""
    return [s.name for s in sorted(finished, key=lambda s: s.start_time)
            if s.parent and s.parent.span_id == parent.context.span_id and s.name != "esmem.engine"]


def _no_text(finished: tuple[ReadableSpan, ...], *secrets: str) -> None:
    for s in finished:
        for value in (s.attributes or {}).values():
            assert not any(x.lower() in str(value).lower() for x in secrets), (s.name, value)


def test_a_recall_trace_shows_its_stages_with_times_and_counts(engine: Engine, installed: str,
                                                              spans: InMemorySpanExporter) -> None:
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    store.remember_many([MemoryInput(t, "tr:ns") for t in (
        "Retry throttled HTTP calls with exponential backoff", "The deploy pipeline runs on Fridays", "Tea in the morning")])
    spans.clear()
    result = store.recall("throttled backoff retry", "tr:ns", 2, now=NOW, touch=False)
    finished = spans.get_finished_spans()
    (root,) = _by_name(finished, "esmem.recall")
    assert root.parent is None and _children(finished, root) == ["esmem.recall.search", "esmem.recall.rank"]
    (search,) = _by_name(finished, "esmem.recall.search")
    (rank,) = _by_name(finished, "esmem.recall.rank")
    engine_spans = [s for s in finished if s.name == "esmem.engine" and s.parent
                    and s.parent.span_id == search.context.span_id]
    assert [s.attributes["url.path"] for s in engine_spans] == [f"/{store.alias}/_msearch/template"]
    assert engine_spans[0].kind == trace.SpanKind.CLIENT
    assert search.attributes["esmem.candidates"] >= 1 and search.attributes["esmem.engine_took_ms"] >= 0
    assert rank.attributes["esmem.results"] == len(result.items) == root.attributes["esmem.results"]
    for s in (root, search, rank):
        assert s.end_time > s.start_time
    assert root.start_time <= search.start_time < search.end_time <= rank.start_time < rank.end_time <= root.end_time
    _no_text(finished, "throttled", "backoff", "tr:ns", "deploy")  # words no hex prefix can hold


def test_a_remember_trace_shows_validation_lookup_and_the_merge_decision(engine: Engine, installed: str,
                                                                        spans: InMemorySpanExporter) -> None:
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    store.remember("Alice lives in Berlin", "tr:ns", valid_from="2025-01-01T00:00:00Z")
    spans.clear()
    res = store.remember("Alice lives in Munich now", "tr:ns", valid_from="2025-06-01T00:00:00Z")
    finished = spans.get_finished_spans()
    (root,) = _by_name(finished, "esmem.remember")
    assert root.parent is None and root.attributes["esmem.memories"] == 1
    assert root.attributes[f"esmem.outcome.{res.action}"] == 1
    assert {"esmem.remember.validate", "esmem.remember.lookup", "esmem.remember.decide"} <= set(
        _children(finished, root))
    (decide,) = _by_name(finished, "esmem.remember.decide")
    assert decide.attributes["esmem.candidates"] >= 1 and sum(
        v for k, v in decide.attributes.items() if k.startswith("esmem.decision.")) == 1
    assert all(s.context.trace_id == root.context.trace_id for s in finished)  # the refresh thread's too
    _no_text(finished, "Alice", "Berlin", "Munich", "tr:ns")


def test_spans_are_free_no_ops_until_the_application_sets_a_tracer_provider() -> None:
    """In a fresh process: before a provider is set a span is esmem's quiet handle (no tracer is asked);
    after `set_tracer_provider` the same call records."""
    import subprocess
    import sys

    code = ("from opentelemetry import trace\n"
            "from opentelemetry.sdk.trace import TracerProvider\n"
            "from esmem.tracing import span\n"
            "with span('before') as s:\n"
            "    before = type(s).__name__\n"
            "trace.set_tracer_provider(TracerProvider())\n"
            "with span('after') as s:\n"
            "    after = s.is_recording()\n"
            "print(before, after)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["_Quiet", "True"]
