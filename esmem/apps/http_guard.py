"""What every esmem HTTP endpoint puts in front of its app: a bearer token checked in constant time,
a request size limit, and JSON error bodies for what they refuse. Pure ASGI (no framework), so the
MCP transport and the HTTP API share it.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Awaitable, Callable, MutableMapping, Sequence

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def digest(token: str) -> str:
    """The sha256 of a token, as stored at rest (tokens are random, so no salt or slow hash is needed)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def bearer(scope: Scope) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() or None if scheme.lower() == "bearer" else None
    return None


async def send_json(send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    raw = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": raw})


def error_body(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, **extra}}


class BearerToken:
    """Refuses (401 JSON) every HTTP request whose bearer token is not `token`."""

    def __init__(self, app: ASGIApp, token: str):
        if not token:
            raise ValueError("an empty bearer token would let anyone in")
        self.app = app
        self.expected = digest(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = bearer(scope)
            if given is None or not hmac.compare_digest(digest(given), self.expected):
                await send_json(send, 401, error_body("unauthorized", "missing or wrong bearer token"),
                                [(b"www-authenticate", b"Bearer")])
                return
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuses (413 JSON) a request body over `max_bytes`, by its Content-Length or, when it streams
    without one, as soon as it passes the limit; the body (at most `max_bytes`) is read before the app runs."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = error_body("too_large", f"request body over {self.max_bytes} bytes")
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await send_json(send, 413, too_large)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_bytes:
                await send_json(send, 413, too_large)
                return
        body: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Message:
            return body.pop() if body else await receive()

        await self.app(scope, replay, send)
