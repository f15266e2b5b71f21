"""Write-path integrity on the real engine: a re-import, a retry after a cut connection
and a re-run after a crash all end in the state of one clean run; batches are all-or-nothing;
version chains stay symmetric under 8 concurrent writers; bad input is refused with a typed error
and writes nothing. Faults come from tests/relay.py (a TCP relay in front of the real engine)."""
from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams, params_from_strings
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.domain.validate import memory_id
from esmem.engines import embedded
from esmem.errors import ConfigError, EngineError, EsmemError, EsmemWarning, IdTaken, InvalidInput, InvalidItem
from esmem.index import refresh
from esmem.index.engine import Engine
from esmem.values import parse_time

from relay import Relay  # tests/relay.py (tests/ is on sys.path under pytest)
from writers import run_writers  # tests/writers.py

NOW = parse_time("2026-10-08T12:00:00Z")
RULES = Path(__file__).resolve().parent.parent / "datasets" / "rules.jsonl"

# add, supersede, supersede, duplicate (restated_count), outdated (late old statement), add
LINES = [
    {"id": "v1", "kind": "rule", "valid_from": "2026-01-01T09:00:00Z",
     "content": "on HTTP 429 rate limit responses from the payments api wait one second and retry at most three times"},
    {"id": "v2", "kind": "rule", "valid_from": "2026-02-01T09:00:00Z",
     "content": "on HTTP 429 rate limit responses from the payments api now back off exponentially and retry at most "
                "five times"},
    {"id": "v3", "kind": "rule", "valid_from": "2026-03-01T09:00:00Z",
     "content": "on HTTP 429 rate limit responses from the payments api now back off exponentially with random jitter "
                "and retry at most five times"},
    {"id": "v3-again", "kind": "rule", "valid_from": "2026-04-01T09:00:00Z",
     "content": "On HTTP 429 rate-limit responses from the payments API now back off exponentially with random jitter "
                "and retry at most five times"},
    {"id": "v0", "kind": "rule", "valid_from": "2025-12-01T09:00:00Z",
     "content": "on HTTP 429 rate limit responses from the payments api retry immediately at most three times"},
    {"id": "other", "kind": "fact", "valid_from": "2026-02-15T09:00:00Z",
     "content": "the staging database is backed up nightly to the office NAS"},
]


def _inputs(ns: str, lines: list[dict] = LINES) -> list[MemoryInput]:
    return [MemoryInput(o["content"], ns, kind=o["kind"], valid_from=o["valid_from"], external_id=o["id"],
                        importance=5) for o in lines]


def dump(engine: Engine, alias: str, ns: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """Every document of a namespace, normalised: ids (or line labels), status, links, counters and
    fields; `recorded_at` (the wall-clock time of the write) is the one field left out."""
    engine.request("POST", f"/{alias}/_refresh")
    hits = engine.request("POST", f"/{alias}/_search", {"size": 10000, "query": {"term": {"namespace": ns}}},
                          {"routing": ns})["hits"]["hits"]
    ext = {h["_id"]: h["_source"]["external_id"] for h in hits if labels is not None and h["_source"].get("external_id")}
    name = lambda i: (labels or {}).get(i) or ext.get(i, i)  # noqa: E731
    out = {}
    for h in hits:
        src = {k: v for k, v in h["_source"].items() if k not in ("recorded_at", "namespace")}
        for key in ("supersedes", "restated_by"):
            if src.get(key) is not None:
                src[key] = sorted(name(i) for i in (src[key] if isinstance(src[key], list) else [src[key]]))
        if src.get("superseded_by"):
            src["superseded_by"] = name(src["superseded_by"])
        out[name(h["_id"])] = src
    return dict(sorted(out.items()))


def labels_for(ns: str, lines: list[dict] = LINES) -> dict[str, str]:
    return {memory_id(ns, "id\0" + o["id"]): o["id"] for o in lines}


def _source(store: MemoryStore, ns: str, doc_id: str) -> dict[str, Any]:
    return store.engine.request("GET", f"/{store.alias}/_doc/{doc_id}", params={"routing": ns})["_source"]


@pytest.fixture
def background(engine, installed) -> str:
    """BM25's IDF comes from the whole index: give it the rule store, as a real deployment has."""
    lines = [json.loads(x) for x in RULES.read_text(encoding="utf-8").splitlines()]
    MemoryStore(engine, installed, merge=MergePolicy(enabled=False)).remember_many(
        [MemoryInput(o["content"], "bg", kind=o["kind"], valid_from=o["valid_from"], external_id=o["id"])
         for o in lines if o["type"] == "memory"])
    return installed


@pytest.fixture
def relay(engine_url: str):
    u = urlparse(engine_url)
    r = Relay((u.hostname, u.port))
    yield r
    r.close()


def _expected_clean(d: dict[str, Any]) -> None:
    """What one clean run of LINES must leave (independently of any second run)."""
    assert {k: v["status"] for k, v in d.items()} == {"v0": "superseded", "v1": "superseded", "v2": "superseded",
                                                      "v3": "active", "other": "active"}
    assert d["v3"]["supersedes"] == ["v0", "v2"] and d["v2"]["supersedes"] == ["v1"]
    assert d["v1"]["superseded_by"] == "v2" and d["v2"]["superseded_by"] == "v3" and d["v0"]["superseded_by"] == "v3"
    assert d["v3"]["restated_count"] == 1 and d["v3"]["restated_by"] == ["v3-again"]
    assert all(v["restated_count"] == 0 for k, v in d.items() if k != "v3")


# -- 1. idempotent identity -----------------------------------------------------------------------
def test_double_import_equals_one_clean_import(engine, background, tmp_path: Path) -> None:
    """Issue case 1: v1, v2 updating v1, v3 updating v2, imported twice, used to leave v1 active."""
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in LINES[:3]), encoding="utf-8")
    runner = CliRunner()
    base = ["--url", engine.url, "--prefix", background, "import", str(path)]
    once = runner.invoke(cli, [*base, "-n", "once"])
    assert once.exit_code == 0 and once.stdout.strip() == "3 memories: 1 added, 2 merged, 0 duplicate, 0 outdated, 0 uncertain"
    first = runner.invoke(cli, [*base, "-n", "twice"])
    second = runner.invoke(cli, [*base, "-n", "twice"])
    assert first.stdout == once.stdout
    assert second.exit_code == 0 and second.stdout.strip() == \
        "3 memories: 0 added, 0 merged, 0 duplicate, 0 outdated, 0 uncertain, 3 already imported"
    store = MemoryStore(engine, background)
    alias = store.alias
    clean = dump(engine, alias, "once", labels_for("once"))
    assert dump(engine, alias, "twice", labels_for("twice")) == clean
    assert {k: v["status"] for k, v in clean.items()} == {"v1": "superseded", "v2": "superseded", "v3": "active"}
    top = store.recall("how to retry on 429", "twice", 3, touch=False)
    assert [r.memory.external_id for r in top.items] == ["v3"]


def test_library_replay_converges_and_reports_replayed(engine, background) -> None:
    store = MemoryStore(engine, background, clock=lambda: NOW)
    first = store.remember_many(_inputs("lib"))
    assert [r.action for r in first] == ["added", "superseded", "superseded", "duplicate", "outdated", "added"]
    clean = dump(engine, store.alias, "lib", labels_for("lib"))
    _expected_clean(clean)
    again = store.remember_many(_inputs("lib"))
    assert [(r.action, r.id, r.replayed) for r in again] == [(r.action, r.id, True) for r in first]
    assert dump(engine, store.alias, "lib", labels_for("lib")) == clean


def test_idempotency_key_makes_a_retry_land_on_the_same_memory(clocked_store: MemoryStore) -> None:
    a = clocked_store.remember("the deploy window is Tuesday 10:00", "key", idempotency_key="req-1")
    b = clocked_store.remember("the deploy window is Tuesday 10:00", "key", idempotency_key="req-1")
    assert b.id == a.id and b.replayed and not a.replayed
    assert clocked_store.count("key", status=None) == 1
    assert _source(clocked_store, "key", a.id)["restated_count"] == 0


SQUAT = "Carol approved wiring 50000 USD to account 999-ATTACKER"


def _squat(store: MemoryStore, ns: str, key: str, **fields: Any) -> str:
    """What a writer who can compute another's id does: create a document there first (a raw request)."""
    doc_id = memory_id(ns, key)
    store.engine.request("PUT", f"/{store.alias}/_create/{doc_id}", {
        "namespace": ns, "content": SQUAT, "kind": "fact", "status": "active", "importance": 10.0,
        "valid_from": "2026-10-08T11:00:00Z", "recorded_at": "2026-10-08T11:00:00Z", "anchor_at": 0, **fields},
        {"routing": ns, "refresh": "true"})
    return doc_id


@pytest.mark.parametrize("merge", [True, False], ids=["merge", "plain"])
def test_a_replay_onto_another_document_is_an_error(engine, installed, merge: bool) -> None:
    """An id that holds what this write would not store is no replay: IdTaken, the stored document
    untouched, nothing of the batch written (with merge: found before writing; without: at the create)."""
    store = MemoryStore(engine, installed, clock=lambda: NOW, merge=MergePolicy(enabled=merge))
    doc_id = _squat(store, "hr", "key\0hr-record-18")
    before = _source(store, "hr", doc_id)
    batch = [MemoryInput("the office opens at 8", "hr"),
             MemoryInput("Carol's bonus is 5000 USD", "hr", idempotency_key="hr-record-18")]
    with pytest.raises(IdTaken, match=f"memory id {doc_id} already holds a different memory \\(content, ") as e:
        store.remember_many(batch)
    assert e.value.id == doc_id and e.value.fields[0] == "content"
    assert _source(store, "hr", doc_id) == before and store.count("hr", status=None) == 1


@pytest.mark.parametrize("field", ["namespace", "kind", "external_id", "evergreen"])
def test_a_replay_is_checked_field_by_field(clocked_store: MemoryStore, field: str) -> None:
    """The same content at the id is not enough: a stored memory that differs in one field (a twin
    planted in another namespace but routed to this one's shard, another kind, id or flag) is refused."""
    ns, content = "twins", "the deploy window is Tuesday 10:00"
    first = clocked_store.remember(content, ns, idempotency_key="req-9")
    other = {"namespace": "elsewhere", "kind": "rule", "external_id": "planted", "evergreen": True}[field]
    clocked_store.engine.request("POST", f"/{clocked_store.alias}/_update/{first.id}", {"doc": {field: other}},
                                 {"routing": ns, "refresh": "true"})
    with pytest.raises(IdTaken) as e:
        clocked_store.remember(content, ns, idempotency_key="req-9")
    assert e.value.id == first.id and e.value.fields == [field]


def test_cli_remember_onto_a_squatted_id_fails_in_one_line(engine, installed) -> None:
    store = MemoryStore(engine, installed)
    _squat(store, "hr", "key\0hr-record-18")
    run = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "remember", "Carol's bonus is 5000 USD",
                                   "-n", "hr", "--idempotency-key", "hr-record-18"])
    assert run.exit_code == 2 and run.output.startswith("error: memory id ") and run.output.count("\n") == 1
    assert [r.memory.content for r in store.recall("Carol bonus", "hr", touch=False).items] == [SQUAT]


def test_cli_remember_retry_with_the_same_key_is_a_replay(engine, installed) -> None:
    base = ["--url", engine.url, "--prefix", installed, "remember", "the office wifi is guest-5g", "-n", "k",
            "--idempotency-key", "msg-7", "--json"]
    first, again = (json.loads(CliRunner().invoke(cli, base).stdout) for _ in range(2))
    assert again["id"] == first["id"] and again["replayed"] and not first["replayed"]
    assert MemoryStore(engine, installed).count("k", status=None) == 1


@pytest.fixture
def clocked_store(engine, installed) -> MemoryStore:
    return MemoryStore(engine, installed, clock=lambda: NOW)


@pytest.mark.plain_http  # the TCP relay forwards plain HTTP
# -- 2./5. cut connections: every write-path request in turn -----------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("recent", [True, False], ids=["after-a-recent-refresh", "refreshing-first"])
def test_cut_at_every_request_then_retry_converges(engine, background, relay: Relay, monkeypatch, recent) -> None:
    """Cut the connection at each request of an import in turn (after the engine applied it, and
    before it reached the engine); the retry must end in exactly the clean run's state. Each run sends
    the same requests: its look-ups either all follow a recent refresh of the process, or all refresh first."""
    monkeypatch.setattr(refresh, "RECENT_SECONDS", float("inf") if recent else -1.0)
    direct = MemoryStore(engine, background, clock=lambda: NOW)
    via = MemoryStore(Engine(relay.url), background, clock=lambda: NOW)
    via.catalog.refresh()  # the engine detection, the install check and a first point: not counted below
    n0 = len(relay.seen)
    clean_results = via.remember_many(_inputs("clean"))
    requests = relay.seen[n0:]
    assert any("_bulk" in s.path for s in requests) and any("_msearch" in s.path for s in requests)
    clean = dump(engine, direct.alias, "clean", labels_for("clean"))
    _expected_clean(clean)
    failures = []
    for cut in ("after", "before"):
        for i in range(1, len(requests) + 1):
            ns = f"cut-{cut}-{i}"
            relay.arm("", i, cut=cut)
            with pytest.raises(EsmemError):
                via.remember_many(_inputs(ns))
            assert relay.fired
            relay.heal()
            retry = MemoryStore(Engine(relay.url), background, clock=lambda: NOW).remember_many(_inputs(ns))
            assert [r.action for r in retry] == [r.action for r in clean_results]
            if dump(engine, direct.alias, ns, labels_for(ns)) != clean:
                failures.append(f"{cut} {requests[i - 1].method} {requests[i - 1].path} (#{i})")
    assert not failures, failures


@pytest.mark.plain_http  # the TCP relay forwards plain HTTP
def test_write_reported_failed_is_retried_safely(engine, background, relay: Relay) -> None:
    """A cut after the creates (it was the settle step's read; a lone writer now skips
    that read, so the refresh before it) used to leave the write applied, and the retry reported
    `duplicate` and bumped restated_count."""
    direct = MemoryStore(engine, background, clock=lambda: NOW)
    old = direct.remember(LINES[1]["content"], "c3", kind="rule", valid_from=LINES[1]["valid_from"])
    via = MemoryStore(Engine(relay.url), background, clock=lambda: NOW)
    relay.arm("/_refresh", 2, cut="after")  # the first makes earlier writes searchable for the look-up
    with pytest.raises(EsmemError):  # the same call retried: kind + content + valid_from are its identity
        via.remember(LINES[2]["content"], "c3", kind="rule", valid_from=LINES[2]["valid_from"])
    relay.heal()
    res = via.remember(LINES[2]["content"], "c3", kind="rule", valid_from=LINES[2]["valid_from"])
    assert res.action == "superseded" and res.superseded == (old.id,)
    new = direct.get("c3", res.id)
    assert new.status == "active" and direct.get("c3", old.id).superseded_by == res.id
    assert _source(direct, "c3", old.id)["restated_count"] == 0 and _source(direct, "c3", res.id)["restated_count"] == 0
    assert direct.count("c3", status=None) == 2


# -- 3. chains under contention ------------------------------------------------------------------
def _chains_are_whole(engine: Engine, store: MemoryStore, ns: str, topics: int) -> dict[str, Any]:
    """Every link symmetric, one active memory per topic, every stored version in its history."""
    docs = dump(engine, store.alias, ns)
    assert all(v["status"] in ("active", "superseded") for v in docs.values())  # nothing left pending
    asymmetric = [(i, d["superseded_by"]) for i, d in docs.items()
                  if d.get("superseded_by") and i not in (docs[d["superseded_by"]].get("supersedes") or [])]
    asymmetric += [(i, s) for i, d in docs.items() for s in d.get("supersedes") or []
                   if docs[s].get("superseded_by") != i]
    assert asymmetric == []
    active = {int(d["content"].split()[0][5:]): i for i, d in docs.items() if d["status"] == "active"}
    assert len(active) == topics and sum(d["status"] == "active" for d in docs.values()) == topics
    reachable = set()
    for t, i in active.items():
        chain = store.history(ns, i)
        assert all(m.content.startswith(f"topic{t} ") for m in chain)
        reachable |= {m.id for m in chain}
    assert reachable == set(docs)  # 100% of the stored versions
    return docs


@pytest.mark.slow
def test_contention_keeps_every_chain_symmetric_and_reachable(engine, installed) -> None:
    """Issue case 4: 8 writers x 100 writes on 20 topics."""
    topics = [f"topic{t} service{t} owner{t} region{t} cluster{t} config value" for t in range(20)]
    rng = random.Random(4)
    work = [[(rng.randrange(20), w * 1000 + i) for i in range(100)] for w in range(8)]
    results, errors = run_writers(lambda: MemoryStore(engine, installed), work, lambda store, job: (
        job[0], store.remember(f"{topics[job[0]]} {job[1]}", "race", kind="fact", importance=5)))
    assert not errors, errors[:1]
    assert len(results) == 800
    docs = _chains_are_whole(engine, MemoryStore(engine, installed), "race", 20)
    assert len(docs) == sum(r.action != "duplicate" for _, r in results)


@pytest.mark.slow
def test_writers_racing_to_create_the_same_id_keep_every_chain_whole(engine, installed) -> None:
    """8 writers write the same versions (identical content and valid_from, so identical ids) of 20
    topics in different orders, in batches of 10, so a writer often meets its own id after checking
    that it was not stored: among its merge candidates, or when it creates. Every chain stays whole
    and every answer is what is stored (before: 5 runs of 7 left a memory superseding itself)."""
    topics, versions = 20, 12
    base = parse_time("2026-01-01T00:00:00Z")
    jobs = [(t, v) for t in range(topics) for v in range(versions)]

    def item(t: int, v: int) -> MemoryInput:
        return MemoryInput(f"topic{t} service{t} owner{t} region{t} cluster{t} config value {v}", "same",
                           kind="fact", importance=5, valid_from=base + timedelta(minutes=v))

    orders = [random.Random(w).sample(jobs, len(jobs)) for w in range(8)]
    work = [[order[i:i + 10] for i in range(0, len(order), 10)] for order in orders]
    results, errors = run_writers(lambda: MemoryStore(engine, installed), work, lambda store, batch: list(zip(
        batch, store.remember_many([item(t, v) for t, v in batch], batch_size=10))))
    assert not errors, errors[:1]
    store = MemoryStore(engine, installed)
    docs = _chains_are_whole(engine, store, "same", topics)
    for _, r in (pair for batch in results for pair in batch):  # every answer is what is stored
        if r.action == "duplicate":
            assert r.duplicate_of in docs
        elif r.action == "superseded":
            assert set(r.superseded) <= set(docs[r.id].get("supersedes") or []), (r, docs[r.id])
        else:
            assert r.id in docs


def test_a_writer_whose_create_finds_its_id_stored_links_what_it_retired(engine, background, monkeypatch) -> None:
    """Two writers of one memory (same content and valid_from, so one id) decide differently: `first`
    looks the topic up while it is empty (add), `second` after an older version appeared (supersede:
    it retires that version for the id). `first` creates the memory, then `second` finds it stored:
    the retired version must end linked from the stored memory, and `second` answers what is stored."""
    ns, when = "same-id", "2026-03-01T09:00:00Z"
    update, older = LINES[1]["content"], LINES[0]["content"]
    first, second = MemoryStore(engine, background), MemoryStore(engine, background)
    decided, go = threading.Event(), threading.Event()
    first_create, second_create = first.writer._create, second.writer._create

    def first_waits(docs, **kw):  # `first` has decided and waits to create
        decided.set()
        assert go.wait(30)
        return first_create(docs, **kw)

    def first_creates_first(docs, **kw):  # `second` has retired the older version: `first` creates first
        go.set()
        runner.join(30)
        return second_create(docs, **kw)

    # both wrappers only order the two writers' creates; each create is the real one, on the engine
    monkeypatch.setattr(first.writer, "_create", first_waits)
    monkeypatch.setattr(second.writer, "_create", first_creates_first)
    answers = {}
    runner = threading.Thread(target=lambda: answers.setdefault("first", first.remember(update, ns, valid_from=when)))
    runner.start()
    assert decided.wait(30)
    old = MemoryStore(engine, background).remember(older, ns, valid_from="2026-01-01T09:00:00Z")
    answers["second"] = second.remember(update, ns, valid_from=when)
    assert not runner.is_alive()
    store = MemoryStore(engine, background)
    stored = store.get(ns, answers["first"].id)
    assert answers["second"].id == stored.id and answers["second"].replayed
    assert store.get(ns, old.id).superseded_by == stored.id and old.id in stored.supersedes
    assert [m.id for m in store.history(ns, stored.id)] == [old.id, stored.id]


def _before_look_up(store: MemoryStore, monkeypatch, write) -> None:
    """Run `write()` once, on the real engine, just before `store`'s first look-up reaches it (the look-up
    itself is sent unchanged): another writer got there between the id check and the look-up."""
    look_up, done = store.catalog.msearch, []

    def then_look_up(searches, what="search"):
        if not done:
            done.append(write())
        return look_up(searches, what)

    monkeypatch.setattr(store.catalog, "msearch", then_look_up)


def test_a_writer_whose_look_up_finds_its_own_id_does_not_retire_it(engine, background, monkeypatch) -> None:
    """`second` checks that its id is not stored; `first` then writes the same memory (retiring the older
    version for it) before `second` looks the topic up. The look-up finds the memory itself: it is not
    a candidate (taking the older version's retire as its own resumed one, `second` made the memory
    supersede itself, and the topic was left without an active memory)."""
    ns, when = "own-id", "2026-03-01T09:00:00Z"
    update, older = LINES[1]["content"], LINES[0]["content"]
    old = MemoryStore(engine, background).remember(older, ns, valid_from="2026-01-01T09:00:00Z")
    first, second = MemoryStore(engine, background), MemoryStore(engine, background)
    answers = {}
    _before_look_up(second, monkeypatch, lambda: answers.setdefault("first", first.remember(update, ns, valid_from=when)))
    answers["second"] = second.remember(update, ns, valid_from=when)
    assert answers["first"].superseded == (old.id,)
    store = MemoryStore(engine, background)
    stored = store.get(ns, answers["first"].id)
    assert stored.status == "active" and stored.superseded_by is None and stored.supersedes == (old.id,)
    assert answers["second"].id == stored.id and answers["second"].replayed
    assert [m.id for m in store.history(ns, stored.id)] == [old.id, stored.id]
    assert store.count(ns) == 1


def test_a_writer_whose_look_up_finds_its_own_id_answers_the_stored_memory(engine, background, monkeypatch) -> None:
    """As above, and the look-up also finds a restatement of the memory (written without merge): the
    write is a replay of the stored memory, not a duplicate of the restatement."""
    ns, when = "own-id-dup", "2026-03-01T09:00:00Z"
    memory, restated = LINES[2]["content"], LINES[3]["content"]
    first, second = MemoryStore(engine, background), MemoryStore(engine, background)
    answers = {}

    def first_writes() -> None:
        answers["first"] = first.remember(memory, ns, valid_from=when)
        answers["plain"] = MemoryStore(engine, background, merge=MergePolicy(enabled=False)).remember(
            restated, ns, valid_from="2026-02-01T09:00:00Z")

    _before_look_up(second, monkeypatch, first_writes)
    answers["second"] = second.remember(memory, ns, valid_from=when)
    assert answers["second"].action == "added" and answers["second"].id == answers["first"].id
    assert answers["second"].replayed
    assert _source(second, ns, answers["plain"].id)["restated_count"] == 0


# -- 2. all-or-nothing batches -------------------------------------------------------------------
@pytest.mark.parametrize("bad", [{"metadata": {"x": math.inf}}, {"metadata": {"x": [1, {"y": math.nan}]}},
                                 {"embedding": [0.1, math.inf]}, {"metadata": {"x": object()}}])
def test_batch_with_one_unserialisable_item_writes_nothing(clocked_store: MemoryStore, bad: dict) -> None:
    """Issue case 5 (library): 50 good memories and one bad one used to write the 50."""
    items = [MemoryInput(f"good memory number {i} about topic {i}", "aon") for i in range(50)]
    with pytest.raises(InvalidItem) as e:
        clocked_store.remember_many([*items, MemoryInput("the bad one", "aon", **bad)])
    assert e.value.position == 50
    assert clocked_store.count("aon", status=None) == 0


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("bad", ['"metadata": {"x": NaN}', '"embedding": [Infinity]'])
def test_cli_import_with_a_bad_line_writes_nothing_and_names_the_line(engine, installed, tmp_path: Path,
                                                                     merge: bool, bad: str) -> None:
    lines = [json.dumps({"id": f"l{i}", "content": f"memory line {i} about subject {i}"}) for i in range(1, 121)]
    lines[100] = lines[100][:-1] + ", " + bad + "}"
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "import", str(path), "-n", "aon",
                                   *([] if merge else ["--no-merge"])])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and f"{path}:101:" in res.output, res.output
    assert MemoryStore(engine, installed).count("aon", status=None) == 0


@pytest.mark.plain_http  # the TCP relay forwards plain HTTP
@pytest.mark.parametrize("merge", [True, False])
def test_engine_rejecting_one_document_leaves_no_partial_batch(engine, installed, relay: Relay, merge: bool) -> None:
    """Validation cannot foresee everything: make the real engine reject one document of the bulk
    (the relay rewrites its importance into a string) and check that nothing of the batch stays."""
    via = MemoryStore(Engine(relay.url), installed, clock=lambda: NOW, merge=MergePolicy(enabled=merge))
    words = ["apple", "bridge", "candle", "dolphin", "empire", "falcon", "guitar", "harbor", "igloo", "jungle"]
    items = [MemoryInput(f"{w} {w}s {w}-{i}", "rej", importance=5, external_id=f"r{i}") for i, w in enumerate(words)]
    items[6] = MemoryInput("the one the engine refuses", "rej", importance=7.25, external_id="r6")
    relay.arm("_bulk", 1, rewrite=(b'"importance":7.25', b'"importance":"seven"'))
    with pytest.raises(EngineError, match="none of that batch was kept"):
        via.remember_many(items)
    assert relay.fired
    store = MemoryStore(engine, installed)
    assert store.count("rej", status=None) == 0
    relay.heal()
    assert [r.action for r in via.remember_many(items)] == ["added"] * 10
    assert store.count("rej") == 10


# -- 4. strict types -----------------------------------------------------------------------------
def nested(levels: int) -> dict:
    """An object `levels` deep (each level one more object, the last holding a number)."""
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


BAD_FIELDS = [
    ({"valid_from": "0001-01-01T00:00:00+05:00"}, "outside"),
    ({"valid_from": "9999-12-31T23:59:59-05:00"}, "outside"),
    # a number is refused, not read as epoch ms: 1700000000 (epoch seconds) used to be stored as 1970-01-20
    ({"valid_from": 1700000000}, "valid_from must be ISO 8601 text"),
    ({"valid_from": 1700000000000}, "valid_from must be ISO 8601 text"),
    ({"valid_from": 1e300}, "valid_from must be ISO 8601 text"),
    ({"valid_from": math.nan}, "valid_from must be ISO 8601 text"),
    ({"valid_from": True}, "valid_from must be ISO 8601 text"),
    ({"valid_from": ["2026-01-01"]}, "valid_from must be ISO 8601 text"),
    ({"entities": 5}, "entities"),
    ({"entities": "abc"}, "entities"),
    ({"entities": [None]}, "entities"),
    ({"entities": ["ok", " "]}, "entities"),
    ({"evergreen": "no"}, "evergreen"),
    ({"evergreen": 1}, "evergreen"),
    ({"namespace": "good\n"}, "namespace"),
    ({"importance": "high"}, "importance"),
    ({"importance": math.nan}, "importance"),
    ({"kind": ["fact"]}, "kind"),
    ({"metadata": [1, 2]}, "metadata"),
    ({"metadata": {"x": math.nan}}, "metadata"),
    ({"embedding": [math.inf]}, "embedding"),
    ({"embedding": [True]}, "embedding"),
    ({"external_id": ""}, "id"),
    ({"external_id": "x" * 600}, "id"),
    ({"idempotency_key": ""}, "idempotency_key"),
    # a number is refused, not turned into its text (5 and "5" were one memory)
    ({"external_id": 5}, "id must be a non-empty string of at most 512 characters, got int 5"),
    ({"idempotency_key": 7.0}, "idempotency_key must be a non-empty string of at most 512 characters, got float"),
    # a lone surrogate (what a JSON escape "\ud800" decodes to) in any text field: not storable text
    ({"metadata": {"note": "lone \ud800"}}, "metadata is not valid UTF-8"),
    ({"metadata": {"lone \udfff": 1}}, "metadata is not valid UTF-8"),
    ({"entities": ["ok", "lone \ud800"]}, "entities is not valid UTF-8"),
    ({"external_id": "lone \ud800"}, "id is not valid UTF-8"),
    ({"idempotency_key": "lone \ud800"}, "idempotency_key is not valid UTF-8"),
    ({"thread": "lone \ud800"}, "thread is not valid UTF-8"),
    ({"thread": "t1", "neighbours": "lone \ud800"}, "neighbours is not valid UTF-8"),
    ({"applies_to": ["lone \ud800"]}, "applies_to is not valid UTF-8"),
    ({"entities": ["ok", "nul\x00"]}, "entities contains the control character U\\+0000"),
    ({"external_id": "x\x1b[0m"}, "id contains the control character U\\+001B"),
    ({"idempotency_key": "k\x00"}, "idempotency_key contains the control character"),
    ({"thread": "t\x07"}, "thread contains the control character"),
    ({"thread": "t1", "neighbours": "n\x1b"}, "neighbours contains the control character"),
    ({"metadata": nested(5000)}, "metadata nests objects/lists more than 32 levels deep"),
    ({"metadata": nested(33)}, "metadata nests objects/lists more than 32 levels deep"),
    ({"metadata": {"a": [[[nested(30)]]]}}, "metadata nests"),
]


@pytest.mark.parametrize("change, message", BAD_FIELDS)
def test_bad_field_is_refused_with_a_typed_error_and_nothing_written(clocked_store: MemoryStore, change: dict,
                                                                     message: str) -> None:
    kept = clocked_store.remember("the one memory that must survive", "strict", kind="fact")
    fields = {"content": "ok content", "namespace": "strict", **change}
    with pytest.raises(InvalidInput, match=message):
        clocked_store.remember(fields.pop("content"), fields.pop("namespace"), **fields)
    with pytest.raises(InvalidItem, match=message):
        clocked_store.remember_many([MemoryInput("first good one", "strict"),
                                     MemoryInput(**{"content": "ok content", "namespace": "strict", **change})])
    assert clocked_store.count("strict", status=None) == 1
    assert clocked_store.get("strict", kept.id).content == "the one memory that must survive"


def test_metadata_nested_up_to_the_limit_is_kept_whole(clocked_store: MemoryStore) -> None:
    res = clocked_store.remember("a memory with deep metadata", "strict", metadata=nested(32))
    assert clocked_store.get("strict", res.id).metadata == nested(32)


def test_a_restatement_with_a_lone_surrogate_leaves_its_target_active(clocked_store: MemoryStore) -> None:
    """Refused before the merge retires anything: the text used to fail only when the create was encoded."""
    first = clocked_store.remember("the staging database is backed up nightly to the office NAS", "strict")
    with pytest.raises(InvalidInput, match="metadata is not valid UTF-8"):
        clocked_store.remember("the staging database is backed up nightly to the office NAS box", "strict",
                               metadata={"note": "lone \ud800"})
    assert clocked_store.get("strict", first.id).status == "active"
    assert clocked_store.count("strict", status=None) == 1


@pytest.mark.parametrize("pairs", [{"must_not_miss_boost": "1e308"}, {"c": "inf"}, {"w": "nan"}, {"k": "inf"},
                                   {"half_life": "0.0001s"}, {"entity_boost": "1e308"}, {"alpha": "inf"},
                                   {"hl.intent": "1000000d"}])
def test_recall_params_must_be_finite_and_in_range(pairs: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        params_from_strings(RecallParams(), pairs)


@pytest.mark.parametrize("change", [{"mmr": "no"}, {"must_not_miss": 0}, {"window": True}, {"c": "0.1"}])
def test_recall_params_are_strictly_typed(change: dict) -> None:
    with pytest.raises(ConfigError):
        RecallParams(**change)


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
def test_recall_times_out_of_range_are_typed_errors(clocked_store: MemoryStore, when: str) -> None:
    with pytest.raises(InvalidInput, match="outside"):
        clocked_store.recall("anything", "strict", now=when)
    with pytest.raises(InvalidInput, match="outside"):
        clocked_store.recall("anything", "strict", as_of=when)


CLI_BAD = [
    (["remember", "x", "-n", "c", "--valid-from", "0001-01-01T00:00:00+05:00"], "outside"),
    (["remember", "x", "-n", "c", "--valid-from", "9999-12-31T23:59:59-05:00"], "outside"),
    (["remember", "x", "-n", "c", "--importance", "high"], "importance"),
    (["recall", "x", "-n", "c", "--now", "9999-12-31T23:59:59-05:00"], "outside"),
    (["recall", "x", "-n", "c", "--as-of", "0001-01-01T00:00:00+05:00"], "outside"),
    (["recall", "x", "-n", "c", "--set", "must_not_miss_boost=1e308"], "must_not_miss_boost"),
    (["recall", "x", "-n", "c", "--set", "half_life=0.0001s"], "half-life"),
    (["history", "", "-n", "c"], "memory id must be a non-empty string"),
    (["restore", "", "-n", "c"], "memory id must be a non-empty string"),
]


@pytest.mark.parametrize("args, message", CLI_BAD)
def test_cli_bad_input_is_one_line_exit_2(engine, installed, args: list[str], message: str) -> None:
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, *args])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and message in res.output, res.output
    assert res.output.startswith("error: ")
    assert MemoryStore(engine, installed).count("c", status=None) == 0


@pytest.mark.parametrize("line, message", [
    ('"valid_from": 1700000000', "valid_from must be ISO 8601 text"), ('"entities": 5', "entities"), ('"entities": "abc"', "entities"),
    ('"evergreen": "no"', "evergreen"), ('"namespace": "good\\n"', "namespace"), ('"importance": "high"', "importance"),
    ('"id": 5', "id must be a non-empty string of at most 512 characters, got int 5"),
    ('"id": "a1", "external_id": "b1"', 'give "id" or "external_id", not both'),
    ('"entities": ["\\u001b[31mred"]', "entities contains the control character U+001B"),
])
def test_cli_import_type_errors_name_the_file_line(engine, installed, tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"content": "fine line one", "namespace": "c"}\n\n'
                    f'{{"content": "the bad line", "namespace": "c", {line}}}\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "import", str(path)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and f"{path}:3: " in res.output, res.output
    assert message in res.output
    assert MemoryStore(engine, installed).count("c", status=None) == 0


@pytest.mark.parametrize("line, message", [
    ('{"content": "a lone \\ud800 surrogate"}', "content is not valid UTF-8"),
    ('{"content": "fine text", "metadata": {"note": "\\udc00"}}', "metadata is not valid UTF-8"),
    ('{"id": "x1", "content": "a lone \\ud800 surrogate"}', "content is not valid UTF-8"),
])
def test_cli_import_of_a_lone_surrogate_escape_names_line_and_field(engine, installed, tmp_path: Path,
                                                                   line: str, message: str) -> None:
    """A line without `id` is identified by its hash, which must not crash on the surrogate first."""
    path = tmp_path / "s.jsonl"
    path.write_text('{"content": "fine line one", "namespace": "c"}\n' + line + "\n", encoding="utf-8")
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "import", str(path), "-n", "c"])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and f"{path}:2: {message}" in res.output, res.output
    assert MemoryStore(engine, installed).count("c", status=None) == 0


@pytest.mark.parametrize("levels, message", [(40, "metadata nests objects/lists more than 32 levels deep"),
                                             (5000, "invalid JSON (nested too deeply)")])
def test_cli_import_of_deeply_nested_metadata_names_the_line(engine, installed, tmp_path: Path, levels: int,
                                                             message: str) -> None:
    path = tmp_path / "deep.jsonl"
    deep = '{"a": ' * (levels - 1) + "1" + "}" * (levels - 1)  # json.dumps itself overflows at 5000
    path.write_text('{"content": "fine line one"}\n'
                    f'{{"content": "deep metadata", "metadata": {deep}}}\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "import", str(path), "-n", "c"])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and f"{path}:2: {message}" in res.output, res.output
    assert MemoryStore(engine, installed).count("c", status=None) == 0


@pytest.mark.plain_http  # the TCP relay forwards plain HTTP
# -- 7. smaller ----------------------------------------------------------------------------------
def test_failed_reheat_write_back_is_a_warning(engine, installed, relay: Relay) -> None:
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    m = store.remember("the team standup is at 9:30 every weekday", "heat", kind="fact")
    via = MemoryStore(Engine(relay.url), installed, clock=lambda: NOW)
    relay.arm("_bulk", 1, cut="before")
    with pytest.warns(EsmemWarning, match="reheat write-back skipped"):
        res = via.recall("when is the standup", "heat", 3, now=NOW)
        via.flush()  # the write-back runs behind the answer (esmem/domain/reheat.py); its failure warns here
    assert relay.fired and [r.memory.id for r in res.items] == [m.id]
    assert store.get("heat", m.id).access_count == 0


@pytest.mark.plain_http  # the TCP relay forwards plain HTTP
def test_interrupted_import_says_how_far_it_got(engine, installed, relay: Relay, tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({"id": f"n{i}", "content": f"note {i} on subject{i} and thing{i}"}) + "\n"
                            for i in range(450)), encoding="utf-8")
    relay.arm("_bulk", 3, cut="after")  # --no-merge: one bulk per 200 lines; the third is cut
    args = ["--url", relay.url, "--prefix", installed, "import", str(path), "-n", "far", "--no-merge"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert "400 of 450 lines are durably imported (up to line 400)" in res.output and "re-run" in res.output
    relay.heal()
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert again.stdout.strip().endswith("already imported")
    assert MemoryStore(engine, installed).count("far", status=None) == 450


@pytest.mark.plain_http  # the TCP relay forwards plain HTTP
def test_interrupted_merge_import_counts_only_the_written_prefix(engine, installed, relay: Relay, tmp_path: Path) -> None:
    """Line 2 updates line 1, so it waits for the next batch while lines 3-7 are written with line 1
    (a batch holds no two memories that could merge): when that batch is cut, the message counts the lines before the first one not written."""
    lines = [{"id": "a", "kind": "rule", "content": "the deploy window is Friday 18:00 for the billing service"},
             {"id": "b", "kind": "rule", "content": "the deploy window is Friday 20:00 for the billing service"},
             *({"id": f"n{i}", "content": f"note {i} on subject{i} and thing{i}"} for i in range(5))]
    path = tmp_path / "update.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
    relay.arm("_bulk", 2, cut="before")  # 1: the first batch's creates; 2: line 2's retire of line 1
    args = ["--url", relay.url, "--prefix", installed, "import", str(path), "-n", "pre"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and "1 of 7 lines are durably imported (up to line 1)" in res.output, res.output
    store = MemoryStore(engine, installed)
    assert store.count("pre", status=None) == 6  # lines 1 and 3-7
    relay.heal()
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and "1 merged" in again.stdout and "6 already imported" in again.stdout, again.output
    assert store.count("pre", status=None) == 7 and store.count("pre") == 6


def test_engine_down_only_signals_its_own_engine(tmp_path: Path) -> None:
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "engine.json").write_text(json.dumps({"pid": stranger.pid, "url": "http://127.0.0.1:9"}))
        assert embedded.down(tmp_path) is False
        time.sleep(0.2)
        assert stranger.poll() is None  # still running: not ours to stop
    finally:
        stranger.kill()
        stranger.wait()


# -- 2./5. kill -9 of the engine mid-import --------------------------------------------------------
def _corpus(n_topics: int = 120, versions: int = 6) -> list[dict]:
    """Lines on distinct topics, each restated a few times (updates: a number changes; exact duplicates;
    late old ones)."""
    rng = random.Random(9)
    lines = []
    for t in range(n_topics):
        words = f"alpha{t} bravo{t} charlie{t} delta{t} echo{t} foxtrot{t} golf{t} hotel{t}"
        for v in range(versions):
            day = 1 + v * 3 + (-2 if v == 4 else 0)  # version 4 arrives late: older than version 3
            text = f"{words} setting level {t}{v}" if v != 2 else f"{words} setting level {t}1"  # v2 restates v1
            lines.append({"id": f"t{t}v{v}", "kind": "fact", "importance": 5,
                          "valid_from": f"2026-0{1 + v % 6}-{day:02d}T09:00:00Z", "content": text})
    rng.shuffle(lines)
    return lines


@pytest.mark.slow
def test_kill_engine_mid_import_then_rerun_converges(tmp_path: Path) -> None:
    home = tmp_path / "engine-home"
    running = embedded.up(home=home, heap=os.environ.get("ESMEM_ENGINE_HEAP", "512m"))
    try:
        for p in [home, home / "engine.json", home / "engine.log", *list((home / "node").rglob("*"))[:200]]:
            assert p.stat().st_mode & 0o077 == 0, p  # private: 0600 files, 0700 directories
        eng = Engine(running.url)
        install(eng, "clean")
        lines = _corpus()
        path = tmp_path / "corpus.jsonl"
        path.write_text("".join(json.dumps(o) + "\n" for o in lines), encoding="utf-8")
        esmem_cmd = str(Path(sys.executable).parent / "esmem")

        def run_import(url: str, prefix: str) -> subprocess.Popen:
            return subprocess.Popen([esmem_cmd, "--url", url, "--prefix", prefix, "import", str(path), "-n", "kill"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        clean = run_import(running.url, "clean")
        out, err = clean.communicate()
        assert clean.returncode == 0, err
        clean_dump = dump(eng, "clean-memories", "kill")
        statuses = [d["status"] for d in clean_dump.values()]
        print(f"clean run said {out.strip()!r}: {len(statuses)} documents, {statuses.count('active')} active, "
              f"{statuses.count('superseded')} superseded")
        for cut_at in (150, 420):  # documents written when the engine is killed
            prefix = f"crash{cut_at}"
            install(eng, prefix)
            imp = run_import(running.url, prefix)
            while eng.request("POST", f"/{prefix}-memories/_count")["count"] < cut_at:
                assert imp.poll() is None, imp.communicate()
                time.sleep(0.05)
            os.kill(running.pid, signal.SIGKILL)
            _, err = imp.communicate(timeout=120)
            assert imp.returncode == 2 and "re-run the same command to resume" in err, err
            print(f"kill at {cut_at} docs: import said {err.strip().split(' -- ')[-1]!r}")
            eng.close()
            running = embedded.up(home=home, heap=os.environ.get("ESMEM_ENGINE_HEAP", "512m"))
            eng = Engine(running.url)
            rerun = run_import(running.url, prefix)
            out, err = rerun.communicate()
            assert rerun.returncode == 0, err
            print(f"kill at {cut_at} docs: re-run said {out.strip()!r}")
            crashed = dump(eng, f"{prefix}-memories", "kill")
            assert crashed == clean_dump, f"kill at {cut_at}: differs from the clean run"
        statuses = [d["status"] for d in clean_dump.values()]
        assert statuses.count("active") == 120 and "pending" not in statuses
    finally:
        embedded.down(home)
