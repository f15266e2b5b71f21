"""Retention on the real engine: on a generated index of a few thousand memories with history, the
dry run lists exactly the memories the policy's rules name, the applied run erases exactly those, and
nothing pinned, evergreen or active is touched unless its kind has a time to live. The [retention]
policy keys are validated like every other policy key."""
from __future__ import annotations

import random
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.policy import DecayPolicy, load_policy
from esmem.domain.store import MemoryStore
from esmem.errors import ConfigError
from esmem.index.engine import Engine
from esmem.values import iso, parse_time, utcnow

pytestmark = pytest.mark.fresh_prefix("an applied retention creates the prefix's audit index")

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)
KINDS = ("fact", "preference", "intent", "rule", "event", "note")
POLICY = {"evergreen_kinds": ["rule"],
          "retention": {"retired": "90d", "retired_by_kind": {"intent": "7d", "fact": "none"}, "ttl": {"event": "365d"}}}


def _generated(topics: int = 4000, seed: int = 7, now: datetime = NOW) -> dict[str, dict[str, Any]]:
    """Memories with 0-3 older versions each, over two years: some evergreen, some pinned by importance,
    some versions retired instead of superseded, some without invalid_at."""
    rnd = random.Random(seed)
    docs: dict[str, dict[str, Any]] = {}
    for t in range(topics):
        kind, ns = KINDS[t % len(KINDS)], f"rt:{t % 5}"
        times = sorted(now - DAY * rnd.randint(0, 800) for _ in range(t % 4 + 1))
        ids = [f"m{t}-{v}" for v in range(len(times))]
        for v, (doc_id, at) in enumerate(zip(ids, times)):
            active = v == len(times) - 1
            doc = {"namespace": ns, "content": f"memory {t} version {v}", "kind": kind,
                   "importance": 9.0 if t % 13 == 0 else float(3 + t % 5), "valid_from": iso(at),
                   "recorded_at": iso(at), "status": "active" if active else "retired" if t % 29 == 0 else "superseded",
                   "evergreen": t % 17 == 0, "access_count": t % 3, "entities": []}
            if not active:
                doc["superseded_by"] = ids[v + 1]
                if t % 31:
                    doc["invalid_at"] = iso(times[v + 1])
            if v:
                doc["supersedes"] = ids[v - 1]
            docs[doc_id] = doc
    return docs


def _due(doc: dict[str, Any], policy: DecayPolicy) -> bool:
    """The rules of POLICY, written out independently of the query."""
    rules = policy.retention_rules
    if doc["evergreen"] or doc["importance"] >= 8 or doc["kind"] in policy.evergreen_kinds:
        return False
    if doc["status"] == "active":
        ttl = rules.ttl.get(doc["kind"])
        return ttl is not None and parse_time(doc["valid_from"]) < NOW - ttl
    if "invalid_at" not in doc:
        return False
    keep = rules.retired_by_kind[doc["kind"]] if doc["kind"] in rules.retired_by_kind else rules.retired
    return keep is not None and parse_time(doc["invalid_at"]) < NOW - keep


def _load(store: MemoryStore, docs: dict[str, dict[str, Any]]) -> None:
    items = list(docs.items())
    for i in range(0, len(items), 500):
        assert not store.catalog.create(items[i:i + 500]).errors
    store.catalog.refresh()


def _dump(store: MemoryStore) -> dict[str, Any]:
    store.catalog.refresh()
    return {h["_id"]: h["_source"] for h in store.catalog.stream({"match_all": {}})}


def test_retention_erases_exactly_what_its_rules_name(engine: Engine, installed: str) -> None:
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    docs = _generated()
    _load(store, docs)
    policy = DecayPolicy.from_dict(POLICY)
    expected = {i for i, d in docs.items() if _due(d, policy)}
    assert 0 < len(expected) < len(docs) // 2

    listed = list(store.retention_due(policy))
    assert {d.id for d in listed} == expected
    assert {d.rule for d in listed} == {"retired", "ttl"} and {d.kind for d in listed if d.rule == "ttl"} == {"event"}

    t0 = time.perf_counter()
    done = store.apply_retention(policy)
    took = time.perf_counter() - t0
    assert (done.deleted, done.remaining) == (len(expected), 0)
    after = _dump(store)
    assert after == {i: d for i, d in docs.items() if i not in expected}  # the rest, byte for byte
    for i, d in docs.items():  # the promise, spelled out
        if d["evergreen"] or d["importance"] >= 8 or (d["status"] == "active" and d["kind"] != "event"):
            assert i in after, (i, d)
    print(f"retention on {len(docs)} memories: {done.deleted} erased in {took * 1000:.0f} ms")
    (record,) = store.catalog.audit_records()
    assert record["action"] == "retention" and record["deleted"] == len(expected)
    assert list(store.retention_due(policy)) == []


def test_retention_within_namespaces_and_from_the_cli(engine: Engine, installed: str, tmp_path) -> None:
    store = MemoryStore(engine, installed)  # the CLI's clock: now
    docs = _generated(topics=120, now=utcnow())
    _load(store, docs)
    path = tmp_path / "policy.toml"
    path.write_text('evergreen_kinds = ["rule"]\n[retention]\nretired = "90d"\n[retention.ttl]\nevent = "365d"\n')
    policy = load_policy(path)
    in_one = {d.id for d in store.retention_due(policy, ["rt:1"])}
    assert in_one and all(docs[i]["namespace"] == "rt:1" for i in in_one)

    runner = CliRunner()
    base = ["--url", engine.url, "--prefix", installed, "retention", "--policy", str(path)]
    every = {d.id for d in store.retention_due(policy)}
    refused = runner.invoke(cli, base)
    assert refused.exit_code == 2 and f"would erase {len(every)} memories" in refused.output
    dry = runner.invoke(cli, [*base, "--dry-run"])
    assert dry.exit_code == 0 and f"(dry run) {len(every)} memories would be erased" in dry.stdout
    assert len(_dump(store)) == len(docs)
    done = runner.invoke(cli, [*base, "--yes"], catch_exceptions=False)
    assert done.exit_code == 0 and f"erased {len(every)} memories; still due after refresh: 0" in done.stdout
    assert set(_dump(store)) == set(docs) - every


@pytest.mark.parametrize("retention, message", [
    ({"keep": "30d"}, "unknown policy key 'retention.keep'"),
    ({"ttl": {"rule": "30d"}}, "retention.ttl.rule: rule is an evergreen kind"),
    ({"retired_by_kind": {"intnet": "7d"}}, "retention.retired_by_kind.intnet: unknown kind"),
    ({"retired": "-3d"}, "retention.retired"),
    ({"ttl": {"event": 0}}, "retention.ttl.event: expected a duration"),
    ({"ttl": ["event"]}, "retention.ttl: expected a table"),
])
def test_bad_retention_keys_are_errors_naming_the_key(retention: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        DecayPolicy.from_dict({"evergreen_kinds": ["rule"], "retention": retention})


def test_a_policy_without_retention_erases_nothing_and_round_trips() -> None:
    assert DecayPolicy().retention_rules.empty
    policy = DecayPolicy.from_dict(POLICY)
    assert DecayPolicy.from_dict({**POLICY, "retention": policy.as_dict()["retention"]}) == policy
