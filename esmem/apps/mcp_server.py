"""esmem as a Model Context Protocol server: any MCP client (Claude Desktop, IDE agents, agent
frameworks) can remember and recall without code. Built on the official `mcp` SDK (extra `esmem[mcp]`).

One server process serves ONE namespace, fixed when the server starts (`esmem mcp -n alice`). No tool
takes a namespace argument, so a prompt-injected model can name any id or text it likes and still only
reach its own user's memories: reads are routed and filtered by the configured namespace, and
`history`/`restore` refuse an id that belongs to another namespace (MemoryStore.get checks it).

Every tool validates its arguments (the JSON schema, then MemoryStore's own checks) before anything
is written; a refusal is an MCP tool error (`isError`) with a one-line message the model can act on.
"""
from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from esmem.apps.context import build_context
from esmem.apps.dialogue import build_query
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import Memory
from esmem.errors import EsmemError
from esmem.values import KINDS, iso, parse_time
from esmem.values import check_namespace

Kind = Literal[KINDS]  # type: ignore[valid-type]  # one list of kinds: esmem.domain.ranking's
MAX_K = 50  # a model never needs more in one call; bounds the reply it has to read

INSTRUCTIONS = """\
Long-term memory for this user, kept across conversations. Call `context` (or `recall`) at the start
of a turn to see what you already know, and `remember` whenever the user states a fact, preference,
rule, plan or event worth keeping. Restating an updated fact supersedes the old one automatically;
`history` shows the versions and `restore` undoes a wrong merge; `forget` hides a memory the user
wants forgotten (a tombstone supersedes it; nothing is deleted)."""


# -- argument types (their Field descriptions end up in the tools' JSON schemas) ---------------
class Message(BaseModel):
    role: Literal["user", "assistant", "system", "tool"] = Field(
        description="Who said it; system and tool messages are ignored when building the query.")
    content: str = Field(description="The message text.")


MemoryId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$",
                                description="A memory id as returned by remember/recall.")]
Messages = Annotated[list[Message], Field(min_length=1, max_length=200, description=(
    "The conversation so far, oldest first. Acknowledgements such as 'ok', '好的，继续' are dropped "
    "and an old topic the newest user message does not mention is ignored."))]
Kinds = Annotated[list[Kind] | None, Field(default=None, min_length=1, description=(
    "Only memories of these kinds (default: all kinds)."))]


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
    action: Literal["added", "superseded", "duplicate", "outdated", "uncertain"] = Field(description=(
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


class ContextOut(BaseModel):
    text: str = Field(description="The block to paste before your answer; empty when nothing is known.")
    chars: int
    tokens: int = Field(description="Estimated tokens of `text`.")
    included: list[str] = Field(description="Ids of the memories in the block.")
    omitted: list[str] = Field(description="Ids recalled but left out to stay within the budget.")
    query: str


class HistoryOut(BaseModel):
    versions: list[MemoryOut] = Field(description="The version chain, oldest first.")


def _refuse(e: EsmemError) -> ToolError:
    return ToolError(str(e).splitlines()[0] if str(e) else type(e).__name__)


def _time(name: str, value: str | None) -> datetime | None:
    """Parse a time argument here so the error names the argument."""
    try:
        return parse_time(value) if value is not None else None
    except EsmemError as e:
        raise ToolError(f"{name}: {e}") from None


def _query(query: str | None, messages: list[Message] | None) -> str:
    if (query is None) == (messages is None):
        raise ToolError("give exactly one of `query` or `messages`")
    if messages is not None:
        built = build_query([m.model_dump() for m in messages])
        if not built:
            raise ToolError("no message has anything to search for (only acknowledgements or fillers)")
        return built
    assert query is not None
    if not query.strip():
        raise ToolError("query is empty")
    return query


def create_server(store: MemoryStore, namespace: str, *, touch: bool = True) -> MCPServer:
    """An MCP server whose tools read and write `namespace` of `store`, and nothing else."""
    check_namespace(namespace)

    server = MCPServer("esmem", instructions=INSTRUCTIONS, version=_version(), log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False))
    def remember(
        content: Annotated[str, Field(min_length=1, max_length=16000, description=(
            "One self-contained statement in the user's words, e.g. 'The user is allergic to peanuts' or "
            "'Deploys go out on Thursdays'. One fact per call."))],
        kind: Annotated[Kind, Field(description=(
            "fact: something true about the world or the user; preference: a like/dislike or style; "
            "intent: a plan or goal (fades in days); rule: an instruction to always follow (never fades); "
            "event: something that happened; note: anything else."))] = "fact",
        importance: Annotated[float | None, Field(default=None, ge=1, le=10, description=(
            "1-10 (10 = safety-critical such as an allergy). Omit to let esmem score it."))] = None,
        entities: Annotated[list[Annotated[str, Field(min_length=1, max_length=256)]] | None, Field(
            default=None, max_length=64, description="Names the memory is about (people, services, products).")] = None,
        valid_from: Annotated[str | None, Field(default=None, max_length=64, description=(
            "ISO-8601 time it became true; default now. Older than an existing version means history."))] = None,
    ) -> RememberOut:
        """Store a memory about this user for later conversations. If it updates something already
        remembered (e.g. a changed setting), the old version is superseded automatically and kept as
        history; restating a known fact is recognised as a duplicate. Returns what was decided."""
        try:
            r = store.remember(content, namespace, kind=kind, importance=importance,
                               entities=tuple(entities or ()), valid_from=_time("valid_from", valid_from))
        except EsmemError as e:
            raise _refuse(e) from None
        return RememberOut(action=r.action, id=r.id, superseded=list(r.superseded), duplicate_of=r.duplicate_of,
                           outdated_by=r.outdated_by, possibly_updates=list(r.possibly_updates),
                           candidates=[Candidate(id=i, bm25=s.get("bm25", 0.0), overlap=s.get("overlap", 0.0),
                                                 verdict=s.get("verdict", ""), why=s.get("why", ""))
                                       for i, s in r.scores.items()])

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def recall(
        query: Annotated[str | None, Field(default=None, max_length=4000, description=(
            "What to look for, in the user's language. Give this or `messages`."))] = None,
        messages: Annotated[list[Message] | None, Field(default=None, min_length=1, max_length=200, description=(
            "Instead of `query`: the recent conversation, oldest first; the query is built from it."))] = None,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many memories to return.")] = 5,
        kinds: Kinds = None,
        as_of: Annotated[str | None, Field(default=None, max_length=64, description=(
            "Answer as of this ISO-8601 time: only memories that were valid then (default: now)."))] = None,
    ) -> RecallOut:
        """Find what you remember about this user that is relevant now, best first, with the score
        components (relevance, recency, importance) of each. Superseded versions are not returned."""
        q = _query(query, messages)
        try:
            params = store.ranking_params().with_(kinds=tuple(kinds)) if kinds else store.params
            res = store.recall(q, namespace, k, params=params, as_of=_time("as_of", as_of), touch=touch)
        except EsmemError as e:
            raise _refuse(e) from None
        return RecallOut(query=res.query, memories=[
            Ranked(rank=i, memory=MemoryOut.of(r.memory), score=r.score, relevance=r.rel, recency=r.recency,
                   importance_part=r.importance_part, reheat=r.reheat, mmr_penalty=r.mmr_penalty)
            for i, r in enumerate(res.items, 1)], pinned=[MemoryOut.of(m) for m in res.pinned])

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def context(
        messages: Messages,
        budget: Annotated[int, Field(ge=100, le=20000, description="Character budget of the block.")] = 1500,
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many relevant memories to consider.")] = 8,
    ) -> ContextOut:
        """Build the memory block to read before answering: the relevant memories (best first) and the
        most recent ones, each dated ('3 weeks ago (2026-09-17)'), within `budget` characters. Prefer it
        over your assumptions; when two memories conflict, prefer the newer."""
        q = _query(None, messages)
        try:
            res = store.recall(q, namespace, k, touch=touch)
            block = build_context(store, res, budget_chars=budget)
        except EsmemError as e:
            raise _refuse(e) from None
        return ContextOut(text=block.text, chars=block.chars, tokens=block.tokens, included=list(block.included),
                          omitted=list(block.omitted), query=q)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def history(memory_id: MemoryId) -> HistoryOut:
        """Show every version of a memory (what it said before it was updated, and what replaced it),
        oldest first, with each version's status."""
        try:
            return HistoryOut(versions=[MemoryOut.of(m) for m in store.history(namespace, memory_id)])
        except EsmemError as e:
            raise _refuse(e) from None

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True))
    def restore(memory_id: MemoryId) -> HistoryOut:
        """Undo a wrong update: make a superseded memory active again and retire the version that
        replaced it (nothing is deleted). Returns the version chain after the change."""
        try:
            store.restore(namespace, memory_id)
            return HistoryOut(versions=[MemoryOut.of(m) for m in store.history(namespace, memory_id)])
        except EsmemError as e:
            raise _refuse(e) from None

    # Tombstones are written without the merge look-up: two tombstones must never merge with each
    # other (or with a real memory), each one supersedes exactly the memory it names.
    tombstones = MemoryStore(store.engine, store.names.prefix, params=store.params, merge=MergePolicy(enabled=False),
                             scorer=store.scorer, clock=store.clock)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False))
    def forget(
        memory_id: MemoryId,
        reason: Annotated[str | None, Field(default=None, max_length=500, description=(
            "Why, in a few words (kept with the tombstone)."))] = None,
    ) -> HistoryOut:
        """Stop using a memory because the user asked you to forget it or it was wrong. Nothing is
        deleted: a tombstone supersedes it, so recall and context no longer return it, `history`
        still shows it, and `restore` brings it back. To correct a fact, `remember` the right one instead."""
        try:
            target = store.get(namespace, memory_id)
            if target.status != "active":
                raise ToolError(f"memory {memory_id} is {target.status}, not active: nothing to forget")
            note = f"Forgotten at the user's request{': ' + reason.strip() if reason and reason.strip() else ''}"
            tombstones.remember(note, namespace, kind=target.kind, importance=1, source="agent",
                                supersedes=memory_id, metadata={"tombstone": True})
            return HistoryOut(versions=[MemoryOut.of(m) for m in store.history(namespace, memory_id)])
        except EsmemError as e:
            raise _refuse(e) from None

    return server


def _version() -> str:
    from esmem import __version__

    return __version__


def serve(store: MemoryStore, namespace: str, *, transport: str = "stdio", host: str = "127.0.0.1",
          port: int = 8000, path: str = "/mcp", touch: bool = True) -> None:
    """Run until the client disconnects (stdio) or the process is stopped (HTTP)."""
    server = create_server(store, namespace, touch=touch)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port, streamable_http_path=path)
