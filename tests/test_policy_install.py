"""The ranking policy lives in the cluster: `install --policy` renders it into the stored templates,
every store and raw client ranks by it on its next call (no restart), the reference formula takes
the same installed policy, `esmem config` reads it back."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.installation import install, installed_policy, policy_drift
from esmem.domain.merge import MergePolicy
from esmem.domain.policy import DecayPolicy
from esmem.domain.ranking import reference_score
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import NotInstalled
from esmem.index.install import Names
from esmem.values import KINDS, parse_time

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)


def _raw(store: MemoryStore, query: str, **params) -> dict[str, float]:
    body = {"id": store.names.script("recall"), "params": {"namespace": "pol", "query": query, **params}}
    return {h["_id"]: h["_score"] for h in store.engine.request("POST", f"/{store.alias}/_search/template", body)["hits"]["hits"]}


@pytest.mark.fresh_prefix("installs another policy into the stored templates")
def test_a_new_policy_reaches_every_store_on_its_next_call(engine, installed: str) -> None:
    one = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    two = MemoryStore(engine, installed, clock=lambda: NOW)
    one.remember_many([MemoryInput(f"planning the team offsite in lisbon ({i})", "pol", kind=kind, importance=imp,
                                   valid_from=NOW - age * DAY)
                       for i, (kind, imp, age) in enumerate([("event", 3, 40), ("event", 6, 2), ("intent", 5, 10),
                                                             ("fact", 9, 300), ("note", 2, 1)])])
    before = {r.memory.id: r.score for r in two.recall("team offsite lisbon", "pol", 5, now=NOW, touch=False).items}
    policy = DecayPolicy(half_lives={"event": "30d", "note": "12h"}, evergreen_kinds=["fact"],
                         recall={"mode": "multiply", "c": 0.2, "mmr": False})
    install(engine, installed, params=policy.params(), evergreen_kinds=tuple(policy.evergreen_kinds))
    rel = {h: s for h, s in _raw(one, "team offsite lisbon", rel_only=True).items()}
    for store in (one, two):
        store.recaller._installed = None  # as after POLICY_TTL; the engine-side ranking changed already
        after = store.recall("team offsite lisbon", "pol", 5, now=NOW, touch=False)
        assert {r.memory.id: r.score for r in after.items} != before
        assert after.params.mode == "multiply" and not after.params.mmr
        for r in after.items:  # the engine's new scores are the reference formula with the installed policy
            doc = store.engine.request("GET", f"/{store.alias}/_doc/{r.memory.id}", params={"routing": "pol"})
            want = reference_score(rel[r.memory.id], doc["_source"], installed_policy(engine, installed).params, NOW)
            assert r.score == pytest.approx(want, rel=1e-4)
    raw_now = _raw(one, "team offsite lisbon", now="2026-10-08T12:00:00Z")
    assert raw_now == pytest.approx({r.memory.id: r.score for r in after.items}, rel=1e-6)
    assert policy_drift(engine, installed, policy.params(), ("fact",)) == []
    assert policy_drift(engine, installed, DecayPolicy().params())  # the built-in defaults differ now


def test_installed_policy_round_trips_every_default(engine, prefix: str) -> None:
    policy = DecayPolicy(half_lives={"intent": "3d", "event": "90d"}, default_half_life="400d",
                         evergreen_kinds=["rule"], rho=0.25,
                         recall={"mode": "weighted", "alpha": 0.6, "beta": 0.25, "gamma": 0.15, "k": 3,
                                 "must_not_miss": False, "importance_floor": 9, "must_not_miss_boost": 2,
                                 "entity_boost": 1.5, "min_importance": 2, "window": 30, "mmr_lambda": 0.5,
                                 "recent_n": 2, "kinds": ["fact", "rule", "intent"], "include_superseded": True})
    install(engine, prefix, params=policy.params(), evergreen_kinds=("rule",))
    got = installed_policy(engine, prefix)
    want = policy.params()
    for kind in KINDS:
        assert got.params.half_life_of(kind) == want.half_life_of(kind), kind
    assert got.values() == got.values() and policy_drift(engine, prefix, want, ("rule",)) == []
    assert got.params.kinds == ("fact", "intent", "rule") and got.params.include_superseded
    assert not got.params.must_not_miss and got.params.window == 30 and got.params.rho == 0.25
    out = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", prefix, "config", "--json"])
    assert out.exit_code == 0, out.output
    defaults = json.loads(out.output)["defaults"]
    assert defaults["mode"] == "weighted" and defaults["half_life_fact"] == "400d" and defaults["size"] == "30"
    assert defaults["evergreen_kinds"] == "rule" and defaults["must_not_miss"] == "false"


def test_a_recall_template_of_another_shape_asks_for_esmem_install(engine, prefix: str) -> None:
    # what a library upgrade finds in a cluster installed by an older esmem: a template it cannot read
    install(engine, prefix)
    names = Names(prefix)
    other = engine.request("GET", f"/_scripts/{names.script('bm25')}")["script"]
    engine.request("PUT", f"/_scripts/{names.script('recall')}", {"script": other})
    with pytest.raises(NotInstalled, match="run `esmem install`"):
        installed_policy(engine, prefix)
    with pytest.raises(NotInstalled, match="run `esmem install`"):
        MemoryStore(engine, prefix).recall("anything", "pol", 3)


def test_bad_policy_file_is_a_one_line_error(engine, prefix: str, tmp_path) -> None:
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"half_lives": {"intent": "soon"}}))
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", prefix, "install", "--policy", str(bad)])
    assert res.exit_code == 2 and res.output.startswith("error: ") and "half_lives.intent" in res.output
