"""Which real engines the suite runs on: ESMEM_URL, else the engines ESMEM_TEST_ENGINES names, else
containers (when a Docker API answers), else the embedded engines.

Every engine found is a parameter of the `engine_url` fixture, so the suite runs once per engine, and
the run ends with one summary line per engine. The embedded engines are every flavour of
`esmem.engines.embedded.FLAVOURS` (OpenSearch 2.19 and 3.x): one already running in its ESMEM_HOME state
directory (as .ci/run starts them) is used as it is, otherwise a temporary one is started and stopped.
The containers (CONTAINERS, started with testcontainers) are `container-opensearch` (the image named by
ESMEM_TEST_IMAGE, by default the official OpenSearch image; `esmem engine image` builds one of the
embedded engine without a registry) and `container-elasticsearch` (ESMEM_TEST_ES_IMAGE).
ESMEM_TEST_ENGINES picks engines by name, e.g. `opensearch-2,opensearch-3,container-opensearch`; a
container run beside embedded engines gets the contract suite only (the tests marked `contract`:
install, writes with merge, recall and its parity with plain HTTP clients of the stored templates),
since the embedded engines run everything else. Tests that use `installed` share one installed
prefix per engine, reset before each of them to what a fresh install leaves (SharedPrefix); a test
marked `fresh_prefix`, and every test that only asks for `prefix`, gets its own (uuid), so tests never
touch each other's data or the rest of the cluster. With ESMEM_REQUIRE_ENGINE=1 (set by .ci/run) an
engine named but not running fails the run.

Secured engine: ESMEM_SECURE_HOME (the ESMEM_HOME of a running `esmem engine up --secure`, as .ci/run
starts it) adds it as one more `engine_url` parameter, so the whole suite also runs on it as its admin;
the `secured` fixture (security-specific tests) uses it too, or starts a temporary one when none is given.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterator

import pytest

from esmem.domain.hybrid import spec
from esmem.domain.installation import install
from esmem.domain.store import MemoryStore
from esmem.engines import embedded
from esmem.errors import EsmemError
from esmem.index.connection import ConnectionConfig
from esmem.index.engine import Engine, detect
from esmem.index.install import current_index, uninstall

# The containers the suite can start (testcontainers, when a Docker API answers): engine name -> the
# environment variable naming its image, the image without it, and the container's environment.
CONTAINERS = {
    "container-opensearch": ("ESMEM_TEST_IMAGE", "opensearchproject/opensearch:2.19.6",  # as the embedded default
                             {"discovery.type": "single-node", "DISABLE_SECURITY_PLUGIN": "true",
                              "DISABLE_INSTALL_DEMO_CONFIG": "true"}, "OPENSEARCH_JAVA_OPTS"),
    "container-elasticsearch": ("ESMEM_TEST_ES_IMAGE", "docker.elastic.co/elasticsearch/elasticsearch:9.1.5",
                                {"discovery.type": "single-node", "xpack.security.enabled": "false"}, "ES_JAVA_OPTS"),
}


def _docker_answers() -> bool:
    """Whether the Docker API testcontainers uses answers (DOCKER_HOST, else the default socket)."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - no SDK, no socket, no daemon: all mean "no"
        return False


def _ready(body: str) -> bool:
    try:
        return json.loads(body).get("status") in ("green", "yellow")
    except ValueError:
        return False


def _container(name: str):  # pragma: no cover - needs a Docker API
    """Start engine `name` of CONTAINERS; ready once its cluster health answers green or yellow (polled over
    HTTP: images print different log lines, and a log line says nothing about the cluster's state)."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import HttpWaitStrategy

    variable, default, env, java_opts = CONTAINERS[name]
    image = os.environ.get(variable) or default
    c = DockerContainer(image).with_exposed_ports(9200).waiting_for(
        HttpWaitStrategy(9200, "/_cluster/health").for_response_predicate(_ready).with_startup_timeout(240))
    # the heap of the embedded engines of this run, and their JVM options (CI: C1 only)
    heap = os.environ.get("ESMEM_ENGINE_HEAP", "512m")
    c = c.with_envs(**env, **{java_opts: f"-Xms{heap} -Xmx{heap} {os.environ.get('ESMEM_ENGINE_JAVA_OPTS', '')}".strip()})
    try:
        c.start()
    except Exception:
        logs = b"".join(c.get_logs()).decode(errors="replace").splitlines()[-10:] if c.get_wrapped_container() else []
        c.stop()
        raise RuntimeError(f"{image} did not become healthy: " + " | ".join(logs)) from None
    return c, image, f"http://{c.get_container_host_ip()}:{c.get_exposed_port(9200)}"


class Engines:
    """Starts (lazily, once) and stops the engines of this run."""

    def __init__(self) -> None:
        self.found: dict[str, str] = {}
        self.started_in: dict[str, str] = {}
        self.images: dict[str, str] = {}  # the image of each container engine
        self.secured: embedded.Running | None = None
        self.problems: list[str] = []
        self._stop: list = []
        self._homes: list[Path] = []
        self.extra: dict[str, str] = {}  # embedded flavours a test asked for that are not engines of this run

    def discover(self) -> None:
        secure_home = os.environ.get("ESMEM_SECURE_HOME")
        if secure_home:
            running = embedded.read_state(Path(secure_home) / "engine")
            if running and running.secure and embedded.running_health(running):
                self.secured = running
                self.found["secured"] = running.url
                self.started_in["secured"] = "already running"
            else:
                self.problems.append(f"ESMEM_SECURE_HOME={secure_home}: no secured embedded engine answers there")
        self._discover_open()

    def _discover_open(self) -> None:
        if os.environ.get("ESMEM_URL"):
            self.found["url"] = os.environ["ESMEM_URL"]
            return
        wanted = os.environ.get("ESMEM_TEST_ENGINES")
        if not wanted and _docker_answers():
            for name in CONTAINERS:
                self._container(name)
            if self.found.keys() - {"secured"}:
                return
        for name in (n.strip() for n in (wanted or ",".join(embedded.FLAVOURS)).split(",") if n.strip()):
            if name in CONTAINERS:
                self._container(name)
            elif name in embedded.FLAVOURS:
                self._embedded(name)
            else:
                self.problems.append(f"ESMEM_TEST_ENGINES: unknown engine {name!r} "
                                     f"(known: {', '.join([*embedded.FLAVOURS, *CONTAINERS])})")

    def _container(self, name: str) -> None:
        t0 = time.monotonic()
        try:
            c, image, url = _container(name)
        except Exception as e:  # noqa: BLE001 - reported (and fatal under ESMEM_REQUIRE_ENGINE=1), never silently
            self.problems.append(f"{name}: {e}")
            return
        self._stop.append(c.stop)
        self.found[name], self.images[name] = url, image
        self.started_in[name] = f"{image}, healthy in {time.monotonic() - t0:.1f}s"

    def missing(self) -> list[str]:
        """The engines asked for by name (ESMEM_TEST_ENGINES, ESMEM_SECURE_HOME) that are not running."""
        wanted = [n.strip() for n in os.environ.get("ESMEM_TEST_ENGINES", "").split(",") if n.strip()]
        if os.environ.get("ESMEM_URL"):
            wanted = []
        return [n for n in wanted + (["secured"] if os.environ.get("ESMEM_SECURE_HOME") else []) if n not in self.found]

    def _embedded(self, name: str) -> None:
        try:
            self.found[name], self.started_in[name] = self._embedded_url(name)
        except EsmemError as e:
            self.problems.append(f"embedded {name}: {e}")

    def _embedded_url(self, name: str) -> tuple[str, str]:
        """The URL of embedded flavour `name` running in ESMEM_HOME, else of a temporary one started
        here (stopped at the end of the run), and how it was found."""
        running = embedded.read_state(embedded.state_dir(name))
        if running and embedded.health(running.url):
            return running.url, "already running"
        home = Path(tempfile.mkdtemp(prefix=f"esmem-test-{name}-"))
        self._homes.append(home)
        t0 = time.monotonic()
        running = embedded.up(home=home, engine=name)
        self._stop.append(lambda: embedded.down(home))
        return running.url, f"started in {time.monotonic() - t0:.1f}s"

    def flavour(self, name: str) -> str:
        """The URL of an open embedded engine of flavour `name`: this run's, one running in ESMEM_HOME,
        else a temporary one (~30-60 s to start), kept for the rest of the run."""
        if name not in self.found and name not in self.extra:
            self.extra[name] = self._embedded_url(name)[0]
        return self.found.get(name) or self.extra[name]

    def start_secured(self) -> embedded.Running:
        """A temporary secured engine for the security tests when the run was not given one."""
        if self.secured is None:
            home = Path(tempfile.mkdtemp(prefix="esmem-test-secure-"))
            self._homes.append(home)
            self._stop.append(lambda: embedded.down(home / "engine"))
            self.secured = embedded.up(home=home / "engine", secure=True,
                                       heap=os.environ.get("ESMEM_ENGINE_HEAP", "512m"))
        return self.secured

    def secured_config(self) -> ConnectionConfig:
        assert self.secured is not None
        user, password = self.secured.auth()  # type: ignore[misc]
        return ConnectionConfig(url=self.secured.url, ca_certs=str(self.secured.ca), username=user, password=password)

    def config(self, name: str) -> ConnectionConfig:
        """How the suite connects to engine `name`: the secured one as its admin, others as the env says."""
        if name == "secured":
            return self.secured_config()
        return ConnectionConfig.from_env(url=self.found[name])

    def stop(self) -> None:
        for stop in self._stop:
            stop()
        for home in self._homes:
            shutil.rmtree(home, ignore_errors=True)


_ENGINES = Engines()


_FOUND_ENV = "ESMEM_TEST_FOUND"  # the engines the first process found, for its pytest-xdist workers


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") and os.environ.get(_FOUND_ENV):
        # a pytest-xdist worker: the controller found (or started) the engines, and stops them
        _ENGINES.found, _ENGINES.started_in = json.loads(os.environ[_FOUND_ENV])
        if "secured" in _ENGINES.found:
            _ENGINES.secured = embedded.read_state(Path(os.environ["ESMEM_SECURE_HOME"]) / "engine")
        return
    _ENGINES.discover()
    os.environ[_FOUND_ENV] = json.dumps([_ENGINES.found, _ENGINES.started_in])  # inherited by workers
    os.environ[_GROUPS_ENV] = tempfile.mkdtemp(prefix="esmem-test-groups-")
    if os.environ.get("ESMEM_REQUIRE_ENGINE") == "1" and (not _ENGINES.found or _ENGINES.missing()):
        raise pytest.UsageError(f"ESMEM_REQUIRE_ENGINE=1 but {', '.join(_ENGINES.missing()) or 'no engine'} "
                                "did not answer: " + "; ".join(_ENGINES.problems))


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        os.environ.pop(_FOUND_ENV, None)
        shutil.rmtree(os.environ.pop(_GROUPS_ENV, ""), ignore_errors=True)
    _ENGINES.stop()


def pytest_report_header(config: pytest.Config) -> list[str]:
    return ([f"esmem engine {k}: {v} ({_ENGINES.started_in.get(k, 'given')})" for k, v in _ENGINES.found.items()]
            or ["esmem engines: none"]) + [f"esmem engine problem: {p}" for p in _ENGINES.problems]


# One summary line per engine: the outcome of every test that ran on it (setup errors count as failed).
# The engine's name travels in the report (user_properties), so a pytest-xdist controller counts too.
_OUTCOMES: dict[str, Counter] = defaultdict(Counter)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = (yield).get_result()
    name = getattr(getattr(item, "callspec", None), "params", {}).get("engine_url")
    if name:
        report.user_properties.append(("esmem_engine", name))
    while _REINSTALLED_NOW:  # found while setting this test up: said in the run's summary
        report.user_properties.append(("esmem_reinstalled", _REINSTALLED_NOW.pop()))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    SHARED_PREFIX_REINSTALLED.extend(v for k, v in report.user_properties if k == "esmem_reinstalled")
    name = dict(report.user_properties).get("esmem_engine")
    if name and (report.when == "call" or report.outcome != "passed"):
        _OUTCOMES[name]["passed" if report.passed else "skipped" if report.skipped else "failed"] += 1


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    for name in sorted(_OUTCOMES):
        c = _OUTCOMES[name]
        try:
            version = str(detect(_ENGINES.config(name)))
        except EsmemError as e:
            version = f"not answering: {e}"
        image = f" [{_ENGINES.images[name]}]" if name in _ENGINES.images else ""
        terminalreporter.write_line(f"esmem engine {name}{image} ({version}): {c['passed']} passed, "
                                    f"{c['failed']} failed, {c['skipped']} skipped")
    for test in SHARED_PREFIX_REINSTALLED:
        terminalreporter.write_line(f"shared prefix reinstalled: {test} changed its artifacts; mark it fresh_prefix")


# pytest-xdist (docs/guides/engines.md, "The test suite"): the tests of one module on one engine run in one worker, one after the
# other as without workers, and so do the tests of the secured engine's own fixture. Workers write which
# tests those are when they collect (the controller sees only node ids).
_GROUPS_ENV = "ESMEM_TEST_GROUPS"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each worker writes, for the scheduler below, every test's work unit and which tests are `slow`."""
    if hasattr(config, "workerinput") and os.environ.get(_GROUPS_ENV):
        units, slow = {}, []
        for item in items:
            engine = getattr(getattr(item, "callspec", None), "params", {}).get("engine_url")
            if "secured" in item.fixturenames:  # one worker starts a temporary secured engine, if any
                units[item.nodeid] = "own secured"
            else:  # shared-prefix tests one after the other, module-scoped fixtures made once
                units[item.nodeid] = f"{engine or 'no engine'} {item.nodeid.split('::')[0]}"
            if item.get_closest_marker("slow"):
                slow.append(item.nodeid)
        path = Path(os.environ[_GROUPS_ENV]) / f"{config.workerinput['workerid']}.json"
        path.write_text(json.dumps({"units": units, "slow": slow}))


# The weight of a `slow` test in ordinary ones when work units are ordered: slow tests (an engine
# killed and restarted, a two-node cluster, concurrent writers) take 10-50 s, ordinary ones ~1.4 s.
SLOW_WEIGHT = 20


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByEngineModule(LoadScopeScheduling):
        """A work unit per engine and module (its shared-prefix tests run one after the other on one
        worker's shared prefix, its module-scoped fixtures are made once), and one for the temporary
        secured engine's tests. A free worker takes the heaviest unit left (a slow test weighs SLOW_WEIGHT), so
        that no long test starts last while the other workers idle. (One unit per engine kept three
        workers busy to the end: 428 and 431 s, against 404 and 412 s split by module.)"""

        _units: dict[str, str] | None = None
        _slow: set[str] = set()

        def _split_scope(self, nodeid: str) -> str:
            if self._units is None:  # all workers have collected when the first unit is made
                self._units = {}
                for path in Path(os.environ[_GROUPS_ENV]).glob("*.json"):
                    written = json.loads(path.read_text())
                    self._units.update(written["units"])
                    self._slow = self._slow | set(written["slow"])
            return self._units.get(nodeid, nodeid)

        def _weight(self, unit: str) -> int:
            return sum(SLOW_WEIGHT if test in self._slow else 1 for test in self.workqueue[unit])

        def _assign_work_unit(self, node) -> None:
            self.workqueue.move_to_end(max(self.workqueue, key=self._weight), last=False)
            super()._assign_work_unit(node)

    return ByEngineModule(config, log)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Parametrised here, not at import, because engines are discovered in pytest_configure.
    if "engine_url" in metafunc.fixturenames:
        names = sorted(_ENGINES.found)
        if metafunc.definition.get_closest_marker("plain_http"):
            # these talk plain HTTP to the engine themselves (urllib, curl, node, a TCP relay): the open
            # engines only; the secured engine's own tests (test_secure, test_grant) cover TLS and auth
            names = [n for n in names if n != "secured"]
        if not metafunc.definition.get_closest_marker("contract") and any(n in embedded.FLAVOURS for n in names):
            # beside the embedded engines, a container checks that the image keeps the contract
            names = [n for n in names if n not in CONTAINERS]
        if metafunc.definition.get_closest_marker("own_engine"):
            # these start a node of their own: once per embedded flavour (the secured engine is one more
            # opensearch-2), or once on another engine
            names = [n for n in names if n in embedded.FLAVOURS] or names[:1]
        metafunc.parametrize("engine_url", names or ["none"], indirect=True, scope="session")
    if "face" in metafunc.fixturenames and metafunc.definition.get_closest_marker("contract"):
        # the contract holds for both stores: MemoryStore and AsyncMemoryStore (through tests/async_face.py)
        metafunc.parametrize("face", ["sync", "async"])


_SECURED_ENV = ("ESMEM_CA_CERTS", "ESMEM_USERNAME", "ESMEM_PASSWORD_FILE")


@pytest.fixture(scope="session")
def engine_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "none":
        if os.environ.get("ESMEM_REQUIRE_ENGINE") == "1":
            pytest.fail("no engine available: " + "; ".join(_ENGINES.problems))
        pytest.skip("no engine available (set ESMEM_URL, start Docker, or install Java+Maven)")
    if request.param != "secured":
        yield _ENGINES.found[request.param]
        return
    # CLI tests pass `--url engine.url`: on the secured engine the rest comes from the environment,
    # as it would for a user (paths only: the password stays in its file).
    from esmem.engines import embedded_secure

    saved = {k: os.environ.get(k) for k in _SECURED_ENV}
    running = _ENGINES.secured
    assert running is not None
    os.environ.update({"ESMEM_CA_CERTS": str(running.ca), "ESMEM_USERNAME": embedded_secure.ADMIN_USER,
                       "ESMEM_PASSWORD_FILE": str(embedded_secure.files(running.home).password_file)})
    yield running.url
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def engines_found() -> dict[str, str]:
    """Every engine of this run by name (embedded flavours, containers, `secured`, `url`) and its URL."""
    return dict(_ENGINES.found)


@pytest.fixture(scope="session")
def engine(engine_url: str) -> Iterator[Engine]:
    name = next(k for k, v in _ENGINES.found.items() if v == engine_url)
    eng = Engine(_ENGINES.config(name))
    yield eng
    eng.close()


@pytest.fixture(scope="session")
def secured() -> embedded.Running:
    """The secured embedded engine (ESMEM_SECURE_HOME, else a temporary one started here)."""
    try:
        return _ENGINES.start_secured()
    except EsmemError as e:
        if os.environ.get("ESMEM_REQUIRE_ENGINE") == "1":
            pytest.fail(f"no secured engine: {e}")
        pytest.skip(f"no secured engine: {e}")


@pytest.fixture(scope="session")
def secured_admin(secured: embedded.Running) -> Iterator[Engine]:
    eng = Engine(_ENGINES.secured_config())
    yield eng
    eng.close()


def _under(engine: Engine, prefix: str) -> dict:
    """Everything the cluster holds under `prefix`, in one cheap read: stored scripts and search
    templates, the index template, and each index's mapping, settings, aliases and state."""
    paths = [f"metadata.stored_scripts.{prefix}-*", f"metadata.index_template.index_template.{prefix}-*"] + \
        [f"metadata.indices.{prefix}-*.{part}" for part in ("mappings", "settings", "aliases", "state")]
    return engine.request("GET", "/_cluster/state/metadata", params={"filter_path": ",".join(paths)})


class SharedPrefix:
    """One installed prefix per engine for the whole session (install + uninstall cost ~20 cluster-state
    updates each, most of the suite's time when every test had its own).

    Before each test that asks for `installed`, `reset` puts it back in the state a fresh install leaves:
    the same stored scripts, templates, index template and mapping, and an index that never held a
    document. A written index is deleted and re-created by `install` (not emptied by delete-by-query:
    deleted documents stay in BM25's statistics, and scores are asserted against the formula); changed
    artifacts are uninstalled and installed again, and named in the run's summary, since such a test
    should be marked `fresh_prefix`."""

    def __init__(self, engine: Engine, **options) -> None:
        self.engine, self.options = engine, options  # `install` options (the semantic one: an embedding)
        self.name = f"t{uuid.uuid4().hex[:12]}"
        self.last_test = ""
        self._install()

    def _install(self) -> None:
        install(self.engine, self.name, **self.options)
        self.index = current_index(self.engine, self.name)
        self.artifacts = _under(self.engine, self.name)

    def _written(self) -> bool:
        """Whether any operation reached the index since it was created (max_seq_no counts every
        index, update and delete, refreshed or not)."""
        stats = self.engine.request("GET", f"/{self.index}/_stats/docs",
                                    params={"level": "shards", "filter_path": "indices.*.shards.*.seq_no"})
        return any(copy["seq_no"]["max_seq_no"] >= 0 for index in stats.get("indices", {}).values()
                   for copies in index["shards"].values() for copy in copies)

    def reset(self, test: str) -> str:
        if _under(self.engine, self.name) != self.artifacts:
            _REINSTALLED_NOW.append(f"{self.last_test} (on {self.engine.url})")
            uninstall(self.engine, self.name)
            self._install()
        elif self._written():
            self.engine.request("DELETE", f"/{self.index}")
            self._install()  # creates the index and its alias, as a first install does
        self.last_test = test
        return self.name


# Tests that changed the shared prefix's artifacts without the `fresh_prefix` mark (see SharedPrefix):
# found by the process that ran them, reported with the next test's report to the one that prints.
_REINSTALLED_NOW: list[str] = []
SHARED_PREFIX_REINSTALLED: list[str] = []


@pytest.fixture(scope="session")
def shared_prefix(engine: Engine) -> Iterator[SharedPrefix]:
    shared = SharedPrefix(engine)
    yield shared
    uninstall(engine, shared.name)


@pytest.fixture(scope="session")
def shared_semantic_prefix(engine: Engine) -> Iterator[SharedPrefix]:
    """The same for tests that ask for `installed_semantic`: installed with MiniLM's vector field."""
    from semantic_support import minilm

    shared = SharedPrefix(engine, embedding=spec(minilm()))
    yield shared
    uninstall(engine, shared.name)


# The fixtures that install a prefix for a test, and the shared prefix each one takes unless the test is
# marked `fresh_prefix`.
SHARED = {"installed": "shared_prefix", "installed_semantic": "shared_semantic_prefix"}


@pytest.fixture
def prefix(request: pytest.FixtureRequest, engine: Engine) -> Iterator[str]:
    """This test's prefix. A test that uses `installed` (or `installed_semantic`) gets the shared one of
    its engine, reset (see SharedPrefix), unless it is marked `fresh_prefix` (it changes installed
    templates, policy or mapping); every other test gets a unique prefix of its own with nothing
    installed, removed after."""
    wants = next((SHARED[f] for f in SHARED if f in request.fixturenames), None)
    if wants and not request.node.get_closest_marker("fresh_prefix"):
        yield request.getfixturevalue(wants).reset(request.node.nodeid)
        return
    p = f"t{uuid.uuid4().hex[:12]}"
    yield p
    if any(_under(engine, p).get("metadata", {}).values()):  # skip ~20 DELETEs when nothing was installed
        uninstall(engine, p)


def _installed(request: pytest.FixtureRequest, engine: Engine, prefix: str, **options) -> str:
    if request.node.get_closest_marker("fresh_prefix"):
        install(engine, prefix, **options)
    return prefix  # otherwise the shared prefix, installed and reset


@pytest.fixture
def installed(request: pytest.FixtureRequest, engine: Engine, prefix: str) -> str:
    return _installed(request, engine, prefix)


@pytest.fixture
def installed_semantic(request: pytest.FixtureRequest, engine: Engine, prefix: str) -> str:
    """A prefix installed with MiniLM's vector field (the semantic tests)."""
    from semantic_support import minilm

    return _installed(request, engine, prefix, embedding=spec(minilm()))


@pytest.fixture
def face() -> str:
    """Which store `make_store` builds: "sync" (MemoryStore), or "async" (AsyncMemoryStore through a
    sync bridge); tests marked `contract` run with each."""
    return "sync"


@pytest.fixture
def make_store(face: str, engine: Engine, request: pytest.FixtureRequest):
    """A factory of this test's store over `engine`: make_store(prefix, **MemoryStore options)."""
    def make(prefix: str, **options) -> MemoryStore:
        if face == "sync":
            return MemoryStore(engine, prefix, **options)
        from async_face import AsyncFace

        store = AsyncFace(Engine(engine.config, asynchronous=True), prefix, **options)
        request.addfinalizer(store.close)
        return store  # type: ignore[return-value]  # answers every call a test makes of a MemoryStore
    return make


@pytest.fixture
def store(make_store, installed: str) -> MemoryStore:
    return make_store(installed)


@pytest.fixture(scope="session")
def other_major(engine: Engine) -> Iterator[Engine]:
    """An open embedded OpenSearch of the other major than `engine` (2 <-> 3): this run's engine of
    that flavour, one running in ESMEM_HOME, else a temporary one. Skipped on Elasticsearch; a failure
    to start it fails the test under ESMEM_REQUIRE_ENGINE=1."""
    if engine.info.family != "opensearch":
        pytest.skip(f"{engine.info} has no embedded engine of another major")
    name = "opensearch-3" if engine.info.major == 2 else "opensearch-2"
    try:
        url = _ENGINES.flavour(name)
    except EsmemError as e:
        if os.environ.get("ESMEM_REQUIRE_ENGINE") == "1":
            pytest.fail(f"embedded {name}: {e}")
        pytest.skip(f"embedded {name}: {e}")
    other = Engine(ConnectionConfig(url=url))
    yield other
    other.close()
