"""`esmem engine up/status/down` on a fresh state directory: a second real node, then stopped."""
from __future__ import annotations

import json
import urllib.request

import pytest
from click.testing import CliRunner

from esmem.cli import cli


@pytest.mark.slow
def test_engine_up_status_down(tmp_path, monkeypatch, engine_url) -> None:  # engine_url: skip/fail like the rest
    monkeypatch.setenv("ESMEM_HOME", str(tmp_path))
    runner = CliRunner()
    up = runner.invoke(cli, ["engine", "up", "--heap", "512m"])
    assert up.exit_code == 0, up.output
    url = up.stdout.strip().splitlines()[-1]
    assert url.startswith("http://127.0.0.1:")
    try:
        with urllib.request.urlopen(url) as resp:
            assert json.load(resp)["version"]["number"].startswith("2.19.")
        assert runner.invoke(cli, ["engine", "status"]).exit_code == 0
    finally:
        assert runner.invoke(cli, ["engine", "down"]).output.strip() == "stopped"
    status = runner.invoke(cli, ["engine", "status"])
    assert status.exit_code == 1
