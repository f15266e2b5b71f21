"""MemoryStore.connect: the one-line way in, configured from the ESMEM_* environment like the CLI.

Real engine: a store made by `connect()` with only the environment writes and recalls.
"""
from __future__ import annotations

from dataclasses import replace

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from esmem import MemoryStore
from esmem.errors import ConfigError
from esmem.index.connection import ENV
from esmem.index.engine import Engine

ROOT = Path(__file__).resolve().parents[1]


def test_connect_without_a_target_reads_esmem_url(engine: Engine, installed: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ESMEM_URL", engine.url)
    with MemoryStore.connect(prefix=installed) as store:
        r = store.remember("The staging database is Postgres 16", "conn", kind="fact")
        assert r.action == "added"
        assert [x.memory.id for x in store.recall("which database does staging use", "conn").items] == [r.id]
        assert store.engine.url == engine.url


def test_a_url_target_keeps_the_credentials_of_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV.values():  # only what this test sets (a run against a secured engine sets a password file)
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ESMEM_URL", "http://elsewhere:9200")
    monkeypatch.setenv("ESMEM_USERNAME", "agent")
    monkeypatch.setenv("ESMEM_PASSWORD", "pw-from-env")
    store = MemoryStore.connect("http://127.0.0.1:1", embedder=None)  # embedder given: no install look-up
    assert store.engine.config is not None
    assert (store.engine.config.url, store.engine.config.username, store.engine.config.password) == \
        ("http://127.0.0.1:1", "agent", "pw-from-env")


def test_a_config_or_engine_target_is_used_as_given(engine: Engine, installed: str) -> None:
    assert MemoryStore.connect(engine, installed).engine is engine
    cfg = replace(engine.config)  # an equal config of its own (the secured engine's CA and credentials too)
    assert MemoryStore.connect(cfg, installed).engine.config == cfg


def test_no_cluster_in_the_environment_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ESMEM_URL", raising=False)
    monkeypatch.delenv("ESMEM_CLOUD_ID", raising=False)
    with pytest.raises(ConfigError, match="ESMEM_URL"):
        MemoryStore.connect()


@pytest.mark.slow
def test_the_wheel_ships_py_typed(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("esmem-*.whl")
    assert "esmem/py.typed" in zipfile.ZipFile(wheel).namelist()
