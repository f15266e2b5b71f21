"""A real two-node OpenSearch cluster on 127.0.0.1: esmem's answer to outgrowing one machine is the
engine's own clustering. install with 2 shards and 1 replica, the write/recall contract on it, and
(slow) a node killed under a running writer and reader."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from esmem.domain.installation import check, install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.engines import embedded
from esmem.errors import EsmemError
from esmem.index.engine import Engine
from esmem.index.install import uninstall

pytestmark = pytest.mark.slow  # every test here starts a two-node cluster of its own


def _health(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/_cluster/health", timeout=5) as resp:
        return json.load(resp)


def _wait(url: str, status: str, nodes: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            h = _health(url)
            if h["status"] == status and h["number_of_nodes"] == nodes:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"cluster at {url} not {status} with {nodes} nodes within {timeout}s")


@pytest.fixture(scope="module")
def cluster() -> Iterator[embedded.Running]:
    home = Path(tempfile.mkdtemp(prefix="esmem-test-cluster-"))
    try:
        running = embedded.up(home=home, nodes=2, heap="512m")
    except EsmemError as e:
        shutil.rmtree(home, ignore_errors=True)
        if os.environ.get("ESMEM_REQUIRE_ENGINE") == "1":
            pytest.fail(f"two-node embedded cluster: {e}")
        pytest.skip(f"two-node embedded cluster: {e}")
    yield running
    embedded.down(home)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def cluster_store(cluster: embedded.Running) -> Iterator[tuple[Engine, MemoryStore]]:
    eng = Engine(cluster.url)
    prefix = f"c{uuid.uuid4().hex[:10]}"
    install(eng, prefix, shards=2, replicas=1)
    _wait(cluster.url, "green", 2)
    yield eng, MemoryStore(eng, prefix)
    uninstall(eng, prefix)
    eng.close()


def test_two_nodes_form_one_cluster_with_replicated_memories(cluster, cluster_store) -> None:
    eng, store = cluster_store
    assert len(cluster.urls) == 2 and _health(cluster.urls[1])["cluster_name"] == "esmem-embedded"
    roles = {n["name"]: n["node.role"] for n in eng.request("GET", "/_cat/nodes", params={"format": "json"})}
    assert "m" in roles["esmem-1"] and "m" not in roles["esmem-2"] and "d" in roles["esmem-2"]
    shards = eng.request("GET", f"/_cat/shards/{store.alias}", params={"format": "json"})
    assert sorted(s["prirep"] for s in shards) == ["p", "p", "r", "r"]
    assert {s["node"] for s in shards} == {"esmem-1", "esmem-2"}  # both nodes hold copies
    assert all(s["state"] == "STARTED" for s in shards)


def test_write_merge_and_recall_contract_on_two_shards(cluster_store) -> None:
    eng, store = cluster_store
    facts = ["The team deploys the order service to Kubernetes on Fridays", "Waters the tomatoes every morning",
             "Reads science fiction before sleeping", "Cycles to work when it does not rain",
             "Plays chess online with an old friend", "Prefers green tea over coffee",
             "我对花生过敏", "周末想去杭州徒步", "The staging database runs PostgreSQL 16",
             "Keeps the backups in a second region", "Learns Japanese on the train", "Bakes bread on Sundays"]
    namespaces = [f"agent-{i}" for i in range(12)]  # routed by namespace: spread over both shards
    for ns in namespaces:  # every namespace holds every fact, so each shard has the same statistics
        MemoryStore(eng, store.names.prefix, merge=MergePolicy(enabled=False)).remember_many(
            [MemoryInput(f, ns) for f in facts])
    merged = store.remember("The team deploys the order service to Kubernetes on Mondays", "agent-3")
    assert merged.action == "superseded", merged.scores
    for ns in namespaces:
        top = store.recall("when does the team deploy to Kubernetes", ns, k=3, touch=False).items
        assert top and all(r.memory.namespace == ns for r in top)
        expected = "Mondays" if ns == "agent-3" else "Fridays"
        assert top[0].memory.content.endswith(expected)
    assert check(eng, store.names.prefix) == []


@pytest.mark.slow
def test_a_node_dies_under_a_writer_and_a_reader(cluster, cluster_store) -> None:
    eng, store = cluster_store
    writer = MemoryStore(eng, store.names.prefix, merge=MergePolicy(enabled=False))
    acknowledged: list[tuple[str, str]] = []
    write_errors: list[str] = []
    recalls: list[int] = []
    read_errors: list[str] = []
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            ns = f"w{i % 6}"
            try:
                acknowledged.append((ns, writer.remember(f"event {i}: shipment {i * 7919 % 1000} left the depot",
                                                         ns, kind="event").id))
            except EsmemError as e:
                write_errors.append(str(e))
            i += 1

    def read() -> None:
        while not stop.is_set():
            try:
                recalls.append(len(store.recall("shipment depot", f"w{len(recalls) % 6}", k=5, touch=False).items))
            except EsmemError as e:
                read_errors.append(str(e))
            time.sleep(0.02)

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for t in threads:
        t.start()
    try:
        time.sleep(3)
        before = (len(acknowledged), len(recalls))
        embedded.stop_pid(cluster.pids[1], kill=True)  # kill -9 the second (data-only) node
        _wait(cluster.url, "yellow", 1, timeout=60)   # its replicas are promoted on the first node
        time.sleep(3)
        during = (len(acknowledged) - before[0], len(recalls) - before[1])
        embedded.restart_node(cluster.home, 1)
        _wait(cluster.url, "green", 2)
        time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not read_errors, read_errors[:3]
    assert during[0] > 0 and during[1] > 0, "writes and recalls went on while the node was down"
    assert sum(1 for n in recalls if n) > len(recalls) // 2
    missing = [(ns, i) for ns, i in acknowledged
               if not eng.request("GET", f"/{store.alias}/_doc/{i}", params={"routing": ns}).get("found")]
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged writes lost"
    # every copy agrees after the node rejoined: the same count from primaries and from replicas
    counts = {pref: eng.request("GET", f"/{store.alias}/_count", params={"preference": pref})["count"]
              for pref in ("_primary", "_replica")}
    assert counts["_primary"] == counts["_replica"] >= len(acknowledged)
