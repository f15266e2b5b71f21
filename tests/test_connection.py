"""ConnectionConfig: parsing (URL userinfo, environment), validation, client options and redaction."""
from __future__ import annotations

import base64
import warnings

import pytest

from esmem.errors import ConfigError
from esmem.index.connection import ConnectionConfig, InsecureTLSWarning, redact_text
from esmem.index.engine import detect
from fake_root import fake_root  # tests/fake_root.py (tests/ is on sys.path under pytest)


def test_url_userinfo_moves_into_the_config_and_out_of_the_url() -> None:
    c = ConnectionConfig(url="https://al%40ice:S3cret%2FPW@127.0.0.1:9200/")
    assert (c.username, c.password, c.url) == ("al@ice", "S3cret/PW", "https://127.0.0.1:9200")
    assert "S3cret" not in repr(c) and "S3cret" not in c.display


def test_from_env_reads_every_option_and_overrides_win(tmp_path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("fromfile-secret\n")
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    env = {"ESMEM_URL": "https://h:9200", "ESMEM_USERNAME": "bob", "ESMEM_PASSWORD_FILE": str(pw),
           "ESMEM_CA_CERTS": str(ca), "ESMEM_VERIFY_CERTS": "true", "ESMEM_TIMEOUT": "7.5"}
    c = ConnectionConfig.from_env(env)
    assert (c.username, c.password, c.ca_certs, c.timeout) == ("bob", "fromfile-secret", str(ca), 7.5)
    assert ConnectionConfig.from_env(env, url="https://other:9200").url == "https://other:9200"
    with pytest.raises(ConfigError, match="ESMEM_VERIFY_CERTS"):
        ConnectionConfig.from_env({**env, "ESMEM_VERIFY_CERTS": "maybe"})


@pytest.mark.parametrize("kwargs, message", [
    ({"url": "https://u:p@h:1", "username": "x", "password": "y"}, "both in the URL"),
    ({"url": "https://h:1", "username": "u", "password": "p", "api_key": "k"}, "one way to authenticate"),
    ({"url": "https://h:1", "username": "u"}, "go together"),
    ({"url": "https://h:1", "client_cert": "/nonexistent.pem", "client_key": "/k"}, "no such file"),
    ({"url": "https://h:1", "cloud_id": "x:y"}, "not both"),
    ({}, "no cluster"),
    ({"url": "ftp://h"}, "http"),
])
def test_inconsistent_options_are_config_errors(kwargs, message) -> None:
    with pytest.raises(ConfigError, match=message):
        ConnectionConfig(**kwargs)


def test_api_key_id_and_key_is_encoded_once() -> None:
    c = ConnectionConfig(url="https://h:1", api_key="myid:mykey")
    assert c.api_key_header_value == base64.b64encode(b"myid:mykey").decode()
    assert ConnectionConfig(url="https://h:1", api_key=c.api_key_header_value).api_key_header_value == c.api_key_header_value


def test_redaction_covers_userinfo_headers_and_every_form_of_the_secret() -> None:
    c = ConnectionConfig(url="https://h:1", username="bob", password="hunter22")
    basic = base64.b64encode(b"bob:hunter22").decode()
    text = (f"GET https://bob:hunter22@h:1/ failed; headers={{'Authorization': 'Basic {basic}'}} "
            f"password hunter22 token {basic}")
    red = c.redact(text)
    assert "hunter22" not in red and basic not in red and "bob:" not in red
    assert redact_text("x-amz-security-token: abc123 done") == "x-amz-security-token: ***"


def test_insecure_warns_loudly() -> None:
    c = ConnectionConfig(url="https://127.0.0.1:9", verify_certs=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        c.opensearch_client().close()
    assert any(issubclass(w.category, InsecureTLSWarning) and "verification is OFF" in str(w.message) for w in seen)


@pytest.fixture
def recorder():
    with fake_root({"number": "2.19.6", "distribution": "opensearch"}) as (url, seen):
        yield url, seen


def test_bearer_and_api_key_headers_reach_the_wire(recorder) -> None:
    url, seen = recorder
    detect(ConnectionConfig(url=url, bearer_token="tok-123"))
    detect(ConnectionConfig(url=url, api_key="id1:key1"))
    auth = [h.get("authorization") or h.get("Authorization") for h in seen]
    assert auth == ["Bearer tok-123", "ApiKey " + base64.b64encode(b"id1:key1").decode()]


def test_sigv4_signs_with_opensearch_py_signer(recorder, monkeypatch) -> None:
    url, seen = recorder
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    detect(ConnectionConfig(url=url, aws_region="eu-west-1"))
    auth = seen[0].get("Authorization") or seen[0].get("authorization")
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") and "/eu-west-1/es/aws4_request" in auth
    assert "X-Amz-Date" in seen[0] or "x-amz-date" in seen[0]


def test_the_issue_command_against_a_closed_port_shows_no_password(monkeypatch) -> None:
    from click.testing import CliRunner

    from esmem.cli.main import cli
    from esmem.index.connection import ENV
    from esmem.engines.embedded import free_port

    for var in ENV.values():
        monkeypatch.delenv(var, raising=False)
    port = free_port()
    res = CliRunner().invoke(cli, ["recall", "deploy", "-n", "A"],
                             env={"ESMEM_URL": f"http://alice:S3cretPW@127.0.0.1:{port}"})
    assert res.exit_code == 2
    assert res.output.startswith(f"error: no engine answers at http://127.0.0.1:{port} (")
    assert "S3cretPW" not in res.output and "alice" not in res.output
