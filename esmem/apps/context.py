"""Turn a recall into the prompt block an agent pastes before its question (seeds 002, 003).

Structured sections tell the model what each part is ("Relevant memories" = ranked recall, "Recent
conversation" = the recent-N memories, oldest first); every line carries the memory's kind and a
date the model can reason with ("3 weeks ago (2026-09-17)", relative to the recall's `now`).

The budget is a hard cap on the whole block, headers included: memories are taken in priority order
(relevant ones by rank, then recent ones newest first) and a memory that does not fit is skipped,
never cut - unless that memory alone would not fit even an empty block, in which case it is cut to
the space left and marked. `namespace_chars` (every active memory's content) says what pasting
the whole memory instead would have cost.
"""
from __future__ import annotations

import math
import unicodedata
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

from esmem.domain.patterns import Pattern
from esmem.domain.store import MemoryStore
from esmem.domain.types import Memory, RecallResult
from esmem.errors import InvalidInput
from esmem.index.catalog import Search
from esmem.values import check_namespace

RELEVANT = "## Relevant memories"
RECENT = "## Recent conversation"
PINNED = "## Keep in mind"  # pinned memories that apply to this request (esmem/pinned.py)
TRUNCATED = "…[truncated]"
ORDERS = ("relevance", "chronological")

_CJK = Pattern(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
_SPACE = Pattern(r"\s+")


@dataclass(frozen=True)
class Context:
    """The prompt block and what it cost; `included`/`omitted`/`truncated` hold memory ids."""

    text: str
    chars: int
    tokens: int
    namespace_chars: int
    included: tuple[str, ...] = ()
    omitted: tuple[str, ...] = ()
    truncated: tuple[str, ...] = ()
    duplicates: int = 0

    @property
    def reduction(self) -> float:
        """How much smaller than pasting every active memory of the namespace (0.89 = -89%)."""
        return 1 - self.chars / self.namespace_chars if self.namespace_chars else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reduction": self.reduction}


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: one token per CJK character, one per 4 other characters."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def when(t: datetime, now: datetime) -> str:
    """'3 weeks ago (2026-09-17)': a relative age for reasoning plus the absolute date (UTC)."""
    seconds = (now - t).total_seconds()
    s = abs(seconds)
    days = int(s // 86400)
    if s < 60:
        rel = "just now"
    else:
        if s < 3600:
            amount = _plural(int(s // 60), "minute")
        elif s < 86400:
            amount = _plural(int(s // 3600), "hour")
        elif days < 14:
            amount = _plural(days, "day")
        elif days < 60:
            amount = _plural(days // 7, "week")
        elif days < 365:
            amount = _plural(days // 30, "month")
        else:
            amount = _plural(days // 365, "year")
        rel = f"{amount} ago" if seconds > 0 else f"in {amount}"
    stamp = t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC" if s < 2 * 86400 else "%Y-%m-%d")
    return f"{rel} ({stamp})"


def namespace_chars(store: MemoryStore, namespace: str) -> int:
    """Characters (code points) of every active memory's content in `namespace`, summed in the engine."""
    check_namespace(namespace)
    resp = store.catalog.search(Search("namespace_chars", {"namespace": namespace}, routing=namespace))
    return int(resp["aggregations"]["chars"]["value"] or 0)


def _line(m: Memory, now: datetime, content: str) -> str:
    status = "" if m.status == "active" else f", {m.status}"
    return f"- [{m.kind}{status}, {when(m.valid_from, now)}] {_SPACE.sub(' ', content)}"


def _key(content: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", content)).strip().casefold()


def build_context(store: MemoryStore, result: RecallResult, *, budget_chars: int = 2000,
                  budget_tokens: int | None = None, order: str = "relevance") -> Context:
    """Render `result` (items + recent) within the budget; `order` sorts the relevant section by
    rank ("relevance") or by time ("chronological") - which memories fit is decided by rank either way."""
    if isinstance(budget_chars, bool) or not isinstance(budget_chars, int) or budget_chars < 1:
        raise InvalidInput(f"budget_chars must be a positive integer, got {budget_chars!r}")
    if budget_tokens is not None and (isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int)
                                      or budget_tokens < 1):
        raise InvalidInput(f"budget_tokens must be a positive integer, got {budget_tokens!r}")
    if order not in ORDERS:
        raise InvalidInput(f"unknown order {order!r} (choose from {', '.join(ORDERS)})")

    def fits(text: str) -> bool:
        return len(text) <= budget_chars and (budget_tokens is None or estimate_tokens(text) <= budget_tokens)

    # (section, memory) in priority order, duplicates (same id or same content) dropped.
    candidates: list[tuple[str, Memory]] = []
    seen_ids: set[str] = set()
    seen_content: set[str] = set()
    duplicates = 0
    for section, m in [*((PINNED, m) for m in result.pinned), *((RELEVANT, r.memory) for r in result.items),
                       *((RECENT, m) for m in reversed(result.recent))]:
        if m.id in seen_ids or _key(m.content) in seen_content:
            duplicates += 1
            continue
        seen_ids.add(m.id)
        seen_content.add(_key(m.content))
        candidates.append((section, m))

    rank = {m.id: i for i, (_, m) in enumerate(candidates)}

    def sort_key(row: tuple[str, Memory, str]) -> tuple[Any, ...]:
        section, m, _ = row
        return (rank[m.id],) if section != RECENT and order == "relevance" else (m.valid_from, rank[m.id])

    def render(rows: Sequence[tuple[str, Memory, str]]) -> str:
        parts = []
        for section in (PINNED, RELEVANT, RECENT):
            mine = sorted((r for r in rows if r[0] == section), key=sort_key)
            if mine:
                parts.append("\n".join([section, *(_line(m, result.now, c) for _, m, c in mine)]))
        return "\n\n".join(parts)

    rows: list[tuple[str, Memory, str]] = []

    def place(section: str, m: Memory) -> str | None:
        """What of `m` fits next to `rows`: all of it, nothing, or - only when it is too big even
        alone - the longest prefix that fits, marked."""
        if fits(render([*rows, (section, m, m.content)])):
            return m.content
        if fits(render([(section, m, m.content)])):
            return None
        cut = _longest_prefix(len(m.content), lambda n: fits(render([*rows, (section, m, m.content[:n] + TRUNCATED)])))
        return m.content[:cut] + TRUNCATED if cut else None

    omitted, truncated = [], []
    for section, m in candidates:
        content = place(section, m)
        if content is None:
            omitted.append(m.id)
            continue
        rows.append((section, m, content))
        if content != m.content:
            truncated.append(m.id)
    text = render(rows)
    return Context(text, len(text), estimate_tokens(text), namespace_chars(store, result.namespace),
                   tuple(m.id for _, m, _ in rows), tuple(omitted), tuple(truncated), duplicates)


def _longest_prefix(size: int, ok: Callable[[int], bool]) -> int:
    """The largest n in 1..size with ok(n), 0 if none; ok must be monotone (true up to some n)."""
    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
