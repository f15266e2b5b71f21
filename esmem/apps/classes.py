"""Class checks of `esmem eval` beyond rank metrics (pinned reach, intrusion), and the comparison with a
saved run.

A query of a class set may name, besides `gold`:
- `must_reach`: memories that must reach the agent's context - the ranked top-k or the pinned
  section (esmem/domain/pinned.py). `reach` is the fraction of them that did (mean over such queries).
- `not_ranked`: memories that must not take a ranked top-k slot (an allergy in an ops query).
  `intrude@k` is the fraction of such queries where one did.
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from esmem.errors import InvalidInput

CLASS_METRICS = ("reach", "intrude@k")
# The previous ranking defaults (no neighbour context, pinned section or resolution; MMR on index tokens at
# lambda 0.7, every similarity a redundancy), as recall overrides: `esmem eval --previous` runs them too, to
# show what the current ones change.
PREVIOUS_DEFAULTS = {"neighbour_boost": "0", "neighbour_prev": "0", "neighbour_next": "0", "must_not_miss": "true",
                     "pinned": "0", "resolve": "false", "mmr_similarity": "tokens", "mmr_lambda": "0.7",
                     "mmr_threshold": "0"}
COMPARED = ("p@1", "r@3", "r@5", "r@10", "mrr", "stale@1", "reach", "intrude@k")


def class_metrics(outcomes: Sequence[Any]) -> dict[str, float]:
    """reach and intrude@k over the queries that ask for them (absent when none does)."""
    out: dict[str, float] = {}
    reach = [o for o in outcomes if o.query.must_reach]
    if reach:
        out["reach"] = statistics.fmean(
            len(set(o.query.must_reach) & (set().union(*o.ranked[:o.k], *o.pinned))) / len(o.query.must_reach)
            for o in reach)
    guarded = [o for o in outcomes if o.query.not_ranked]
    if guarded:
        out["intrude@k"] = statistics.fmean(
            1.0 if set().union(*o.ranked[:o.k]) & set(o.query.not_ranked) else 0.0 for o in guarded)
    return out


def load_saved(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """A saved `esmem eval --json` run: {label: {group: metrics}} (one run or several)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidInput(f"cannot read saved run {path}: {e}") from None
    runs = data["runs"] if isinstance(data, dict) and "runs" in data else [dict(data, label="esmem")]
    try:
        return {r["label"]: {"overall": r["overall"], **r["groups"]} for r in runs}
    except (KeyError, TypeError):
        raise InvalidInput(f"{path} is not the output of `esmem eval --json`") from None


def changes(now: Mapping[str, Mapping[str, float]], before: Mapping[str, Mapping[str, float]]) -> list[tuple[str, str]]:
    """Per group, what moved by at least 0.05 points: [(group, "p@1 71.4% -> 100.0%  stale@1 ..."), ...]."""
    out = []
    for group, m in now.items():
        old = before.get(group)
        if old is None:
            out.append((group, "not in the saved run"))
            continue
        moved = [f"{key} {_pct(key, old[key])} -> {_pct(key, m[key])}" for key in COMPARED
                 if key in m and key in old and not _same(m[key], old[key])]
        out.append((group, "  ".join(moved) or "unchanged"))
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) < 5e-4


def _pct(key: str, v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.3f}" if key == "mrr" else f"{v * 100:.1f}%"


def print_class_checks(console: Any, results: Sequence[tuple[str, Mapping[str, Any]]],
                       saved: Mapping[str, Mapping[str, Mapping[str, float]]] | None) -> None:
    """The class checks of every run (when the dataset asks for them), then the changes against
    `saved` (the run of the same label, else the saved run's first) and, when a run is labelled
    "previous defaults", the changes of the first run against it."""
    from rich.markup import escape
    from rich.table import Table

    rows = [(label, group, m) for label, rep in results
            for group, m in [("overall", rep["overall"]), *rep["groups"].items()]
            if any(c in m for c in CLASS_METRICS)]
    if rows:
        table = Table(title="class checks (reach: must_reach in top-k or pinned; intrude@k: a not_ranked memory in top-k)")
        for col in ("run", "group", *CLASS_METRICS):
            table.add_column(col, justify="right")
        for label, group, m in rows:
            table.add_row(label, group, *(_pct(c, m[c]) if c in m else "-" for c in CLASS_METRICS))
        console.print(table)
    previous = dict(results).get("previous defaults")
    if previous is not None:
        before: Mapping[str, Mapping[str, float]] = {"overall": previous["overall"], **previous["groups"]}
        for group, line in changes({"overall": results[0][1]["overall"], **results[0][1]["groups"]}, before):
            console.print(escape(f"vs previous defaults {group}: {line}"))
    if saved:
        for label, rep in results:
            before = saved.get(label) or next(iter(saved.values()))
            for group, line in changes({"overall": rep["overall"], **rep["groups"]}, before):
                console.print(escape(f"vs saved [{label}] {group}: {line}"))
