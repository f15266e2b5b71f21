"""Erase on the real engine: after erasing an entity, no raw query finds a document, version or
vector mentioning it (match on the text, _count, terms aggregation on entities), the versions linked
to what mentioned it are gone too, every other memory is untouched, and the audit record holds no
content. The CLI refuses without --yes."""
from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.erase import digest
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.index.engine import Engine
from esmem.values import parse_time

# every erase writes its audit record into the prefix's audit index, which the shared prefix lacks
pytestmark = pytest.mark.fresh_prefix("an erase creates the prefix's audit index")
NOW = parse_time("2026-10-08T12:00:00Z")


def _populated(engine: Engine, prefix: str) -> tuple[MemoryStore, dict[str, str]]:
    store = MemoryStore(engine, prefix, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    w = store.remember_many([
        MemoryInput("Zed's phone number is 555-0100", "er:a", valid_from="2025-01-01T00:00:00Z"),
        MemoryInput("met a colleague at the conference", "er:a", entities=["Zed"], valid_from="2025-02-01T00:00:00Z"),
        MemoryInput("prefers window seats", "er:a", kind="preference", valid_from="2025-03-01T00:00:00Z"),
        MemoryInput("zed asked for the invoice", "er:b", valid_from="2025-03-02T00:00:00Z"),
        MemoryInput("the invoice was paid", "er:b", valid_from="2025-03-03T00:00:00Z", entities=["Acme"]),
        MemoryInput("Zedong is a different name", "er:b", valid_from="2025-03-04T00:00:00Z"),
    ])
    # a newer version that no longer names Zed: it is the same person's data, so it goes with the chain
    newer = store.remember("the phone number is now 555-0199", "er:a", supersedes=w[0].id,
                           valid_from="2025-06-01T00:00:00Z")
    store.recall("window seats", "er:a", 3, now=NOW)  # a reheat on a memory that stays
    store.flush(30)
    ids = {"phone": w[0].id, "phone_newer": newer.id, "colleague": w[1].id, "seats": w[2].id,
           "invoice_ask": w[3].id, "invoice_paid": w[4].id, "zedong": w[5].id}
    return store, ids


def _dump(engine: Engine, alias: str) -> dict[str, Any]:
    engine.request("POST", f"/{alias}/_refresh")
    hits = engine.request("POST", f"/{alias}/_search", {"size": 100, "query": {"match_all": {}}})["hits"]["hits"]
    return {h["_id"]: h["_source"] for h in hits}


def test_erasing_an_entity_leaves_no_trace_of_it_and_nothing_else_changes(engine: Engine, installed: str) -> None:
    store, ids = _populated(engine, installed)
    before = _dump(engine, store.alias)
    done = store.erase(entity="Zed")
    gone = {ids["phone"], ids["phone_newer"], ids["colleague"], ids["invoice_ask"]}
    assert (done.deleted, done.remaining, done.covered) == (4, 0, 4)

    alias = store.alias
    assert engine.request("POST", f"/{alias}/_search", {"query": {"match": {"content": "Zed"}}})["hits"]["total"][
        "value"] == 0
    assert engine.request("POST", f"/{alias}/_count", {"query": {"query_string": {"query": "Zed"}}})["count"] == 0
    assert engine.request("POST", f"/{alias}/_count", {"query": {"ids": {"values": sorted(gone)}}})["count"] == 0
    buckets = engine.request("POST", f"/{alias}/_search", {"size": 0, "aggs": {"e": {"terms": {"field": "entities"}}}})
    assert [b["key"] for b in buckets["aggregations"]["e"]["buckets"]] == ["Acme"]
    assert _dump(engine, alias) == {k: v for k, v in before.items() if k not in gone}  # the rest untouched

    (record,) = store.catalog.audit_records()
    assert record["selector"] == "entity" and record["values_sha256"] == [digest("Zed")]
    assert record["deleted"] == 4 and record["remaining"] == 0
    assert "zed" not in json.dumps(record).lower() and "555" not in json.dumps(record)
    assert store.recall("Zed phone", "er:a", 5, now=NOW, touch=False).items == ()


def test_erasing_ids_takes_their_versions_and_a_namespace_takes_everything(engine: Engine, installed: str) -> None:
    store, ids = _populated(engine, installed)
    before = _dump(engine, store.alias)
    assert store.erase(ids=[ids["phone_newer"]], namespaces=["er:a"]).deleted == 2  # and the version it replaced
    assert set(before) - set(_dump(engine, store.alias)) == {ids["phone"], ids["phone_newer"]}
    done = store.erase(namespaces=["er:b"])
    assert (done.deleted, done.remaining) == (3, 0)
    assert {s["namespace"] for s in _dump(engine, store.alias).values()} == {"er:a"}


def test_the_cli_refuses_without_yes_and_prints_the_proof(engine: Engine, installed: str) -> None:
    store, ids = _populated(engine, installed)
    runner = CliRunner()
    base = ["--url", engine.url, "--prefix", installed, "erase", "--entity", "Zed"]
    refused = runner.invoke(cli, base)
    assert refused.exit_code == 2 and "would erase 4 memories" in refused.output
    assert store.count(None, status=None) == 7
    listed = runner.invoke(cli, [*base, "--dry-run"])
    assert listed.exit_code == 0 and ids["phone_newer"] in listed.stdout and store.count(None, status=None) == 7
    done = runner.invoke(cli, [*base, "--yes"])
    assert done.exit_code == 0 and "erased 4 memories" in done.stdout and "after refresh: 0" in done.stdout
    assert store.count(None, status=None) == 3
    audit = runner.invoke(cli, ["--url", engine.url, "--prefix", installed, "audit"])
    (record,) = [json.loads(line) for line in audit.stdout.splitlines()]
    assert record["selector"] == "entity" and record["deleted"] == 4 and "Zed" not in audit.stdout


def test_an_erase_scoped_to_namespaces_never_follows_a_link_out_of_them(engine: Engine, installed: str,
                                                                         tmp_path) -> None:
    """A chain link to another namespace (a restored or hand-written document can carry one) does not
    take that namespace's memory with an erase scoped to the first."""
    store, ids = _populated(engine, installed)
    linked = dict(_dump(engine, store.alias)[ids["colleague"]], supersedes=[ids["invoice_paid"]])
    path = tmp_path / "linked.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [
        {"format": "esmem-export", "version": 1, "namespaces": ["er:a"]}, {"id": "crosslink", "memory": linked},
        {"end": True, "memories": 1}]) + "\n", encoding="utf-8")
    store.restore_export(str(path))
    done = store.erase(namespaces=["er:a"], entity="Zed")
    assert done.remaining == 0 and "crosslink" not in _dump(engine, store.alias)
    assert ids["invoice_paid"] in _dump(engine, store.alias)


def test_an_erase_of_many_scroll_batches_counts_every_deleted_memory(engine: Engine, installed: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenSearch sends one response header per scroll batch of a delete-by-query, and more than 100
    headers make the HTTP client drop the answer and send the call again (which then deletes nothing):
    with batches of 20, 2,500 memories are 125 batches, so each call must stay under 100 of them."""
    import esmem.index.catalog as catalog

    monkeypatch.setattr(catalog, "DELETE_BATCH", 20)
    monkeypatch.setattr(catalog, "DELETE_CALL", 50 * 20)
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    store.remember_many([MemoryInput(f"inventory item {i} is on shelf {i % 40}", "er:bulk") for i in range(2500)])
    store.remember("a memory of another namespace", "er:keep")
    done = store.erase(namespaces=["er:bulk"])
    assert (done.deleted, done.remaining) == (2500, 0)
    assert store.count("er:bulk", status=None) == 0 and store.count("er:keep", status=None) == 1
