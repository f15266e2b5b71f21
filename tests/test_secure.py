"""The secured embedded engine (security plugin, TLS) and every way of connecting to it, right and wrong.

Each failure is one line with exit code 2 in the CLI, and no password, key or token appears in any
CLI output, exception text or traceback, nor in the engine's log.
"""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ssl
import stat
import traceback
import uuid
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.installation import install
from esmem.domain.store import MemoryStore
from esmem.engines import embedded
from esmem.engines import embedded_secure
from esmem.errors import AuthenticationFailed, EsmemError, TLSFailure
from esmem.index.connection import ENV, ConnectionConfig, InsecureTLSWarning
from esmem.index.engine import Engine
from esmem.index.grant import grant, revoke
from esmem.index.install import uninstall


def _hostport(url: str) -> str:
    return url.split("://", 1)[1]


def _other_ca(path: Path) -> Path:
    """A CA the engine's certificate was not signed by."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "someone-else-ca")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def _fingerprint(url: str) -> str:
    host, port = _hostport(url).split(":")
    pem = ssl.get_server_certificate((host, int(port)))
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()


@pytest.fixture(scope="module")
def agent(secured: embedded.Running, secured_admin: Engine, tmp_path_factory):
    """A prefix with memories in A and B, and user alice confined to A with a known password."""
    prefix = f"s{uuid.uuid4().hex[:10]}"
    install(secured_admin, prefix)
    store = MemoryStore(secured_admin, prefix)
    store.remember("deploy runs on fridays with blue green", "A")
    store.remember("deploy key for team B is in the vault", "B")
    password = "S3cretPW-" + uuid.uuid4().hex[:12]
    secret = tmp_path_factory.mktemp("alice") / "alice.pw"
    secret.write_text(password + "\n")
    user = f"alice{uuid.uuid4().hex[:6]}"
    grant(secured_admin, prefix, user, ["A"], secret, shared_index=True)
    yield prefix, user, password
    revoke(secured_admin, prefix, user)
    uninstall(secured_admin, prefix)


def test_secrets_live_in_private_files(secured: embedded.Running) -> None:
    sec = embedded_secure.files(secured.home)
    assert stat.S_IMODE(sec.dir.stat().st_mode) == 0o700
    names = sorted(p.name for p in sec.dir.iterdir())
    assert names == ["admin-key.pem", "admin-password", "admin.pem", "ca-key.pem", "ca.pem", "node-key.pem", "node.pem"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in sec.dir.iterdir())
    assert len(sec.password()) >= 24
    assert secured.url.startswith("https://127.0.0.1:")


def test_engine_env_prints_paths_not_the_password(secured: embedded.Running, monkeypatch) -> None:
    monkeypatch.setenv("ESMEM_HOME", str(secured.home.parent))
    res = CliRunner().invoke(cli, ["engine", "env"])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == (f"export ESMEM_URL={secured.url} ESMEM_CA_CERTS={secured.ca} ESMEM_USERNAME=admin "
                                  f"ESMEM_PASSWORD_FILE={embedded_secure.files(secured.home).password_file}")
    assert embedded_secure.files(secured.home).password() not in res.output


def test_credentials_in_the_url_work_and_every_failure_is_one_clear_line(secured, agent, tmp_path,
                                                                         monkeypatch) -> None:
    prefix, user, password = agent
    admin_password = embedded_secure.files(secured.home).password()
    api_key, token = "kid-" + uuid.uuid4().hex, "tok-" + uuid.uuid4().hex
    for var in ENV.values():
        monkeypatch.delenv(var, raising=False)
    hp = _hostport(secured.url)
    ca, other = str(secured.ca), str(_other_ca(tmp_path / "other-ca.pem"))
    runner = CliRunner()
    texts: list[str] = []

    def run(env: dict[str, str], *args: str):
        res = runner.invoke(cli, ["--prefix", prefix, *args], env=env)
        texts.append(res.output)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            texts.append("".join(traceback.format_exception(res.exception)))
        return res

    ok = run({"ESMEM_URL": f"https://{user}:{password}@{hp}", "ESMEM_CA_CERTS": ca}, "recall", "deploy", "-n", "A",
             "--no-touch")
    assert ok.exit_code == 0, ok.output
    assert "fridays" in ok.output and "vault" not in ok.output
    pinned = run({"ESMEM_URL": f"https://{user}:{password}@{hp}", "ESMEM_SSL_FINGERPRINT": _fingerprint(secured.url)},
                 "recall", "deploy", "-n", "A", "--no-touch")
    assert pinned.exit_code == 0 and "fridays" in pinned.output

    failures = {
        "wrong password": ({"ESMEM_URL": f"https://{user}:wrong-{password}@{hp}", "ESMEM_CA_CERTS": ca},
                           f"rejected the password of user '{user}' (HTTP 401)"),
        "missing credentials": ({"ESMEM_URL": f"https://{hp}", "ESMEM_CA_CERTS": ca}, "needs credentials (HTTP 401)"),
        "no CA (system trust)": ({"ESMEM_URL": f"https://{user}:{password}@{hp}"}, "certificate verify failed"),
        "another CA": ({"ESMEM_URL": f"https://{user}:{password}@{hp}", "ESMEM_CA_CERTS": other},
                       "certificate verify failed"),
        "wrong fingerprint": ({"ESMEM_URL": f"https://{user}:{password}@{hp}", "ESMEM_SSL_FINGERPRINT": "ab" * 32},
                              "ingerprints did not match"),
        "plain http": ({"ESMEM_URL": f"http://{user}:{password}@{hp}"}, "plain HTTP to a TLS port"),
        "API key": ({"ESMEM_URL": f"https://{hp}", "ESMEM_CA_CERTS": ca, "ESMEM_API_KEY": api_key},
                    "rejected the credentials (HTTP 401)"),
        "bearer token": ({"ESMEM_URL": f"https://{hp}", "ESMEM_CA_CERTS": ca, "ESMEM_BEARER_TOKEN": token},
                         "rejected the credentials (HTTP 401)"),
    }
    for case, (env, expected) in failures.items():
        res = run(env, "recall", "deploy", "-n", "A", "--no-touch")
        assert res.exit_code == 2, (case, res.output)
        assert res.output.count("\n") == 1 and res.output.startswith("error: "), (case, res.output)
        assert expected in res.output, (case, res.output)

    # The library raises typed errors with the same redacted texts.
    for cfg, kind in [(ConnectionConfig(url=f"https://{user}:nope-{password}@{hp}", ca_certs=ca), AuthenticationFailed),
                      (ConnectionConfig(url=f"https://{user}:{password}@{hp}", ca_certs=other), TLSFailure)]:
        with pytest.raises(kind) as info:
            Engine(cfg).info
        texts += [str(info.value), repr(info.value), "".join(traceback.format_exception(info.value)), repr(cfg),
                  str(info.value.cause)]

    everything = "\n".join(texts)
    log = (secured.home / "engine.log").read_text(errors="replace")
    for secret in (password, f"wrong-{password}", f"nope-{password}", admin_password, api_key, token):
        for form in (secret, base64.b64encode(f"{user}:{secret}".encode()).decode(), base64.b64encode(secret.encode()).decode()):
            assert form not in everything, f"a secret leaked into CLI output or an exception: {form[:4]}..."
            assert form not in log, f"a secret leaked into the engine log: {form[:4]}..."


def test_from_client_uses_the_callers_configured_client(secured: embedded.Running, agent) -> None:
    from opensearchpy import OpenSearch

    prefix, user, password = agent
    client = OpenSearch([secured.url], http_auth=(user, password), ca_certs=str(secured.ca), use_ssl=True,
                        verify_certs=True)
    eng = Engine.from_client(client)
    assert eng.info.family == "opensearch" and eng.url == secured.url
    result = MemoryStore(eng, prefix).recall("deploy", "A", touch=False)
    assert [i.memory.namespace for i in result.items] == ["A"]
    eng.close()


def test_client_certificate_authenticates(secured: embedded.Running) -> None:
    sec = embedded_secure.files(secured.home)
    eng = Engine(ConnectionConfig(url=secured.url, ca_certs=str(sec.ca), client_cert=str(sec.dir / "admin.pem"),
                                  client_key=str(sec.dir / "admin-key.pem")))
    assert eng.request("GET", "/_plugins/_security/api/account")["user_name"] == "esmem-admin"
    eng.close()


def test_insecure_works_but_warns(secured: embedded.Running) -> None:
    user, password = secured.auth()  # type: ignore[misc]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        eng = Engine(ConnectionConfig(url=secured.url, username=user, password=password, verify_certs=False))
    assert eng.info.family == "opensearch"
    assert [w for w in seen if issubclass(w.category, InsecureTLSWarning)]
    eng.close()


def test_open_engine_refuses_to_share_a_home_with_the_secured_one(secured: embedded.Running) -> None:
    with pytest.raises(EsmemError, match="secured embedded engine already runs"):
        embedded.up(home=secured.home, secure=False)


def test_secured_engine_loads_the_security_plugin(secured: embedded.Running, secured_admin: Engine) -> None:
    """And esmem's guard plugin, unless started with --no-guard (a stock security plugin)."""
    nodes = secured_admin.request("GET", "/_nodes/plugins")["nodes"]
    loaded = {p["classname"] for n in nodes.values() for p in n["plugins"]}
    assert embedded_secure.PLUGIN_CLASS in loaded and (embedded_secure.GUARD_CLASS in loaded) == secured.guard


def test_no_guard_goes_with_secure() -> None:
    run = CliRunner().invoke(cli, ["engine", "up", "--no-guard"])
    assert run.exit_code == 2 and run.output == "error: --no-guard goes with --secure\n"
