"""install is idempotent, check names drift, rendering is strict about variables."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.derived import derived
from esmem.domain.installation import artifacts, check, install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import TemplateRenderError
from esmem.index.engine import Engine
from esmem.index.install import Names, current_index, uninstall
from esmem.index.templates import render, render_json
from esmem.values import parse_time

pytestmark = pytest.mark.contract  # a container engine beside the embedded ones runs these too


def test_install_twice_changes_nothing_the_second_time(engine: Engine, prefix: str) -> None:
    first = install(engine, prefix)
    assert first.created and not first.updated
    assert any(name.startswith("index ") for name in first.created)
    second = install(engine, prefix)
    assert not second.changed and second.summary() == "nothing to do"
    assert check(engine, prefix) == []


def _artifacts(engine: Engine) -> int:
    """What an install of an index without vectors puts in the cluster: the index template, the stored
    scripts and search templates the repo's files render to, and the index."""
    return len(artifacts(engine, "count")) + 1


def test_cli_install_reports_counts(engine: Engine, prefix: str) -> None:
    runner = CliRunner()
    first = runner.invoke(cli, ["--url", engine.url, "--prefix", prefix, "install"])
    assert first.exit_code == 0, first.output
    assert first.output.strip().splitlines()[-1].startswith(f"{_artifacts(engine)} created, 0 updated")
    second = runner.invoke(cli, ["--url", engine.url, "--prefix", prefix, "install"])
    assert second.output.strip().splitlines()[-1].startswith("nothing to do")


@pytest.mark.fresh_prefix("edits an installed script by hand")
def test_hand_edited_script_is_drift_and_install_repairs_it(engine: Engine, installed: str) -> None:
    name = Names(installed).script("fuse")
    engine.request("PUT", f"/_scripts/{name}", {"script": {"lang": "painless", "source": "return 42.0;"}})
    res = CliRunner().invoke(cli, ["--url", engine.url, "--prefix", installed, "check"])
    assert res.exit_code == 1
    assert f"script {name}: content hash" in res.output
    assert install(engine, installed).updated == [f"script {name}"]
    assert check(engine, installed) == []


@pytest.mark.fresh_prefix("adds a field to the live mapping")
def test_hand_edited_mapping_is_drift(engine: Engine, installed: str) -> None:
    live = current_index(engine, installed)
    engine.request("PUT", f"/{live}/_mapping", {"properties": {"extra": {"type": "keyword"}}})
    assert check(engine, installed) == [f"index {live}: live mapping differs from the repo's"]


def test_missing_everything_is_drift(engine: Engine, prefix: str) -> None:
    drift = check(engine, prefix)
    assert f"index template {prefix}-memories: missing" in drift
    assert f"index {prefix}-memories: missing" in drift


def test_migrate_reindexes_and_swaps_the_alias(engine: Engine, prefix: str, store_factory=None) -> None:
    install(engine, prefix, shards=1)
    old = current_index(engine, prefix)
    engine.request("PUT", f"/{Names(prefix).alias}/_doc/x", {"namespace": "n", "content": "kept", "kind": "fact",
                                                              "status": "active"}, {"routing": "n", "refresh": "true"})
    report = install(engine, prefix, shards=2)  # a different template: the index is now stale
    assert report.notes and "install --migrate" in report.notes[0]
    migrated = install(engine, prefix, shards=2, migrate=True)
    new = current_index(engine, prefix)
    assert new != old and any("migrated" in c for c in migrated.created)
    doc = engine.request("GET", f"/{Names(prefix).alias}/_doc/x", params={"routing": "n"})
    assert doc["_source"]["content"] == "kept"
    # written by hand without the fields the writer derives: the migration wrote them
    assert (doc["_source"]["asks"], doc["_source"]["tells_time"]) == (0.0, False)
    assert any("derived fields" in n and "for 1 memories" in n for n in migrated.notes)


def test_memories_written_before_a_derived_field_get_it_once(engine: Engine, prefix: str) -> None:
    install(engine, prefix)
    store = MemoryStore(engine, prefix, merge=MergePolicy(enabled=False))
    texts = ["Did you book the flight?", "I booked the flight yesterday.", "The flight is booked, see you soon."]
    store.remember_many([MemoryInput(t, "n") for t in texts])
    store.remember_many([MemoryInput(f"parcel {i} waits at dock {i % 7}", "m") for i in range(120)])
    engine.request("POST", f"/{Names(prefix).alias}/_update_by_query", {  # as written before the fields existed
        "query": {"term": {"namespace": "n"}}, "script": {"source": "ctx._source.remove('tells_time'); ctx._source.remove('asks')"}},
        {"refresh": "true", "conflicts": "proceed"})
    def sources() -> dict[str, dict]:
        resp = engine.request("POST", f"/{Names(prefix).alias}/_search", {"query": {"term": {"namespace": "n"}}})
        return {h["_source"]["content"]: h["_source"] for h in resp["hits"]["hits"]}

    before = sources()
    assert all("tells_time" not in src and "asks" not in src for src in before.values())
    report = install(engine, prefix, migrate=True)
    assert any("for 3 memories" in n for n in report.notes), report.notes
    after = sources()
    assert {t: (after[t]["asks"], after[t]["tells_time"]) for t in texts} == {t: tuple(derived(t).values()) for t in texts}
    assert [after[t]["tells_time"] for t in texts] == [False, True, False] and after[texts[0]]["asks"] == 1.0
    assert not any("derived fields" in n for n in install(engine, prefix, migrate=True).notes)  # nothing left


def test_a_migration_of_many_scroll_batches_keeps_every_memory(engine: Engine, prefix: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenSearch sends one response header per batch of a synchronous reindex, and more than 100
    headers make the HTTP client drop the answer: with batches of 10, 1,500 memories are 150 batches."""
    import esmem.index.install as installing

    monkeypatch.setattr(installing, "REINDEX_BATCH", 10)
    install(engine, prefix, shards=1)
    store = MemoryStore(engine, prefix, merge=MergePolicy(enabled=False))
    store.remember_many([MemoryInput(f"parcel {i} waits at dock {i % 7}", "n") for i in range(1500)])
    migrated = install(engine, prefix, shards=2, migrate=True)
    assert any("migrated" in c for c in migrated.created)
    assert store.count("n", status=None) == 1500


def test_a_namespaces_memories_lie_together_in_the_index_newest_first(engine: Engine, prefix: str) -> None:
    """The index is sorted by namespace, then valid_from newest first: a search confined to one
    namespace reads one stretch of the index, and recent-N stops after its first matches."""
    install(engine, prefix, shards=1)
    store = MemoryStore(engine, prefix, merge=MergePolicy(enabled=False))
    written = [MemoryInput(f"parcel {i} waits at dock {i % 7}", ("bob", "alice", "carol")[i % 3],
                           valid_from=f"2026-0{1 + i % 9}-{10 + i % 17}T08:00:00Z") for i in range(60)]
    store.remember_many(written)
    alias = Names(prefix).alias
    engine.request("POST", f"/{alias}/_forcemerge", params={"max_num_segments": "1"})
    engine.request("POST", f"/{alias}/_refresh")
    hits = engine.request("POST", f"/{alias}/_search", {"size": 100, "sort": ["_doc"],
                                                        "_source": ["namespace", "valid_from"]})["hits"]["hits"]
    in_index_order = [(h["_source"]["namespace"], h["_source"]["valid_from"]) for h in hits]
    assert len(in_index_order) == 60
    by_namespace = sorted(in_index_order, key=lambda nv: nv[0])  # stable: keeps each namespace's order
    assert in_index_order == by_namespace
    for namespace in ("alice", "bob", "carol"):
        times = [parse_time(t) for n, t in in_index_order if n == namespace]
        assert times == sorted(times, reverse=True)


def test_uninstall_removes_only_its_own_prefix(engine: Engine, prefix: str) -> None:
    other = prefix + "x"
    install(engine, prefix)
    install(engine, other)
    try:
        uninstall(engine, prefix)
        gone = check(engine, prefix)  # the index template, the scripts, the search templates, the index
        assert len(gone) == _artifacts(engine) and all(line.endswith(": missing") for line in gone)
        assert check(engine, other) == []
    finally:
        uninstall(engine, other)


def test_unknown_variable_fails_with_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "t.json.j2").write_text('{"a": [[ a ]]}')
    with pytest.raises(TemplateRenderError, match=r"t\.json\.j2: unknown template variable\(s\): b"):
        render("t.json.j2", {"a": 1, "b": 2}, root=tmp_path)


def test_missing_variable_fails_with_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "t.json.j2").write_text('{"a": [[ a ]], "b": [[ b ]]}')
    with pytest.raises(TemplateRenderError, match=r"t\.json\.j2: missing template variable"):
        render("t.json.j2", {"a": 1}, root=tmp_path)


def test_invalid_json_shows_the_lines_around_it(tmp_path: Path) -> None:
    (tmp_path / "t.json.j2").write_text('{\n  "a": 1,\n  "b": [[ b ]]\n  "c": 3\n}\n')
    with pytest.raises(TemplateRenderError) as e:
        render_json("t.json.j2", {"b": 2}, root=tmp_path)
    assert "t.json.j2:4" in str(e.value) and '>    4 |   "c": 3' in str(e.value)


def test_mustache_braces_are_left_to_mustache(tmp_path: Path) -> None:
    (tmp_path / "s.mustache.j2").write_text('{"q": "{{query}}", "id": "[[ prefix ]]-x"}')
    assert render("s.mustache.j2", {"prefix": "p"}, root=tmp_path) == '{"q": "{{query}}", "id": "p-x"}'
