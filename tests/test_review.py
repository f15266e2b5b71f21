"""Uncertain merge decisions on the engine: the link, recall putting the newer first, review and settle."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")
PLAN, REPAINT = "We plan to tile the bathroom floor with slate.", "We plan to tile the bathroom floor with marble."


@pytest.fixture
def store(engine, installed) -> MemoryStore:
    return MemoryStore(engine, installed, clock=lambda: NOW)


def _pair(store: MemoryStore, ns: str) -> tuple[str, str]:
    old = store.remember(PLAN, ns, kind="fact", valid_from="2026-01-01T00:00:00Z")
    new = store.remember(REPAINT, ns, kind="fact", valid_from="2026-02-01T00:00:00Z")
    assert new.action == "uncertain" and new.possibly_updates == (old.id,)
    return old.id, new.id


def test_an_uncertain_pair_is_listed_and_recall_puts_the_newer_first(store: MemoryStore) -> None:
    old, new = _pair(store, "u")
    assert store.get("u", old).status == "active" and store.get("u", new).possibly_updates == (old,)
    [p] = store.review("u")
    assert (p.older.id, p.newer.id) == (old, new)
    res = store.recall("what will the bathroom floor be, slate?", "u", 5, now=NOW, touch=False)
    ranked = [r.memory.id for r in res.items]
    assert ranked[:2] == [new, old]  # the older matches "slate" better, yet goes under the linked newer
    assert res.items[1].demoted_by == new


def test_replaces_supersedes_the_older_and_records_the_verdict_on_both(store: MemoryStore) -> None:
    old, new = _pair(store, "r")
    store.settle("r", old, new, "replaces", by="alice")
    older, newer = store.get("r", old), store.get("r", new)
    assert older.status == "superseded" and older.superseded_by == new and newer.supersedes == (old,)
    assert newer.possibly_updates == () and store.review("r") == []
    for m in (older, newer):
        [record] = m.reviews
        assert (record["older"], record["newer"], record["verdict"], record["by"]) == (old, new, "replaces", "alice")
    assert [m.id for m in store.history("r", new)] == [old, new]
    store.settle("r", old, new, "replaces")  # the same verdict again: nothing changes
    assert len(store.get("r", new).reviews) == 1
    with pytest.raises(InvalidInput, match="no open uncertain pair"):
        store.settle("r", old, new, "coexists")
    restored = store.restore("r", old)  # a confirmed pair is an ordinary merge: restore undoes it
    assert restored.status == "active"


def test_coexists_drops_the_link_and_keeps_both(store: MemoryStore) -> None:
    old, new = _pair(store, "c")
    store.settle("c", old, new, "coexists")
    assert store.get("c", old).status == "active" and store.get("c", new).status == "active"
    assert store.get("c", new).possibly_updates == () and store.review("c") == []
    assert store.get("c", new).reviews[0]["verdict"] == "coexists"
    res = store.recall("slate bathroom floor", "c", 5, now=NOW, touch=False)
    assert res.items[0].memory.id == old and not any(r.demoted_by for r in res.items)
    with pytest.raises(InvalidInput, match="verdict"):
        store.settle("c", old, new, "maybe")


def test_a_late_older_memory_records_the_link_itself_and_replays_the_same(store: MemoryStore) -> None:
    items = [MemoryInput(REPAINT, "late", kind="fact", valid_from="2026-02-01T00:00:00Z"),
             MemoryInput(PLAN, "late", kind="fact", valid_from="2026-01-01T00:00:00Z")]
    first = store.remember_many(items)
    assert first[1].action == "uncertain" and first[1].possibly_updated_by == first[0].id
    [p] = store.review("late")
    assert (p.older.id, p.newer.id) == (first[1].id, first[0].id)
    again = store.remember_many(items)  # a re-import: the same results, replayed, and the link kept
    assert [(r.action, r.id, r.possibly_updated_by) for r in again] == \
        [(r.action, r.id, r.possibly_updated_by) for r in first] and all(r.replayed for r in again)
    assert len(store.review("late")) == 1


def test_a_judge_settles_what_it_can_and_leaves_the_rest_open(store: MemoryStore) -> None:
    _pair(store, "j")
    store.remember("The user's gym is on Elm Street.", "j2", kind="fact", valid_from="2026-01-01T00:00:00Z")
    assert store.remember("The user's gym is on Oak Street.", "j2", kind="fact",
                          valid_from="2026-02-01T00:00:00Z").action in ("superseded", "uncertain")
    asked = []

    def judge(questions):
        asked.extend(questions)
        return [None for _ in questions]

    assert store.review_with(judge, "j") == {"replaces": 0, "coexists": 0, "open": 1}
    assert [(q.old, q.new) for q in asked] == [(PLAN, REPAINT)]
    assert store.review_with(lambda qs: [True] * len(qs), "j") == {"replaces": 1, "coexists": 0, "open": 0}
    assert store.review("j") == []


def test_cli_review_lists_and_settles(engine, installed, store: MemoryStore) -> None:
    old, new = _pair(store, "cli")
    base = ["--url", engine.url, "--prefix", installed, "review", "-n", "cli"]
    listed = CliRunner().invoke(cli, [*base, "--json"])
    assert listed.exit_code == 0 and [(p["older"]["id"], p["newer"]["id"]) for p in json.loads(listed.stdout)] == [(old, new)]
    bad = CliRunner().invoke(cli, [*base, "--replaces", new, old])  # the wrong way round: no such open pair
    assert bad.exit_code == 2 and "no open uncertain pair" in bad.output
    done = CliRunner().invoke(cli, [*base, "--coexists", old, new])
    assert done.exit_code == 0, done.output
    assert json.loads(CliRunner().invoke(cli, [*base, "--json"]).stdout) == []
