"""Per-kind decay policy (seed 003): how fast each kind of memory fades, kept in one reviewable file.

A short-term intent ("looking for a hotel in Beijing") should fade in days, a preference in months,
a fact or rule never; a single global half-life gets one of them wrong. A policy maps kinds to
half-lives (overriding esmem's defaults kind by kind), names evergreen kinds, sets the reheat
fraction rho and may set any other recall knob; `params()` turns it into the RecallParams every
recall uses. Example policy.toml (the same keys work as JSON):

    default_half_life = "none"       # kinds without their own half-life
    evergreen_kinds = ["rule"]       # never decay, and are written evergreen (must-not-miss)
    rho = 0.5
    [half_lives]
    intent = "7d"
    preference = "180d"
    fact = "none"
    [recall]                         # any other RecallParams knob
    mode = "multiply"
    recent_n = 3
    [retention]                      # what `esmem retention` erases (nothing unless set)
    retired = "180d"                 # superseded versions of every kind: kept 180 days after they were replaced
    [retention.retired_by_kind]      # ... overridden per kind ("none": kept for ever)
    intent = "30d"
    [retention.ttl]                  # active memories of a kind: erased this long after valid_from
    event = "365d"

Pinned memories (evergreen, or importance at or above recall's importance_floor) are never erased by
retention (esmem/domain/retention.py).

Every mistake is a ConfigError naming its key (`half_lives.intent: ...`), raised when the policy is
built, not at the first recall. `esmem install --policy FILE` renders the policy into the stored
templates, so every client of the cluster ranks by it (docs/guides/any-language.md).
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence, cast

from esmem.domain.ranking import DEFAULT_KIND_HALF_LIVES, RecallParams, params_from_strings
from esmem.domain.types import MemoryInput
from esmem.errors import ConfigError, InvalidInput
from esmem.values import check_kind, format_duration, parse_duration

KEYS = ("default_half_life", "half_lives", "evergreen_kinds", "rho", "recall", "retention")
RETENTION_KEYS = ("retired", "retired_by_kind", "ttl")
# Knobs the policy owns itself; setting them under [recall] would make two sources of truth.
_OWNED = {"half_life": "default_half_life", "kind_half_lives": "half_lives", "rho": "rho"}


def _duration(key: str, value: Any, what: str = "half-life") -> timedelta | None:
    if value is None or isinstance(value, timedelta):
        d = value
    elif isinstance(value, str):
        try:
            d = parse_duration(value)
        except ConfigError as e:
            raise ConfigError(f"{key}: {e}") from None
    else:
        raise ConfigError(f"{key}: expected a duration such as '7d', '12h' or 'none', got {value!r}")
    if d is not None and d.total_seconds() <= 0:
        raise ConfigError(f"{key}: {what} must be positive, got {value!r}")
    return d


def _kind(key: str, kind: Any) -> str:
    try:
        return check_kind(kind)
    except InvalidInput as e:  # in a policy file, a configuration error naming its key
        raise ConfigError(f"{key}: {e}") from None


def _recall_value(key: str, value: Any) -> str:
    """A [recall] value as the string params_from_strings parses (lists are `kinds`: a|b)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "|".join(value)
    raise ConfigError(f"recall.{key}: expected a string, number, boolean or list of strings, got {value!r}")


@dataclass(frozen=True)
class Retention:
    """How long memories stay before `esmem retention` erases them; None: for ever. `retired`: non-active
    versions (superseded, forgotten, retired) of every kind, counted from when they were replaced
    (`invalid_at`); `retired_by_kind` overrides it per kind; `ttl`: active memories of a kind, counted
    from `valid_from`."""

    retired: timedelta | None = None
    retired_by_kind: Mapping[str, timedelta | None] = field(default_factory=dict)
    ttl: Mapping[str, timedelta] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Any, evergreen_kinds: Sequence[str] = ()) -> "Retention":
        """The [retention] table, validated: unknown keys, kinds and durations are errors naming their key."""
        if not isinstance(data, Mapping):
            raise ConfigError("retention: expected a table with retired, retired_by_kind, ttl")
        for key in data:
            if key not in RETENTION_KEYS:
                raise ConfigError(f"unknown policy key 'retention.{key}' (known: {', '.join(RETENTION_KEYS)})")
        by_kind, ttl = data.get("retired_by_kind", {}), data.get("ttl", {})
        for key, table in (("retired_by_kind", by_kind), ("ttl", ttl)):
            if not isinstance(table, Mapping):
                raise ConfigError(f"retention.{key}: expected a table of kind = duration")
        ttls = {}
        for k, v in ttl.items():
            kind = _kind(f"retention.ttl.{k}", k)
            if kind in evergreen_kinds:
                raise ConfigError(f"retention.ttl.{kind}: {kind} is an evergreen kind, exempt from retention")
            d = _duration(f"retention.ttl.{k}", v, "a time to live")
            if d is not None:
                ttls[kind] = d
        return cls(_duration("retention.retired", data.get("retired"), "a retention"),
                   MappingProxyType({_kind(f"retention.retired_by_kind.{k}", k):
                                     _duration(f"retention.retired_by_kind.{k}", v, "a retention")
                                     for k, v in by_kind.items()}),
                   MappingProxyType(ttls))

    @property
    def empty(self) -> bool:
        """Whether this retention erases nothing."""
        return self.retired is None and not self.ttl and not any(d is not None for d in self.retired_by_kind.values())

    def as_dict(self) -> dict[str, Any]:
        return {"retired": format_duration(self.retired),
                "retired_by_kind": {k: format_duration(d) for k, d in self.retired_by_kind.items()},
                "ttl": {k: format_duration(d) for k, d in self.ttl.items()}}


@dataclass(frozen=True)
class DecayPolicy:
    """Half-lives per kind, evergreen kinds, rho and other recall knobs; validated on construction.

    `half_lives` values may be timedeltas, None or strings ("7d", "none"); kinds it does not name keep
    esmem's defaults (ranking.DEFAULT_KIND_HALF_LIVES)."""

    half_lives: Mapping[str, timedelta | str | None] = field(default_factory=dict)
    default_half_life: timedelta | str | None = None
    evergreen_kinds: Sequence[str] = ()
    rho: float = 0.5
    recall: Mapping[str, Any] = field(default_factory=dict)
    retention: Mapping[str, Any] | Retention = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.half_lives, Mapping):
            raise ConfigError("half_lives: expected a table of kind = duration")
        given = {_kind(f"half_lives.{k}", k): _duration(f"half_lives.{k}", v) for k, v in self.half_lives.items()}
        if isinstance(self.evergreen_kinds, str) or not isinstance(self.evergreen_kinds, (list, tuple)):
            raise ConfigError("evergreen_kinds: expected a list of kinds")
        evergreen = tuple(_kind("evergreen_kinds", k) for k in self.evergreen_kinds)
        for kind in evergreen:
            if given.get(kind) is not None:
                raise ConfigError(f"half_lives.{kind}: {kind} is an evergreen kind, it cannot have a half-life")
        merged = {**DEFAULT_KIND_HALF_LIVES, **given, **{k: None for k in evergreen}}
        if isinstance(self.rho, bool) or not isinstance(self.rho, (int, float)) or not (
                math.isfinite(self.rho) and 0 <= self.rho <= 1):
            raise ConfigError(f"rho: must be a number in 0..1, got {self.rho!r}")
        if not isinstance(self.recall, Mapping):
            raise ConfigError("recall: expected a table of recall parameters")
        recall = {}
        for key, value in self.recall.items():
            if key in _OWNED or key.startswith("hl."):
                raise ConfigError(f"recall.{key}: set it with the policy's "
                                  f"{_OWNED.get(key, 'half_lives')} key instead")
            recall[key] = _recall_value(key, value)
        object.__setattr__(self, "half_lives", MappingProxyType(merged))
        object.__setattr__(self, "default_half_life", _duration("default_half_life", self.default_half_life))
        object.__setattr__(self, "evergreen_kinds", evergreen)
        object.__setattr__(self, "rho", float(self.rho))
        object.__setattr__(self, "recall", MappingProxyType(recall))
        if not isinstance(self.retention, Retention):
            object.__setattr__(self, "retention", Retention.from_dict(self.retention, evergreen))
        self.params()  # a bad [recall] knob fails here, not at the first recall

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DecayPolicy":
        """A policy from parsed TOML/JSON; unknown keys are errors, not ignored typos."""
        if not isinstance(data, Mapping):
            raise ConfigError("a policy must be a table/object at the top level")
        for key in data:
            if key not in KEYS:
                raise ConfigError(f"unknown policy key {key!r} (known: {', '.join(KEYS)})")
        return cls(**data)

    def params(self, base: RecallParams | None = None) -> RecallParams:
        """The RecallParams this policy means, on top of `base` (default: esmem's defaults)."""
        p = replace(base or RecallParams(), half_life=self._default, kind_half_lives=self._half_lives, rho=self.rho)
        try:
            return params_from_strings(p, self.recall)
        except (ConfigError, InvalidInput) as e:  # an unknown kind under recall.kinds is InvalidInput
            raise ConfigError(f"recall: {e}") from None

    def apply(self, item: MemoryInput) -> MemoryInput:
        """`item` marked evergreen when its kind is: so it never decays and is never missed."""
        return replace(item, evergreen=True) if item.kind in self.evergreen_kinds else item

    # __post_init__ normalised the duration fields; these give them their precise types.
    @property
    def _half_lives(self) -> Mapping[str, timedelta | None]:
        return cast("Mapping[str, timedelta | None]", self.half_lives)

    @property
    def _default(self) -> timedelta | None:
        return cast("timedelta | None", self.default_half_life)

    @property
    def retention_rules(self) -> Retention:
        """The [retention] table, validated (esmem/domain/retention.py applies it)."""
        return cast(Retention, self.retention)

    def as_dict(self) -> dict[str, Any]:
        return {"default_half_life": format_duration(self._default),
                "half_lives": {k: format_duration(d) for k, d in self._half_lives.items()},
                "evergreen_kinds": list(self.evergreen_kinds), "rho": self.rho, "recall": dict(self.recall),
                "retention": self.retention_rules.as_dict()}


def load_policy(path: str | Path) -> DecayPolicy:
    """Read a policy from a .toml (Python >= 3.11) or .json file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ConfigError(f"policy file {path} must end in .toml or .json")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read policy file {path}: {e.strerror or e}") from None
    if suffix == ".json":
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ConfigError(f"policy file {path} is not valid JSON: {e}") from None
    else:
        if sys.version_info < (3, 11):  # no tomllib
            raise ConfigError(f"reading {path} needs Python 3.11+ (tomllib); use a .json policy file")
        else:
            import tomllib
            try:
                data = tomllib.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
                raise ConfigError(f"policy file {path} is not valid TOML: {e}") from None
    try:
        return DecayPolicy.from_dict(data)
    except ConfigError as e:
        raise ConfigError(f"policy file {path}: {e}") from None
