"""`esmem engine image`: the build context holds the node `esmem engine up` runs (same jars, same order),
the base image's mirror comes from apt's sources, and a machine without a container runtime gets one
line. In CI the suite's container path must have run the contract suite (tests/conftest.py)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from esmem.engines import container, embedded


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", list(embedded.FLAVOURS))
def test_the_context_holds_the_locked_classpath_in_order(tmp_path, name: str) -> None:
    entries, plugins = embedded.node_classpath(name)
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    container.write_context(name, False, ctx, tmp_path / "secrets")
    args = (ctx / "engine.args").read_text().split("\n")
    inside = args[0].removeprefix("-cp ").split(":")
    assert len(inside) == len(entries)
    for host, image in zip(map(Path, entries), inside):
        copied = ctx / image.removeprefix("/opt/esmem/")
        if host.is_dir():
            assert sorted(p.relative_to(copied) for p in copied.rglob("*")) == \
                sorted(p.relative_to(host) for p in host.rglob("*"))
        else:
            assert copied.name.endswith(host.name) and _sha(copied) == _sha(host)
    assert (f"-Desmem.plugins={','.join(plugins)}" in args) == bool(plugins)
    assert (ctx / "Containerfile").read_text() == (container.build_files() / "Containerfile").read_text()
    assert os.access(ctx / "entrypoint.sh", os.X_OK)
    assert container.default_tag(name) == f"esmem/{name}:{container.engine_version(name)}"


def test_the_base_image_uses_the_mirror_apt_uses(tmp_path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    assert container.debian_mirror(tmp_path) == container.DEFAULT_MIRROR
    (tmp_path / "sources.list.d" / "other.sources").write_text(
        "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
        "URIs: http://mirror.example/debian/\nSuites: bookworm\n")
    assert container.debian_mirror(tmp_path) == "http://mirror.example/debian"
    (tmp_path / "sources.list").write_text("# deb http://commented.example/debian bookworm main\n"
                                           "deb [arch=amd64] http://one-line.example/debian bookworm main\n")
    assert container.debian_mirror(tmp_path) == "http://one-line.example/debian"


def test_no_container_runtime_is_one_line_and_exit_2(tmp_path) -> None:
    env = {**os.environ, "PATH": str(tmp_path), "ESMEM_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", "from esmem.cli import main; main()", "engine", "image"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == \
        "error: no container runtime answers: docker: not installed; podman: not installed"
    assert not (tmp_path / "images").exists()  # nothing made before the runtime was found


def test_a_secured_opensearch_3_image_is_refused_before_anything_is_built(tmp_path) -> None:
    env = {**os.environ, "PATH": str(tmp_path), "ESMEM_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", "from esmem.cli import main; main()", "engine", "image",
                           "--engine", "opensearch-3", "--secure"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("error: the secured embedded engine is one OpenSearch 2.19 node")


def test_ci_runs_the_contract_suite_on_a_container(request: pytest.FixtureRequest, engines_found) -> None:
    """A container path that silently fell back to the embedded engines would test no image at all."""
    if os.environ.get("CI") != "true":
        pytest.skip("outside CI (CI=true) a container engine is optional")
    containers = [n for n in engines_found if n.startswith("container-")]
    assert containers, f"CI=true but no container engine runs (engines: {', '.join(engines_found)})"
    per_engine: dict[str, int] = {}
    for item in request.session.items:
        name = getattr(item, "callspec", None) and item.callspec.params.get("engine_url")
        if name and item.get_closest_marker("contract"):
            per_engine[name] = per_engine.get(name, 0) + 1
    for name in containers:  # the whole contract suite, as on the embedded engines
        assert per_engine.get(name, 0) == max(per_engine[n] for n in per_engine if n not in containers), per_engine
