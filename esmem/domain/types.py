"""The value types of the domain: what a caller writes, what is stored, what a write or a recall returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Sequence

from esmem.domain.ranking import RecallParams
from esmem.values import parse_time

@dataclass(frozen=True)
class MemoryInput:
    """One memory to write; everything but content has a default."""

    content: str | bytes
    namespace: str = "default"
    kind: str = "fact"
    importance: float | None = None
    valid_from: str | datetime | None = None
    entities: Sequence[str] = ()
    source: str = "user"
    evergreen: bool = False
    metadata: Mapping[str, Any] | None = None
    external_id: str | None = None
    embedding: Sequence[float] | None = None
    supersedes: str | None = None  # the caller knows this replaces a memory: skip the lookup
    idempotency_key: str | None = None  # a retry with the same key lands on the same memory
    thread: str | None = None  # conversation turns (esmem/domain/threads.py): session, position, neighbour text
    seq: int | None = None
    neighbours: str | None = None
    applies_to: str | Sequence[str] | None = None  # pinned memories: situations they apply to (domain/pinned.py)

    @property
    def text(self) -> str:
        """The content as text (bytes read as UTF-8)."""
        return self.content.decode("utf-8") if isinstance(self.content, bytes) else self.content


@dataclass(frozen=True)
class Memory:
    id: str
    namespace: str
    content: str
    kind: str
    importance: float
    valid_from: datetime
    status: str
    recorded_at: datetime | None = None
    invalid_at: datetime | None = None
    superseded_by: str | None = None
    supersedes: tuple[str, ...] = ()
    access_count: int = 0
    last_accessed_at: datetime | None = None
    entities: tuple[str, ...] = ()
    source: str = "user"
    evergreen: bool = False
    external_id: str | None = None
    importance_rule: str | None = None
    metadata: Mapping[str, Any] | None = None
    possibly_updates: tuple[str, ...] = ()  # an uncertain merge: older memories this one may replace
    possibly_updated_by: tuple[str, ...] = ()  # ... or newer ones that may replace it
    reviews: tuple[Mapping[str, Any], ...] = ()  # verdicts on uncertain pairs (esmem/domain/review.py)

    @classmethod
    def from_hit(cls, doc_id: str, src: Mapping[str, Any]) -> "Memory":
        def t(key: str) -> datetime | None:
            return parse_time(src[key]) if src.get(key) is not None else None

        sup = src.get("supersedes") or []
        return cls(id=doc_id, namespace=src["namespace"], content=src["content"], kind=src["kind"],
                   importance=float(src["importance"]), valid_from=parse_time(src["valid_from"]),
                   status=src["status"], recorded_at=t("recorded_at"), invalid_at=t("invalid_at"),
                   superseded_by=src.get("superseded_by"),
                   supersedes=tuple(sup) if isinstance(sup, list) else (sup,),
                   access_count=int(src.get("access_count") or 0), last_accessed_at=t("last_accessed_at"),
                   entities=tuple(src.get("entities") or ()), source=src.get("source", "user"),
                   evergreen=bool(src.get("evergreen")), external_id=src.get("external_id"),
                   importance_rule=src.get("importance_rule"), metadata=src.get("metadata"),
                   possibly_updates=_tuple(src.get("possibly_updates")),
                   possibly_updated_by=_tuple(src.get("possibly_updated_by")),
                   reviews=tuple(r for r in _tuple(src.get("reviews")) if isinstance(r, Mapping)))


def _tuple(value: Any) -> tuple[Any, ...]:
    """A stored field that holds one value or a list of them, as a tuple."""
    return () if value is None else tuple(value) if isinstance(value, list) else (value,)


@dataclass(frozen=True)
class WriteResult:
    """What `remember` did: `added`, `superseded` (ids it replaced), `duplicate` (of id) or
    `outdated` (stored as history: a newer active memory on the same topic exists)."""

    action: str
    id: str
    superseded: tuple[str, ...] = ()
    duplicate_of: str | None = None
    outdated_by: str | None = None
    scores: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # candidate id -> the pair's reading
    dry_run: bool = False
    replayed: bool = False  # written before (a re-import or a retry): nothing new was added
    possibly_updates: tuple[str, ...] = ()  # `uncertain`: the older memory this one may replace
    possibly_updated_by: str | None = None  # `uncertain`, arriving late: the newer memory that may replace it


@dataclass(frozen=True)
class Recalled:
    """A recalled memory with its final score and the components that made it."""

    memory: Memory
    score: float
    rel: float
    recency: float
    importance_part: float  # multiply: the factor (1 + c*imp); weighted: gamma*(imp-1)/9; blend: 0
    reheat: float
    mmr_penalty: float = 0.0
    answer: float = 1.0  # the share of rel a memory that asks keeps: 1 - question_penalty * asks
    period: float = 1.0  # period_boost when the memory is from a period the query names, else 1
    when: float = 1.0  # when_boost when the query asks when and the memory tells a time, else 1
    rank_before_mmr: int = 0
    terms: Mapping[str, float] = field(default_factory=dict)
    legs: Mapping[str, Mapping[str, float]] = field(default_factory=dict)  # hybrid: {leg: {score, rank}}
    neighbour_of: str | None = None  # score inherited from this candidate next to it (domain/threads.py)
    demoted_by: str | None = None  # put under this newer same-topic memory (domain/resolve.py)


@dataclass(frozen=True)
class RecallResult:
    query: str
    namespace: str
    now: datetime
    params: RecallParams
    items: tuple[Recalled, ...]
    recent: tuple[Memory, ...] = ()
    took_ms: float = 0.0
    engine_took_ms: float = 0.0
    pinned: tuple[Memory, ...] = ()  # pinned memories that apply and are not in items (domain/pinned.py)

