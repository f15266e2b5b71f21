"""`esmem config / stats / context` through click, on the real engine; bad input is one line + exit 2."""
from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from esmem.apps.stats import collect
from esmem.cli.agent import config_cmd, context_cmd, stats_cmd
from esmem.cli.main import Group
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams, default_values
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)


@click.group(cls=Group)
def agent_cli() -> None:
    """The agent commands alone, as esmem.cli.main will register them."""


for _cmd in (config_cmd, stats_cmd, context_cmd):
    agent_cli.add_command(_cmd)


@pytest.fixture
def run(engine, prefix):
    def invoke(*args: str) -> Result:
        return CliRunner().invoke(agent_cli, list(args), obj={"url": engine.url, "prefix": prefix})
    return invoke


REDIS = "订单服务的缓存用 Redis 7，maxmemory-policy 配的是 allkeys-lru"
HIKING = "用户周末喜欢去徒步，偏爱越野路线"
HOTEL = "正在找杭州开会期间的酒店"


@pytest.fixture
def memories(engine, installed) -> MemoryStore:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    store.remember_many([
        MemoryInput(REDIS, "cli", importance=5, valid_from=NOW - 21 * DAY),
        MemoryInput(HIKING, "cli", kind="preference", importance=5, valid_from=NOW - 60 * DAY),
        MemoryInput(HOTEL, "cli", kind="intent", importance=4, valid_from=NOW - timedelta(hours=1)),
    ])
    return store


def _one_line_error(res: Result, needle: str) -> None:
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1 and needle in res.stderr
    assert "Traceback" not in res.output


# -- config ------------------------------------------------------------------------------------
def test_config_shows_the_effective_params(run, installed: str, tmp_path: Path) -> None:
    res = run("config", "--json")  # with a cluster: the defaults installed there (esmem's built-in ones)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["defaults"] == default_values(RecallParams())
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"half_lives": {"intent": "3d"}, "evergreen_kinds": ["rule"],
                                  "recall": {"mode": "multiply"}}), encoding="utf-8")
    res = run("config", "--file", str(policy), "--set", "recent_n=4")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == f"policy: {policy}"
    for expected in ("  evergreen_kinds      rule", "  mode                 multiply", "  recent_n             4",
                     "  hl.intent            3d", "  hl.rule              none"):
        assert expected in lines


@pytest.mark.parametrize("policy, needle", [
    ({"half_lives": {"mood": "3d"}}, "half_lives.mood: unknown kind 'mood'"),
    ({"half_lives": {"intent": "-7d"}}, "half_lives.intent: half-life must be positive"),
])
def test_config_with_a_bad_policy_is_one_line_and_exit_2(run, tmp_path: Path, policy: dict, needle: str) -> None:
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(policy), encoding="utf-8")
    _one_line_error(run("config", "--file", str(path)), needle)
    _one_line_error(run("config", "--file", str(tmp_path / "missing.toml")), "cannot read policy file")


# -- stats -------------------------------------------------------------------------------------
def test_stats_json_text_and_plot(run, memories: MemoryStore, tmp_path: Path) -> None:
    memories.recall("Redis 缓存", "cli", 1, now=NOW)
    res = run("stats", "-n", "cli", "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data == json.loads(json.dumps(collect(memories, "cli").as_dict()))
    assert data["active"] == 3 and data["recalled"] == 1 and data["most_recalled"][0]["content"].startswith("订单服务")
    png = tmp_path / "stats.png"
    res = run("stats", "--plot", str(png))
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("3 memories (3 active) in 1 namespace under prefix")
    assert "recalled 1, never recalled 2" in res.stdout and f"plot written to {png}" in res.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_stats_before_install_is_one_line_and_exit_2(run) -> None:
    res = run("stats")
    assert res.exit_code == 2 and res.stderr.startswith("error: ") and res.stderr.count("\n") == 1


# -- context -----------------------------------------------------------------------------------
def test_context_for_a_query_within_the_budget(run, memories: MemoryStore) -> None:
    res = run("context", "Redis 缓存", "-n", "cli", "--budget", "200", "--now", "2026-10-08T12:00:00Z")
    assert res.exit_code == 0, res.output
    block = res.stdout.removesuffix("\n")
    assert len(block) <= 200
    assert block.splitlines()[:2] == ["## Relevant memories", f"- [fact, 3 weeks ago (2026-09-17)] {REDIS}"]
    assert "## Recent conversation" in block and "酒店" in block
    assert f"{len(block)} of 200 chars" in res.stderr


def test_context_from_messages_builds_the_query_from_the_dialogue(run, memories: MemoryStore, tmp_path: Path) -> None:
    conversation = tmp_path / "conversation.json"
    conversation.write_text(json.dumps({"messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Redis 的 maxmemory-policy 该怎么配？"},
        {"role": "assistant", "content": "热点数据多的话 Redis 用 allkeys-lfu 更合适。"},
        {"role": "user", "content": "好的，继续"},
    ]}, ensure_ascii=False), encoding="utf-8")
    res = run("context", "-n", "cli", "--from-messages", str(conversation), "--json", "--recent", "0")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert "Redis" in data["query"] and "继续" not in data["query"]
    assert data["text"].splitlines()[1].endswith(REDIS)
    assert data["chars"] == len(data["text"]) and data["namespace_chars"] == len(REDIS + HIKING + HOTEL)


def test_context_with_a_policy_file(run, memories: MemoryStore, tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"recall": {"kinds": ["preference"], "must_not_miss": False}}), encoding="utf-8")
    res = run("context", "徒步 Redis", "-n", "cli", "--policy", str(policy), "--recent", "0", "--json")
    assert res.exit_code == 0, res.output
    text = json.loads(res.stdout)["text"]
    assert "徒步" in text and "Redis" not in text  # the policy's kinds filter reached the engine


def test_context_bad_input_is_one_line_and_exit_2(run, memories: MemoryStore, tmp_path: Path) -> None:
    fillers = tmp_path / "fillers.json"
    fillers.write_text(json.dumps([{"role": "user", "content": "好的"}, {"role": "user", "content": "继续"}]),
                       encoding="utf-8")
    broken = tmp_path / "broken.json"
    broken.write_text("[{", encoding="utf-8")
    bad_policy = tmp_path / "bad.json"
    bad_policy.write_text(json.dumps({"half_lives": {"intent": "-1d"}}), encoding="utf-8")
    _one_line_error(run("context", "-n", "cli", "--from-messages", str(tmp_path / "missing.json")),
                    "cannot read messages file")
    _one_line_error(run("context", "-n", "cli", "--from-messages", str(broken)), "not valid JSON")
    _one_line_error(run("context", "-n", "cli", "--from-messages", str(fillers)), "only fillers")
    _one_line_error(run("context", "Redis", "-n", "cli", "--policy", str(bad_policy)), "half_lives.intent")
    _one_line_error(run("context", "-n", "cli"), "either QUERY or --from-messages")
    _one_line_error(run("context", "Redis", "-n", "bad namespace!"), "invalid namespace")
