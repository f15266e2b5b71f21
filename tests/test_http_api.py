"""`esmem serve` over real HTTP (uvicorn in a thread, or the CLI as a subprocess) on the real engine.

Clients are httpx, curl and Node.js; they see API keys confined to namespaces, JSON errors for every
bad input, and every write they make (100 concurrent clients).
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
import random
import shutil
import ssl
import string
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import uvicorn

from esmem.apps.api_keys import Keyring, add_key
from esmem.apps.http_api import create_app
from esmem.cli.serve import openapi_text
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from listening import free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "http"


class Served:
    """The API served by uvicorn on a thread of this process."""

    def __init__(self, app: Any, **ssl: Any):
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    access_log=False, **ssl))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "Served":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


class Api:
    def __init__(self, engine: Engine, prefix: str, tmp: Path):
        run = uuid.uuid4().hex[:8]
        self.a1, self.a2, self.b1 = f"a1-{run}", f"a2-{run}", f"b1-{run}"
        self.keys_file = tmp / "keys.json"
        self.alpha = add_key(self.keys_file, "alpha", [self.a1, self.a2])
        self.beta = add_key(self.keys_file, "beta", [self.b1])
        self.store = MemoryStore(engine, prefix)
        self.app = create_app(lambda: MemoryStore(engine, prefix), Keyring.load(self.keys_file))


@pytest.fixture
def api(engine: Engine, installed: str, tmp_path: Path) -> Iterator[tuple[Api, str]]:
    a = Api(engine, installed, tmp_path)
    with Served(a.app) as served:
        yield a, f"http://127.0.0.1:{served.port}"


def client(base: str, token: str | None) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"} if token else {}, timeout=120)


def error_of(r: httpx.Response, status: int, kind: str) -> str:
    """The message of a JSON error answer, after checking its status and type."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert set(body) == {"error"} and body["error"]["type"] == kind, body
    return body["error"]["message"]


def test_a_memory_lives_its_whole_life_over_http(api: tuple[Api, str]) -> None:
    a, base = api
    with client(base, a.alpha) as c:
        ns = f"/v1/namespaces/{a.a1}"
        old = c.post(f"{ns}/memories", json={"content": "Deploys go out on Thursdays", "kind": "rule"}).json()
        assert old["action"] == "added"
        new = c.post(f"{ns}/memories", json={"content": "Deploys go out on Tuesdays now", "kind": "rule",
                                              "supersedes": old["id"]}).json()
        assert new["action"] == "superseded" and new["superseded"] == [old["id"]]
        batch = c.post(f"{ns}/memories/batch", json={"memories": [
            {"content": "The user is allergic to peanuts", "importance": 10},
            {"content": "Staging runs Postgres 16", "entities": ["staging", "Postgres"]}]}).json()
        assert [r["action"] for r in batch["results"]] == ["added", "added"]

        got = c.post(f"{ns}/recall", json={"query": "when do deploys go out", "k": 3}).json()
        assert got["memories"][0]["memory"]["id"] == new["id"]
        assert old["id"] not in [m["memory"]["id"] for m in got["memories"]]
        ctx = c.post(f"{ns}/context", json={"messages": [{"role": "user", "content": "when can I deploy?"}]}).json()
        assert "Tuesdays" in ctx["text"] and new["id"] in ctx["included"]
        listed = c.get(f"{ns}/memories", params={"limit": 10}).json()["memories"]
        assert {m["id"] for m in listed} == {new["id"], *(r["id"] for r in batch["results"])}
        assert c.get(f"{ns}/memories/{old['id']}").json()["status"] == "superseded"
        hist = c.get(f"{ns}/memories/{new['id']}/history").json()["versions"]
        assert [v["id"] for v in hist] == [old["id"], new["id"]]

        gone = c.post(f"{ns}/memories/{new['id']}/forget", json={"reason": "wrong day"}).json()["versions"]
        assert gone[1]["status"] == "superseded" and gone[-1]["content"].endswith("wrong day")
        assert new["id"] not in [m["memory"]["id"] for m in
                                 c.post(f"{ns}/recall", json={"query": "deploys Tuesdays"}).json()["memories"]]
        back = c.post(f"{ns}/memories/{new['id']}/restore").json()["versions"]
        assert {v["id"]: v["status"] for v in back}[new["id"]] == "active"
    assert a.store.count(a.a1) == 3 and a.store.count(a.a2, status=None) == 0


@pytest.mark.fresh_prefix("an erase creates the prefix's audit index")
def test_erase_deletes_within_the_callers_namespace_only_and_needs_confirm(api: tuple[Api, str]) -> None:
    a, base = api
    with client(base, a.alpha) as c, client(base, a.beta) as b:
        ns = f"/v1/namespaces/{a.a1}"
        old = c.post(f"{ns}/memories", json={"content": "Zed's phone number is 555-0100"}).json()
        c.post(f"{ns}/memories", json={"content": "the phone number is now 555-0199", "supersedes": old["id"]})
        keep = c.post(f"{ns}/memories", json={"content": "prefers window seats", "kind": "preference"}).json()
        other = c.post(f"/v1/namespaces/{a.a2}/memories", json={"content": "Zed asked for the invoice"}).json()
        b.post(f"/v1/namespaces/{a.b1}/memories", json={"content": "Zed signed the contract"})
        before = a.store.count(None, status=None)

        assert "confirm" in error_of(c.post(f"{ns}/erase", json={"entity": "Zed"}), 400, "invalid_input")
        assert "exactly one" in error_of(c.post(f"{ns}/erase", json={"entity": "Zed", "everything": True,
                                                                       "confirm": True}), 400, "invalid_input")
        error_of(c.post(f"/v1/namespaces/{a.b1}/erase", json={"entity": "Zed", "confirm": True}), 403, "forbidden")
        error_of(c.post(f"{ns}/erase", json={"entity": "Zed", "confirm": "yes please"}), 422, "invalid_request")
        assert a.store.count(None, status=None) == before

        dry = c.post(f"{ns}/erase", json={"entity": "Zed", "dry_run": True}).json()
        assert (dry["erased"], len(dry["covered"]), dry["remaining"]) == (0, 2, 2) and old["id"] in dry["covered"]
        done = c.post(f"{ns}/erase", json={"entity": "Zed", "confirm": True}).json()
        assert (done["selector"], done["erased"], done["remaining"]) == ("entity", 2, 0) and done["audit_id"]
        page = (ROOT / "docs/guides/lifecycle.md").read_text(encoding="utf-8")
        shown = json.loads(page.split("<!-- tested-by: tests/test_http_api.py -->\n```json\n")[1].split("```")[0])
        assert set(shown) == set(done) and shown["selector"] == "entity"  # the page shows this answer's shape
        # another namespace's id, even of the same key, is out of reach of an erase in this one
        assert c.post(f"{ns}/erase", json={"ids": [other["id"]], "confirm": True}).json()["erased"] == 0
        assert a.store.count(None, status=None) == before - 2
        assert a.store.count(a.a1) == 1 and a.store.get(a.a1, keep["id"]).content == "prefers window seats"
        assert a.store.count(a.a2) == 1 and a.store.count(a.b1) == 1

        everything = c.post(f"{ns}/erase", json={"everything": True, "confirm": True}).json()
        assert (everything["selector"], everything["erased"], everything["remaining"]) == ("namespace", 1, 0)
        assert a.store.count(a.a1, status=None) == 0 and a.store.count(None, status=None) == before - 3


def test_keys_are_confined_to_their_namespaces(api: tuple[Api, str]) -> None:
    a, base = api
    written = a.store.remember("The vault code is 4711", a.b1)
    body = {"content": "planted by alpha"}
    with client(base, None) as anon, client(base, "esmem_wrong") as wrong, client(base, a.alpha) as alpha:
        for c in (anon, wrong):
            r = c.post(f"/v1/namespaces/{a.a1}/memories", json=body)
            assert error_of(r, 401, "unauthorized") == "missing or unknown API key"
            assert r.headers["www-authenticate"] == "Bearer"
        for method, path, kw in [("POST", "/memories", {"json": body}), ("POST", "/recall", {"json": {"query": "vault"}}),
                                 ("GET", "/memories", {}), ("GET", f"/memories/{written.id}", {}),
                                 ("GET", f"/memories/{written.id}/history", {}),
                                 ("POST", f"/memories/{written.id}/forget", {"json": {}}),
                                 ("POST", f"/memories/{written.id}/restore", {})]:
            r = alpha.request(method, f"/v1/namespaces/{a.b1}{path}", **kw)
            assert f"may not use namespace '{a.b1}'" in error_of(r, 403, "forbidden"), path
        # an id of another namespace, asked for in one's own: not found there
        assert "no memory" in error_of(alpha.get(f"/v1/namespaces/{a.a1}/memories/{written.id}"), 404, "not_found")
        assert "invalid namespace" in error_of(alpha.get("/v1/namespaces/bad%20ns/memories"), 400, "invalid_input")
    assert a.store.count(a.b1, status=None) == 1 and a.store.get(a.b1, written.id).access_count == 0


def test_every_bad_input_is_a_json_error_and_writes_nothing(api: tuple[Api, str]) -> None:
    a, base = api
    ns = f"/v1/namespaces/{a.a1}"
    with client(base, a.alpha) as c:
        cases = [
            (c.post(f"{ns}/memories", json={"content": "ok", "namespace": a.b1}), 422, "invalid_request", "namespace"),
            (c.post(f"{ns}/memories", json={"content": "ok", "kind": "opinion"}), 422, "invalid_request", "kind"),
            (c.post(f"{ns}/memories", json={"content": ""}), 422, "invalid_request", "content"),
            (c.post(f"{ns}/memories", json={"content": "   "}), 400, "invalid_input", "content is empty"),
            (c.post(f"{ns}/memories", json={"content": "ok", "importance": "high"}), 422, "invalid_request", "importance"),
            (c.post(f"{ns}/memories", json={"content": "ok", "valid_from": "yesterday-ish"}), 400, "invalid_input",
             "valid_from"),
            (c.post(f"{ns}/memories", json={"content": "ok", "valid_from": "2999-01-01T00:00:00Z"}), 400,
             "invalid_input", "in the future"),
            (c.post(f"{ns}/memories", content=b"{not json", headers={"content-type": "application/json"}), 422,
             "invalid_request", "JSON"),
            (c.post(f"{ns}/memories", json=["a list"]), 422, "invalid_request", "body"),
            (c.post(f"{ns}/memories", json={"content": "x" * 16001}), 422, "invalid_request", "content"),
            (c.post(f"{ns}/memories/batch", json={"memories": [{"content": "fine"}, {"content": " "}]}), 400,
             "invalid_input", "memory #2"),
            (c.post(f"{ns}/memories/batch", json={"memories": []}), 422, "invalid_request", "memories"),
            (c.post(f"{ns}/recall", json={}), 400, "invalid_input", "exactly one of"),
            (c.post(f"{ns}/recall", json={"query": "x", "k": 0}), 422, "invalid_request", "k"),
            (c.post(f"{ns}/recall", json={"query": "x", "as_of": "soon"}), 400, "invalid_input", "as_of"),
            (c.post(f"{ns}/context", json={"messages": [{"role": "boss", "content": "hi"}]}), 422, "invalid_request",
             "role"),
            (c.get(f"{ns}/memories", params={"limit": 5000}), 422, "invalid_request", "limit"),
            (c.get(f"{ns}/memories/no-such-id"), 404, "not_found", "no memory"),
            (c.get(f"{ns}/memories/has%20space"), 422, "invalid_request", "memory_id"),
            (c.post(f"{ns}/memories/no-such-id/forget", json={"reason": "x", "extra": 1}), 422, "invalid_request",
             "extra"),
            (c.post(f"{ns}/memories/no-such-id/restore"), 404, "not_found", "no memory"),
            (c.get("/v1/nowhere"), 404, "not_found", "Not Found"),
            (c.delete(f"{ns}/memories"), 405, "method_not_allowed", "Method Not Allowed"),
            (c.post(f"{ns}/memories", content=b"x" * (1024 * 1024 + 1), headers={"content-type": "application/json"}),
             413, "too_large", "over 1048576 bytes"),
            # no Content-Length: the limit holds on the streamed body too
            (c.post(f"{ns}/memories", content=iter([b"x" * 600_000, b"x" * 600_000]),
                    headers={"content-type": "application/json"}), 413, "too_large", "over 1048576 bytes"),
        ]
        for r, status, kind, needle in cases:
            assert needle in error_of(r, status, kind), (r.request.url, r.text)
        bad = c.post(f"{ns}/memories/batch", json={"memories": [{"content": "fine"}, {"content": " "}]}).json()
        assert bad["error"]["position"] == 1
    assert a.store.count(a.a1, status=None) == 0


def _words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(5, 9))) for _ in range(n))


@pytest.mark.slow
def test_100_concurrent_clients_lose_no_write_and_see_only_their_namespaces(api: tuple[Api, str]) -> None:
    a, base = api
    spaces = {a.a1: a.alpha, a.a2: a.alpha, a.b1: a.beta}
    writes_per_client = 3
    mine: dict[str, set[str]] = {ns: set() for ns in spaces}
    failures: list[str] = []
    lock = threading.Lock()

    def one_client(n: int) -> None:
        rng = random.Random(n)
        ns = list(spaces)[n % len(spaces)]
        other = next(o for o in spaces if spaces[o] != spaces[ns])
        with client(base, spaces[ns]) as c:
            texts = [f"{ns} {_words(rng, 8)}" for _ in range(writes_per_client)]
            for text in texts:
                r = c.post(f"/v1/namespaces/{ns}/memories", json={"content": text})
                if r.status_code != 200 or r.json()["action"] != "added":
                    failures.append(f"write {r.status_code} {r.text}")
                    continue
                with lock:
                    mine[ns].add(r.json()["id"])
            for text in texts:  # every recall names this client's own words and the other namespaces
                r = c.post(f"/v1/namespaces/{ns}/recall", json={"query": f"{text} {' '.join(spaces)}", "k": 10})
                if r.status_code != 200:
                    failures.append(f"recall {r.status_code} {r.text}")
                    continue
                got = [m["memory"]["content"] for m in r.json()["memories"]]
                if text not in got or any(not g.startswith(ns + " ") for g in got):
                    failures.append(f"recall in {ns} returned {got}")
            # refused requests, concurrently: each a JSON error
            for r, status in [(c.post(f"/v1/namespaces/{other}/recall", json={"query": "x"}), 403),
                              (c.post(f"/v1/namespaces/{ns}/memories", json={"content": "x", "bogus": 1}), 422)]:
                if r.status_code != status or "error" not in r.json():
                    failures.append(f"refusal {r.status_code} {r.text}")

    with ThreadPoolExecutor(max_workers=100) as pool:
        list(pool.map(one_client, range(100)))
    assert failures == []
    for ns, ids in mine.items():
        expected = sum(writes_per_client for n in range(100) if list(spaces)[n % len(spaces)] == ns)
        assert len(ids) == expected
        assert a.store.count(ns) == expected  # nothing lost, nothing merged away
        assert all(a.store.get(ns, i).namespace == ns for i in ids)


def test_the_access_log_names_the_key_never_a_secret_or_text(api: tuple[Api, str],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    a, base = api
    secret = f"Carol's bonus is 5000 USD {uuid.uuid4().hex}"
    with caplog.at_level(logging.INFO, logger="esmem.http.access"), client(base, a.alpha) as c:
        c.post(f"/v1/namespaces/{a.a1}/memories", json={"content": secret})
        c.post(f"/v1/namespaces/{a.a1}/recall", json={"query": secret})
        c.post(f"/v1/namespaces/{a.b1}/recall", json={"query": secret})
        with client(base, "esmem_wrong") as wrong:
            wrong.get(f"/v1/namespaces/{a.a1}/memories")
        # the server logs a request once its response is sent, in its own thread: wait for the last line
        for _ in range(200):
            if sum(r.name == "esmem.http.access" for r in caplog.records) >= 4:
                break
            time.sleep(0.05)
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "esmem.http.access"]
    assert [(x["method"], x["route"], x["namespace"], x["status"], x["key"]) for x in lines] == [
        ("POST", "/v1/namespaces/{namespace}/memories", a.a1, 200, "alpha"),
        ("POST", "/v1/namespaces/{namespace}/recall", a.a1, 200, "alpha"),
        ("POST", "/v1/namespaces/{namespace}/recall", a.b1, 403, "alpha"),
        ("GET", "/v1/namespaces/{namespace}/memories", a.a1, 401, None)]
    text = caplog.text
    assert all(x["ms"] > 0 for x in lines)
    assert secret not in text and "bonus" not in text and a.alpha not in text and "esmem_wrong" not in text


def test_the_committed_openapi_document_is_what_the_app_serves(api: tuple[Api, str]) -> None:
    a, base = api
    served = httpx.get(f"{base}/openapi.json").json()
    assert served == a.app.openapi()
    committed = (ROOT / "docs" / "openapi.json").read_text(encoding="utf-8")
    assert committed.strip() == openapi_text(a.app), "regenerate: esmem serve --print-openapi > docs/openapi.json"
    assert set(served["paths"]) >= {"/v1/namespaces/{namespace}/recall", "/v1/namespaces/{namespace}/memories/batch"}
    assert served["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def _needs(tool: str) -> None:
    """Skip without the client the example needs, except where every engine test must run (CI)."""
    if not shutil.which(tool):
        if os.environ.get("ESMEM_REQUIRE_ENGINE") == "1":
            pytest.fail(f"{tool} is not installed, and ESMEM_REQUIRE_ENGINE=1 wants the example run")
        pytest.skip(f"{tool} is not installed")


def test_the_curl_example_writes_and_recalls(api: tuple[Api, str]) -> None:
    _needs("curl")
    a, base = api
    run = subprocess.run(["sh", str(EXAMPLES / "remember_recall.sh")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ESMEM_SERVE_URL": base, "ESMEM_API_KEY": a.alpha, "ESMEM_NAMESPACE": a.a1})
    assert run.returncode == 0, run.stderr
    written, recalled = (json.loads(line) for line in run.stdout.splitlines())
    assert written["action"] == "added"
    assert recalled["memories"][0]["memory"]["id"] == written["id"]
    assert a.store.get(a.a1, written["id"]).content == "The user is allergic to peanuts"


def test_the_node_example_writes_and_recalls(api: tuple[Api, str]) -> None:
    _needs("node")
    a, base = api
    run = subprocess.run(["node", str(EXAMPLES / "remember_recall.mjs")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ESMEM_SERVE_URL": base, "ESMEM_API_KEY": a.alpha, "ESMEM_NAMESPACE": a.a2})
    assert run.returncode == 0, run.stderr
    first, top = run.stdout.splitlines()[:2]
    memory_id = first.split()[1].rstrip(":")
    assert first == f"remembered {memory_id}: added"
    assert top.startswith("1. Deploys go out on Thursdays (score ") and top.endswith(f"id {memory_id})")
    assert a.store.get(a.a2, memory_id).kind == "rule"
    # a refused call ends the script with the JSON error's type and message
    bad = subprocess.run(["node", str(EXAMPLES / "remember_recall.mjs")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ESMEM_SERVE_URL": base, "ESMEM_API_KEY": a.beta, "ESMEM_NAMESPACE": a.a2})
    assert bad.returncode != 0 and f"403 forbidden: this key may not use namespace '{a.a2}'" in bad.stderr


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp / "cert.pem", tmp / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_the_cli_serves_https_with_a_cert_and_logs_json_lines(engine: Engine, installed: str, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    keys = tmp_path / "keys.json"
    ns = f"tls-{uuid.uuid4().hex[:8]}"
    token = add_key(keys, "tls-agent", [ns])
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", "from esmem.cli.main import main; main()", "--url", engine.url,
                             "--prefix", installed, "serve", "--keys", str(keys), "--port", str(port), "--cert", str(cert),
                             "--key", str(key)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(proc, port)
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=ssl.create_default_context(cafile=str(cert)), timeout=60,
                          headers={"Authorization": f"Bearer {token}"}) as c:
            r = c.post(f"/v1/namespaces/{ns}/memories", json={"content": "TLS holds the line"})
            assert r.status_code == 200 and r.json()["action"] == "added"
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not spoken
            httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=10)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    logged = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert {"method": "POST", "route": "/v1/namespaces/{namespace}/memories", "namespace": ns, "status": 200,
            "key": "tls-agent"}.items() <= logged[0].items()
    assert "TLS holds the line" not in stderr and token not in stderr


def test_the_cli_server_leaves_start_up_objects_out_of_collections_and_collects_fully_rarely(
        engine: Engine, installed: str, tmp_path: Path) -> None:
    """`esmem serve` applies `collector.long_lived` before it listens (its full collections made the
    slowest recalls): start-up objects frozen, a full collection per 1000 of the middle generation."""
    import gc

    from esmem.domain.collector import FULL_COLLECTION_EVERY

    keys = tmp_path / "keys.json"
    add_key(keys, "gc-agent", ["gc-ns"])
    listen = ("import gc, json, uvicorn; uvicorn.run = lambda *a, **k: print(json.dumps("
              "{'threshold': gc.get_threshold(), 'frozen': gc.get_freeze_count()})); "
              "from esmem.cli.main import main; main()")
    run = subprocess.run([sys.executable, "-c", listen, "--url", engine.url, "--prefix", installed, "serve",
                          "--keys", str(keys)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["threshold"] == [gc.get_threshold()[0], gc.get_threshold()[1], FULL_COLLECTION_EVERY]
    assert seen["threshold"][2] != gc.get_threshold()[2] and seen["frozen"] > 10_000


def test_serve_needs_a_keys_file_with_a_key(engine: Engine, installed: str, tmp_path: Path) -> None:
    empty = tmp_path / "keys.json"
    empty.write_text('{"keys": []}')
    for args, message in [([], "error: give the API keys file"), (["--keys", str(empty)], "no API keys"),
                          (["--keys", str(tmp_path / "none.json")], "API keys file"),
                          (["--keys", str(empty), "--cert", "c.pem"], "TLS needs both --cert and --key")]:
        run = subprocess.run([sys.executable, "-c", "from esmem.cli.main import main; main()", "--url", engine.url,
                              "--prefix", installed, "serve", *args], capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if k != "ESMEM_SERVE_KEYS"})
        assert run.returncode == 2 and message in run.stderr and len(run.stderr.splitlines()) == 1, run.stderr


def test_the_http_guide_shows_the_examples_the_tests_run() -> None:
    guide = (ROOT / "docs/guides/http.md").read_text(encoding="utf-8")
    for name, lang in (("remember_recall.sh", "sh"), ("remember_recall.mjs", "js")):
        assert f"```{lang}\n{(EXAMPLES / name).read_text(encoding='utf-8').rstrip()}\n```" in guide, name


def test_without_the_extra_serve_names_the_extra_and_exits_2(engine: Engine, installed: str, tmp_path: Path) -> None:
    hide = "import sys; sys.modules['fastapi'] = None; from esmem.cli.main import main; sys.argv[0] = 'esmem'; main()"
    run = subprocess.run([sys.executable, "-c", hide, "--url", engine.url, "--prefix", installed, "serve", "--keys",
                          str(tmp_path / "keys.json")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == ["error: esmem serve needs FastAPI, uvicorn and prometheus-client: pip install 'esmem[serve]'"]


def _samples(text: str) -> dict[str, float]:
    """The exposition's sample lines as {'name{labels}': value} (parsed by prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def test_metrics_count_requests_per_route_template_and_status_and_never_name_a_namespace(
        api: tuple[Api, str]) -> None:
    a, base = api
    with client(base, a.alpha) as c, client(base, None) as anonymous:
        ns = f"/v1/namespaces/{a.a1}"
        c.post(f"{ns}/memories", json={"content": "The secret word is marmalade"})
        c.post(f"{ns}/memories/batch", json={"memories": [{"content": "The VPN gateway is in Frankfurt"},
                                                           {"content": "The secret word is marmalade"}]})
        for _ in range(3):
            assert c.post(f"{ns}/recall", json={"query": "secret word", "k": 2}).status_code == 200
        assert c.post(f"{ns}/recall", json={"k": 2}).status_code == 400  # neither query nor messages
        assert c.get(f"/v1/namespaces/{a.b1}/memories").status_code == 403
        assert anonymous.get(f"{ns}/memories").status_code == 401
        assert c.get("/no/such/path/marmalade").status_code == 404
        scraped = anonymous.get("/metrics")
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    for secret in (a.a1, a.b1, a.alpha, "alpha", "marmalade", "Frankfurt", "secret word"):
        assert secret not in text, secret
    m = _samples(text)
    route = "/v1/namespaces/{namespace}"
    assert m[f'esmem_http_requests_total{{method="POST",route="{route}/recall",status="200"}}'] == 3
    assert m[f'esmem_http_requests_total{{method="POST",route="{route}/recall",status="400"}}'] == 1
    assert m[f'esmem_http_requests_total{{method="GET",route="{route}/memories",status="403"}}'] == 1
    assert m[f'esmem_http_requests_total{{method="GET",route="{route}/memories",status="401"}}'] == 1
    assert m['esmem_http_requests_total{method="GET",route="unmatched",status="404"}'] == 1
    hist = f'method="POST",route="{route}/recall",status="200"'
    assert m[f"esmem_http_request_duration_seconds_count{{{hist}}}"] == 3
    assert m[f'esmem_http_request_duration_seconds_bucket{{le="+Inf",{hist}}}'] == 3
    assert 0 < m[f"esmem_http_request_duration_seconds_sum{{{hist}}}"] < 60
    assert m["esmem_recalls_total{}"] == 3 and m["esmem_recall_engine_seconds_count{}"] == 3
    assert 1 <= m["esmem_recalled_memories_total{}"] <= 6
    # the third write restates the first: the merge outcome is counted, not the text
    assert m['esmem_remembered_memories_total{action="added"}'] == 2
    assert m['esmem_remembered_memories_total{action="duplicate"}'] == 1


def test_metrics_can_be_turned_off(engine: Engine, installed: str) -> None:
    with Served(create_app(lambda: MemoryStore(engine, installed), Keyring([]), metrics=False)) as served:
        assert httpx.get(f"http://127.0.0.1:{served.port}/metrics", timeout=30).status_code == 404
