"""`esmem engine up/status/down` on a fresh state directory: a second real node of the same engine, then stopped."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.engines import embedded
from esmem.engines import lockfile
from esmem.errors import ConfigError, EsmemError


@pytest.mark.slow
@pytest.mark.own_engine
@pytest.mark.parametrize("source", ["maven", "lockfile"])
def test_engine_up_status_down(tmp_path, monkeypatch, engine_url, request, source: str) -> None:
    # engine_url: skip/fail like the rest; on an embedded engine, start another node of that flavour
    name = request.node.callspec.params["engine_url"]
    flavour = name if name in embedded.FLAVOURS else embedded.DEFAULT_FLAVOUR
    major = {"opensearch-2": "2.19.", "opensearch-3": "3."}[flavour]
    monkeypatch.setenv("ESMEM_HOME", str(tmp_path))
    monkeypatch.setenv("ESMEM_ENGINE_FROM", source)
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


def test_engine_java_opts_add_to_g1_unless_they_pick_a_collector(monkeypatch) -> None:
    monkeypatch.delenv("ESMEM_ENGINE_JAVA_OPTS", raising=False)
    assert embedded.java_opts() == ["-XX:+UseG1GC"]
    monkeypatch.setenv("ESMEM_ENGINE_JAVA_OPTS", "-XX:TieredStopAtLevel=1 -Dx='a b'")
    assert embedded.java_opts() == ["-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Dx=a b"]
    monkeypatch.setenv("ESMEM_ENGINE_JAVA_OPTS", "-XX:+UseSerialGC")  # two collectors: the JVM would not start
    assert embedded.java_opts() == ["-XX:+UseSerialGC"]
    monkeypatch.setenv("ESMEM_ENGINE_JAVA_OPTS", "-Dx='unclosed")
    with pytest.raises(ConfigError, match="ESMEM_ENGINE_JAVA_OPTS"):
        embedded.java_opts()


def test_the_machines_jdks_are_found_by_version() -> None:
    java = embedded.find_java(17)
    assert embedded.java_major(java) >= 17


@pytest.mark.parametrize("name", list(embedded.FLAVOURS))
def test_the_committed_lock_and_launcher_were_made_from_the_current_sources(name: str) -> None:
    project = embedded.engine_dir()
    assert lockfile.is_current(project, name, embedded._source_digest(project)), \
        f"engine/ changed since engine/launcher/{name} was written: run `esmem engine lock --engine {name}`"
    jars = lockfile.read_lock(project, name)
    assert len({j.path for j in jars}) == len(jars) > 50
    assert all(len(j.sha256) == 64 for j in jars)
    core = {"opensearch-2": "2.19.6", "opensearch-3": "3.5.0"}[name]
    assert any(j.group == "org.opensearch" and j.artifact == "opensearch" and j.version == core for j in jars)
    assert (lockfile.launcher_dir(project, name) / "classes/dev/esmem/engine/EmbeddedNode.class").exists()


@pytest.mark.slow
@pytest.mark.own_engine
def test_no_maven_and_no_compiler_are_needed(tmp_path, engine_url, request, monkeypatch) -> None:
    """No mvn or javac on PATH: the jars come from Maven Central by the lock (checked against their
    SHA-256) and the committed launcher runs on a plain Java runtime (each flavour)."""
    name = request.node.callspec.params["engine_url"]
    flavour = name if name in embedded.FLAVOURS else embedded.DEFAULT_FLAVOUR
    major = {"opensearch-2": "2.19.6", "opensearch-3": "3."}[flavour]
    java = embedded.find_java(embedded.FLAVOURS[flavour].java)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "esmem").symlink_to(Path(sys.executable).parent / "esmem")
    (bin_dir / "java").symlink_to(java)
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "ESMEM_ENGINE_FROM")}
    env.update(PATH=str(bin_dir), ESMEM_HOME=str(tmp_path / "home"), ESMEM_ENGINE_HEAP="512m")
    assert shutil.which("mvn", path=env["PATH"]) is None and shutil.which("javac", path=env["PATH"]) is None
    up = subprocess.run(["esmem", "engine", "up", "--engine", flavour], env=env, capture_output=True, text=True,
                        timeout=600)
    assert up.returncode == 0, up.stderr[-2000:]
    try:
        url = up.stdout.strip().splitlines()[-1]
        with urllib.request.urlopen(url) as resp:
            assert json.load(resp)["version"]["number"].startswith(major)
        monkeypatch.setenv("ESMEM_HOME", env["ESMEM_HOME"])
        state = json.loads((embedded.state_dir(flavour) / "engine.json").read_text())
        assert f"engine/launcher/{flavour}/classes" in state["nodes"][0]["cmd"][state["nodes"][0]["cmd"].index("-cp") + 1]
        cached = [*(tmp_path / "home" / "jars").rglob("*.jar"), *(tmp_path / "home" / "jars").rglob("*.zip")]
        assert len(cached) == len(lockfile.read_lock(embedded.engine_dir(), flavour))
        # the k-NN plugin zip of the lock is unpacked and its plugin class handed to the node
        assert "-Desmem.plugins=org.opensearch.knn.plugin.KNNPlugin" in state["nodes"][0]["cmd"]
    finally:
        subprocess.run(["esmem", "engine", "down", "--engine", flavour], env=env, capture_output=True, timeout=120)
