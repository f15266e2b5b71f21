"""The engine's scores equal the plain-Python reference of the documented formula, in every mode."""
from __future__ import annotations

import random
from datetime import timedelta

import pytest

from esmem.domain.merge import MergePolicy
from esmem.domain.when import Period, TimeCues
from esmem.domain.ranking import (RecallParams, epoch_ms, parse_duration, params_from_strings, parse_time, period_factor,
                                  reference_score, template_overrides, when_factor)
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import ConfigError

NOW = parse_time("2026-10-08T12:00:00Z")
WORDS = ["redis", "cache", "deploy", "python", "rust", "backup", "retry", "429", "jitter", "weekend", "hiking",
         "coffee", "docker", "latency", "index", "香港", "咖啡", "缓存", "部署", "重试", "备份", "周末", "徒步",
         "输出", "路径", "截图", "发布", "隐私", "扫描", "过敏"]


def _random_corpus(rng: random.Random, n: int) -> list[MemoryInput]:
    kinds = ["fact", "preference", "intent", "rule", "event", "note"]
    out = []
    for i in range(n):
        words = rng.sample(WORDS, rng.randint(3, 9))
        cut = rng.randint(1, len(words))  # some memories ask: one or both of their sentences is a question
        text = " ".join(words[:cut]) + rng.choice([".", "?"]) + " " + " ".join(words[cut:]) + rng.choice(["", "?"])
        text += rng.choice(["", "", "", " yesterday", " 上周", " on Friday"])  # some tell a time
        out.append(MemoryInput(
            content=text + f" m{i}", namespace="parity", kind=rng.choice(kinds),
            importance=rng.randint(1, 10), valid_from=NOW - timedelta(hours=rng.uniform(0, 24 * 720)),
            evergreen=rng.random() < 0.1, entities=rng.sample(WORDS[:8], rng.randint(0, 2))))
    return out


@pytest.fixture
def parity_store(engine, installed) -> MemoryStore:
    rng = random.Random(7)
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    results = store.remember_many(_random_corpus(rng, 240))
    # reheat a third of them at various times so anchor_at != valid_from
    reheated = rng.sample([r.id for r in results], 80)
    for chunk in range(0, 80, 20):
        store.touch("parity", reheated[chunk:chunk + 20], NOW - timedelta(days=rng.uniform(0, 60)), 0.5)
    engine.request("POST", f"/{store.alias}/_refresh")
    return store


@pytest.mark.parametrize("mode", ["blend", "multiply", "weighted"])
def test_engine_scores_equal_the_reference(parity_store: MemoryStore, mode: str) -> None:
    store = parity_store
    # every decay path: own half-lives, the default one, evergreen, never-decaying kinds
    params = params_from_strings(RecallParams(mode=mode, mmr=False, question_penalty=0.6, period_boost=2.5,
                                              when_boost=1.7),
                                 {"half_life": "30d", "hl.event": "60d", "hl.fact": "none"})
    assert sum(1 for h in _all(store) if h["asks"] > 0) > 50  # the question factor is exercised
    assert 50 < sum(1 for h in _all(store) if h["tells_time"]) < 200  # and the time a memory tells
    rng = random.Random(mode)
    compared = in_period = timed = 0
    for i in range(12):
        query = " ".join(rng.sample(WORDS, 3))
        # every form of period: a month of a year, a month of every year, a whole year; none every third
        # call; asking when every other call
        periods = () if i % 3 == 0 else tuple(rng.sample([Period(2025, rng.randint(1, 12)), Period(None, rng.randint(1, 12)),
                                                          Period(2026, None), Period(2024, 12)], 2))
        cues = TimeCues(periods, asks_when=i % 2 == 1)
        tp = {"query": query, "namespace": "parity", "size": 500, "now": epoch_ms(NOW), **template_overrides(params),
              "rescore_window": 500,  # fuse all 500 asked for (the default fuses the relevance top 100)
              **cues.template_params()}
        body = {"id": store.names.script("recall"), "params": tp}
        fused = store.engine.request("POST", f"/{store.alias}/_search/template", body, {"routing": "parity"})
        rel = store.engine.request("POST", f"/{store.alias}/_search/template",
                                   {**body, "params": {**tp, "rel_only": True}}, {"routing": "parity"})
        rels = {h["_id"]: h["_score"] for h in rel["hits"]["hits"]}
        hits = fused["hits"]["hits"]
        assert {h["_id"] for h in hits} == set(rels)
        for h in hits:
            want = reference_score(rels[h["_id"]], h["_source"], params, NOW, cues)
            assert h["_score"] == pytest.approx(want, rel=1e-4, abs=1e-7), (h["_source"], rels[h["_id"]], cues)
            compared += 1
            in_period += period_factor(h["_source"], cues, params) != 1
            timed += when_factor(h["_source"], cues, params) != 1
    assert compared >= 200 and in_period >= 50 and timed >= 50


def _all(store: MemoryStore) -> list[dict]:
    resp = store.engine.request("POST", f"/{store.alias}/_search", {"size": 500, "query": {"match_all": {}}})
    return [h["_source"] for h in resp["hits"]["hits"]]


def test_per_kind_half_lives_and_no_default_decay_match_the_reference(parity_store: MemoryStore) -> None:
    params = params_from_strings(RecallParams(mode="multiply", mmr=False),
                                 {"half_life": "none", "hl.note": "3d", "hl.fact": "400d"})
    tp = {"query": "redis 缓存 deploy", "namespace": "parity", "size": 500, "now": "2026-10-08T12:00:00Z",
          **template_overrides(params), "rescore_window": 500}
    body = {"id": parity_store.names.script("recall"), "params": tp}
    fused = parity_store.engine.request("POST", f"/{parity_store.alias}/_search/template", body)
    rel = parity_store.engine.request("POST", f"/{parity_store.alias}/_search/template",
                                      {**body, "params": {**tp, "rel_only": True}})
    rels = {h["_id"]: h["_score"] for h in rel["hits"]["hits"]}
    assert len(fused["hits"]["hits"]) > 20
    for h in fused["hits"]["hits"]:
        assert h["_score"] == pytest.approx(reference_score(rels[h["_id"]], h["_source"], params, NOW), rel=1e-4)


@pytest.mark.parametrize("window", [5, 30, 0])
def test_the_fusion_reranks_the_relevance_top_window_as_the_reference_does(parity_store: MemoryStore,
                                                                             window: int) -> None:
    """The template fuses the relevance top-`rescore_window` (a rescore, so the query phase can
    prune); the reference: take the rel top-window, fuse each in Python, sort. 0 = every match."""
    store = parity_store
    params = params_from_strings(RecallParams(mode="blend", mmr=False, rescore_window=window), {"half_life": "20d"})
    for query in ("redis 缓存 deploy", "python rust backup", "retry 429 jitter weekend"):
        tp = {"query": query, "namespace": "parity", "size": 10, "now": epoch_ms(NOW), **template_overrides(params)}
        body = {"id": store.names.script("recall"), "params": tp}
        if window:
            assert tp["rescore_window"] == window
        else:
            assert tp["exhaustive"] is True
        fused = store.engine.request("POST", f"/{store.alias}/_search/template", body, {"routing": "parity"})
        rel = store.engine.request("POST", f"/{store.alias}/_search/template",
                                   {**body, "params": {**tp, "size": 500, "rel_only": True}}, {"routing": "parity"})
        ranked = rel["hits"]["hits"][:window] if window else rel["hits"]["hits"]
        assert len(rel["hits"]["hits"]) > 30  # more matches than the windows tested
        want = sorted(((reference_score(h["_score"], h["_source"], params, NOW), h["_id"]) for h in ranked),
                      reverse=True)[:min(10, len(ranked))]
        got = [(h["_score"], h["_id"]) for h in fused["hits"]["hits"][:len(want)]]
        assert [s for s, _ in got] == pytest.approx([s for s, _ in want], rel=1e-4)
        assert {i for _, i in got} == {i for _, i in want} or len({round(s, 5) for s, _ in want}) < len(want)


def test_duration_parsing_and_bad_values() -> None:
    assert parse_duration("7d") == timedelta(days=7)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration("none") is None
    for bad in ("0d", "-3d", "7x", "abc"):
        with pytest.raises(ConfigError):
            parse_duration(bad)
    with pytest.raises(ConfigError):
        RecallParams(mode="sum")
    with pytest.raises(ConfigError):
        params_from_strings(RecallParams(), {"nope": "1"})
    with pytest.raises(ConfigError):
        params_from_strings(RecallParams(), {"hl.gossip": "3d"})
