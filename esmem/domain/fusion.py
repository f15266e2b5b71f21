"""The fusion modes as strategies: how relevance, recency and importance become one score.

Each mode owns its knobs (the `RecallParams` fields the `recall` template passes to the stored
`fuse` script), its plain-Python reference (`fuse`, tests compare it with the engine), the inverse
used to explain a hit, and its Painless fragment `painless/fusion/<name>.painless`, which `esmem
install` includes into `fuse`. A fourth mode is one class here and one fragment file.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol


class Knobs(Protocol):
    """The ranking knobs a fusion mode reads (`ranking.RecallParams` has them, and more)."""

    @property
    def w(self) -> float: ...
    @property
    def k(self) -> float: ...
    @property
    def c(self) -> float: ...
    @property
    def alpha(self) -> float: ...
    @property
    def beta(self) -> float: ...
    @property
    def gamma(self) -> float: ...


def sat(rel: float, k: float) -> float:
    return rel / (rel + k)


def unsat(s: float, k: float) -> float:
    """The inverse of `sat`, clamped to [0, 1) so that a rounding error never divides by zero."""
    s = min(max(s, 0.0), 1 - 1e-12)
    return k * s / (1 - s)


class Fusion(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def knobs(self) -> tuple[str, ...]: ...

    def fuse(self, rel: float, rec: float, importance: float, p: Knobs) -> float:
        """The score the engine computes (the reference the tests hold the engine to)."""

    def importance_part(self, importance: float, p: Knobs) -> float:
        """Importance's share of the score, as `explain` shows it."""

    def invert(self, score: float, rec: float, importance: float, p: Knobs) -> float:
        """Recover rel from a fused score, for explaining a hit."""


@dataclass(frozen=True)
class Blend:
    """sat(rel) * (1 - w) + rec * w (seed 000): recency can lift, never dominate, a weak match."""

    name: str = "blend"
    knobs: tuple[str, ...] = ("w", "k")

    def fuse(self, rel: float, rec: float, importance: float, p: Knobs) -> float:
        return sat(rel, p.k) * (1 - p.w) + rec * p.w

    def importance_part(self, importance: float, p: Knobs) -> float:
        return 0.0

    def invert(self, score: float, rec: float, importance: float, p: Knobs) -> float:
        return unsat((score - rec * p.w) / (1 - p.w) if p.w < 1 else 0.0, p.k)


@dataclass(frozen=True)
class Multiply:
    """rel * rec * (1 + c * importance) (seed 003): every factor scales the others."""

    name: str = "multiply"
    knobs: tuple[str, ...] = ("c",)

    def fuse(self, rel: float, rec: float, importance: float, p: Knobs) -> float:
        return rel * rec * (1 + p.c * importance)

    def importance_part(self, importance: float, p: Knobs) -> float:
        return 1 + p.c * importance

    def invert(self, score: float, rec: float, importance: float, p: Knobs) -> float:
        denom = rec * (1 + p.c * importance)
        return score / denom if denom > 0 else 0.0


@dataclass(frozen=True)
class Weighted:
    """alpha * sat(rel) + beta * rec + gamma * (importance - 1) / 9 (seed 004): a weighted sum."""

    name: str = "weighted"
    knobs: tuple[str, ...] = ("alpha", "beta", "gamma", "k")

    def fuse(self, rel: float, rec: float, importance: float, p: Knobs) -> float:
        return p.alpha * sat(rel, p.k) + p.beta * rec + p.gamma * (importance - 1) / 9

    def importance_part(self, importance: float, p: Knobs) -> float:
        return p.gamma * (importance - 1) / 9

    def invert(self, score: float, rec: float, importance: float, p: Knobs) -> float:
        s = (score - p.beta * rec - p.gamma * (importance - 1) / 9) / p.alpha if p.alpha else 0.0
        return unsat(s, p.k)


_MODES: tuple[Fusion, ...] = (Blend(), Multiply(), Weighted())
FUSIONS: Mapping[str, Fusion] = {f.name: f for f in _MODES}
MODES = tuple(FUSIONS)
# Every mode's knobs, once each, in a stable order: the parameters the template passes to `fuse`.
KNOBS = tuple(dict.fromkeys(k for f in FUSIONS.values() for k in f.knobs))
