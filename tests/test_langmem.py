"""LangMem's memory tools (manage_memory, search_memory) on the esmem LangGraph store, real engine.

The tools need no model: they are what an agent calls, so this is the path an agent built with
LangMem takes through esmem: create, search, update (a new version supersedes), delete (forget).
"""
from __future__ import annotations

import json

import pytest

from esmem.apps.langgraph_store import EsmemStore
from esmem.domain.store import MemoryStore

langmem = pytest.importorskip("langmem")


def test_langmem_tools_create_search_update_and_delete(store: MemoryStore) -> None:
    lg = EsmemStore(store, touch=False)
    ns = ("memories", "frank")
    manage = langmem.create_manage_memory_tool(namespace=ns, store=lg)
    search = langmem.create_search_memory_tool(namespace=ns, store=lg)

    created = manage.invoke({"content": "User prefers dark mode in every editor", "action": "create"})
    key = created.removeprefix("created memory ")
    manage.invoke({"content": "Deploys go out on Thursdays", "action": "create"})
    found = json.loads(search.invoke({"query": "dark mode editor"}))
    assert found[0]["key"] == key and found[0]["value"] == {"content": "User prefers dark mode in every editor"}

    assert manage.invoke({"content": "User now prefers light mode in every editor", "action": "update",
                          "id": key}) == f"updated memory {key}"
    found = json.loads(search.invoke({"query": "editor mode"}))
    assert [(f["key"], f["value"]["content"]) for f in found] == [(key, "User now prefers light mode in every editor")]
    current = store.recall("light mode editor", "memories:frank", 1, touch=False).items[0].memory
    assert [m.content for m in store.history("memories:frank", current.id)] == [
        "User prefers dark mode in every editor", "User now prefers light mode in every editor"]

    assert manage.invoke({"action": "delete", "id": key}) == f"Deleted memory {key}"
    assert json.loads(search.invoke({"query": "editor mode light dark"})) == []
    assert lg.get(ns, key) is None
    assert store.get("memories:frank", current.id).status == "superseded"  # forgotten, kept as history
