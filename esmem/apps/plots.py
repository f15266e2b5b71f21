"""Every chart esmem draws (stats dashboard, eval sweep, bench), behind one guarded import.

matplotlib is optional (`esmem[plot]`): `require()` is called before the work whose result is
plotted, so a missing matplotlib is a one-line error at the start, not a traceback after a long run.
"""
from __future__ import annotations

import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from esmem.domain.ranking import RecallParams, recency
from esmem.errors import ConfigError, InvalidInput
from esmem.values import KINDS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from esmem.apps.stats import Stats


NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
AGES_DAYS = [d / 2 for d in range(0, 2 * 366)]  # one year, half-day steps


def decay_curves(params: RecallParams) -> dict[str, list[float]]:
    """Recency of a memory of each kind at each age of AGES_DAYS (1.0 throughout: it never decays);
    no matplotlib needed (the docs' figure and the inspector's stats page draw these)."""
    return {kind: [recency({"kind": kind, "valid_from": (NOW - timedelta(days=age)).isoformat()}, params, NOW)
                   for age in AGES_DAYS] for kind in KINDS}


def require() -> None:
    """Fail early, with the install hint, when matplotlib is missing."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError("plotting needs matplotlib: pip install 'esmem[plot]'") from None


def _figure(**kw: Any) -> "Figure":
    require()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kw)
    FigureCanvasAgg(fig)
    return fig


def _save(fig: "Figure", path: str | Path) -> Path:
    path = Path(path)
    with warnings.catch_warnings():  # CJK content renders as boxes without a CJK font; not an error
        warnings.filterwarnings("ignore", message="Glyph .* missing")
        try:
            fig.savefig(path, format="png", dpi=120)
        except OSError as e:
            raise InvalidInput(f"cannot write {path}: {e.strerror or e}") from None
    return path


def stats_dashboard(stats: "Stats", path: str | Path) -> Path:
    """Kinds by status, age when last recalled, most recalled memories."""
    fig = _figure(figsize=(13, 4), layout="constrained")
    ax_kind, ax_age, ax_top = fig.subplots(1, 3)
    kinds = sorted(stats.by_kind)
    bottom = [0] * len(kinds)
    for status in sorted({s for counts in stats.by_kind.values() for s in counts}):
        values = [stats.by_kind[k].get(status, 0) for k in kinds]
        ax_kind.bar(kinds, values, bottom=bottom, label=status)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax_kind.set_title("memories by kind")
    if kinds:
        ax_kind.legend()
    ax_age.bar(list(stats.recall_age), list(stats.recall_age.values()))
    ax_age.set_title("age when last recalled")
    ax_age.tick_params(axis="x", labelrotation=45)
    top = list(reversed(stats.most_recalled))
    ax_top.barh([f"{m.content[:24]} ({m.id[:6]})" for m in top], [m.access_count for m in top])
    ax_top.set_title(f"most recalled ({stats.never_recalled} of {stats.active} active never)")
    fig.suptitle(f"esmem {stats.prefix}" + (f" / {stats.namespace}" if stats.namespace else ""))
    return _save(fig, path)


def eval_sweep(path: str | Path, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> Path:
    """P@1 per group and stale@1 across the values of one swept knob (`esmem eval --sweep`)."""
    fig = _figure(figsize=(7, 4), layout="constrained")
    ax = fig.subplots()
    labels = [label.split("=", 1)[-1] for label, _ in rows]
    groups = sorted({g for _, rep in rows for g in rep["groups"]})
    for g in groups:
        ax.plot(labels, [rep["groups"].get(g, {}).get("p@1", float("nan")) * 100 for _, rep in rows],
                marker="o", label=f"P@1 {g}")
    ax.plot(labels, [rep["overall"]["stale@1"] * 100 for _, rep in rows], linestyle="--", label="stale@1")
    ax.set_xlabel(rows[0][0].split("=", 1)[0] if rows else "")
    ax.set_ylabel("%")
    ax.set_ylim(-5, 105)
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _size(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def bench(report: Mapping[str, Any], paths: Mapping[str, str], path: str | Path) -> Path:
    """p50 (bar) and p99 (tick) per recall path and scope on a log scale, plus ingest throughput."""
    groups = [(f"{_size(r['size'])}\n{s['scope']}\n({s['namespace_size']})", s["paths"])
              for r in report["runs"] for s in r["latency"]]
    fig = _figure(figsize=(max(8, 2.2 * len(groups)) + 4, 5), layout="constrained")
    lat, ing = fig.subplots(1, 2, gridspec_kw={"width_ratios": [max(2, len(groups)), 1]})
    width = 0.8 / len(paths)
    for j, key in enumerate(paths):
        xs = [i + (j - (len(paths) - 1) / 2) * width for i in range(len(groups))]
        lat.bar(xs, [g[key]["p50"] for _, g in groups], width, label=f"({key}) {paths[key]}")
        lat.scatter(xs, [g[key]["p99"] for _, g in groups], marker="_", color="black", s=120)
    lat.set_xticks(range(len(groups)), [label for label, _ in groups], fontsize=8)
    lat.set_yscale("log")
    lat.set_ylabel("ms (bar p50, tick p99)")
    lat.legend(fontsize=8)
    rows = [(f"{_size(r['size'])} {row['policy']}", row["per_second"]) for r in report["runs"] for row in r["ingest"]]
    ing.bar(range(len(rows)), [v for _, v in rows], color="gray")
    ing.set_xticks(range(len(rows)), [label for label, _ in rows], rotation=30, ha="right", fontsize=8)
    ing.set_ylabel("memories/s")
    fig.suptitle(f"esmem bench ({report['engine']})")
    return _save(fig, path)
