"""The benchmark on the real engine with tiny sizes: the corpus is reproducible, the report has every
path, the naive scorer is what it claims, and the bench never touches the prefix it is given.
Speed is reported by `esmem bench`, never asserted here: machines are noisy."""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from datetime import datetime, timezone

import click
import pytest
from click.testing import CliRunner

from esmem.apps.bench import closed_loop, combine_passes, PATHS, SLOTS, TEMPLATES, fetch_all, generate, make_queries, naive_rank, zipf_sizes
from esmem.cli.bench import bench_cmd
from esmem.domain.analysis import tokens
from esmem.domain.installation import check
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from esmem.errors import NotInstalled
from esmem.index.install import require_installed
from esmem.values import KINDS, epoch_ms, parse_time

NOW = datetime(2026, 10, 8, tzinfo=timezone.utc)


def test_closed_loop_times_each_clients_share_after_the_warm_up() -> None:
    """Each client walks its own share of the probes (client i: i, i + clients, ...), one call at a
    time, and only calls made after the warm-up are timed."""
    import threading
    import time

    probes = generate(200, 4, 0)
    queries = make_queries(probes, 10, 0)
    seen: dict[int, list[str]] = {0: [], 1: []}
    lock = threading.Lock()

    def call(i: int, probe) -> None:
        with lock:
            seen[i].append(probe.text)
        time.sleep(0.002)

    ms = closed_loop(call, queries, 2, 0.2, warmup=0.1)
    assert ms == sorted(ms) and all(m >= 2 for m in ms)
    calls = len(seen[0]) + len(seen[1])
    assert 0 < len(ms) < calls  # the warm-up's calls are not timed
    for i in (0, 1):
        assert seen[i] == [queries[n % len(queries)].text for n in range(i, 2 * len(seen[i]), 2)]


def test_corpus_is_deterministic_for_a_seed() -> None:
    one, again, other = generate(300, 5, 7, now=NOW), generate(300, 5, 7, now=NOW), generate(300, 5, 8, now=NOW)
    assert one == again and one != other
    assert make_queries(one, 10, 7) == make_queries(again, 10, 7)


@pytest.mark.parametrize("n,m", [(300, 5), (10_000, 100), (1000, 1000), (7, 1), (100_000, 100)])
def test_zipf_sizes_sum_to_n_and_fall_with_rank(n: int, m: int) -> None:
    sizes = zipf_sizes(n, m)
    assert sum(sizes) == n and len(sizes) == m and min(sizes) >= 1
    assert sizes == sorted(sizes, reverse=True)


def test_corpus_looks_like_agent_memories() -> None:
    corpus = generate(2000, 20, 1, now=NOW)
    mems = [s.memory for s in corpus.items]
    assert Counter(m.namespace for m in mems) == dict(zip(corpus.namespaces, corpus.sizes))
    assert set(TEMPLATES) == set(KINDS) and {m.kind for m in mems} == set(KINDS)
    assert all(m.importance is not None and 1 <= m.importance <= 10 for m in mems)
    times = [parse_time(m.valid_from) for m in mems if m.valid_from is not None]
    assert len(times) == len(mems) and times == sorted(times)
    assert (NOW - times[0]).days >= 700 and times[-1] <= NOW
    restated = [(i, s.restates) for i, s in enumerate(corpus.items) if s.restates is not None]
    assert 0.07 <= len(restated) / len(mems) <= 0.13
    assert all(j < i and mems[j].namespace == mems[i].namespace and mems[j].kind == mems[i].kind
               for i, j in restated)
    han = sum(bool(re.search(r"[\u4e00-\u9fff]", str(m.content))) for m in mems)
    latin = sum(bool(re.search(r"[A-Za-z]{3}", str(m.content))) for m in mems)
    assert han > 500 and latin > 500
    vocabulary = {w for words in SLOTS.values() for w in words}
    for q in make_queries(corpus, 50, 1):
        assert q.text.strip() and q.namespace in corpus.namespaces
        assert any(w in q.text for w in vocabulary)


def _plain_top1(docs: list[dict], query: str, now: datetime) -> int:
    """The Generative Agents formula written out longhand: BM25 (k1 1.2, b 0.75) + recency (half-life
    per kind on anchor_at) + importance, each min-max scaled, summed."""
    params = RecallParams()
    q = set(tokens(query, query=True))
    bags = [tokens(d["content"]) for d in docs]
    avgdl = sum(len(b) for b in bags) / len(bags)
    rel = []
    for bag in bags:
        score = 0.0
        for term in q:
            df = sum(term in other for other in bags)
            tf = bag.count(term)
            if tf:
                idf = math.log(1 + (len(bags) - df + 0.5) / (df + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(bag) / avgdl))
        rel.append(score)
    rec = []
    for d in docs:
        hl = params.half_life_of(d["kind"])
        age = abs(epoch_ms(now) - int(d["anchor_at"]))
        rec.append(1.0 if d["evergreen"] or hl is None else 0.5 ** (age / (hl.total_seconds() * 1000)))
    imp = [d["importance"] for d in docs]

    def scaled(xs: list[float]) -> list[float]:
        return [(x - min(xs)) / (max(xs) - min(xs)) if max(xs) > min(xs) else 0.0 for x in xs]

    total = [a + b + c for a, b, c in zip(scaled(rel), scaled(rec), scaled(imp))]
    return min(range(len(docs)), key=lambda i: (-total[i], docs[i]["_id"]))


def test_naive_top1_matches_a_plain_python_computation(engine: Engine, installed: str) -> None:
    corpus = generate(120, 3, 3, now=NOW)
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False))
    store.remember_many(corpus.inputs())
    ns = corpus.namespaces[2]  # the smallest
    docs, took = fetch_all(engine, store.names.prefix, ns)
    assert len(docs) == corpus.sizes[2] and took >= 0
    for q in make_queries(corpus, 8, 3, namespace=ns):
        ranked = naive_rank(docs, q.text, NOW, RecallParams(), 5)
        assert len(ranked) == 5
        assert ranked[0][0] == docs[_plain_top1(docs, q.text, NOW)]["_id"], q.text


def _bench(engine: Engine, prefix: str, *args: str):
    """`esmem bench ...` as the CLI group runs it, against the test engine."""
    group = click.Group()
    group.add_command(bench_cmd)
    return CliRunner().invoke(group, ["bench", *args], obj={"url": engine.url, "prefix": prefix})


@pytest.mark.slow
def test_cli_report_has_every_path_and_leaves_the_prefix_alone(engine: Engine, installed: str) -> None:
    mine = MemoryStore(engine, installed)
    mine.remember("我的真实记忆：周五前交周报", "me", importance=5)
    res = _bench(engine, installed, "--sizes", "300", "--namespaces", "5", "--queries", "10",
                      "--merge-sample", "60", "--seed", "1", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["config"]["sizes"] == [300]
    (run,) = report["runs"]
    assert [s["scope"] for s in run["latency"]] == ["mixed", "#1 largest", "#2 largest"]
    for scope in run["latency"]:
        assert set(scope["paths"]) == set(PATHS) == {"a", "b", "c", "d"}
        for key, p in scope["paths"].items():
            assert p["n"] == scope["queries"]
            for stat in ("p50", "p95", "p99"):
                assert 0 < p[stat] and math.isfinite(p[f"ratio_{stat}"]) and p[f"ratio_{stat}"] > 0
                assert stat in p["took"]
            assert p["p50"] <= p["p95"] <= p["p99"]
        assert scope["paths"]["a"]["ratio_p50"] == 1.0
        assert {"fetch", "score"} <= set(scope["paths"]["d"])
    ingest = {row["policy"]: row for row in run["ingest"]}
    assert ingest["no merge"]["memories"] == 300 and ingest["merge"]["memories"] == 60
    assert all(row["per_second"] > 0 and row["seconds"] > 0 for row in ingest.values())
    assert ingest["no merge"]["actions"] == {"added": 300}
    assert run["index"]["live"]["docs"] == 300 and run["index"]["live"]["bytes_per_memory"] > 0
    assert run["index"]["force_merged"]["bytes_per_memory"] > 0
    assert len(run["targets"]) == 6 and all(t["met"] in (True, False, None) for t in run["targets"])  # five speed targets + (d)
    # the bench cleaned up after itself and never touched the prefix it was given
    leftovers = engine.request("GET", f"/_cat/indices/{installed}-bench-*", params={"format": "json"})
    scripts = engine.request("GET", "/_cluster/state/metadata", params={"filter_path": "metadata.stored_scripts"})
    assert leftovers == []
    assert not [s for s in scripts.get("metadata", {}).get("stored_scripts", {}) if s.startswith(f"{installed}-bench-")]
    assert mine.count("me") == 1 and check(engine, installed) == []


def test_cli_rejects_more_namespaces_than_memories(engine: Engine, prefix: str) -> None:
    group = click.Group()
    group.add_command(bench_cmd)
    res = CliRunner().invoke(group, ["bench", "--sizes", "10", "--namespaces", "20"],
                             obj={"url": engine.url, "prefix": prefix})
    assert res.exit_code == 2 and "namespaces" in res.output


def test_the_median_ingest_pass_is_reported_with_every_pass() -> None:
    from esmem.apps.bench import median_pass

    passes = [{"per_second": v, "seconds": 10 / v, "actions": {"added": n}} for n, v in enumerate([900.0, 1500.0, 1200.0])]
    assert median_pass(passes) == {**passes[2], "passes_per_second": [900.0, 1500.0, 1200.0]}
    assert median_pass(passes[:2])["per_second"] == 900.0  # an even count: the lower middle
    assert median_pass(passes[:1])["passes_per_second"] == [900.0]


def test_passes_combine_into_medians_with_the_spread_of_each_ratio() -> None:
    def one(a50: float, b50: float) -> dict[str, dict]:
        return {name: {"label": name, "n": 10, "p50": v, "p95": 2 * v, "p99": 3 * v, "mean": v,
                       "took": {"p50": v, "p95": v, "p99": v, "mean": v},
                       "ratio_p50": v / a50, "ratio_p95": v / a50, "ratio_p99": v / a50}
                for name, v in (("a", a50), ("b", b50))}

    combined = combine_passes([one(1.0, 1.2), one(2.0, 3.0), one(1.0, 1.1)])
    b = combined["b"]
    assert b["passes"] == 3 and b["n"] == 30
    assert b["p50"] == 1.2 and b["took"]["p50"] == 1.2            # medians of the passes
    assert b["ratio_p50"] == 1.2                                  # median of 1.2, 1.5, 1.1
    assert b["ratio_p50_spread"] == [1.1, 1.5]
    assert combined["a"]["ratio_p50_spread"] == [1.0, 1.0]


@pytest.mark.slow
def test_cli_repeat_reports_every_pass(engine: Engine, installed: str) -> None:
    res = _bench(engine, installed, "--sizes", "200", "--namespaces", "4", "--queries", "4",
                      "--merge-sample", "20", "--repeat", "3", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["config"]["repeat"] == 3
    for scope in report["runs"][0]["latency"]:
        for p in scope["paths"].values():
            assert p["passes"] == 3 and p["n"] == 3 * scope["queries"]
            lo, hi = p["ratio_p50_spread"]
            assert lo <= p["ratio_p50"] <= hi
    merged = next(row for row in report["runs"][0]["ingest"] if row["policy"] == "merge")
    assert len(merged["passes_per_second"]) == 3 and merged["per_second"] == sorted(merged["passes_per_second"])[1]
    assert merged["memories"] == 20 and sum(merged["actions"].values()) == 20  # each pass wrote the whole sample
    table = _bench(engine, installed, "--sizes", "200", "--namespaces", "4", "--queries", "4",
                   "--merge-sample", "20", "--repeat", "2")
    assert table.exit_code == 0 and "median of 2 interleaved passes" in table.stdout


def test_cli_skip_naive_leaves_out_path_d_and_its_target(engine: Engine, installed: str) -> None:
    res = _bench(engine, installed, "--sizes", "200", "--namespaces", "4", "--queries", "4",
                 "--merge-sample", "20", "--skip-naive", "--json")
    assert res.exit_code == 0, res.output
    (run,) = json.loads(res.stdout)["runs"]
    assert all(sorted(scope["paths"]) == ["a", "b", "c"] for scope in run["latency"])
    naive = [t for t in run["targets"] if t["target"].startswith("(d)")]
    assert [(t["value"], t["met"]) for t in naive] == [(None, None)]
    table = _bench(engine, installed, "--sizes", "200", "--namespaces", "4", "--queries", "4",
                   "--merge-sample", "20", "--skip-naive")
    assert table.exit_code == 0 and "naive fetch-all" not in table.stdout


def test_cli_inspector_reports_each_page_and_leaves_the_prefix_alone(engine: Engine, installed: str) -> None:
    mine = MemoryStore(engine, installed)
    mine.remember("my own memory: the report is due on Friday", "me", importance=5)
    res = _bench(engine, installed, "--inspector", "--sizes", "300", "--queries", "6", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["size"] == 300 and set(report["pages"]) == {"list", "filtered", "next page", "playground"}
    for name, p in report["pages"].items():
        assert p["n"] == (5 if name == "next page" else 6) and 0 < p["p50"] <= p["p95"] <= p["p99"], name
    assert report["target"]["met"] in (True, False)
    assert engine.request("GET", f"/_cat/indices/{installed}-bench-*", params={"format": "json"}) == []
    assert mine.count("me") == 1 and check(engine, installed) == []


@pytest.mark.slow
@pytest.mark.plain_http  # the `esmem serve` child connects by URL only
def test_cli_mixed_runs_every_phase_on_both_paths_without_errors_and_leaves_the_prefix_alone(
        engine: Engine, installed: str) -> None:
    mine = MemoryStore(engine, installed)
    mine.remember("my own memory: the standup moved to 10:00", "me", importance=5)
    res = _bench(engine, installed, "--mixed", "--sizes", "300", "--seconds", "1", "--recall-clients", "2",
                 "--remember-clients", "1", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["config"]["recall_clients"] == 2 and report["config"]["remember_clients"] == 1
    assert set(report["paths"]) == {"library", "library, touch=False", "library, 2 in flight", "serve",
                                    "serve, 2 in flight"}
    assert report["config"]["recalls_in_flight"] == 2
    for path, phases in report["paths"].items():
        assert {name: sorted(p["ops"]) for name, p in phases.items()} == {
            "remember alone": ["remember"], "recall alone": ["recall"], "mixed": ["recall", "remember"]}, path
        for name, p in phases.items():
            for op, o in p["ops"].items():
                assert o["errors"] == 0 and o["first_error"] is None, (path, name, op, o["first_error"])
                assert o["n"] > 0 and 0 < o["p50"] <= o["p99"], (path, name, op)
    assert {(r["ratio"], r["op"]) for r in report["ratios"]} >= {
        ("mixed / remember alone", "remember"), ("mixed / recall alone", "recall"),
        ("serve / library, mixed", "remember"), ("serve / library, mixed", "recall"),
        ("library / touch=False, mixed", "remember"), ("library / touch=False, recall alone", "recall"),
        ("2 in flight / library, mixed", "remember"), ("2 in flight / library, mixed", "recall")}
    assert [(t["target"], t["scope"]) for t in report["targets"]] == [
        ("remember p50 <= 100 ms", "library"), ("recall p99 <= 100 ms", "library"),
        ("remember p50 <= 100 ms", "library, 2 in flight"), ("recall p99 <= 100 ms", "library, 2 in flight"),
        ("remember p50 <= 100 ms", "serve"), ("recall p99 <= 100 ms", "serve"),
        ("remember p50 <= 100 ms", "serve, 2 in flight"), ("recall p99 <= 100 ms", "serve, 2 in flight"),
        ("serve adds <= 2 ms p50 (remember)", "mixed"), ("serve adds <= 2 ms p50 (recall)", "mixed")]
    assert engine.request("GET", f"/_cat/indices/{installed}-bench-*", params={"format": "json"}) == []
    assert mine.count("me") == 1 and check(engine, installed) == []


def test_history_bench_compares_the_same_active_memories_and_retention_spares_active_and_pinned(
        engine: Engine, prefix: str) -> None:
    from esmem.apps.bench_history import run_history

    report = run_history(engine, prefix, size=200, namespaces=4, queries=4, k=3, seed=2, dead=3)
    assert report["history"]["written"] == 600
    assert report["history"]["documents"] == {f"{prefix}-bench-history-0": 200, f"{prefix}-bench-history-3": 800}
    lat = report["latency"]
    assert set(lat["paths"]) == {"b0", "b3", "c0", "c3"} and all(p["n"] == 4 for p in lat["paths"].values())
    assert lat["ratio"]["b"]["p50"] == lat["paths"]["b3"]["p50"] / lat["paths"]["b0"]["p50"]
    r = report["retention"]
    assert r["due"] == r["deleted"] > 0 and r["remaining"] == 0
    assert r["before"]["pinned"] == r["after"]["pinned"] > 0  # pinned: never erased
    # only active events (the one kind with a time to live) left the active memories
    assert r["before"]["active"] - r["after"]["active"] == r["before"]["active_event"] - r["after"]["active_event"] > 0
    assert r["deleted"] - (r["before"]["active"] - r["after"]["active"]) < 600  # part of the history, not all
    for left in (f"{prefix}-bench-history-0", f"{prefix}-bench-history-3"):  # the bench cleans up after itself
        with pytest.raises(NotInstalled):
            require_installed(engine, left)


@pytest.mark.plain_http  # the TCP relay forwards plain HTTP
def test_a_force_merge_waits_for_the_merge_however_short_the_stores_timeout(engine_url: str, prefix: str) -> None:
    from urllib.parse import urlparse

    from esmem.domain.installation import install
    from esmem.errors import EsmemError
    from esmem.index.catalog import Catalog
    from esmem.index.engine import Engine
    from relay import Relay

    u = urlparse(engine_url)
    relay = Relay((u.hostname, u.port))
    quick = Engine(relay.url, timeout=1.0)
    try:
        install(Engine(engine_url), prefix)
        relay.arm("_forcemerge", 1, delay=2.0)  # a merge that takes longer than the store's timeout
        assert Catalog(quick, prefix).store_stats(force_merge=True)["docs"]["count"] == 0 and relay.fired
        relay.arm("_forcemerge", 1, delay=2.0)
        with pytest.raises(EsmemError):  # any other call with that timeout gives up
            quick.request("POST", f"/{Catalog(quick, prefix).alias}/_forcemerge", params={"max_num_segments": 1})
    finally:
        quick.close()
        relay.close()
