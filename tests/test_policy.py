"""Decay policy: files and code produce the RecallParams the engine ranks with; mistakes name their key."""
from __future__ import annotations

import json
import re
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from esmem.domain.merge import MergePolicy
from esmem.domain.policy import DecayPolicy, load_policy
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import ConfigError
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)

TOML = """
default_half_life = "60d"
evergreen_kinds = ["rule"]
rho = 0.25
[half_lives]
intent = "3d"
preference = "none"
[recall]
mode = "multiply"
recent_n = 2
mmr = false
"""


def test_defaults_are_esmems_defaults() -> None:
    assert DecayPolicy().params() == RecallParams()


def test_a_toml_file_and_its_json_twin_give_the_same_params(tmp_path: Path) -> None:
    (tmp_path / "p.toml").write_text(TOML, encoding="utf-8")
    if sys.version_info < (3, 11):  # no tomllib: a clear error pointing to JSON, never a crash
        with pytest.raises(ConfigError, match="JSON"):
            load_policy(tmp_path / "p.toml")
        return
    (tmp_path / "p.json").write_text(json.dumps({
        "default_half_life": "60d", "evergreen_kinds": ["rule"], "rho": 0.25,
        "half_lives": {"intent": "3d", "preference": None}, "recall": {"mode": "multiply", "recent_n": 2, "mmr": False},
    }), encoding="utf-8")
    toml, js = load_policy(tmp_path / "p.toml"), load_policy(tmp_path / "p.json")
    assert toml == js
    p = toml.params()
    assert p.half_life == 60 * DAY and p.rho == 0.25 and p.mode == "multiply" and p.recent_n == 2 and not p.mmr
    assert p.kind_half_lives["intent"] == 3 * DAY and p.kind_half_lives["preference"] is None
    assert p.kind_half_lives["rule"] is None  # evergreen
    assert "event" not in p.kind_half_lives and p.half_life_of("event") == 60 * DAY  # not named: the default
    assert toml.as_dict()["half_lives"]["intent"] == "3d"


def test_a_policy_in_code_on_top_of_other_params() -> None:
    policy = DecayPolicy(half_lives={"intent": timedelta(days=2), "event": "12h"}, default_half_life=None)
    p = policy.params(RecallParams(mode="weighted", window=50))
    assert (p.mode, p.window, p.half_life) == ("weighted", 50, None)
    assert p.half_life_of("intent") == 2 * DAY and p.half_life_of("event") == timedelta(hours=12)


@pytest.mark.parametrize("data, message", [
    ({"half_lives": {"mood": "3d"}}, "half_lives.mood: unknown kind 'mood'"),
    ({"half_lives": {"intent": "-7d"}}, "half_lives.intent: half-life must be positive"),
    ({"half_lives": {"intent": "0h"}}, "half_lives.intent: half-life must be positive"),
    ({"half_lives": {"intent": -7}}, "half_lives.intent: expected a duration"),
    ({"half_lives": {"intent": "soon"}}, "half_lives.intent: invalid duration 'soon'"),
    ({"half_lives": ["intent"]}, "half_lives: expected a table"),
    ({"default_half_life": "-1d"}, "default_half_life: half-life must be positive"),
    ({"evergreen_kinds": ["forever"]}, "evergreen_kinds: unknown kind 'forever'"),
    ({"evergreen_kinds": "rule"}, "evergreen_kinds: expected a list"),
    ({"evergreen_kinds": ["rule"], "half_lives": {"rule": "7d"}}, "half_lives.rule: rule is an evergreen kind"),
    ({"rho": 1.5}, "rho: must be a number in 0..1"),
    ({"recall": {"half_life": "7d"}}, "recall.half_life: set it with the policy's default_half_life key"),
    ({"recall": {"hl.intent": "7d"}}, "recall.hl.intent: set it with the policy's half_lives key"),
    ({"recall": {"speed": 3}}, "recall: unknown recall parameter 'speed'"),
    ({"recall": {"w": 3}}, "recall: w out of range"),
    ({"recall": {"kinds": ["mood"]}}, "recall: unknown kind 'mood'"),
    ({"half_life": "7d"}, "unknown policy key 'half_life'"),
])
def test_bad_policies_name_the_key(tmp_path: Path, data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DecayPolicy.from_dict(data)
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(f"policy file {path}: ") + message):
        load_policy(path)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read policy file"):
        load_policy(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="must end in .toml or .json"):
        load_policy(tmp_path / "policy.yaml")
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_policy(tmp_path / "bad.json")
    (tmp_path / "bad.toml").write_text("half_lives = [", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML" if sys.version_info >= (3, 11) else "Python 3.11"):
        load_policy(tmp_path / "bad.toml")


def test_the_engine_decays_each_kind_by_the_policy(engine, installed) -> None:
    policy = DecayPolicy(half_lives={"intent": "7d", "preference": "180d", "fact": "none"},
                         recall={"mode": "multiply", "mmr": False, "must_not_miss": False})
    store = MemoryStore(engine, installed, params=policy.params(), merge=MergePolicy(enabled=False),
                        clock=lambda: NOW)
    text = "weekend trip to the mountains near Hangzhou"
    store.remember_many([MemoryInput(f"{text} ({kind})", "pol", kind=kind, importance=5, valid_from=NOW - 7 * DAY)
                         for kind in ("intent", "preference", "fact")])
    res = store.recall("weekend trip mountains Hangzhou", "pol", 3, now=NOW, touch=False)
    got = {r.memory.kind: r for r in res.items}
    assert got["intent"].recency == pytest.approx(0.5, rel=1e-6)
    assert got["preference"].recency == pytest.approx(0.5 ** (7 / 180), rel=1e-6)
    assert got["fact"].recency == 1.0
    # the engine's scores follow: same relevance, so score ratios are the recency ratios
    assert got["intent"].score / got["fact"].score == pytest.approx(0.5, rel=1e-4)
    assert [r.memory.kind for r in sorted(got.values(), key=lambda r: -r.score)] == ["fact", "preference", "intent"]


def test_evergreen_kinds_are_written_evergreen_and_never_missed(engine, installed) -> None:
    policy = DecayPolicy(evergreen_kinds=["rule"])
    store = MemoryStore(engine, installed, params=policy.params(), clock=lambda: NOW)
    rule = store.remember_many([policy.apply(MemoryInput("Answer in Chinese unless asked otherwise", "ever",
                                                         kind="rule", importance=3, valid_from=NOW - 400 * DAY))])[0]
    fact = store.remember_many([policy.apply(MemoryInput("Uses a standing desk", "ever", importance=3))])[0]
    assert store.get("ever", rule.id).evergreen and not store.get("ever", fact.id).evergreen
    # pinned: the evergreen rule comes back (in the pinned section) for a query that shares no word with it
    got = store.recall("standing desk", "ever", 5, now=NOW, touch=False)
    assert {r.memory.id for r in got.items} == {fact.id} and [m.id for m in got.pinned] == [rule.id]
    old = store.recall("standing desk", "ever", 5, now=NOW, touch=False,
                       params=policy.params().with_(must_not_miss=True, pinned=0))  # the ranked slot of before
    assert {r.memory.id for r in old.items} == {rule.id, fact.id}
    assert next(r for r in old.items if r.memory.id == rule.id).recency == 1.0
