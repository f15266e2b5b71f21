"""`esmem mcp` driven by the official MCP client, over stdio and streamable HTTP, on the real engine.

The server runs as a subprocess (`esmem --url ... --prefix ... mcp -n NS`) exactly as an MCP client
would launch it; the client is `mcp.Client` from the same SDK.
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from esmem.apps.mcp_server import create_server
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from listening import free_port, wait_listening

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
RULES = {o["id"]: o for o in map(json.loads, (DATASETS / "rules.jsonl").read_text(encoding="utf-8").splitlines())
         if o.get("type") == "memory"}
# the rule store's r09, saying that it changes s01 (改成)
OLD_429, NEW_429 = RULES["s01"]["content"], RULES["r09"]["content"].replace("限流时按", "限流时改成按")
PEANUTS = "我对花生过敏"
TOOLS = {"remember", "remember_many", "edit", "recall", "context", "list", "get", "history", "restore", "forget",
         "erase"}
TOKEN = "mcp-test-token-" + "x" * 24


def esmem_command(url: str, prefix: str, namespace: str, *extra: str) -> list[str]:
    script = Path(sys.executable).with_name("esmem")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "esmem.cli.main"]
    return [*head, "--url", url, "--prefix", prefix, "mcp", "-n", namespace, *extra]


def call(result: Any) -> dict[str, Any]:
    """The structured result of a successful tool call."""
    assert not result.is_error, result.content
    return result.structured_content


async def scenario(client: Client, store: MemoryStore, ns: str) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description and len(t.description) > 80  # written for a model, not a stub
        assert "namespace" not in json.dumps(t.input_schema)  # the model cannot choose one
        assert t.output_schema is not None
    assert tools["remember"].input_schema["required"] == ["content"]
    assert set(tools["remember"].input_schema["properties"]["kind"]["enum"]) == \
        {"fact", "preference", "intent", "rule", "event", "note"}
    assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
    # what writes is never annotated read-only: recall and context reheat what they return
    assert {n for n, t in tools.items() if t.annotations.read_only_hint} == {"list", "get", "history"}

    # three memories: the newer 429 rule supersedes the older one
    old = call(await client.call_tool("remember", {"content": OLD_429, "kind": "rule",
                                                   "valid_from": RULES["s01"]["valid_from"]}))
    assert old["action"] == "added"
    new = call(await client.call_tool("remember", {"content": NEW_429, "kind": "rule", "importance": 7,
                                                   "entities": ["HTTP 429", "jitter"],
                                                   "valid_from": RULES["r09"]["valid_from"]}))
    assert new["action"] == "superseded" and new["superseded"] == [old["id"]]
    assert old["id"] in {c["id"] for c in new["candidates"]}
    nut = call(await client.call_tool("remember", {"content": PEANUTS, "kind": "fact"}))
    assert nut["action"] == "added" and nut["id"] not in (old["id"], new["id"])
    assert store.count(ns) == 2 and store.count(ns, status="superseded") == 1

    # recall: the current rule only, with its score components
    got = call(await client.call_tool("recall", {"query": "遇到 429 怎么重试", "k": 3}))
    ids = [m["memory"]["id"] for m in got["memories"]]
    assert ids[0] == new["id"] and old["id"] not in ids
    top = got["memories"][0]
    assert top["rank"] == 1 and top["memory"]["content"] == NEW_429 and top["memory"]["entities"] == ["HTTP 429", "jitter"]
    assert top["relevance"] > 0 and 0 < top["recency"] <= 1 and top["score"] > 0
    # blend (the default): score = (1 - w) * sat(rel, k) + w * recency, w = 0.1, k = 5
    assert top["score"] == pytest.approx(0.9 * top["relevance"] / (top["relevance"] + 5) + 0.1 * top["recency"], rel=1e-4)
    # as_of: before the update the old rule was the valid one; kinds filters
    past = call(await client.call_tool("recall", {"query": "429 重试", "as_of": "2026-08-01T00:00:00Z"}))
    assert [m["memory"]["id"] for m in past["memories"]] == [old["id"]]
    facts = call(await client.call_tool("recall", {"query": "429 重试 花生", "kinds": ["fact"]}))
    assert [m["memory"]["id"] for m in facts["memories"]] == [nut["id"]]
    # pinned: the allergy applies to ordering takeout although no word matches; not to a 429 question
    food = call(await client.call_tool("recall", {"query": "今晚点外卖"}))
    assert [m["content"] for m in food["pinned"]] == [PEANUTS] and not food["memories"]
    assert call(await client.call_tool("recall", {"query": "429 重试"}))["pinned"] == []
    # from messages: the filler last turn does not hide the topic
    conv = [{"role": "user", "content": "接口一直 429，怎么重试比较好？"}, {"role": "assistant", "content": "可以退避。"},
            {"role": "user", "content": "好的，继续"}]
    by_msgs = call(await client.call_tool("recall", {"messages": conv, "k": 1}))
    assert "429" in by_msgs["query"] and by_msgs["memories"][0]["memory"]["id"] == new["id"]

    # context: the block to paste, within the budget, current rule in, stale rule out
    ctx = call(await client.call_tool("context", {"messages": conv, "budget": 400}))
    assert ctx["text"].startswith("## Relevant memories\n- [rule, ")
    assert NEW_429 in ctx["text"] and OLD_429 not in ctx["text"]
    assert PEANUTS not in ctx["text"]  # importance 10 (allergy): pinned, but it does not apply to 429
    assert ctx["chars"] == len(ctx["text"]) <= 400 and new["id"] in ctx["included"]

    # history, restore
    hist = call(await client.call_tool("history", {"memory_id": new["id"]}))
    assert [(v["id"], v["status"]) for v in hist["versions"]] == [(old["id"], "superseded"), (new["id"], "active")]
    assert hist["versions"][0]["superseded_by"] == new["id"]
    back = call(await client.call_tool("restore", {"memory_id": old["id"]}))
    assert {v["id"]: v["status"] for v in back["versions"]}[old["id"]] == "active"
    assert store.get(ns, new["id"]).status == "retired"
    again = call(await client.call_tool("recall", {"query": "遇到 429 怎么重试", "k": 3}))
    ids = [m["memory"]["id"] for m in again["memories"]]
    assert ids[0] == old["id"] and new["id"] not in ids

    # forget: a tombstone supersedes the memory (nothing deleted); restore brings it back
    gone = call(await client.call_tool("forget", {"memory_id": old["id"], "reason": "outdated advice"}))
    (v1, tomb) = gone["versions"]
    assert (v1["id"], v1["status"], v1["superseded_by"]) == (old["id"], "superseded", tomb["id"])
    assert tomb["status"] == "active" and tomb["content"] == "Forgotten at the user's request: outdated advice"
    assert tomb["kind"] == "rule" and tomb["importance"] == 1
    after = call(await client.call_tool("recall", {"query": "遇到 429 怎么重试", "k": 5}))
    assert not {old["id"], new["id"]} & {m["memory"]["id"] for m in after["memories"]}
    assert OLD_429 not in call(await client.call_tool("context", {"messages": conv}))["text"]
    back = call(await client.call_tool("restore", {"memory_id": old["id"]}))
    assert [(v["id"], v["status"]) for v in back["versions"]] == [(old["id"], "active")]
    assert store.get(ns, tomb["id"]).status == "retired"

    # list, get: what is stored, newest first, without searching
    listed = call(await client.call_tool("list", {"limit": 10}))["memories"]
    assert {m["id"] for m in listed} == {old["id"], nut["id"]} and listed[0]["id"] == nut["id"]
    assert call(await client.call_tool("get", {"memory_id": tomb["id"]}))["status"] == "retired"

    # remember_many: in order, each decided as remember decides it; one invalid memory writes none
    many = call(await client.call_tool("remember_many", {"memories": [
        {"content": "Deploys go out on Thursdays", "kind": "rule", "entities": ["deploys"]},
        {"content": "The staging database is Postgres 16", "entities": ["staging"]}]}))
    assert [r["action"] for r in many["results"]] == ["added", "added"]
    assert store.get(ns, many["results"][1]["id"]).entities == ("staging",)

    # edit: the new text supersedes the memory named, keeping its kind and entities
    thursday = many["results"][0]["id"]
    edited = call(await client.call_tool("edit", {"memory_id": thursday, "content": "Deploys go out on Tuesdays"}))
    assert edited["action"] == "superseded" and edited["superseded"] == [thursday]
    after_edit = store.get(ns, edited["id"])
    assert (after_edit.content, after_edit.kind, after_edit.entities) == ("Deploys go out on Tuesdays", "rule", ("deploys",))
    assert store.get(ns, thursday).status == "superseded"

    # bad arguments: a tool error with a clear message, nothing written
    before = store.count(ns, status=None)
    bad = [("remember", {"content": "x", "kind": "opinion"}, "kind"),
           ("remember", {"content": "   "}, "content is empty"),
           ("remember", {"content": "ok", "importance": 11}, "importance"),
           ("remember", {"content": "ok", "valid_from": "2999-01-01T00:00:00Z"}, "in the future"),
           ("remember", {"content": "ok", "valid_from": "yesterday-ish"}, "valid_from"),
           ("recall", {}, "exactly one of `query` or `messages`"),
           ("recall", {"query": "429", "k": 0}, "k"),
           ("recall", {"messages": [{"role": "user", "content": "好的"}]}, "anything to search for"),
           ("context", {"messages": [{"role": "boss", "content": "429"}]}, "role"),
           ("history", {"memory_id": "no-such-id"}, "no memory 'no-such-id'"),
           ("restore", {"memory_id": nut["id"]}, "already active"),
           ("forget", {"memory_id": new["id"]}, "is retired, not active"),
           ("forget", {"memory_id": "no-such-id"}, "no memory 'no-such-id'"),
           ("forget", {"memory_id": "has space"}, "memory_id"),
           # undeclared arguments are refused, never silently dropped
           ("recall", {"query": "429", "namespace": "other"}, "namespace"),
           ("remember", {"content": "ok", "routing": "other"}, "Extra inputs are not permitted"),
           ("remember_many", {"memories": [{"content": "ok", "namespace": "other"}]}, "namespace"),
           # every argument has a size limit
           ("remember", {"content": "x" * 16001}, "content"),
           ("recall", {"query": "x" * 4001}, "query"),
           ("context", {"messages": [{"role": "user", "content": "x" * 16001}]}, "content"),
           ("remember", {"content": "ok", "entities": ["e"] * 65}, "entities"),
           ("remember_many", {"memories": [{"content": f"m{i}"} for i in range(51)]}, "memories"),
           ("list", {"limit": 51}, "limit"),
           ("edit", {"memory_id": thursday, "content": "again"}, "is superseded, not active"),
           ("remember_many", {"memories": [{"content": "fine"}, {"content": "  "}]}, "memory #2")]
    for tool, args, needle in bad:
        res = await client.call_tool(tool, args)
        text = " ".join(c.text for c in res.content)
        assert res.is_error and needle in text, (tool, args, text)
    assert store.count(ns, status=None) == before


@pytest.fixture
def url(engine) -> str:
    return engine.url


def test_stdio_transport(url: str, store: MemoryStore) -> None:
    params = StdioServerParameters(command=esmem_command(url, store.names.prefix, "alice")[0],
                                   args=esmem_command(url, store.names.prefix, "alice")[1:], env=dict(os.environ))

    async def main() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            await scenario(client, store, "alice")

    asyncio.run(main())


@pytest.fixture
def http_server(url: str, store: MemoryStore, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    proc = subprocess.Popen(esmem_command(url, store.names.prefix, "bob", "--transport", "http", "--port", str(port),
                                          "--token-file", str(token_file)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(proc, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def authorized(url: str, token: str | None) -> Any:
    """A streamable-HTTP transport sending `Authorization: Bearer <token>` (none with None)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


def test_streamable_http_transport(http_server: str, store: MemoryStore) -> None:
    async def main() -> None:
        async with Client(authorized(http_server, TOKEN), read_timeout_seconds=60) as client:
            await scenario(client, store, "bob")

    asyncio.run(main())


def test_http_refuses_a_missing_or_wrong_token_and_an_oversized_message(http_server: str, store: MemoryStore) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {TOKEN}x"},
                    {"Authorization": f"Basic {TOKEN}"}, {"Authorization": "Bearer"}):
        r = httpx.post(http_server, json=hello, headers={**accept, **headers}, timeout=30)
        assert r.status_code == 401 and r.json()["error"]["type"] == "unauthorized", (headers, r.text)
    assert httpx.post(http_server, json=hello, headers={**accept, "Authorization": f"Bearer {TOKEN}"},
                      timeout=30).status_code == 200
    big = httpx.post(http_server, content=b"x" * (600 * 1024), timeout=30,
                     headers={**accept, "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    assert big.status_code == 413

    async def refused() -> None:
        async with Client(authorized(http_server, "wrong"), read_timeout_seconds=30) as client:
            await client.list_tools()

    with pytest.raises(Exception):
        asyncio.run(refused())
    assert store.count("bob", status=None) == 0


def test_the_http_transport_needs_a_token(url: str, installed: str) -> None:
    run = subprocess.run(esmem_command(url, installed, "alice", "--transport", "http"), capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL, env={k: v for k, v in os.environ.items()
                                                                    if k != "ESMEM_MCP_TOKEN"})
    assert run.returncode == 2
    assert run.stderr.strip() == "error: the HTTP transport needs a bearer token: --token-file FILE or ESMEM_MCP_TOKEN"


def raw_dump(engine: Engine, store: MemoryStore) -> list[tuple[str, int, int, dict[str, Any]]]:
    """Every document of the store's index as stored: id, sequence number, primary term and source."""
    engine.request("POST", f"/{store.alias}/_refresh")
    hits = engine.request("POST", f"/{store.alias}/_search",
                          {"size": 10000, "seq_no_primary_term": True, "sort": ["_doc"]})["hits"]["hits"]
    return sorted((h["_id"], h["_seq_no"], h["_primary_term"], h["_source"]) for h in hits)


@pytest.mark.parametrize("touch", [True, False])
def test_a_client_calling_only_read_only_tools_changes_nothing(engine: Engine, store: MemoryStore, touch: bool) -> None:
    ns = "carol"
    old = store.remember("Deploys go out on Thursdays", ns, kind="rule")
    new = store.remember("Deploys go out on Tuesdays now", ns, kind="rule", supersedes=old.id)
    store.remember(PEANUTS, ns, importance=10)
    store.flush()
    before = raw_dump(engine, store)
    conv = [{"role": "user", "content": "when do deploys go out?"}]
    calls = {"list": {"limit": 10}, "get": {"memory_id": old.id}, "history": {"memory_id": new.id},
             "recall": {"query": "deploys Tuesdays", "k": 5}, "context": {"messages": conv}}

    async def main() -> set[str]:
        async with Client(create_server(store, ns, touch=touch)) as client:
            read_only = {t.name for t in (await client.list_tools()).tools if t.annotations.read_only_hint}
            for name in sorted(read_only):
                call(await client.call_tool(name, calls[name]))
            return read_only

    read_only = asyncio.run(main())
    store.flush()  # reheat write-backs, had any been queued
    assert raw_dump(engine, store) == before
    assert read_only == ({"list", "get", "history"} if touch else {"list", "get", "history", "recall", "context"})


@pytest.mark.fresh_prefix("an erase creates the prefix's audit index")
def test_erase_is_destructive_needs_confirm_and_reaches_only_the_servers_namespace(
        engine: Engine, store: MemoryStore) -> None:
    ns, other = "dora", "erin"
    old = store.remember("Zed's phone number is 555-0100", ns)
    store.remember("the phone number is now 555-0199", ns, supersedes=old.id)
    keep = store.remember("prefers window seats", ns, kind="preference")
    theirs = store.remember("Zed asked for the invoice", other)
    store.flush()

    async def main() -> dict[str, Any]:
        async with Client(create_server(store, ns, touch=False)) as client:
            tool = {t.name: t for t in (await client.list_tools()).tools}["erase"]
            assert tool.annotations.destructive_hint is True and tool.annotations.read_only_hint is False
            assert "confirm" in tool.input_schema["required"]
            refused = {}
            for name, args in {"no confirm": {"entity": "Zed"}, "confirm false": {"entity": "Zed", "confirm": False},
                               "two selectors": {"entity": "Zed", "everything": True, "confirm": True},
                               "a namespace": {"entity": "Zed", "confirm": True, "namespace": other}}.items():
                res = await client.call_tool("erase", args)
                refused[name] = res.is_error
            assert store.count(None, status=None) == 4, "a refused erase deleted something"
            out = {"refused": refused,
                   "theirs": call(await client.call_tool("erase", {"memory_ids": [theirs.id], "confirm": True})),
                   "zed": call(await client.call_tool("erase", {"entity": "Zed", "confirm": True}))}
            return out

    out = asyncio.run(main())
    assert all(out["refused"].values()), out["refused"]
    assert out["theirs"]["erased"] == 0  # another namespace's memory is out of this server's reach
    assert (out["zed"]["erased"], out["zed"]["remaining"]) == (2, 0)
    assert store.count(ns, status=None) == 1 and store.get(ns, keep.id).content == "prefers window seats"
    assert store.get(other, theirs.id).content == "Zed asked for the invoice"


def test_without_the_extra_it_names_the_extra_and_exits_2(url: str, installed: str) -> None:
    hide = "import sys; sys.modules['mcp'] = None; from esmem.cli.main import main; sys.argv[0] = 'esmem'; main()"
    run = subprocess.run([sys.executable, "-c", hide, "--url", url, "--prefix", installed, "mcp", "-n", "alice"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == ["error: esmem mcp needs the MCP SDK: pip install 'esmem[mcp]'"]


def test_a_bad_namespace_is_refused_before_serving(url: str, installed: str) -> None:
    run = subprocess.run(esmem_command(url, installed, "../other ns"), capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 2 and run.stderr.startswith("error: invalid namespace '../other ns'")


def test_the_mcp_guide_client_example_runs(http_server: str, store: MemoryStore) -> None:
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "mcp.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"^```python\n(.*?)^```", guide, re.S | re.M)
    store.remember("Deploys go out on Thursdays", "bob", kind="rule")
    body = code.replace("http://127.0.0.1:8000/mcp", http_server)
    namespace: dict[str, Any] = {}
    exec("async def example(token):\n" + "".join(f"    {line}\n" for line in body.splitlines()), namespace)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        asyncio.run(namespace["example"](TOKEN))
    assert "Deploys go out on Thursdays" in out.getvalue() and "is_error=False" in out.getvalue()
