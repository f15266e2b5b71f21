"""The calendar periods a query names ("in June", "on 7 July, 2023", "in 2022", "2023年6月", "六月").

A question about a named time asks about what was said or true then: "What did Maria donate in
December?" is answered by a memory from December, whatever other month's memory shares its words.
The `recall` template raises the relevance of a memory whose `valid_from` (UTC) falls in a named
period by `period_boost` (painless/fuse.painless; `esmem.domain.ranking.period_factor` is the Python
reference). A period is a year and a month, either of which may be open: "June" matches June of every
year, "2023" every month of 2023. A day narrows nothing (a conversation about the 7th often happens on
the 8th); the month is the unit.

The template takes the periods as one text parameter, `periods`: comma-separated `YYYY-MM`, `*-MM`
or `YYYY` - the form any client can send.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from esmem.errors import InvalidInput

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_ABBREVIATIONS = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
_NAMES = {m: i + 1 for i, m in enumerate(MONTHS)}
_YEAR = r"(?:1[89]|2[0-9])\d\d"
# A month's full name; an abbreviation ("Aug", "Sept.") or "may"/"march" (also words) only next to a day or
# a year, or after a word that introduces a time ("in may", "since March")
_MONTH_WORD = r"(?:" + "|".join(sorted(set(_NAMES) | set(_ABBREVIATIONS), key=len, reverse=True)) + r")\.?"
_DAY = r"(?:[0-3]?\d)(?:st|nd|rd|th)?"
_ENGLISH = re.compile(
    rf"(?:(?P<pre>\b(?:in|on|of|since|during|until|till|by|before|after|early|mid|late|last|this|next)\s+)|(?P<dayb>\b{_DAY}\s+(?:of\s+)?))?"
    rf"\b(?P<month>{_MONTH_WORD})(?![\w-])"
    rf"(?P<dayafter>\s+{_DAY}\b)?(?:,?\s*(?P<year>{_YEAR})\b)?", re.IGNORECASE)
_YEAR_ALONE = re.compile(rf"(?<![\d-])(?P<year>{_YEAR})(?![\d-]|\s*年\s*[0-9一二三四五六七八九十]+\s*月)")
_ISO = re.compile(rf"(?<!\d)(?P<year>{_YEAR})-(?P<month>0?[1-9]|1[0-2])(?:-[0-3]\d)?(?!\d)")
_CJK_NUMBER = {"一": 1, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10,
               "十一": 11, "十二": 12}
_CHINESE = re.compile(rf"(?:(?P<year>{_YEAR})\s*年\s*)?(?P<month>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])\s*月")
_CHINESE_YEAR = re.compile(rf"(?P<year>{_YEAR})\s*年(?!\s*(?:1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])\s*月)")
_FULL_NAME = re.compile(r"(?:" + "|".join(MONTHS[i] for i in range(12) if MONTHS[i] not in ("may", "march")) + r")$")


@dataclass(frozen=True, order=True)
class Period:
    """A year and a month; None is open (every year, every month of the year)."""

    year: int | None
    month: int | None

    def __post_init__(self) -> None:
        if self.year is None and self.month is None:
            raise InvalidInput("a period names a year, a month or both")
        if self.month is not None and not 1 <= self.month <= 12:
            raise InvalidInput(f"a period's month is 1..12, got {self.month}")
        if self.year is not None and not 1 <= self.year <= 9999:
            raise InvalidInput(f"a period's year is 1..9999, got {self.year}")

    @property
    def text(self) -> str:
        """The template's form: YYYY-MM, *-MM or YYYY."""
        if self.month is None:
            return f"{self.year:04d}"
        return f"{'*' if self.year is None else f'{self.year:04d}'}-{self.month:02d}"

    def holds(self, year: int, month: int) -> bool:
        return (self.year is None or self.year == year) and (self.month is None or self.month == month)


def named_periods(query: str) -> tuple[Period, ...]:
    """Every period the query names, in order of first mention, each once."""
    found: list[tuple[int, Period]] = []
    taken: list[tuple[int, int]] = []

    def add(at: int, end: int, period: Period) -> None:
        if any(a < end and at < b for a, b in taken):
            return
        taken.append((at, end))
        found.append((at, period))

    for m in _ISO.finditer(query):
        add(m.start(), m.end(), Period(int(m["year"]), int(m["month"])))
    for m in _ENGLISH.finditer(query):
        word = m["month"].lower().rstrip(".")
        month = _NAMES.get(word) or _ABBREVIATIONS[word]
        context = m["pre"] or m["dayb"] or m["dayafter"] or m["year"]
        if not context and not _FULL_NAME.match(word):
            continue  # "may", "march", "jan" alone are words first
        add(m.start("month"), m.end(), Period(int(m["year"]) if m["year"] else None, month))
    for m in _CHINESE.finditer(query):
        raw = m["month"]
        month = int(raw) if raw.isdigit() else _CJK_NUMBER[raw]
        add(m.start(), m.end(), Period(int(m["year"]) if m["year"] else None, month))
    for pattern in (_CHINESE_YEAR, _YEAR_ALONE):
        for m in pattern.finditer(query):
            add(m.start(), m.end(), Period(int(m["year"]), None))
    out: list[Period] = []
    for _, p in sorted(found, key=lambda f: f[0]):
        if p not in out:
            out.append(p)
    return tuple(out)


def as_param(periods: tuple[Period, ...]) -> str:
    """The `periods` template parameter for these periods ("" for none)."""
    return ",".join(p.text for p in periods)


def parse_param(text: str) -> tuple[Period, ...]:
    """The periods a `periods` template parameter names (the inverse of `as_param`); InvalidInput
    for anything else."""
    out = []
    for part in (t.strip() for t in text.split(",")):
        m = re.fullmatch(r"(\d{4}|\*)(?:-(\d{1,2}))?", part)
        if not m or (m[1] == "*" and m[2] is None):
            raise InvalidInput(f"periods is a comma-separated list of YYYY-MM, *-MM or YYYY, got {text!r}")
        out.append(Period(None if m[1] == "*" else int(m[1]), int(m[2]) if m[2] else None))
    return tuple(out)
