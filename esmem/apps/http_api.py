"""`esmem serve`: esmem over HTTP for any language (FastAPI, extra `esmem[serve]`).

Every route is under `/v1/namespaces/{namespace}/` and needs `Authorization: Bearer <API key>`; a key
may use the namespaces the keys file gives it and no other (403). Each route maps to one MemoryStore
call, so writes get esmem's validation and supersede-merge exactly as in Python. Every error is a
JSON body `{"error": {"type", "message", ...}}` (see `ErrorOut`); bodies declare their fields and
refuse any other. Each request is logged as one JSON line (method, route, namespace, status, time,
key name): never a key, a query or memory text. `GET /metrics` (no key needed; `esmem serve --no-metrics`
turns it off) is the Prometheus exposition of esmem/apps/http_metrics.py: no namespace, no text.
"""

import json
import logging
import threading
import time
from typing import Annotated, Any, Callable, MutableMapping

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from esmem.apps.api_keys import ApiKey, Keyring
from esmem.apps.context import build_context
from esmem.apps.erasing import erase_in
from esmem.apps.dialogue import build_query
from esmem.apps.http_guard import ASGIApp, BodyLimit, Receive, Scope, Send, error_body
from esmem.apps.http_metrics import CONTENT_TYPE, HttpMetrics
from esmem.apps.schemas import (ContextIn, ContextOut, EraseIn, EraseOut, ErrorOut, ForgetIn, HistoryOut, ListOut, MemoryId, MemoryOut,
                                RecallIn, RecallOut, RememberIn, RememberManyIn, RememberManyOut, RememberOut)
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import (EngineError, EngineUnavailable, EsmemError, InvalidInput, InvalidItem, NotFound,
                          NotInstalled, VersionConflict)
from esmem.values import check_namespace, parse_time

MAX_BODY_BYTES = 1024 * 1024
access_log = logging.getLogger("esmem.http.access")

_ERRORS = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text} for code, text in [
        (400, "esmem refused a value (invalid_input)"), (401, "missing or unknown API key"),
        (403, "the key may not use this namespace"), (404, "no such memory in this namespace"),
        (413, "request body too large"), (422, "the body or a parameter does not fit the schema"),
        (503, "the engine is unreachable or esmem is not installed")]}


def _status(e: EsmemError) -> tuple[int, str]:
    """The HTTP status and error type of an esmem error: the caller's mistakes are 4xx."""
    for cls, status, kind in ((InvalidInput, 400, "invalid_input"), (NotFound, 404, "not_found"),
                              (VersionConflict, 409, "conflict"), (NotInstalled, 503, "unavailable"),
                              (EngineUnavailable, 503, "unavailable"), (EngineError, 502, "engine_error")):
        if isinstance(e, cls):
            return status, kind
    return 500, "internal"


def _time(name: str, value: str | None) -> Any:
    try:
        return parse_time(value) if value is not None else None
    except InvalidInput as e:
        raise InvalidInput(f"{name}: {e}") from None


def create_app(make_store: Callable[[], MemoryStore], keys: Keyring, *, touch: bool = True,
               max_body: int = MAX_BODY_BYTES, metrics: bool = True) -> FastAPI:
    """The API over the stores `make_store` builds: one per worker thread, since a store's writer
    takes one write at a time (they share the engine's connection pool). `touch`: recalls reheat.
    `metrics`: serve `GET /metrics` (the requests are measured either way)."""
    from esmem import __version__

    app = FastAPI(title="esmem", version=__version__, description=__doc__, responses=_RESPONSES,
                  docs_url=None, redoc_url=None,
                  generate_unique_id_function=lambda route: route.name)
    local = threading.local()
    meter = HttpMetrics()

    def store() -> MemoryStore:
        if not hasattr(local, "store"):
            local.store = make_store()
        mine: MemoryStore = local.store  # this thread's
        return mine

    bearer = HTTPBearer(auto_error=False, description="An API key from the server's keys file (`esmem serve-key`).")

    async def namespace_of(request: Request, namespace: Annotated[str, Path(max_length=128)],
                           credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> str:
        key: ApiKey | None = keys.find(credentials.credentials) if credentials else None
        if key is None:
            raise HTTPException(401, "missing or unknown API key", headers={"WWW-Authenticate": "Bearer"})
        request.scope["esmem.key"] = key.name
        check_namespace(namespace)
        if not key.allows(namespace):
            raise HTTPException(403, f"this key may not use namespace {namespace!r}")
        return namespace

    Namespace = Annotated[str, Depends(namespace_of)]
    v1 = "/v1/namespaces/{namespace}"

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, e: RequestValidationError) -> JSONResponse:
        details = [{"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
                   for err in e.errors()]
        first = details[0] if details else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"])
        return JSONResponse(error_body("invalid_request", f"{where}: {first['msg']}" if where else str(first["msg"]),
                                       details=details), status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        return JSONResponse(error_body(_ERRORS.get(e.status_code, "invalid_request"), str(e.detail)),
                            status_code=e.status_code, headers=e.headers)

    @app.exception_handler(EsmemError)
    async def esmem_error(request: Request, e: EsmemError) -> JSONResponse:
        status, kind = _status(e)
        extra = {"position": e.position} if isinstance(e, InvalidItem) else {}
        message = (str(e).splitlines() or [type(e).__name__])[0] if status < 500 or kind != "internal" else "internal error"
        return JSONResponse(error_body(kind, message, **extra), status_code=status)

    @app.exception_handler(Exception)
    async def crash(request: Request, e: Exception) -> JSONResponse:
        return JSONResponse(error_body("internal", "internal error"), status_code=500)

    def one(m: RememberIn, namespace: str, position: str = "") -> MemoryInput:
        return MemoryInput(m.content, namespace, kind=m.kind, importance=m.importance, entities=tuple(m.entities or ()),
                           valid_from=_time(position + "valid_from", m.valid_from), supersedes=m.supersedes,
                           idempotency_key=m.idempotency_key)

    @app.post(v1 + "/memories", tags=["write"], summary="Remember one memory")
    def remember(namespace: Namespace, body: RememberIn) -> RememberOut:
        """Write one memory through esmem's merge decision: it may supersede an older version of the
        same statement (`action: superseded`) or be recognised as a duplicate."""
        results = store().remember_many([one(body, namespace)])
        meter.remember(results)
        return RememberOut.of(results[0])

    @app.post(v1 + "/memories/batch", tags=["write"], summary="Remember many memories, in order")
    def remember_many(namespace: Namespace, body: RememberManyIn) -> RememberManyOut:
        """Write memories in order (a later one may supersede an earlier one of the same batch).
        Every memory is validated first: one refused memory (`position`) writes none."""
        items = [one(m, namespace, f"memories.{i}.") for i, m in enumerate(body.memories)]
        results = store().remember_many(items, dry_run=body.dry_run)
        meter.remember(results)
        return RememberManyOut(results=[RememberOut.of(r) for r in results])

    @app.get(v1 + "/memories", tags=["read"], summary="List the newest memories")
    def list_memories(namespace: Namespace,
                      limit: Annotated[int, Query(ge=1, le=1000, description="How many.")] = 20) -> ListOut:
        """The newest active memories of the namespace, newest first (changes nothing)."""
        return ListOut(memories=[MemoryOut.of(m) for m in store().recent(namespace, limit)])

    @app.get(v1 + "/memories/{memory_id}", tags=["read"], summary="Get one memory")
    def get(namespace: Namespace, memory_id: Annotated[str, Path(min_length=1, max_length=128,
                                                                 pattern=r"^[A-Za-z0-9_-]+$")]) -> MemoryOut:
        """One memory by id, whatever its status (changes nothing)."""
        return MemoryOut.of(store().get(namespace, memory_id))

    @app.get(v1 + "/memories/{memory_id}/history", tags=["read"], summary="Every version of a memory")
    def history(namespace: Namespace, memory_id: Annotated[MemoryId, Path()]) -> HistoryOut:
        """The version chain of a memory, oldest first (changes nothing)."""
        return HistoryOut(versions=[MemoryOut.of(m) for m in store().history(namespace, memory_id)])

    @app.post(v1 + "/memories/{memory_id}/restore", tags=["write"], summary="Undo a merge")
    def restore(namespace: Namespace, memory_id: Annotated[MemoryId, Path()]) -> HistoryOut:
        """Make a superseded memory active again and retire the version that replaced it."""
        s = store()
        s.restore(namespace, memory_id)
        return HistoryOut(versions=[MemoryOut.of(m) for m in s.history(namespace, memory_id)])

    @app.post(v1 + "/memories/{memory_id}/forget", tags=["write"], summary="Forget a memory")
    def forget(namespace: Namespace, memory_id: Annotated[MemoryId, Path()], body: ForgetIn) -> HistoryOut:
        """A tombstone supersedes the memory: recall no longer returns it, history keeps it, restore
        brings it back. Nothing is deleted."""
        s = store()
        s.forget(namespace, memory_id, reason=body.reason)
        return HistoryOut(versions=[MemoryOut.of(m) for m in s.history(namespace, memory_id)])

    @app.post(v1 + "/erase", tags=["write"], summary="Erase memories for good")
    def erase(namespace: Namespace, body: EraseIn) -> EraseOut:
        """Delete from the index, for good, the namespace's memories that name or mention `entity`, the
        memories `ids`, or (`everything`) all of them, with every version linked to them; then count
        again (`remaining`, 0: the proof) and keep an audit record without content. Never reaches
        another namespace. Needs `confirm: true` unless `dry_run`."""
        return erase_in(store(), namespace, entity=body.entity, ids=body.ids, everything=body.everything,
                        dry_run=body.dry_run, confirm=body.confirm)

    @app.post(v1 + "/recall", tags=["read"], summary="Recall the memories relevant to a query")
    def recall(namespace: Namespace, body: RecallIn) -> RecallOut:
        """Top-k active memories for `query` (or a conversation), ranked in the engine, with each score's
        parts. With the server's default `touch`, the returned memories' access counts are updated."""
        if (body.query is None) == (body.messages is None):
            raise InvalidInput("give exactly one of `query` or `messages`")
        query = body.query if body.query is not None else build_query([m.model_dump() for m in body.messages or ()])
        if not query.strip():
            raise InvalidInput("nothing to search for (the query is empty, or the messages only fillers)")
        s = store()
        params = s.ranking_params().with_(kinds=tuple(body.kinds)) if body.kinds else s.params
        result = s.recall(query, namespace, body.k, params=params, as_of=_time("as_of", body.as_of), touch=touch)
        meter.recall(result)
        return RecallOut.of(result)

    @app.post(v1 + "/context", tags=["read"], summary="The memory block to put before an answer")
    def context(namespace: Namespace, body: ContextIn) -> ContextOut:
        """The relevant and the most recent memories of a conversation, dated, within `budget` characters."""
        query = build_query([m.model_dump() for m in body.messages])
        if not query:
            raise InvalidInput("no message has anything to search for (only acknowledgements or fillers)")
        s = store()
        result = s.recall(query, namespace, body.k, touch=touch)
        meter.recall(result)
        block = build_context(s, result, budget_chars=body.budget)
        return ContextOut(text=block.text, chars=block.chars, tokens=block.tokens, included=list(block.included),
                          omitted=list(block.omitted), query=query)

    if metrics:
        @app.get("/metrics", include_in_schema=False)
        def prometheus() -> Response:
            return Response(meter.exposition(), media_type=CONTENT_TYPE)

    app.add_middleware(BodyLimit, max_bytes=max_body)
    app.add_middleware(AccessLog, metrics=meter)
    return app


def log_access_to(stream: Any) -> None:
    """Write the access log's lines to `stream` and nowhere else (the servers print them on stderr)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    access_log.addHandler(handler)
    access_log.setLevel(logging.INFO)
    access_log.propagate = False


class AccessLog:
    """One JSON line per request on `esmem.http.access`: what was asked and how it ended, never a secret,
    a query or memory text (the route template, not the path; the key's name, not the key); and the
    same request counted and timed in `metrics`."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics | None = None):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def tracked(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        finally:
            seconds = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", None)
            access_log.info(json.dumps({
                "method": scope["method"], "route": route,
                "namespace": (scope.get("path_params") or {}).get("namespace"), "status": status,
                "ms": round(seconds * 1000, 1), "key": scope.get("esmem.key")}))
            if self.metrics is not None:
                self.metrics.request(scope["method"], route, status, seconds)
