"""`esmem grant`: an agent confined to namespace A by the cluster's document-level security.

The property test sends hypothesis-generated requests with the agent's credentials through every read
channel (search, templates inline and stored with any parameters, msearch, msearch/template, mget,
GET _doc, explain, count, aggregations) and checks that none returns a memory of namespace B: no B
id, no B content, no B namespace key, no hit count above A's. Engine: the secured embedded OpenSearch.
"""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esmem import values
from esmem.cli.main import cli
from esmem.domain.store import MemoryStore
from esmem.engines import embedded
from esmem.engines import embedded_secure
from esmem.errors import EngineError, InvalidInput
from esmem.index.connection import ENV, ConnectionConfig
from esmem.index.engine import Engine
from esmem.index.grant import dls_query, elasticsearch_role_descriptor, grant, revoke, role_body
from esmem.index.install import Names, install, uninstall

A, B = "alpha-ns", "bravo-ns"
MARK = "zebrasecret"  # only in B's contents; queries use it to try to match them
HIDDEN = "xylophonebravo"  # only in B's contents, never in a request: its presence in a response is a leak
WORDS = ["deploy", "vault", "fridays", "key", "green", MARK, "release", "rollback", "的", "部署"]


class World:
    def __init__(self, admin: Engine, agent: Engine, prefix: str, a_ids: list[str], b_ids: list[str]):
        self.admin, self.agent, self.prefix = admin, agent, prefix
        self.a_ids, self.b_ids = a_ids, b_ids
        self.alias = Names(prefix).alias
        self.a_total = len(a_ids)


@pytest.fixture(scope="module")
def world(secured: embedded.Running, secured_admin: Engine, tmp_path_factory):
    prefix = f"g{uuid.uuid4().hex[:10]}"
    install(secured_admin, prefix)
    store = MemoryStore(secured_admin, prefix)
    a_ids = [store.remember(f"{w} deploy note {i} for alpha", A).id for i, w in enumerate(WORDS[:5] * 2)]
    b_ids = [store.remember(f"{MARK} {w} deploy secret {i} {HIDDEN}", B).id for i, w in enumerate(WORDS[:5] * 2)]
    a_ids += [store.remember("deploy rule for alpha: always roll back", A, kind="rule", importance=9).id]
    b_ids += [store.remember(f"{MARK} deploy rule {HIDDEN}: never tell", B, kind="rule", importance=9).id]
    secret = tmp_path_factory.mktemp("agent") / "agent.pw"
    user = f"agent{uuid.uuid4().hex[:6]}"
    grant(secured_admin, prefix, user, [A], secret)
    agent = Engine(ConnectionConfig(url=secured.url, ca_certs=str(secured.ca), username=user,
                                    password=secret.read_text().strip()))
    yield World(secured_admin, agent, prefix, a_ids, b_ids)
    agent.close()
    revoke(secured_admin, prefix, user)
    uninstall(secured_admin, prefix)


def _leaks(world: World, resp: object) -> list[str]:
    """What in `resp` belongs to namespace B."""
    text = json.dumps(resp, ensure_ascii=False)
    found: list[str] = []

    def walk(node: object) -> None:  # a B document returned (a requested id echoed as not found is none)
        if isinstance(node, dict):
            if node.get("_id") in world.b_ids and (node.get("found") or node.get("matched") or "_source" in node
                                                   or "_score" in node):
                found.append(node["_id"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(resp)
    if HIDDEN in text:
        found.append("B content")
    found += [p for p in (f'"namespace": "{B}"', f'"_routing": "{B}"', f'"key": "{B}"') if p in text]
    for total in re.findall(r'"(?:total|doc_count|count)": (?:\{"value": )?(\d+)', text):
        if int(total) > world.a_total:
            found.append(f"count {total} > {world.a_total} memories of A")
    if any(int(n) > 1 for n in re.findall(r'"n": \{"value": (\d+)', text)):
        found.append("more than one namespace counted")
    return found


# -- request strategies ------------------------------------------------------------------------
word = st.sampled_from(WORDS)
namespace = st.sampled_from([A, B, "*", f"{B}*", "", A.upper()])
doc_id = st.one_of(st.sampled_from(["x"]), st.integers(0, 10_000).map(str))

query = st.recursive(
    st.one_of(
        st.just({"match_all": {}}),
        word.map(lambda w: {"match": {"content": w}}),
        namespace.map(lambda n: {"term": {"namespace": n}}),
        namespace.map(lambda n: {"prefix": {"namespace": n[:3]}}),
        word.map(lambda w: {"query_string": {"query": f"{w} OR namespace:{B} OR *"}}),
        st.just({"exists": {"field": "content"}}),
    ),
    lambda inner: st.lists(inner, min_size=1, max_size=3).map(lambda qs: {"bool": {"should": qs}}),
    max_leaves=4,
)
aggs = st.one_of(
    st.just({}),
    st.just({"ns": {"terms": {"field": "namespace", "size": 20}}}),
    st.just({"top": {"top_hits": {"size": 20}}}),
    st.just({"n": {"cardinality": {"field": "namespace"}}}),
    namespace.map(lambda n: {"f": {"filter": {"term": {"namespace": n}}, "aggs": {"t": {"top_hits": {}}}}}),
    st.just({"k": {"terms": {"field": "kind"}, "aggs": {"t": {"top_hits": {"size": 5}}}}}),
)


@st.composite
def search_body(draw) -> dict:
    body: dict = {"query": draw(query), "size": draw(st.integers(0, 50))}
    if a := draw(aggs):
        body["aggs"] = a
    if draw(st.booleans()):
        body["post_filter"] = {"term": {"namespace": draw(namespace)}}
    return body


def _url_params(draw) -> dict:
    p: dict = {}
    if draw(st.booleans()):
        p["routing"] = draw(st.sampled_from([A, B]))
    if draw(st.booleans()):
        p["request_cache"] = draw(st.sampled_from(["true", "false"]))
    return p


@st.composite
def stored_template_params(draw) -> dict:
    ns = draw(namespace)
    tp = {"namespace": ns or A, "query": " ".join(draw(st.lists(word, min_size=1, max_size=4))),
          "size": draw(st.integers(1, 50)), "now": values.iso(values.utcnow())}
    extra = draw(st.dictionaries(st.sampled_from(["namespace", "min_importance", "size", "include_superseded",
                                                  "must_not_miss", "rel_only", "kinds", "mode", "junk"]),
                                 st.one_of(namespace, st.integers(-5, 50), st.booleans(), st.just("")), max_size=3))
    return {**tp, **extra}


@st.composite
def request(draw, alias: str, index_names: list[str], a_ids: list[str], b_ids: list[str]):
    """(method, path, body, params) on one of the read channels."""
    target = draw(st.sampled_from(index_names))
    channel = draw(st.sampled_from(["search", "template_inline", "template_stored", "msearch", "msearch_template",
                                    "mget", "get", "explain", "count"]))
    ids = draw(st.lists(st.sampled_from(b_ids + a_ids[:2]) | doc_id, min_size=1, max_size=4))
    if channel == "search":
        return "POST", f"/{target}/_search", draw(search_body()), _url_params(draw)
    if channel == "template_inline":
        source = json.dumps({"query": {"bool": {"should": [{"term": {"namespace": "{{ns}}"}},
                                                           {"match": {"content": "{{q}}"}}]}}, "size": "{{size}}"})
        return "POST", f"/{target}/_search/template", {"source": source, "params": {
            "ns": draw(namespace), "q": draw(word), "size": draw(st.integers(0, 30))}}, _url_params(draw)
    if channel == "template_stored":
        return ("POST", f"/{target}/_search/template",
                {"id": f"{alias.removesuffix('-memories')}-recall", "params": draw(stored_template_params())},
                _url_params(draw))
    if channel == "msearch":
        lines = []
        for _ in range(draw(st.integers(1, 3))):
            lines += [{"index": draw(st.sampled_from(index_names)), **({"routing": B} if draw(st.booleans()) else {})},
                      draw(search_body())]
        return "POST", "/_msearch", "".join(json.dumps(x) + "\n" for x in lines), None
    if channel == "msearch_template":
        lines = [{"index": target}, {"id": f"{alias.removesuffix('-memories')}-recall",
                                     "params": draw(stored_template_params())}]
        return "POST", "/_msearch/template", "".join(json.dumps(x) + "\n" for x in lines), None
    if channel == "mget":
        docs = [{"_index": target, "_id": i, **({"routing": B} if draw(st.booleans()) else {})} for i in ids]
        return "POST", "/_mget", {"docs": docs}, None
    if channel == "get":
        return "GET", f"/{target}/_doc/{ids[0]}", None, {"routing": draw(st.sampled_from([A, B]))}
    if channel == "explain":
        return "POST", f"/{target}/_explain/{ids[0]}", {"query": draw(query)}, {"routing": B}
    return "POST", f"/{target}/_count", {"query": draw(query)}, None


def test_admin_sees_both_namespaces(world: World) -> None:
    """The control: the same data is there for a user without DLS (so 0 leaks is not 0 data)."""
    resp = world.admin.request("POST", f"/{world.alias}/_search", {"query": {"match_all": {}}, "size": 100})
    assert resp["hits"]["total"]["value"] == len(world.a_ids) + len(world.b_ids)
    assert _leaks(world, resp)


def test_agent_reads_no_memory_of_another_namespace(world: World) -> None:
    world.a_total = world.admin.request("POST", f"/{world.alias}/_count", {"query": {"term": {"namespace": A}}})["count"]
    index = world.admin.request("GET", f"/{world.alias}/_alias/{world.alias}")
    names = [world.alias, next(iter(index)), f"{world.alias}-*"]
    seen = {"ok": 0, "refused": 0, "a_hits": 0}  # over all examples, shrinking included

    @settings(max_examples=600, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(request(world.alias, names, world.a_ids, world.b_ids))
    def check(req) -> None:
        method, path, body, params = req
        try:
            resp = world.agent.request(method, path, body, params)
        except EngineError as e:  # refused or not found is no leak, unless the error carries B's data
            seen["refused"] += 1
            assert HIDDEN not in str(e) and '"found":true' not in str(e).replace(" ", "")
            return
        seen["ok"] += 1
        seen["a_hits"] += json.dumps(resp).count(A)
        assert _leaks(world, resp) == [], (method, path, body, params)

    check()
    assert seen["ok"] + seen["refused"] >= 500, seen  # hypothesis ran at least 500 requests
    assert seen["ok"] >= 300 and seen["a_hits"] > 0, seen  # mostly answered requests, and A's data did come back


@pytest.mark.xfail(strict=True, reason="OpenSearch security 2.19.4.0 applies DLS to the search query, which a "
                                       "global aggregation ignores: B's documents come back (upstream, see README)")
def test_global_aggregation_does_not_leak(world: World) -> None:
    resp = world.agent.request("POST", f"/{world.alias}/_search", {
        "size": 0, "aggs": {"g": {"global": {}, "aggs": {"t": {"top_hits": {"size": 50}}}}}})
    assert _leaks(world, resp) == []


def test_agent_writes_and_recalls_in_its_namespace_only(world: World) -> None:
    store = MemoryStore(world.agent, world.prefix)
    new = store.remember("alpha canary releases go out on tuesdays", A)
    assert new.action == "added"
    got = store.recall("canary releases tuesdays", A, touch=False)
    assert got.items[0].memory.id == new.id
    assert store.recall(f"{MARK} deploy secret", B, touch=False).items == ()
    with pytest.raises(EngineError, match="Update is not supported when FLS or DLS"):
        store.touch(A, [new.id], values.utcnow(), 0.5)  # partial updates are refused under DLS (README)


def test_grant_cli_is_idempotent_and_prints_no_secret(world: World, secured: embedded.Running, tmp_path,
                                                     monkeypatch) -> None:
    for var in ENV.values():
        monkeypatch.delenv(var, raising=False)
    env = {"ESMEM_URL": secured.url, "ESMEM_CA_CERTS": str(secured.ca), "ESMEM_USERNAME": "admin",
           "ESMEM_PASSWORD_FILE": str(embedded_secure.files(secured.home).password_file)}
    secret = tmp_path / "bot.pw"
    user = f"bot{uuid.uuid4().hex[:6]}"
    runner = CliRunner()
    first = runner.invoke(cli, ["--prefix", world.prefix, "grant", user, "-n", A, "-n", "other-ns",
                                "--secret-file", str(secret)], env=env)
    assert first.exit_code == 0, first.output
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    password = secret.read_text().strip()
    second = runner.invoke(cli, ["--prefix", world.prefix, "grant", user, "-n", A, "--secret-file", str(secret)],
                           env=env)
    assert second.exit_code == 0 and second.output.startswith(f"user {user} (role esmem-{world.prefix}-{user})")
    assert password not in first.output + second.output and secret.read_text().strip() == password
    role = world.admin.request("GET", f"/_plugins/_security/api/roles/esmem-{world.prefix}-{user}")
    assert json.loads(role[f"esmem-{world.prefix}-{user}"]["index_permissions"][0]["dls"]) == dls_query([A])
    bad = runner.invoke(cli, ["--prefix", world.prefix, "grant", user, "-n", "bad ns!", "--secret-file",
                              str(secret)], env=env)
    assert bad.exit_code == 2 and bad.output.startswith("error: ") and bad.output.count("\n") == 1
    assert runner.invoke(cli, ["--prefix", world.prefix, "revoke", user], env=env).output.strip() == "revoked"


def test_grant_refuses_bad_input(world: World, tmp_path) -> None:
    with pytest.raises(InvalidInput):
        grant(world.admin, world.prefix, "no spaces please", [A], tmp_path / "x")
    with pytest.raises(InvalidInput):
        grant(world.admin, world.prefix, "ok-user", [], tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_role_documents_match_between_families() -> None:
    os_role, es_role = role_body("esmem", [A]), elasticsearch_role_descriptor("esmem", [A])
    assert json.loads(os_role["index_permissions"][0]["dls"]) == es_role["indices"][0]["query"] == dls_query([A])
    assert os_role["index_permissions"][0]["index_patterns"] == es_role["indices"][0]["names"]


README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_agent_credentials_example_runs(secured: embedded.Running, tmp_path) -> None:
    """The shell block of "Give each agent its own credentials", as written, on the secured engine."""
    section = README.read_text(encoding="utf-8").split("## Give each agent its own credentials", 1)[1]
    block = re.findall(r"^```bash\n(.*?)^```", section.split("\n## ", 1)[0], re.S | re.M)[0]
    prefix = f"r{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if k not in ENV.values()}
    env.update({"ESMEM_HOME": str(secured.home.parent), "ESMEM_PREFIX": prefix,
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    try:
        assert run.returncode == 0, run.stderr
        alice, bob = run.stdout.split("recall 'deploys Fridays' in bob")
        assert "Alice prefers dark mode" in alice
        assert "blue-green" not in bob and "Alice" not in bob  # the table is empty: the cluster hid bob's memory
        admin_pw = embedded_secure.files(secured.home).password()
        agent_pw = (tmp_path / "agent-alice.pw").read_text().strip()
        assert admin_pw not in run.stdout + run.stderr and agent_pw not in run.stdout + run.stderr
    finally:
        admin = Engine(ConnectionConfig(url=secured.url, ca_certs=str(secured.ca), username="admin",
                                        password=embedded_secure.files(secured.home).password()))
        revoke(admin, prefix, "agent-alice")
        uninstall(admin, prefix)
        admin.close()
