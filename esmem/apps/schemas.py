"""The shapes memories take on the wire: the JSON of the HTTP API (`esmem serve`) and of the MCP
tools, one pydantic model each, so both say the same thing the same way (and their schemas document it).
"""
from __future__ import annotations

from typing import Annotated, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from esmem.domain.types import Memory, RecallResult, WriteResult
from esmem.values import KINDS, iso

Kind = Literal[KINDS]  # type: ignore[valid-type]  # one list of kinds: esmem.domain.ranking's
Action = Literal["added", "superseded", "duplicate", "outdated", "uncertain"]


MAX_CONTENT = 16000  # characters of one memory or message; bounds every text argument
MAX_BATCH = 500  # memories in one remember-many call


class Strict(BaseModel):
    """Refuses fields it does not declare: a misspelt or unsupported argument is an error, not ignored."""

    model_config = ConfigDict(extra="forbid")


# -- argument types (their Field descriptions end up in the tools' JSON schemas) ---------------
class Message(Strict):
    role: Literal["user", "assistant", "system", "tool"] = Field(
        description="Who said it; system and tool messages are ignored when building the query.")
    content: str = Field(max_length=MAX_CONTENT, description="The message text.")


MemoryId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$",
                                description="A memory id as returned by remember/recall.")]
Messages = Annotated[list[Message], Field(min_length=1, max_length=200, description=(
    "The conversation so far, oldest first. Acknowledgements such as 'ok', '好的，继续' are dropped "
    "and an old topic the newest user message does not mention is ignored."))]
Kinds = Annotated[list[Kind] | None, Field(default=None, min_length=1, max_length=len(KINDS), description=(
    "Only memories of these kinds (default: all kinds)."))]
Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT, description=(
    "One self-contained statement in the user's words, e.g. 'The user is allergic to peanuts' or "
    "'Deploys go out on Thursdays'. One fact per memory."))]
KindArg = Annotated[Kind, Field(description=(
    "fact: something true about the world or the user; preference: a like/dislike or style; "
    "intent: a plan or goal (fades in days); rule: an instruction to always follow (never fades); "
    "event: something that happened; note: anything else."))]
Importance = Annotated[float | None, Field(default=None, ge=1, le=10, description=(
    "1-10 (10 = safety-critical such as an allergy). Omit to let esmem score it."))]
Entities = Annotated[list[Annotated[str, Field(min_length=1, max_length=256)]] | None, Field(
    default=None, max_length=64, description="Names the memory is about (people, services, products).")]
Time = Annotated[str | None, Field(default=None, max_length=64, description="An ISO-8601 time.")]
ValidFrom = Annotated[str | None, Field(default=None, max_length=64, description=(
    "ISO-8601 time it became true; default now. Older than an existing version means history."))]
Query = Annotated[str | None, Field(default=None, max_length=4000, description=(
    "What to look for, in the user's language. Give this or `messages`."))]
Reason = Annotated[str | None, Field(default=None, max_length=500, description=(
    "Why, in a few words (kept with the tombstone)."))]


class RememberIn(Strict):
    """One memory to write."""

    content: Content
    kind: KindArg = "fact"
    importance: Importance = None
    entities: Entities = None
    valid_from: ValidFrom = None
    supersedes: MemoryId | None = Field(None, description=(
        "The id of the memory this one replaces (an edit): no similarity look-up, that one is superseded."))
    idempotency_key: str | None = Field(None, min_length=1, max_length=256, description=(
        "A retry with the same key lands on the same memory instead of writing a second one."))


class RememberManyIn(Strict):
    memories: list[RememberIn] = Field(min_length=1, max_length=MAX_BATCH, description="Written in this order.")
    dry_run: bool = Field(False, description="Decide what would happen without writing.")


class RecallIn(Strict):
    query: Query = None
    messages: list[Message] | None = Field(None, min_length=1, max_length=200, description=(
        "Instead of `query`: the recent conversation, oldest first; the query is built from it."))
    k: int = Field(5, ge=1, le=100, description="How many memories to return.")
    kinds: Kinds = None
    as_of: Time = None


class ContextIn(Strict):
    messages: Messages
    budget: int = Field(1500, ge=100, le=20000, description="Character budget of the block.")
    k: int = Field(8, ge=1, le=100, description="How many relevant memories to consider.")


class ForgetIn(Strict):
    reason: Reason = None


class EraseIn(Strict):
    entity: str | None = Field(None, min_length=1, max_length=256, description=(
        "Erase every memory of the namespace that names this entity or mentions it in its text."))
    ids: list[MemoryId] | None = Field(None, min_length=1, max_length=1000, description="Erase these memories.")
    everything: bool = Field(False, description="Erase every memory of the namespace.")
    dry_run: bool = Field(False, description="Only list what would be erased.")
    confirm: bool = Field(False, description=(
        "Must be true to erase: the memories and every version linked to them are deleted for good."))


# -- results -----------------------------------------------------------------------------------
class MemoryOut(BaseModel):
    id: str
    content: str
    kind: str
    importance: float = Field(description="1-10; 8 or more is always recalled when it matches at all.")
    valid_from: str = Field(description="When it became true (ISO-8601).")
    status: str = Field(description="active, superseded (replaced by a newer version) or retired.")
    superseded_by: str | None = None
    supersedes: list[str] = Field(default_factory=list)
    entities: list[str] = Field(default_factory=list)
    invalid_at: str | None = None

    @classmethod
    def of(cls, m: Memory) -> "MemoryOut":
        return cls(id=m.id, content=m.content, kind=m.kind, importance=m.importance, valid_from=iso(m.valid_from),
                   status=m.status, superseded_by=m.superseded_by, supersedes=list(m.supersedes),
                   entities=list(m.entities), invalid_at=iso(m.invalid_at) if m.invalid_at else None)


class Candidate(BaseModel):
    id: str
    bm25: float
    overlap: float = Field(description="Share of the shorter memory's words found in the other.")
    verdict: str = Field("", description="How the pair reads: restates, replaces, coexists or uncertain.")
    why: str = Field("", description="What made that reading.")


class RememberOut(BaseModel):
    action: Action = Field(description=(
        "added: a new memory; superseded: it replaced the older version listed in `superseded`; "
        "duplicate: already known (nothing new written, the existing one was reinforced); "
        "outdated: an active newer memory on the same topic exists, this one is kept as history; "
        "uncertain: added, and it may replace `possibly_updates` (both stay active; if it does, "
        "remember it again saying what changed, e.g. with 'now' or 'instead')."))
    id: str = Field(description="The new memory's id (for duplicate: the existing memory's id).")
    superseded: list[str] = Field(default_factory=list)
    duplicate_of: str | None = None
    outdated_by: str | None = None
    possibly_updates: list[str] = Field(default_factory=list)
    candidates: list[Candidate] = Field(default_factory=list, description="Similar memories the decision compared.")

    @classmethod
    def of(cls, r: WriteResult) -> "RememberOut":
        return cls(action=cast(Action, r.action), id=r.id, superseded=list(r.superseded), duplicate_of=r.duplicate_of,
                   outdated_by=r.outdated_by, possibly_updates=list(r.possibly_updates),
                   candidates=[Candidate(id=i, bm25=s.get("bm25", 0.0), overlap=s.get("overlap", 0.0),
                                         verdict=s.get("verdict", ""), why=s.get("why", ""))
                               for i, s in r.scores.items()])


class Ranked(BaseModel):
    rank: int
    memory: MemoryOut
    score: float = Field(description="Final engine score (before MMR diversification).")
    relevance: float = Field(description="Text relevance: BM25 of the query plus entity and must-not-miss boosts.")
    recency: float = Field(description="Decay factor 0-1 from the memory's age and its kind's half-life.")
    importance_part: float = Field(description="What importance contributed (depends on the ranking mode).")
    reheat: float = Field(description="Boost from recent recalls of this memory.")
    mmr_penalty: float = Field(description="Similarity to memories ranked above it (diversification).")


class RecallOut(BaseModel):
    query: str = Field(description="The query actually searched (built from the messages if given).")
    memories: list[Ranked]
    pinned: list[MemoryOut] = Field(default_factory=list, description=(
        "Must-not-miss memories (allergies, standing instructions...) that apply to this request: "
        "keep them in mind even when they are not ranked."))

    @classmethod
    def of(cls, res: RecallResult) -> "RecallOut":
        return cls(query=res.query, memories=[
            Ranked(rank=i, memory=MemoryOut.of(r.memory), score=r.score, relevance=r.rel, recency=r.recency,
                   importance_part=r.importance_part, reheat=r.reheat, mmr_penalty=r.mmr_penalty)
            for i, r in enumerate(res.items, 1)], pinned=[MemoryOut.of(m) for m in res.pinned])


class ContextOut(BaseModel):
    text: str = Field(description="The block to paste before your answer; empty when nothing is known.")
    chars: int
    tokens: int = Field(description="Estimated tokens of `text`.")
    included: list[str] = Field(description="Ids of the memories in the block.")
    omitted: list[str] = Field(description="Ids recalled but left out to stay within the budget.")
    query: str


class HistoryOut(BaseModel):
    versions: list[MemoryOut] = Field(description="The version chain, oldest first.")


class ListOut(BaseModel):
    memories: list[MemoryOut] = Field(description="Active memories, newest first.")


class RememberManyOut(BaseModel):
    results: list[RememberOut] = Field(description="One per memory, in input order.")


class EraseOut(BaseModel):
    selector: str = Field(description="entity, ids or namespace.")
    erased: int = Field(description="Memories deleted (a dry run: 0).")
    covered: list[str] = Field(default_factory=list, description=(
        "A dry run: the ids that would be erased, the selected memories and every version linked to them."))
    remaining: int = Field(description="The proof: what the selector still matches after the erase (0).")
    audit_id: str | None = Field(None, description="The audit record of the erase (it holds no content).")


class ErrorDetail(BaseModel):
    type: str = Field(description=(
        "unauthorized, forbidden, invalid_request (the body or a parameter), invalid_input (esmem refused "
        "a value), not_found, conflict, too_large, unavailable, engine_error or internal."))
    message: str = Field(description="One line saying what was wrong.")
    details: list[dict[str, object]] | None = Field(None, description="invalid_request: each field refused.")
    position: int | None = Field(None, description="remember-many: the 0-based position of the refused memory.")


class ErrorOut(BaseModel):
    """Every error answer of the HTTP API."""

    error: ErrorDetail
