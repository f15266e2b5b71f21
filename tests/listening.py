"""Servers the tests start as subprocesses: a free port to give them, and the wait until one listens."""
from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(proc: subprocess.Popen, port: int, timeout: float = 60) -> None:
    """Return once 127.0.0.1:port accepts a connection; fail with the server's stderr if it exits or
    does not listen within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read() if proc.stderr else ""
                raise AssertionError(f"the server did not listen on {port}: "
                                     f"{err.decode() if isinstance(err, bytes) else err}") from None
            time.sleep(0.2)
