"""`esmem engine up/status/down` on a fresh state directory: a second real node of the same engine, then stopped."""
from __future__ import annotations

import json
import urllib.request

import pytest
from click.testing import CliRunner

from esmem import embedded
from esmem.cli import cli
from esmem.errors import EsmemError


@pytest.mark.slow
def test_engine_up_status_down(tmp_path, monkeypatch, engine_url, request) -> None:
    # engine_url: skip/fail like the rest; on an embedded engine, start another node of that flavour
    name = request.node.callspec.params["engine_url"]
    flavour = name if name in embedded.FLAVOURS else embedded.DEFAULT_FLAVOUR
    major = {"opensearch-2": "2.19.", "opensearch-3": "3."}[flavour]
    monkeypatch.setenv("ESMEM_HOME", str(tmp_path))
    runner = CliRunner()
    up = runner.invoke(cli, ["engine", "up", "--engine", flavour, "--heap", "512m"])
    assert up.exit_code == 0, up.output
    url = up.stdout.strip().splitlines()[-1]
    assert url.startswith("http://127.0.0.1:")
    try:
        with urllib.request.urlopen(url) as resp:
            assert json.load(resp)["version"]["number"].startswith(major)
        assert runner.invoke(cli, ["engine", "status", "--engine", flavour]).exit_code == 0
    finally:
        assert runner.invoke(cli, ["engine", "down", "--engine", flavour]).output.strip() == "stopped"
    status = runner.invoke(cli, ["engine", "status", "--engine", flavour])
    assert status.exit_code == 1
    assert "not running" in status.output


def test_unknown_engine_and_missing_java_are_clear_errors() -> None:
    with pytest.raises(EsmemError, match="unknown embedded engine 'elasticsearch-9'"):
        embedded.flavour("elasticsearch-9")
    with pytest.raises(EsmemError, match=r"a Java 99\+ runtime is needed .* found: "):
        embedded.find_java(99)


def test_the_machines_jdks_are_found_by_version() -> None:
    java = embedded.find_java(17)
    assert embedded.java_major(java) >= 17
