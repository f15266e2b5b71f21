"""A stand-in for a cluster's `GET /` only (detection, auth-header and signing-format tests; never
for ranking): answers with a given `version` object and records every request's headers."""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Iterator


@contextmanager
def fake_root(version: dict) -> Iterator[tuple[str, list[dict]]]:
    """(URL, headers of each request seen) of a server that answers `GET /` with `version`."""
    seen: list[dict] = []

    class Root(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(dict(self.headers))
            body = json.dumps({"version": version}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Root)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
