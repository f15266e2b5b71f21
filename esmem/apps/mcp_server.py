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

import threading
from datetime import datetime
from typing import Annotated, Any, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp_types import ToolAnnotations
from pydantic import ConfigDict, Field

from esmem.apps.context import build_context
from esmem.apps.dialogue import build_query
from esmem.apps.erasing import erase_in
from esmem.apps.schemas import (Content, ContextOut, Entities, EraseOut, HistoryOut, Importance, KindArg, Kinds,
                                ListOut, MemoryId, MemoryOut, Message, Messages, Query, Reason, RecallOut,
                                RememberIn, RememberManyOut, RememberOut, ValidFrom)
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import EsmemError
from esmem.values import check_namespace, parse_time

MAX_K = 50  # a model never needs more in one call; bounds the reply it has to read
MAX_BATCH_TOOL = 50  # memories in one remember_many call
MAX_MESSAGE_BYTES = 512 * 1024  # HTTP: one JSON-RPC message (a larger batch goes in several calls)

INSTRUCTIONS = """\
Long-term memory for this user, kept across conversations. Call `context` (or `recall`) at the start
of a turn to see what you already know, and `remember` whenever the user states a fact, preference,
rule, plan or event worth keeping. Restating an updated fact supersedes the old one automatically;
`edit` replaces a memory you know is wrong by id; `history` shows the versions and `restore` undoes a
wrong merge; `forget` hides a memory the user wants forgotten (a tombstone supersedes it; nothing is
deleted); `erase` deletes for good, only when the user asks for their data to be deleted. `list` and
`get` browse what is stored without changing anything."""


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
    """An MCP server whose tools read and write `namespace` of `store`, and nothing else.

    Annotations say exactly what writes: `recall` and `context` record which memories they returned
    (the reheat that ranks often-used memories higher), so they are read-only only with `touch=False`;
    `list`, `get` and `history` never write."""
    check_namespace(namespace)

    server = MCPServer("esmem", instructions=INSTRUCTIONS, version=_version(), log_level="WARNING")
    writing = threading.Lock()  # sync tools run on worker threads; one store's writer takes one write at a time
    reads = ToolAnnotations(read_only_hint=True)
    recalls = reads if not touch else ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                      idempotent_hint=False)

    def write(items: list[MemoryInput]) -> list[RememberOut]:
        try:
            with writing:
                return [RememberOut.of(r) for r in store.remember_many(items)]
        except EsmemError as e:
            raise _refuse(e) from None

    def memory(m: RememberIn, position: str = "") -> MemoryInput:
        return MemoryInput(m.content, namespace, kind=m.kind, importance=m.importance, entities=tuple(m.entities or ()),
                           valid_from=_time(position + "valid_from", m.valid_from), supersedes=m.supersedes,
                           idempotency_key=m.idempotency_key)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    def remember(content: Content, kind: KindArg = "fact", importance: Importance = None,
                 entities: Entities = None, valid_from: ValidFrom = None) -> RememberOut:
        """Store a memory about this user for later conversations. If it updates something already
        remembered (e.g. a changed setting), the old version is superseded automatically and kept as
        history; restating a known fact is recognised as a duplicate. Returns what was decided."""
        return write([MemoryInput(content, namespace, kind=kind, importance=importance, entities=tuple(entities or ()),
                                  valid_from=_time("valid_from", valid_from))])[0]

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    def remember_many(memories: Annotated[list[RememberIn], Field(min_length=1, max_length=MAX_BATCH_TOOL, description=(
            "The memories to store, in order (each as for `remember`)."))]) -> RememberManyOut:
        """Store several memories at once, in order, each decided as `remember` decides it (a later one
        can supersede an earlier one of the same call). Nothing is written if any one is invalid."""
        return RememberManyOut(results=write([memory(m, f"memories[{i}].") for i, m in enumerate(memories)]))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    def edit(memory_id: MemoryId, content: Content, kind: KindArg | None = None,
             importance: Importance = None, entities: Entities = None) -> RememberOut:
        """Correct a memory you know by id: the new text supersedes it (the old version stays in
        `history`, `restore` brings it back). Kind and entities default to the old memory's."""
        try:
            old = store.get(namespace, memory_id)
        except EsmemError as e:
            raise _refuse(e) from None
        if old.status != "active":
            raise ToolError(f"memory {memory_id} is {old.status}, not active: edit its active version")
        return write([MemoryInput(content, namespace, kind=kind or old.kind, importance=importance,
                                  entities=tuple(entities if entities is not None else old.entities),
                                  supersedes=memory_id)])[0]

    @server.tool(annotations=recalls)
    def recall(
        query: Query = None,
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
            return RecallOut.of(store.recall(q, namespace, k, params=params, as_of=_time("as_of", as_of), touch=touch))
        except EsmemError as e:
            raise _refuse(e) from None

    @server.tool(annotations=recalls)
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
            block = build_context(store, store.recall(q, namespace, k, touch=touch), budget_chars=budget)
        except EsmemError as e:
            raise _refuse(e) from None
        return ContextOut(text=block.text, chars=block.chars, tokens=block.tokens, included=list(block.included),
                          omitted=list(block.omitted), query=q)

    @server.tool(name="list", annotations=reads)
    def list_(limit: Annotated[int, Field(ge=1, le=MAX_K, description="How many to list.")] = 20) -> ListOut:
        """List the newest memories kept about this user (active ones, newest first) without searching;
        use `recall` to find the ones relevant to a question. Changes nothing."""
        try:
            return ListOut(memories=[MemoryOut.of(m) for m in store.recent(namespace, limit)])
        except EsmemError as e:
            raise _refuse(e) from None

    @server.tool(annotations=reads)
    def get(memory_id: MemoryId) -> MemoryOut:
        """Show one memory by id, whatever its status (active, superseded or retired). Changes nothing."""
        try:
            return MemoryOut.of(store.get(namespace, memory_id))
        except EsmemError as e:
            raise _refuse(e) from None

    @server.tool(annotations=reads)
    def history(memory_id: MemoryId) -> HistoryOut:
        """Show every version of a memory (what it said before it was updated, and what replaced it),
        oldest first, with each version's status. Changes nothing."""
        try:
            return HistoryOut(versions=[MemoryOut.of(m) for m in store.history(namespace, memory_id)])
        except EsmemError as e:
            raise _refuse(e) from None

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    def restore(memory_id: MemoryId) -> HistoryOut:
        """Undo a wrong update: make a superseded memory active again and retire the version that
        replaced it (nothing is deleted). Returns the version chain after the change."""
        try:
            with writing:
                store.restore(namespace, memory_id)
            return HistoryOut(versions=[MemoryOut.of(m) for m in store.history(namespace, memory_id)])
        except EsmemError as e:
            raise _refuse(e) from None

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
    def forget(memory_id: MemoryId, reason: Reason = None) -> HistoryOut:
        """Stop using a memory because the user asked you to forget it or it was wrong. Nothing is
        deleted: a tombstone supersedes it, so recall and context no longer return it, `history`
        still shows it, and `restore` brings it back. To correct a fact, `remember` the right one instead."""
        try:
            with writing:
                store.forget(namespace, memory_id, reason=reason)
            return HistoryOut(versions=[MemoryOut.of(m) for m in store.history(namespace, memory_id)])
        except EsmemError as e:
            raise _refuse(e) from None

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True))
    def erase(
        confirm: Annotated[bool, Field(description=(
            "Must be true: erase deletes for good. Call it only when the user explicitly asked to delete "
            "their data, and after telling them it cannot be undone."))],
        entity: Annotated[str | None, Field(default=None, min_length=1, max_length=256, description=(
            "Erase every memory that names this entity (a person, a company...) or mentions it."))] = None,
        memory_ids: Annotated[list[MemoryId] | None, Field(default=None, min_length=1, max_length=100, description=(
            "Erase these memories."))] = None,
        everything: Annotated[bool, Field(description="Erase every memory kept about this user.")] = False,
    ) -> EraseOut:
        """Delete memories for good (the user's right to erasure): the selected memories and every
        version linked to them are removed from the index, unlike `forget`, which keeps history and
        can be undone. Name exactly one of `entity`, `memory_ids` or `everything`. Returns how many
        were erased and the proof (`remaining`, 0)."""
        if confirm is not True:
            raise ToolError("erase deletes for good: call it with confirm=true once the user asked for it")
        try:
            with writing:
                return erase_in(store, namespace, entity=entity, ids=memory_ids, everything=everything, confirm=True)
        except EsmemError as e:
            raise _refuse(e) from None

    _refuse_unknown_arguments(server)
    return server


def _refuse_unknown_arguments(server: MCPServer) -> None:
    """Make every tool refuse an argument it does not declare (the SDK drops them silently), and say
    so in its input schema (`additionalProperties: false`)."""
    for tool in server._tool_manager.list_tools():  # the SDK has no public hook for the argument model
        base = tool.fn_metadata.arg_model
        strict = cast(type[ArgModelBase], type(base.__name__, (base,), {
            "model_config": ConfigDict(**{**base.model_config, "extra": "forbid"}), "__module__": base.__module__}))
        tool.fn_metadata.arg_model = strict
        tool.parameters = strict.model_json_schema(by_alias=True)


def _version() -> str:
    from esmem import __version__

    return __version__


def http_app(server: MCPServer, token: str, *, path: str = "/mcp", host: str = "127.0.0.1") -> Any:
    """The streamable-HTTP ASGI app of `server`, refusing every request without `Authorization:
    Bearer <token>` (401) and every message over MAX_MESSAGE_BYTES (413)."""
    from esmem.apps.http_guard import BearerToken

    app = server.streamable_http_app(streamable_http_path=path, max_request_body_size=MAX_MESSAGE_BYTES, host=host)
    return BearerToken(app, token)


def serve(store: MemoryStore, namespace: str, *, transport: str = "stdio", host: str = "127.0.0.1",
          port: int = 8000, path: str = "/mcp", touch: bool = True, token: str | None = None) -> None:
    """Run until the client disconnects (stdio) or the process is stopped (HTTP, which needs `token`)."""
    server = create_server(store, namespace, touch=touch)
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    if not token:
        raise ValueError("the HTTP transport needs a bearer token")
    uvicorn.run(http_app(server, token, path=path, host=host), host=host, port=port, log_level="warning")
