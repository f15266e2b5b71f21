"""The ranking figures of the docs are drawn from the documented formula and the policy."""
from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path

from esmem.domain.policy import DecayPolicy
from esmem.domain.ranking import RecallParams

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("plots", ROOT / "docs/reference/plots.py")
plots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plots)  # type: ignore[union-attr]


def test_each_kind_is_at_half_recency_after_its_half_life_and_evergreen_kinds_stay_at_one() -> None:
    params = DecayPolicy(half_lives={"event": "30d"}, evergreen_kinds=["rule"]).params()
    curves = plots.decay_curves(params)
    for kind, ys in curves.items():
        hl = params.half_life_of(kind)
        if hl is None:
            assert set(ys) == {1.0}, kind
        else:  # the plain formula 0.5 ** (age / half-life) at every plotted age
            assert all(abs(y - 0.5 ** (age / (hl / timedelta(days=1)))) < 1e-9 for age, y in zip(plots.AGES_DAYS, ys))
    assert curves["event"][plots.AGES_DAYS.index(30)] == 0.5 and set(curves["rule"]) == {1.0}


def test_the_fusion_curves_follow_each_modes_formula() -> None:
    p = RecallParams()
    curves = plots.fusion_curves(p)
    sat = lambda r: r / (r + p.k)  # noqa: E731
    for i, rel in enumerate(plots.RELS):
        for rec in plots.RECENCIES:
            assert abs(curves["blend"][rec][i] - (sat(rel) * (1 - p.w) + rec * p.w)) < 1e-9
            assert abs(curves["multiply"][rec][i] - rel * rec * (1 + p.c * plots.IMPORTANCE)) < 1e-9
            assert abs(curves["weighted"][rec][i] - (p.alpha * sat(rel) + p.beta * rec
                                                      + p.gamma * (plots.IMPORTANCE - 1) / 9)) < 1e-9


def test_the_script_draws_both_figures(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[half_lives]\nevent = "30d"\n', encoding="utf-8")
    plots.main(["--policy", str(policy), str(tmp_path / "img")])
    for name in ("decay.png", "fusion.png"):
        assert (tmp_path / "img" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {p.name for p in (ROOT / "docs/concepts/img").iterdir()} >= {"decay.png", "fusion.png"}
