"""A TCP relay in front of the real engine that fails on purpose, for fault-injection tests.

It forwards HTTP/1.1 requests one by one (keep-alive included) and counts them. Armed with a path
substring and an ordinal, it acts on the n-th matching request:

- cut="after":  the request reaches the engine and is applied, the response is read and thrown away,
                the client's connection is closed: a write that happened but was reported as failed;
- cut="before": the connection is closed before the request is forwarded: a write that never happened;
- rewrite=(old, new): the request body is edited before forwarding (to make the engine reject one
                document of a bulk); the relay stays up;
- delay=seconds: the response is held that long before the client gets it (a slow call); the relay
                stays up.

After a cut the relay stays "down" (every later request is cut too, so the client's own retries
fail as they would in an outage) until `heal()`.
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Seen:
    method: str
    path: str


@dataclass
class _Plan:
    needle: str
    ordinal: int
    cut: str | None = "after"
    rewrite: tuple[bytes, bytes] | None = None
    delay: float = 0.0
    matched: int = 0
    fired: bool = False


@dataclass
class Relay:
    upstream: tuple[str, int]
    seen: list[Seen] = field(default_factory=list)
    down: bool = False
    _plan: _Plan | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def arm(self, needle: str, ordinal: int, *, cut: str | None = "after",
            rewrite: tuple[bytes, bytes] | None = None, delay: float = 0.0) -> None:
        """Act on the `ordinal`-th (1-based) request whose "METHOD path" contains `needle`."""
        with self._lock:
            self._plan = _Plan(needle, ordinal, cut, rewrite, delay)

    @property
    def fired(self) -> bool:
        return bool(self._plan and self._plan.fired)

    def heal(self) -> None:
        with self._lock:
            self._plan, self.down = None, False
        self._drop_all()

    def close(self) -> None:
        self._server.close()
        self._drop_all()

    # -- plumbing ----------------------------------------------------------------------------
    def _drop_all(self) -> None:
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            try:
                c.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        with self._lock:
            self._conns += [client, upstream]
        cin, uin = client.makefile("rb"), upstream.makefile("rb")
        try:
            while True:
                head, body = _read_message(cin, request=True)
                if head is None:
                    return
                method, path = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")[:2]
                action = self._decide(method, path)
                if action == "before":
                    return
                if action == "rewrite":
                    old, new = self._plan.rewrite  # type: ignore[union-attr]
                    body = body.replace(old, new)
                    head = _set_length(head, len(body))
                upstream.sendall(head + body)
                rhead, rbody = _read_message(uin, request=False, method=method)
                if rhead is None:
                    return
                if action == "after":
                    return  # applied by the engine, never answered
                if action == "delay":
                    time.sleep(self._plan.delay)  # type: ignore[union-attr]
                client.sendall(rhead + rbody)
        except OSError:
            return
        finally:
            for s in (client, upstream):
                try:
                    s.close()
                except OSError:
                    pass

    def _decide(self, method: str, path: str) -> str | None:
        with self._lock:
            self.seen.append(Seen(method, path))
            if self.down:
                return "before"
            plan = self._plan
            if plan is None or plan.fired or plan.needle not in f"{method} {path}":
                return None
            plan.matched += 1
            if plan.matched != plan.ordinal:
                return None
            plan.fired = True
            if plan.rewrite:
                return "rewrite"
            if plan.delay:
                return "delay"
            self.down = True
            return plan.cut


def _read_message(f, *, request: bool, method: str = "") -> tuple[bytes | None, bytes]:
    """One HTTP/1.1 message: (head incl. the blank line, body); (None, b"") at EOF."""
    lines = []
    while True:
        line = f.readline()
        if not line:
            return None, b""
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            break
    head = b"".join(lines)
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (ln.decode("latin-1").partition(":") for ln in lines[1:-1])}
    if not request and (method == "HEAD" or lines[0].split(b" ")[1][:1] in (b"1",) or b" 204 " in lines[0]
                        or b" 304 " in lines[0]):
        return head, b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size_line = f.readline()
            body += size_line
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            chunk = f.read(size + 2)
            body += chunk
            if size == 0:
                return head, body
    length = int(headers.get("content-length", "0") or 0)
    return head, f.read(length) if length else b""


def _set_length(head: bytes, length: int) -> bytes:
    out = []
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            line = b"Content-Length: " + str(length).encode()
        out.append(line)
    return b"\r\n".join(out)
