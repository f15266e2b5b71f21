"""Ranking knobs and the plain-Python reference of the formula the `recall` template computes.

The engine computes, per memory matching the namespace/status/time filters:

    rel = BM25(content) + entity_boost * BM25(entities), or, for an evergreen or important memory
          (imp >= floor) with no lexical match, must_not_miss_boost * imp / 10
    rel' = rel * (1 - question_penalty * asks)     asks: share of the memory's text that asks (questions.py)
               * period_boost                      if valid_from (UTC) falls in a period the query names
               * when_boost                        if the query asks when and the memory tells a time
                                                   (when.py; each 1 otherwise)
    rec = 0.5 ** (|now - anchor_at| / half_life(kind))     (1 for evergreen and non-decaying kinds)
    multiply:  score = rel' * rec * (1 + c * imp)                                   (seed 003)
    blend:     score = sat(rel') * (1 - w) + rec * w,     sat(x) = x / (x + k)      (seed 000)
    weighted:  score = alpha * sat(rel') + beta * rec + gamma * (imp - 1) / 9       (seed 004)

`anchor_at` starts at valid_from and is pulled towards each recall time by `reheat` (painless/
reheat.painless): anchor' = anchor + rho * (now - anchor). `reference_score` mirrors this exactly;
tests compare it with the engine's scores.
"""
from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, Mapping

from esmem.domain.fusion import FUSIONS, KNOBS, MODES
from esmem.domain.when import NO_CUES, TimeCues
from esmem.errors import ConfigError
from esmem.values import (KINDS, check_kind, epoch_ms, format_duration, parse_bool, parse_duration, parse_number,
                          parse_time)

# Chosen from `esmem eval` (docs/results/defaults.md): decay cost P@1 on both the rule store
# (seed 002) and LoCoMo (events: 30d 31.8%, 365d 35.9%, none 37.1%), and merge, not decay, fixes
# conflicts. Only kinds that really expire decay: intentions within days, tastes within months.
DEFAULT_KIND_HALF_LIVES: Mapping[str, timedelta | None] = MappingProxyType({
    "intent": timedelta(days=7),
    "preference": timedelta(days=180),
})


# Documented ranges (docs/reference/configuration.md): every numeric knob finite, half-lives 1s..100 years.
MIN_HALF_LIFE, MAX_HALF_LIFE = timedelta(seconds=1), timedelta(days=36500)
NUMERIC = ("c", "w", "k", "alpha", "beta", "gamma", "importance_floor", "must_not_miss_boost", "entity_boost",
           "question_penalty", "period_boost", "when_boost", "compound_boost", "neighbour_boost", "neighbour_prev", "neighbour_next", "pinned", "pinned_min_share",
           "resolve_overlap", "resolve_factor", "resolve_ratio",
           "min_importance", "window", "rescore_window", "mmr_lambda", "mmr_threshold", "recent_n", "rho")


@dataclass(frozen=True)
class RecallParams:
    """Every ranking knob, carried unchanged from CLI/eval/library to the template."""

    mode: str = "blend"
    half_life: timedelta | None = None  # kinds without their own half-life never decay
    kind_half_lives: Mapping[str, timedelta | None] = field(default_factory=lambda: DEFAULT_KIND_HALF_LIVES)
    c: float = 0.1                 # multiply: importance coefficient
    w: float = 0.1                 # blend: recency weight
    k: float = 5.0                 # saturation constant of sat(rel) = rel / (rel + k)
    alpha: float = 0.5             # weighted
    beta: float = 0.3
    gamma: float = 0.2
    must_not_miss: bool = False    # pinned memories take no ranked slot: they have their own section
    pinned: int = 3                # at most this many pinned memories that apply (esmem/domain/pinned.py)
    resolve: bool = True           # demote the older of two same-topic candidates (esmem/domain/resolve.py)
    resolve_overlap: float = 0.5
    resolve_factor: float = 0.9
    resolve_ratio: float = 0.5
    pinned_min_share: float = 0.5  # a pinned memory keeps a ranked slot from this share of the top rel
    importance_floor: float = 8.0
    must_not_miss_boost: float = 1.0
    entity_boost: float = 1.0      # a speaker or subject named by the query (docs/concepts/ranking.md#who-said-it)
    compound_boost: float = 0.3    # a compound matched as two words or one ("smartwatch" / "smart watch")
    question_penalty: float = 0.6  # damps a memory that asks: rel * (1 - question_penalty * asks)
    period_boost: float = 2.0      # raises a memory from a period the query names (esmem/domain/when.py)
    when_boost: float = 1.5        # raises a memory that tells a time when the query asks when (esmem/domain/when.py)
    neighbour_boost: float = 0.2   # a turn's neighbours field (esmem/domain/threads.py)
    neighbour_prev: float = 0.5    # share of a candidate's score its previous turn inherits
    neighbour_next: float = 0.8    # ... and its next turn (the reply); the turn after that, its square
    min_importance: float = 1.0
    window: int = 20
    rescore_window: int = 100      # fuse the relevance top-N only, so the engine can prune; 0: every match
    mmr: bool = True
    mmr_lambda: float = 0.65            # chosen on datasets/diversity.jsonl + LoCoMo (docs/concepts/mmr.md)
    mmr_threshold: float = 0.3     # a similarity below it is no redundancy (docs/concepts/mmr.md)
    mmr_similarity: str = "tokens"  # Jaccard over index tokens (esmem/domain/mmr.py); cosine: stored vectors
    recent_n: int = 0
    rho: float = 0.5               # reheat: fraction of the gap to `now` an access removes
    kinds: tuple[str, ...] | None = None
    include_superseded: bool = False

    def __post_init__(self) -> None:
        if self.mmr_similarity not in ("words", "tokens", "cosine"):
            raise ConfigError(f"mmr_similarity must be words, tokens or cosine, got {self.mmr_similarity!r}")
        if self.mode not in MODES:
            raise ConfigError(f"unknown mode {self.mode!r} (choose from {', '.join(MODES)})")
        for name, d in [("half_life", self.half_life), *self.kind_half_lives.items()]:
            if d is not None and not MIN_HALF_LIFE <= d <= MAX_HALF_LIFE:
                raise ConfigError(f"half-life of {name} must be between 1s and 36500d (or none), got {d}")
        for kind in self.kind_half_lives:
            if kind not in KINDS:
                raise ConfigError(f"unknown kind {kind!r} in kind_half_lives (known: {', '.join(KINDS)})")
        for kind in self.kinds or ():
            check_kind(kind)
        for name in ("mmr", "must_not_miss", "include_superseded", "resolve"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in NUMERIC:  # finite numbers only: NaN/inf would reach the engine's scripts
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"{name} must be a finite number, got {v!r}")
        checks = [("w", 0 <= self.w <= 1), ("mmr_lambda", 0 <= self.mmr_lambda <= 1),
                  ("mmr_threshold", 0 <= self.mmr_threshold <= 1), ("k", 0 < self.k <= 1e6),
                  ("c", 0 <= self.c <= 100), ("rho", 0 <= self.rho <= 1), ("window", 1 <= self.window <= 1000),
                  ("rescore_window", 0 <= self.rescore_window <= 10000),
                  ("recent_n", 0 <= self.recent_n <= 100), ("pinned", 0 <= self.pinned <= 100),
                  ("pinned_min_share", 0 <= self.pinned_min_share <= 1),
                  ("resolve_overlap", 0 <= self.resolve_overlap <= 1), ("resolve_factor", 0 <= self.resolve_factor <= 1),
                  ("resolve_ratio", 0 <= self.resolve_ratio <= 100), ("entity_boost", 0 <= self.entity_boost <= 100),
                  ("question_penalty", 0 <= self.question_penalty <= 1),
                  ("period_boost", 1 <= self.period_boost <= 100), ("when_boost", 1 <= self.when_boost <= 100),
                  ("compound_boost", 0 <= self.compound_boost <= 100),
                  ("must_not_miss_boost", 0 <= self.must_not_miss_boost <= 100),
                  ("neighbour_boost", 0 <= self.neighbour_boost <= 100),
                  ("neighbour_prev", 0 <= self.neighbour_prev <= 1), ("neighbour_next", 0 <= self.neighbour_next <= 1),
                  ("alpha/beta/gamma", min(self.alpha, self.beta, self.gamma) >= 0
                   and max(self.alpha, self.beta, self.gamma) <= 100),
                  ("importance_floor", 1 <= self.importance_floor <= 10),
                  ("min_importance", 1 <= self.min_importance <= 10)]
        for name, ok in checks:
            if not ok:
                raise ConfigError(f"{name} out of range: {getattr(self, name.split('/')[0])}")

    def with_(self, **changes: Any) -> "RecallParams":
        return replace(self, **changes)

    def half_life_of(self, kind: str) -> timedelta | None:
        return self.kind_half_lives[kind] if kind in self.kind_half_lives else self.half_life

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            if isinstance(v, timedelta) or (v is None and name == "half_life"):
                v = format_duration(v)
            elif name == "kind_half_lives":
                v = {k: format_duration(d) for k, d in v.items()}
            elif isinstance(v, tuple):
                v = list(v)
            out[name] = v
        return out


SETTABLE = {f for f in RecallParams.__dataclass_fields__}


def params_from_strings(base: RecallParams, pairs: Mapping[str, str]) -> RecallParams:
    """Apply `key=value` overrides from the CLI/eval (`half_life=7d`, `mode=multiply`, `hl.intent=3d`,
    `kind_half_lives=none` for one half-life for every kind)."""
    changes: dict[str, Any] = {}
    kind_hl = dict(base.kind_half_lives)
    for key, raw in pairs.items():
        if key.startswith("hl."):
            kind_hl[key[3:]] = parse_duration(raw)
            continue
        if key == "kind_half_lives":  # only "none": drop every per-kind half-life (uniform decay)
            if raw.strip().lower() not in ("none", ""):
                raise ConfigError("kind_half_lives can only be set to none here; use hl.<kind>=<duration>")
            kind_hl = {}
            continue
        if key not in SETTABLE:
            raise ConfigError(f"unknown recall parameter {key!r} (known: {', '.join(sorted(SETTABLE))}, hl.<kind>)")
        current = getattr(base, key)
        if key == "half_life":
            changes[key] = parse_duration(raw)
        elif key == "kinds":
            changes[key] = tuple(k for k in raw.split("|") if k) or None
        elif isinstance(current, bool):
            changes[key] = parse_bool(raw, key)
        elif isinstance(current, (int, float)):
            changes[key] = parse_number(raw, key, integer=isinstance(current, int))
        else:
            changes[key] = raw
    return replace(base, kind_half_lives=MappingProxyType(kind_hl), **changes)


# -- template parameters -----------------------------------------------------------------------
# The knobs of the stored `recall` template: every one is an optional plain parameter of the call
# whose default `esmem install` renders from the policy. Client-side knobs (MMR, recent-N, reheat)
# are not template parameters; install keeps their defaults in a comment of the template.
TEMPLATE_KNOBS = ("mode", *KNOBS, "must_not_miss", "importance_floor", "must_not_miss_boost", "entity_boost",
                  "min_importance", "include_superseded", "neighbour_boost", "rescore_window", "question_penalty",
                  "period_boost", "when_boost", "compound_boost")
FUSE_KNOBS = (*KNOBS, "question_penalty", "period_boost", "when_boost")  # the knobs of the stored `fuse` script: every mode's, then its own
CLIENT_KNOBS = ("mmr", "mmr_lambda", "mmr_threshold", "recent_n", "rho", "neighbour_prev", "neighbour_next", "pinned",
                "pinned_min_share", "resolve", "resolve_overlap", "resolve_factor",
                "resolve_ratio", "mmr_similarity")


def duration_param(d: timedelta | None) -> str | bool:
    """A half-life as the template takes it: exact milliseconds, or false for never decays."""
    return False if d is None else f"{_ms(d)}ms"


def template_overrides(params: RecallParams) -> dict[str, Any]:
    """Every ranking knob of `params` as plain template parameters (strings, numbers, booleans,
    lists): what a caller passes to reproduce `params` whatever the installed defaults are."""
    out: dict[str, Any] = {name: getattr(params, name) for name in TEMPLATE_KNOBS}
    for kind in KINDS:
        out[f"half_life_{kind}"] = duration_param(params.half_life_of(kind))
    if params.kinds:
        out["kinds"] = sorted(params.kinds)
    if not params.rescore_window:  # fuse every match (a template installed with rescore_window 0 always does)
        del out["rescore_window"]
        out["exhaustive"] = True
    return out


def template_variables(params: RecallParams, evergreen_kinds: tuple[str, ...] = ()) -> dict[str, Any]:
    """The Jinja variables `install` renders the search templates with: the policy's defaults."""
    client = {name: getattr(params, name) for name in CLIENT_KNOBS}
    return {
        **{name: getattr(params, name) for name in TEMPLATE_KNOBS}, "window": params.window, "pinned": params.pinned,
        "fusion_knobs": [(name, getattr(params, name)) for name in FUSE_KNOBS],  # what `fuse` is passed
        "kinds": sorted(params.kinds or ()),
        "half_lives": [(kind, _ms(params.half_life_of(kind))) for kind in KINDS],
        "client_defaults": json.dumps({**client, "evergreen_kinds": list(evergreen_kinds)}),
    }


def default_values(params: RecallParams, evergreen_kinds: tuple[str, ...] = ()) -> dict[str, str]:
    """Every installed default by its parameter name, as comparable text (for config/check)."""
    out = {name: _text(getattr(params, name)) for name in (*TEMPLATE_KNOBS, "window", *CLIENT_KNOBS)}
    out["size"] = out.pop("window")
    for kind in KINDS:
        out[f"half_life_{kind}"] = format_duration(params.half_life_of(kind))
    out["kinds"] = ",".join(sorted(params.kinds or ())) or "(all)"
    out["evergreen_kinds"] = ",".join(sorted(evergreen_kinds)) or "-"
    return out


def _ms(d: timedelta | None) -> int:
    """A half-life in milliseconds as the template renders it; 0 = never decays."""
    return 0 if d is None else int(round(d.total_seconds() * 1000))


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


# -- the reference formula ---------------------------------------------------------------------
def anchor_ms(doc: Mapping[str, Any]) -> int:
    a = doc.get("anchor_at")
    return int(a) if isinstance(a, (int, float)) else epoch_ms(parse_time(a or doc["valid_from"]))


def recency(doc: Mapping[str, Any], params: RecallParams, now: datetime) -> float:
    """0.5 ** (age / half-life), age measured from the reheated anchor; 1 if it never decays."""
    hl = params.half_life_of(doc.get("kind", "fact"))
    if doc.get("evergreen") or hl is None:
        return 1.0
    age_ms = abs(epoch_ms(now) - anchor_ms(doc))
    return float(0.5 ** (age_ms / (hl.total_seconds() * 1000)))


def reheat_factor(doc: Mapping[str, Any], params: RecallParams, now: datetime) -> float:
    """How much reheat raised recency: rec(anchor_at) / rec(valid_from)."""
    base = recency({**doc, "anchor_at": None}, params, now)
    return recency(doc, params, now) / base if base > 0 else 1.0


def fuse(rel: float, rec: float, importance: float, params: RecallParams) -> float:
    return FUSIONS[params.mode].fuse(rel, rec, importance, params)


def answer_factor(doc: Mapping[str, Any], params: RecallParams) -> float:
    """1 - question_penalty * asks: how much a memory that asks keeps of its relevance (1 if it states)."""
    return 1.0 - params.question_penalty * _as_float32(float(doc.get("asks") or 0.0))


def period_factor(doc: Mapping[str, Any], cues: TimeCues, params: RecallParams) -> float:
    """period_boost when the memory's valid_from (UTC) falls in one of the periods the query names, else 1."""
    if not cues.periods:
        return 1.0
    t = parse_time(doc["valid_from"]).astimezone(timezone.utc)
    return params.period_boost if any(p.holds(t.year, t.month) for p in cues.periods) else 1.0


def when_factor(doc: Mapping[str, Any], cues: TimeCues, params: RecallParams) -> float:
    """when_boost when the query asks when and the memory tells a time (`tells_time`, stored at write time), else 1."""
    return params.when_boost if cues.asks_when and doc.get("tells_time") else 1.0


def time_factor(doc: Mapping[str, Any], cues: TimeCues, params: RecallParams) -> float:
    """What the query's time cues multiply a memory's relevance by."""
    return period_factor(doc, cues, params) * when_factor(doc, cues, params)


def _as_float32(x: float) -> float:
    """`asks` as the engine reads it back: a float field's doc value."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def reference_score(rel: float, doc: Mapping[str, Any], params: RecallParams, now: datetime,
                    cues: TimeCues = NO_CUES) -> float:
    """The documented formula in plain Python, given the engine's relevance `rel` and the query's time cues."""
    rel = rel * answer_factor(doc, params) * time_factor(doc, cues, params)
    return fuse(rel, recency(doc, params, now), float(doc.get("importance", 1.0)), params)


def importance_part(importance: float, params: RecallParams) -> float:
    """Importance's share of the score: a factor in multiply, a summand in weighted, none in blend."""
    return FUSIONS[params.mode].importance_part(importance, params)


def invert_rel(score: float, rec: float, importance: float, params: RecallParams) -> float:
    """Recover rel from a fused score (the inverse of `fuse`), for explaining a hit."""
    return FUSIONS[params.mode].invert(score, rec, importance, params)
