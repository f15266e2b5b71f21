"""Time in a recall: the periods a query names, whether it asks when, and whether a memory tells a time.

- **Named periods** ("in June", "on 7 July, 2023", "in 2022", "2023年6月", "六月"): a question about a
  named time asks about what was said or true then: "What did Maria donate in December?" is answered
  by a memory from December, whatever other month's memory shares its words. The `recall` template
  raises the relevance of a memory whose `valid_from` (UTC) falls in a named period by `period_boost`.
  A period is a year and a month, either of which may be open: "June" matches June of every year,
  "2023" every month of 2023. A day narrows nothing (a conversation about the 7th often happens on
  the 8th); the month is the unit. The template takes them as one text parameter, `periods`:
  comma-separated `YYYY-MM`, `*-MM` or `YYYY` - the form any client can send.
- **Asking when** ("When did ...?", "what time", "which year", "什么时候", "哪天"): the answer is a
  memory that tells a time ("yesterday", "last weekend", "on Friday", "in May", "3 pm", "上周",
  "昨天"). The writer stores `tells_time`; the template, given `asks_when`, raises such a memory's
  relevance by `when_boost`.

Both factors are applied in painless/fuse.painless; `esmem.domain.ranking.time_factor` is the Python
reference.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from esmem.domain.analysis import fold_han
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
# What every match of the patterns holds, looked for first since most texts hold none of it: every
# period named holds a digit, 月 or a month word's first three letters; every time told (_TELLS_TIME
# below) a digit, a CJK character or one of these words. The same case folding as the patterns. A
# write derives `tells_time` of every memory: 30 -> 24 µs a memory on the bench corpus, 105 -> 60 µs
# on LoCoMo's turns (docs/results/time-cue-cost.txt).
_MAY_NAME_A_PERIOD = re.compile(r"\d|月|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec", re.IGNORECASE)
_MAY_TELL_A_TIME = re.compile(r"\d|[\u4e00-\u9fff]|day|week|month|year|hour|decade|night|morning|afternoon|"
                              r"evening|summer|winter|spring|fall|autumn|ago|tomorrow", re.IGNORECASE)


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
    return _periods(query) if _MAY_NAME_A_PERIOD.search(query) else ()


def _periods(query: str) -> tuple[Period, ...]:
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
        word = m["month"].casefold().rstrip(".")  # casefold: the pattern also matched "ſeptember"
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


# "when" asks only as a question word: followed by an auxiliary ("when did", "when is"), not as a
# conjunction ("what to do when the build fails")
_ASKS_WHEN = re.compile(
    r"\bwhen\s+(?:did|do|does|is|was|were|will|would|are|am|has|have|had|can|could|should|shall)\b|"
    r"\b(?:since|until|till) when\b|\bwhat (?:time|date|day|month|year)\b|"
    r"\b(?:which|what) (?:day|date|month|year|week|weekend)\b|\bhow long\b|"
    r"什么时候|什么时间|何时|哪天|哪一天|几号|几月|哪年|哪一年|哪个月|几点|多久以前|多久之前", re.IGNORECASE)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_TELLS_TIME = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|ago|the other day|{_WEEKDAY}s?|weekends?|"
    rf"(?:last|next|this|past|coming|previous)\s+(?:week|month|year|night|morning|afternoon|evening|summer|"
    rf"winter|spring|fall|autumn)s?)\b|"
    r"\b\d{1,2}(?::\d\d)?\s?(?:am|pm|a\.m\.|p\.m\.)(?!\w)|\b\d{1,2}:\d\d\b|\b\d{1,2}(?:st|nd|rd|th)\b|"
    r"\b(?:\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of|several)\s+(?:days?|weeks?|months?|"
    r"years?|hours?|decades?)\b|"
    r"昨天|今天|明天|前天|后天|今晚|昨晚|明晚|今早|上周|下周|本周|这周|上个?星期|下个?星期|上个月|下个月|这个月|本月|"
    r"去年|今年|明年|前年|周[一二三四五六日末]|星期[一二三四五六日天]|礼拜[一二三四五六日天]|\d{1,2}\s*[号日]|\d{1,2}\s*点|"
    r"[0-9一二三四五六七八九十两几]+\s*(?:天|周|个星期|个月|年)(?:前|以前|之前)", re.IGNORECASE)


def asks_when(query: str) -> bool:
    """Whether the query asks for a time ("When did ...?", "what year", "什么时候")."""
    return bool(_ASKS_WHEN.search(fold_han(query)))  # its Chinese words are simplified; either script asks


def tells_time(text: str) -> bool:
    """Whether the text tells a time: a day word, a weekday, last/next week..., a month or a year, a
    clock time or a day of the month, "… ago" (English and Chinese). Stored as `tells_time` at write time."""
    text = fold_han(text)
    return bool(_MAY_TELL_A_TIME.search(text) and _TELLS_TIME.search(text)) or bool(named_periods(text))


@dataclass(frozen=True)
class TimeCues:
    """What a query says about time: the periods it names, and whether it asks when."""

    periods: tuple[Period, ...] = ()
    asks_when: bool = False

    def template_params(self) -> dict[str, Any]:
        """The `recall` template's parameters for these cues (none when the query says nothing of time)."""
        return {**({"periods": as_param(self.periods)} if self.periods else {}),
                **({"asks_when": True} if self.asks_when else {})}


NO_CUES = TimeCues()


def time_cues(query: str) -> TimeCues:
    """The time cues of a query."""
    return TimeCues(named_periods(query), asks_when(query))
