"""The embedded engine: a real OpenSearch 2.19 node built from Maven Central artifacts (engine/).

`up()` builds the Maven project once (downloads are cached in ~/.m2), starts the node in the
background on 127.0.0.1, waits for yellow/green health and returns its URL; `down()` stops it.
State (pid, address, data, log) lives under one directory so `status`/`down` find the node again.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .errors import EngineUnavailable, EsmemError

PACKAGE_DIR = Path(__file__).resolve().parent


def engine_dir() -> Path:
    """The Maven project: ESMEM_ENGINE_DIR, the repo's engine/, or the copy inside the wheel."""
    given = os.environ.get("ESMEM_ENGINE_DIR")
    for candidate in ([Path(given)] if given else [PACKAGE_DIR.parent / "engine", PACKAGE_DIR / "_assets" / "engine"]):
        if (candidate / "pom.xml").exists():
            return candidate
    raise EsmemError(f"embedded engine sources ({given or 'engine'}/pom.xml) not found; set ESMEM_ENGINE_DIR")


def state_dir() -> Path:
    return Path(os.environ.get("ESMEM_HOME", Path.home() / ".local" / "state" / "esmem")) / "engine"


@dataclass(frozen=True)
class Running:
    pid: int
    url: str
    home: Path


def _source_digest(project: Path) -> str:
    h = hashlib.sha256()
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*")]):
        if path.is_file():
            h.update(path.relative_to(project).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def build(project: Path | None = None) -> Path:
    """`mvn package` the launcher unless this exact pom + source was already built."""
    project = project or engine_dir()
    target = project / "target"
    stamp = target / "esmem-build.sha256"
    digest = _source_digest(project)
    if stamp.exists() and stamp.read_text() == digest:
        return target
    mvn = shutil.which("mvn")
    if not mvn:
        raise EsmemError("Maven (mvn) is needed to build the embedded engine; install it (apt-get install maven)")
    proc = subprocess.run([mvn, "-B", "-q", "package", "-DskipTests"], cwd=project, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise EsmemError(f"building the embedded engine failed:\n{tail}")
    stamp.write_text(digest)
    return target


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise EsmemError("a Java 17+ runtime is needed for the embedded engine (apt-get install openjdk-17-jdk-headless)")
    return java


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(url: str, timeout: float = 2.0) -> str | None:
    """Cluster health status, or None when nothing answers."""
    try:
        with urllib.request.urlopen(f"{url}/_cluster/health", timeout=timeout) as resp:
            return json.load(resp).get("status")
    except (OSError, ValueError):
        return None


def read_state(home: Path | None = None) -> Running | None:
    home = home or state_dir()
    try:
        info = json.loads((home / "engine.json").read_text())
    except (OSError, ValueError):
        return None
    return Running(info["pid"], info["url"], home)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def up(*, port: int | None = None, data: Path | None = None, home: Path | None = None,
       heap: str | None = None, timeout: float = 180.0) -> Running:
    """Start the node in the background (or return the one already running) and wait for health."""
    home = (home or state_dir()).resolve()
    running = read_state(home)
    if running and _alive(running.pid) and health(running.url):
        return running
    target = build()
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.chmod(0o700)  # memories are private: the node's files are created 0600 / 0700 (umask below)
    node_home = (data or home / "node").resolve()
    (node_home / "http.address").unlink(missing_ok=True)
    port = port or free_port()
    heap = heap or os.environ.get("ESMEM_ENGINE_HEAP", "1g")
    cmd = [_java(), f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-Dlog4j2.disable.jmx=true",
           "-cp", f"{target / 'classes'}{os.pathsep}{target / 'lib'}/*",
           "dev.esmem.engine.EmbeddedNode", str(node_home), str(port)]
    log = os.fdopen(os.open(home / "engine.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, umask=0o077)
    url = f"http://127.0.0.1:{port}"
    state = os.open(home / "engine.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(state, "w") as fh:
        fh.write(json.dumps({"pid": proc.pid, "url": url}))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = "\n".join((home / "engine.log").read_text(errors="replace").splitlines()[-15:])
            raise EngineUnavailable(f"embedded engine exited with code {proc.returncode}:\n{tail}")
        if health(url) in ("green", "yellow"):
            return Running(proc.pid, url, home)
        time.sleep(0.5)
    proc.terminate()
    raise EngineUnavailable(f"embedded engine did not become healthy within {timeout:.0f}s (log: {home / 'engine.log'})")


def _is_engine(pid: int) -> bool:
    """The PID in engine.json may have been reused by any process since: signal only our node."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # no /proc (macOS): ask ps
        cmdline = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True).stdout
    return b"dev.esmem.engine.EmbeddedNode" in cmdline


def down(home: Path | None = None, timeout: float = 30.0) -> bool:
    """Stop the node; True if one was running."""
    home = home or state_dir()
    running = read_state(home)
    if not running or not _alive(running.pid) or not _is_engine(running.pid):
        (home / "engine.json").unlink(missing_ok=True)
        return False
    os.kill(running.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(running.pid):
        try:  # reap it if it is our child
            os.waitpid(running.pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    if _alive(running.pid):
        os.kill(running.pid, signal.SIGKILL)
    (home / "engine.json").unlink(missing_ok=True)
    return True
