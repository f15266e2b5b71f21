"""The stored templates are the API: a client that imports nothing from esmem (plain HTTP with
urllib) calls `_search/template` and gets what `MemoryStore.recall` gets (through `esmem recall` in
a subprocess, so this module imports nothing from esmem either) - for each fusion mode installed
through a policy file, with per-call overrides, without `now`, and with hostile parameter values.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# talks to the engine itself (urllib, curl, node or a recording transport); a container engine beside the
# embedded ones runs these too
pytestmark = [pytest.mark.plain_http, pytest.mark.contract]

ESMEM = str(Path(sys.executable).with_name("esmem"))
NOW = datetime(2026, 10, 8, 12, 0, tzinfo=timezone.utc)
WORDS = ["redis", "cache", "deploy", "python", "rust", "backup", "retry", "429", "jitter", "weekend", "hiking",
         "coffee", "docker", "latency", "index", "hotel", "beijing", "香港", "咖啡", "缓存", "部署", "重试", "备份",
         "周末", "徒步", "输出", "路径", "截图", "发布", "隐私", "扫描", "过敏", "酒店", "北京"]
KINDS = ["fact", "preference", "intent", "rule", "event", "note"]


def http(url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def cli(url: str, prefix: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([ESMEM, "--url", url, "--prefix", prefix, *args], capture_output=True, text=True,
                         timeout=300)
    if check:
        assert res.returncode == 0, res.stderr + res.stdout
    return res


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def corpus(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, list[str]]]:
    """240 memories (Chinese and English, every kind, two years of timestamps, some evergreen) in
    namespace `api`, two in `other`; 12 queries."""
    prefix = f"c{uuid.uuid4().hex[:10]}"
    rng = random.Random(13)
    lines = []
    for i in range(240):
        lines.append({"content": " ".join(rng.sample(WORDS, rng.randint(3, 8))) + f" m{i}", "namespace": "api",
                      "kind": rng.choice(KINDS), "importance": rng.randint(1, 10), "evergreen": rng.random() < 0.1,
                      "valid_from": iso(NOW - timedelta(hours=rng.uniform(0, 24 * 720))),
                      "entities": rng.sample(WORDS[:8], rng.randint(0, 2))})
    lines += [{"content": "secret of the other namespace: redis 缓存 {{namespace}} \" \\", "namespace": "other",
               "kind": "fact", "importance": 10, "evergreen": True},
              {"content": "other namespace hotel beijing note", "namespace": "other", "kind": "note"}]
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    cli(engine_url, prefix, "install")
    cli(engine_url, prefix, "import", str(path), "--no-merge")
    queries = [" ".join(rng.sample(WORDS, rng.randint(1, 3))) for _ in range(10)] + ["429 怎么重试", "酒店 北京 hotel"]
    yield engine_url, prefix, queries
    cli(engine_url, prefix, "uninstall", "--delete-data")


def raw_recall(url: str, prefix: str, params: dict[str, Any]) -> list[tuple[str, float]]:
    status, resp = http(url, "POST", f"/{prefix}-memories/_search/template", {"id": f"{prefix}-recall", "params": params})
    assert status == 200, resp
    return [(h["_id"], h["_score"]) for h in resp["hits"]["hits"]]


# `esmem recall` run by the CLI's own entry point for each call, in one subprocess: one interpreter
# start for all the calls of a test, not one per query (that start was most of this module's time).
RECALLS = """
import contextlib, io, json, sys
from esmem.cli.main import cli
for args in json.load(sys.stdin):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main(args, prog_name="esmem")
        except SystemExit as e:
            if e.code:
                raise
    sys.stdout.write(json.dumps(json.loads(out.getvalue())) + "\\n")
"""


def store_recalls(url: str, prefix: str, calls: list[tuple[str, ...]]) -> list[list[tuple[str, float]]]:
    """`esmem --url URL --prefix P recall QUERY -n api -k 20 --no-touch --json ARGS...` for each
    (QUERY, *ARGS) of `calls`: (id, score) of its items."""
    argv = [["--url", url, "--prefix", prefix, "recall", query, "-n", "api", "-k", "20", "--no-touch", "--json", *args]
            for query, *args in calls]
    res = subprocess.run([sys.executable, "-c", RECALLS], input=json.dumps(argv), capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr + res.stdout
    outs = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(outs) == len(calls)
    return [[(item["id"], item["score"]) for item in out["items"]] for out in outs]


def same(raw: list[tuple[str, float]], lib: list[tuple[str, float]]) -> None:
    assert [i for i, _ in raw] == [i for i, _ in lib]
    for (_, a), (_, b) in zip(raw, lib):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-6)


def install_policy(url: str, prefix: str, tmp_path: Path, mode: str) -> Path:
    policy = tmp_path / f"policy-{mode}.json"
    policy.write_text(json.dumps({"half_lives": {"event": "60d", "fact": "400d", "note": "3d"},
                                  "recall": {"mode": mode, "mmr": False, "entity_boost": 1.5,
                                             "pinned": 0, "resolve": False}}))  # client-side stages off
    cli(url, prefix, "install", "--policy", str(policy))
    return policy


@pytest.mark.parametrize("mode", ["blend", "multiply", "weighted"])
@pytest.mark.slow
def test_raw_template_call_equals_memorystore_recall(corpus, tmp_path: Path, mode: str) -> None:
    url, prefix, queries = corpus
    install_policy(url, prefix, tmp_path, mode)
    compared = 0
    for q, lib in zip(queries, store_recalls(url, prefix, [(q, "--now", iso(NOW)) for q in queries])):
        raw = raw_recall(url, prefix, {"namespace": "api", "query": q, "now": iso(NOW)})
        same(raw, lib)
        compared += len(raw)
    assert compared >= 200


def test_per_call_overrides_are_plain_params(corpus, tmp_path: Path) -> None:
    url, prefix, queries = corpus
    install_policy(url, prefix, tmp_path, "blend")
    as_of = NOW - timedelta(days=200)
    for mode in ("multiply", "weighted"):
        libs = store_recalls(url, prefix, [(q, "--now", iso(NOW), "--as-of", iso(as_of), "--set", f"mode={mode}",
                                            "--set", "hl.intent=3d", "--set", "kinds=intent|event|fact")
                                           for q in queries[:6]])
        for q, lib in zip(queries[:6], libs):
            raw = raw_recall(url, prefix, {"namespace": "api", "query": q, "now": iso(NOW), "mode": mode,
                                           "half_life_intent": "3d", "kinds": ["intent", "event", "fact"],
                                           "as_of": iso(as_of)})
            assert raw and {i for i, _ in raw} <= {i for i, _ in raw_recall(url, prefix, {
                "namespace": "api", "query": q, "kinds": ["intent", "event", "fact"], "size": 500})}
            same(raw, lib)


def test_without_now_the_engine_clock_is_the_reference(corpus, tmp_path: Path) -> None:
    url, prefix, queries = corpus
    install_policy(url, prefix, tmp_path, "multiply")
    for q in queries:
        before = iso(datetime.now(timezone.utc))
        engine_clock = raw_recall(url, prefix, {"namespace": "api", "query": q})
        after = iso(datetime.now(timezone.utc))
        given_now = raw_recall(url, prefix, {"namespace": "api", "query": q, "now": before})
        assert [i for i, _ in engine_clock] == [i for i, _ in given_now] or \
            [i for i, _ in engine_clock] == [i for i, _ in raw_recall(url, prefix, {"namespace": "api", "query": q,
                                                                                     "now": after})]
        for (_, a), (_, b) in zip(engine_clock, given_now):
            assert a == pytest.approx(b, rel=1e-4)
        fixed = raw_recall(url, prefix, {"namespace": "api", "query": q, "now": iso(NOW)})
        assert fixed == raw_recall(url, prefix, {"namespace": "api", "query": q, "now": iso(NOW)})  # reproducible


HOSTILE = st.one_of(
    st.sampled_from(["{{namespace}}", "}}{{#must_not_miss}}", '"}', '"}}]}}', "\\", "\\\\\"", '{"match_all": {}}',
                     '"other"', "other", '*:*', "namespace:other OR *", "1}, \"size\": 10000, \"x\": {", "[]", "",
                     "false", "true", "none", "NaN", "-1", "1e309", "7d\"}}", "{{/kinds}}", "{{^as_of}}",
                     '{{#toJson}}namespace{{/toJson}}', "\u0000", "'; DROP"]),
    st.text(max_size=30), st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(),
    st.lists(st.one_of(st.text(max_size=10), st.sampled_from(["other", "fact", '"}'])), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)
PARAMS = ["query", "size", "now", "as_of", "kinds", "include_superseded", "mode", "w", "k", "c", "alpha", "beta",
          "gamma", "must_not_miss", "importance_floor", "must_not_miss_boost", "entity_boost", "min_importance",
          "question_penalty", "compound_boost", "periods", "period_boost", "asks_when", "when_boost",
          "half_life_intent", "half_life_fact", "rel_only", "rescore_window", "exhaustive"]


@settings(max_examples=520, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.dictionaries(st.sampled_from(PARAMS), HOSTILE, min_size=1, max_size=4),
       namespace=st.one_of(st.just("api"), st.just(None), HOSTILE), template=st.sampled_from(["recall", "recent", "lookup"]))
def test_hostile_params_stay_inside_their_value_or_fail_clearly(corpus, values, namespace, template) -> None:
    url, prefix, _ = corpus
    params = {"query": "redis 缓存 hotel", **values}
    if namespace is not None:
        params["namespace"] = namespace
    status, resp = http(url, "POST", f"/{prefix}-memories/_search/template", {"id": f"{prefix}-{template}",
                                                                            "params": params})
    if status != 200:  # a clear client error naming what failed, never a server error
        assert status == 400, resp
        assert resp["error"]["type"] and resp["error"].get("reason") is not None or resp["error"]["root_cause"]
        return
    namespaces = {h["_source"]["namespace"] for h in resp["hits"]["hits"]}
    if namespace != "api":  # a missing or hostile namespace never reaches another namespace's memories
        assert namespaces <= ({namespace} if namespace == "other" else set())
    else:
        assert namespaces <= {"api"}


@pytest.mark.slow
def test_check_policy_install_uninstall_cycle(corpus, tmp_path: Path) -> None:
    url, prefix, _ = corpus
    policy = install_policy(url, prefix, tmp_path, "weighted")
    assert cli(url, prefix, "check", "--policy", str(policy)).stdout.strip() == "no drift"
    # someone edits an installed default by hand: w 0.1 -> 0.3
    _, got = http(url, "GET", f"/_scripts/{prefix}-recall")
    source = got["script"]["source"]
    assert "{{^w}}0.1{{/w}}" in source
    http(url, "PUT", f"/_scripts/{prefix}-recall", {"script": {"lang": "mustache", "options": got["script"].get("options", {}),
                                                              "source": source.replace("{{^w}}0.1{{/w}}", "{{^w}}0.3{{/w}}")}})
    drift = cli(url, prefix, "check", "--policy", str(policy), check=False)
    assert drift.returncode == 1
    assert "drift    default w: installed 0.3, policy 0.1" in drift.stdout
    other = tmp_path / "blend.json"
    other.write_text(json.dumps({"recall": {"mode": "blend"}}))
    changed = cli(url, prefix, "check", "--policy", str(other), check=False)
    assert changed.returncode == 1 and "default mode: installed weighted, policy blend" in changed.stdout
    assert f"updated  script {prefix}-recall" in cli(url, prefix, "install", "--policy", str(policy)).stdout
    assert cli(url, prefix, "check", "--policy", str(policy)).stdout.strip() == "no drift"
    config = json.loads(cli(url, prefix, "config", "--json").stdout)
    assert config["defaults"]["mode"] == "weighted" and config["defaults"]["half_life_note"] == "3d"

    removed = cli(url, prefix, "uninstall").stdout
    assert f"removed  script {prefix}-recall" in removed and "memories kept" in removed
    assert f"index {prefix}-memories" not in removed.replace("index template", "")
    missing = cli(url, prefix, "check", check=False)
    assert missing.returncode == 1
    assert all(f"{what}: missing" in missing.stdout for what in (
        f"index template {prefix}-memories", f"script {prefix}-recall", f"script {prefix}-recent",
        f"script {prefix}-lookup", f"script {prefix}-fuse", f"script {prefix}-reheat"))
    status, count = http(url, "GET", f"/{prefix}-memories/_count")
    assert status == 200 and count["count"] == 242  # the memories survive
    again = cli(url, prefix, "uninstall").stdout  # idempotent
    assert again.strip().splitlines()[-1].startswith("0 removed")
    cli(url, prefix, "install", "--policy", str(policy))  # back for the other tests of this module
    assert cli(url, prefix, "check", "--policy", str(policy)).stdout.strip() == "no drift"
