"""What Python's full garbage collections cost the slowest recalls of `esmem serve`: 16 clients recall
as fast as they are answered (keep-alive connections, urllib3, as `esmem bench --mixed`) from one
namespace of the bench corpus, through `esmem serve` as it ships (`esmem.domain.collector.long_lived`
at start-up) and through the same server with Python's collector settings left as they are; the two
alternate, `rounds` times, each after a warm-up of 3 s.

    python docs/results/serve_gc.py $ESMEM_URL 100000 15 2
"""
from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
import urllib3

from esmem.apps import bench
from esmem.apps.api_keys import add_key
from esmem.index.engine import Engine
from esmem.index.install import uninstall

SERVE = "from esmem.cli.main import main; main()"
SETUPS = {"as shipped (long_lived)": SERVE,
          "Python's collector settings": "import esmem.domain.collector as c; c.long_lived = lambda: None; " + SERVE}
CLIENTS = 16


def served(code: str, url: str, prefix: str, namespace: str, keys_dir: str) -> tuple[subprocess.Popen[bytes], int, str]:
    keys = Path(keys_dir) / f"keys-{time.monotonic_ns()}.json"
    token = add_key(keys, "bench", [namespace])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-c", code, "--url", url, "--prefix", prefix, "serve", "--keys", str(keys),
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port, token
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("esmem serve did not start")
            time.sleep(0.1)


def recall_load(port: int, token: str, probes: list[bench.Probe], seconds: float) -> list[float]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    pools = [urllib3.HTTPConnectionPool("127.0.0.1", port, maxsize=1, timeout=120) for _ in range(CLIENTS)]

    def recall(i: int, probe: bench.Probe) -> None:
        response = pools[i].urlopen("POST", f"/v1/namespaces/{probe.namespace}/recall", headers=headers,
                                    body=orjson.dumps({"query": probe.text, "k": 5}))
        assert response.status == 200, response.data[:200]

    return bench.closed_loop(recall, probes, CLIENTS, seconds)


def main(url: str, size: int, seconds: float, rounds: int) -> None:
    engine, prefix = Engine(url), "serve-gc"
    try:
        corpus = bench.loaded(engine, prefix, size, namespaces=1)
        namespace = corpus.namespaces[0]
        probes = bench.make_queries(corpus, 2000, 0, namespace=namespace)
        print(f"{size} memories in one namespace, {CLIENTS} recall clients through esmem serve, "
              f"{seconds:.0f} s a run after 3 s of warm-up")
        with tempfile.TemporaryDirectory() as keys_dir:
            for _ in range(rounds):
                for name, code in SETUPS.items():
                    proc, port, token = served(code, url, prefix, namespace, keys_dir)
                    try:
                        ms = recall_load(port, token, probes, seconds)
                    finally:
                        proc.terminate()
                        proc.wait(30)
                    n = len(ms)
                    print(f"{name:28s} {n / seconds:5.0f} recalls/s  p50 {ms[n // 2]:6.1f}  p95 {ms[int(n * 0.95)]:6.1f}  "
                          f"p99 {ms[int(n * 0.99)]:6.1f}  max {ms[-1]:6.1f} ms", flush=True)
    finally:
        uninstall(engine, prefix)
        engine.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
