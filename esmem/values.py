"""One parser per value concept, shared by every layer: kinds, namespaces, booleans, durations, times.

Each raises one error type (`InvalidInput` for what a caller passes per call, `ConfigError` for
configuration values), so "true"/"flase" or "7x" is refused the same way everywhere.
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from esmem.errors import ConfigError, InvalidInput

KINDS = ("fact", "preference", "intent", "rule", "event", "note")
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")
TIME_RANGE = "0001-01-01T00:00:00Z..9999-12-31T23:59:59Z"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def check_namespace(namespace: Any) -> str:
    # fullmatch: `$` alone would accept a trailing newline ("good\n"), which then became routing
    if not isinstance(namespace, str) or not NAMESPACE_RE.fullmatch(namespace):
        raise InvalidInput(f"invalid namespace {namespace!r}: 1-128 characters from A-Z a-z 0-9 _ . : @ -, "
                           "starting with a letter or digit")
    return namespace


def check_memory_id(memory_id: Any) -> str:
    """A memory id as a write or a recall returns it: a non-empty string within the engine's 512-byte
    bound on ids (an empty one addressed another endpoint of the engine)."""
    try:
        ok = isinstance(memory_id, str) and bool(memory_id.strip()) and len(memory_id.encode("utf-8")) <= 512
    except UnicodeEncodeError:  # a lone surrogate: no id at all
        ok = False
    if not ok or not isinstance(memory_id, str):
        raise InvalidInput(f"a memory id must be a non-empty string of at most 512 bytes, got {memory_id!r}")
    return memory_id


def check_kind(kind: Any) -> str:
    if not isinstance(kind, str) or kind not in KINDS:
        raise InvalidInput(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    return kind


def parse_bool(value: Any, name: str) -> bool:
    """true/false, 1/0, yes/no, on/off (any case); anything else is refused, not read as False."""
    if isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def parse_number(value: Any, name: str, *, integer: bool = False) -> float:
    """A number (an integer with `integer`) from configuration text."""
    try:
        return int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} takes {'an integer' if integer else 'a number'}, got {value!r}") from None


def parse_duration(text: str | timedelta | None) -> timedelta | None:
    """'7d', '12h', '30m', '90s', '2w' or 'none' -> timedelta (None = never decays)."""
    if text is None or isinstance(text, timedelta):
        return text
    s = str(text).strip().lower()
    if s in ("none", "off", "inf", "never"):
        return None
    units = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
    try:
        value, unit = float(s[:-1]), s[-1]
        seconds = value * units[unit]
    except (ValueError, KeyError, IndexError):
        raise ConfigError(f"invalid duration {text!r}: use e.g. 7d, 12h, 30m or none") from None
    if seconds <= 0 or not math.isfinite(seconds):
        raise ConfigError(f"half-life must be positive, got {text!r}")
    return timedelta(seconds=seconds)


def format_duration(d: timedelta | None) -> str:
    if d is None:
        return "none"
    s = d.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s % size == 0:
            return f"{int(s // size)}{unit}"
    return f"{s:g}s"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_ms(t: datetime) -> int:
    return int(round(t.timestamp() * 1000))


def parse_time(value: str | datetime | int | float) -> datetime:
    """ISO-8601 (naive = UTC) or epoch milliseconds -> aware datetime; InvalidInput otherwise."""
    if isinstance(value, datetime):
        t = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            t = datetime.fromtimestamp(value / 1000, timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise InvalidInput(f"time {value!r} (epoch ms) is outside {TIME_RANGE}") from None
    else:
        try:
            t = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(f"unparseable time {value!r}: use ISO-8601, e.g. 2026-10-08T12:00:00Z") from None
    t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
    try:  # the engine stores UTC: a time whose UTC form leaves years 1..9999 cannot be written or compared
        t.astimezone(timezone.utc)
    except (OverflowError, OSError):
        raise InvalidInput(f"time {value!r} is outside {TIME_RANGE}") from None
    return t
