"""The embedded engine: a real OpenSearch 2.19 node built from Maven Central artifacts (engine/).

`up()` builds the Maven project once (downloads are cached in ~/.m2), starts the node in the
background on 127.0.0.1, waits for yellow/green health and returns its URL; `down()` stops it.
State (pid, address, data, log) lives under one directory so `status`/`down` find the node again.
`up(secure=True)` starts the same node with the security plugin (TLS, users; see embedded_secure).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import base64
import socket
import ssl
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
    secure: bool = False

    @property
    def ca(self) -> Path | None:
        """The CA bundle to trust (secured engine only)."""
        from . import embedded_secure

        return embedded_secure.files(self.home).ca if self.secure else None

    def auth(self) -> tuple[str, str] | None:
        """The admin user and password (secured engine only)."""
        from . import embedded_secure

        return (embedded_secure.ADMIN_USER, embedded_secure.files(self.home).password()) if self.secure else None


def _source_digest(project: Path) -> str:
    h = hashlib.sha256()
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*")]):
        if path.is_file():
            h.update(path.relative_to(project).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def build(project: Path | None = None, *, secure: bool = False) -> Path:
    """`mvn package` the launcher unless this exact pom + source was already built (`secure`: with -Psecure)."""
    project = project or engine_dir()
    target = project / "target"
    stamp = target / ("esmem-build-secure.sha256" if secure else "esmem-build.sha256")
    digest = _source_digest(project)
    if stamp.exists() and stamp.read_text() == digest:
        return target
    mvn = shutil.which("mvn")
    if not mvn:
        raise EsmemError("Maven (mvn) is needed to build the embedded engine; install it (apt-get install maven)")
    proc = subprocess.run([mvn, "-B", "-q", "package", "-DskipTests", *(["-Psecure"] if secure else [])], cwd=project,
                          capture_output=True, text=True)
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


def health(url: str, timeout: float = 2.0, *, ca: Path | None = None,
           auth: tuple[str, str] | None = None) -> str | None:
    """Cluster health status, or None when nothing answers (or not yet to these credentials)."""
    req = urllib.request.Request(f"{url}/_cluster/health")
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return json.load(resp).get("status")
    except (OSError, ValueError):
        return None


def running_health(running: Running, timeout: float = 2.0) -> str | None:
    """`health` of a started node with the credentials it was started with."""
    return health(running.url, timeout, ca=running.ca, auth=running.auth())


def read_state(home: Path | None = None) -> Running | None:
    home = home or state_dir()
    try:
        info = json.loads((home / "engine.json").read_text())
    except (OSError, ValueError):
        return None
    return Running(info["pid"], info["url"], home, bool(info.get("secure", False)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def up(*, port: int | None = None, data: Path | None = None, home: Path | None = None,
       heap: str | None = None, timeout: float = 180.0, secure: bool = False) -> Running:
    """Start the node in the background (or return the one already running) and wait for health.

    `secure`: with the security plugin, TLS and a generated admin password (embedded_secure); it gets
    its own node directory, so an open and a secured engine never share data under one home.
    """
    home = (home or state_dir()).resolve()
    running = read_state(home)
    if running and _alive(running.pid) and running.secure != secure:
        raise EsmemError(f"a{' secured' if running.secure else 'n open'} embedded engine already runs at "
                         f"{running.url} for this ESMEM_HOME: `esmem engine down` first")
    if running and _alive(running.pid) and running_health(running):
        return running
    target = build(secure=secure)
    home.mkdir(parents=True, exist_ok=True)
    node_home = (data or home / ("node-secure" if secure else "node")).resolve()
    extra_cp: list[str] = []
    props: list[str] = []
    if secure:
        from . import embedded_secure

        embedded_secure.configure(home, node_home, target)
        extra_cp = embedded_secure.classpath(target)
        props = [f"-Desmem.plugins={embedded_secure.PLUGIN_CLASS}",
                 f"-Dlog4j2.configurationFile={embedded_secure.log_config(node_home)}"]
    (node_home / "http.address").unlink(missing_ok=True)
    port = port or free_port()
    heap = heap or os.environ.get("ESMEM_ENGINE_HEAP", "1g")
    cmd = [_java(), f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-Dlog4j2.disable.jmx=true", *props,
           "-cp", os.pathsep.join([str(target / "classes"), f"{target / 'lib'}/*", *extra_cp]),
           "dev.esmem.engine.EmbeddedNode", str(node_home), str(port)]
    log = open(home / "engine.log", "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"{'https' if secure else 'http'}://127.0.0.1:{port}"
    (home / "engine.json").write_text(json.dumps({"pid": proc.pid, "url": url, "secure": secure}))
    started = Running(proc.pid, url, home, secure)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = "\n".join((home / "engine.log").read_text(errors="replace").splitlines()[-15:])
            raise EngineUnavailable(f"embedded engine exited with code {proc.returncode}:\n{tail}")
        if running_health(started) in ("green", "yellow"):
            return started
        time.sleep(0.5)
    proc.terminate()
    raise EngineUnavailable(f"embedded engine did not become healthy within {timeout:.0f}s (log: {home / 'engine.log'})")


def down(home: Path | None = None, timeout: float = 30.0) -> bool:
    """Stop the node; True if one was running."""
    home = home or state_dir()
    running = read_state(home)
    if not running or not _alive(running.pid):
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
