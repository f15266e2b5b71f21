"""Class checks of `esmem eval` (reach, intrude@k), --compare and --previous (esmem/classes.py)."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from esmem.apps.classes import changes, class_metrics, load_saved
from esmem.cli.main import cli
from esmem.errors import InvalidInput
from esmem.apps.evaluate import Query, QueryOutcome, metrics

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
DATASETS = Path(__file__).resolve().parents[1] / "datasets"


def _o(ranked, pinned=(), gold=(), must=(), forbid=(), k=3) -> QueryOutcome:
    q = Query("q", "n", "t", NOW, tuple(gold), (), "g", tuple(must), tuple(forbid))
    return QueryOutcome(q, tuple(frozenset(r) for r in ranked), 10, 100, 1.0, None,
                        tuple(frozenset(p) for p in pinned), k)


def test_reach_counts_ranked_top_k_and_pinned_and_intrude_only_the_ranked_top_k() -> None:
    outcomes = [_o([["a"], ["b"], ["c"], ["x"]], pinned=[["p"]], must=["p", "x"]),  # x is below k: 1 of 2
                _o([["a"]], must=["a"]),
                _o([["a"], ["p"]], gold=["a"], forbid=["p"]),
                _o([["a"], ["b"], ["c"], ["p"]], gold=["a"], forbid=["p"])]
    got = class_metrics(outcomes)
    assert got == {"reach": pytest.approx(0.75), "intrude@k": pytest.approx(0.5)}
    m = metrics(outcomes)  # rank metrics only over the queries with gold
    assert m["p@1"] == 1.0 and m["queries"] == 4 and m["reach"] == pytest.approx(0.75)


def test_changes_name_what_moved(tmp_path: Path) -> None:
    before = {"overall": {"p@1": 0.5, "stale@1": 0.4, "reach": 0.75}}
    now = {"overall": {"p@1": 0.5, "stale@1": 0.0, "reach": 1.0}, "new": {"p@1": 1.0}}
    assert dict(changes(now, before)) == {"overall": "stale@1 40.0% -> 0.0%  reach 75.0% -> 100.0%",
                                          "new": "not in the saved run"}
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(InvalidInput):
        load_saved(bad)


def test_eval_prints_the_class_checks_and_what_changed_against_previous_defaults(engine, prefix, tmp_path) -> None:
    runner = CliRunner()
    saved = tmp_path / "run.json"
    first = runner.invoke(cli, ["--url", engine.url, "--prefix", prefix, "eval", str(DATASETS / "pinned.jsonl"),
                                "--set", "pinned=0", "--set", "must_not_miss=true", "--json"])
    assert first.exit_code == 0, first.output
    saved.write_text(first.stdout)
    assert json.loads(first.stdout)["overall"]["intrude@k"] > 0
    res = runner.invoke(cli, ["--url", engine.url, "--prefix", prefix, "eval", str(DATASETS / "pinned.jsonl"),
                              "--previous", "--compare", str(saved), "--no-misses"])
    assert res.exit_code == 0, res.output
    assert "vs previous defaults unrelated: intrude@k 100.0% -> 0.0%" in res.stdout
    line = next(x for x in res.stdout.splitlines() if x.startswith("vs saved [esmem] must-reach: "))
    assert line.startswith("vs saved [esmem] must-reach: reach ") and line.endswith("-> 100.0%")
