"""esmem repair on the engine: supersessions an earlier decision made are read again, listed, undone."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain import repair
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index.catalog import ScriptOp
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")


def _legacy_supersede(store: MemoryStore, ns: str, old_text: str, new_text: str) -> tuple[str, str]:
    """Two memories where the earlier word-overlap rule retired the first for the second: written without
    merge, then retired and linked by the writer's own scripts, the successor marked as the merge marks it."""
    plain = MemoryStore(store.engine, store.names.prefix, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    old = plain.remember(old_text, ns, kind="fact", valid_from="2026-01-01T00:00:00Z").id
    new = plain.remember(new_text, ns, kind="fact", valid_from="2026-02-01T00:00:00Z").id
    store.writer.scripted([ScriptOp(ns, old, "retire", {"winner": new, "invalid_at": "2026-02-01T00:00:00.000Z"}),
                           ScriptOp(ns, new, "link", {"loser": old})])
    store.catalog.set_fields(ns, new, {"written_as": "supersede"})
    return old, new


@pytest.fixture
def store(engine, installed) -> MemoryStore:
    return MemoryStore(engine, installed, clock=lambda: NOW)


def test_a_wrong_supersession_is_listed_then_undone_once(store: MemoryStore) -> None:
    old, new = _legacy_supersede(store, "r", "I am allergic to penicillin.", "I am allergic to shellfish as well.")
    kept = store.remember("I now take the train to work instead of driving.", "r", kind="fact")  # a real update...
    store.remember("I drive to work.", "r2", kind="fact", valid_from="2026-01-01T00:00:00Z")
    right = store.remember("I now take the train to work instead of driving.", "r2", kind="fact")
    assert right.action == "superseded"  # ...that repair leaves alone
    [f] = store.repair("r")
    assert (f.older, f.newer, f.verdict, f.why) == (old, new, "coexists", "an additive cue")
    assert store.get("r", old).status == "superseded"  # a dry run changes nothing
    assert store.repair("r2") == [] and kept.action == "added"
    assert [x.older for x in store.repair("r", apply=True)] == [old]
    older, newer = store.get("r", old), store.get("r", new)
    assert older.status == "active" and older.superseded_by is None and newer.supersedes == ()
    assert [r["verdict"] for r in older.reviews] == ["repaired: coexists"] == [r["verdict"] for r in newer.reviews]
    assert store.repair("r") == [] and store.count("r") == 3
    ranked = store.recall("is the user allergic to penicillin", "r", 3, touch=False).items
    assert ranked[0].memory.id == old


def test_an_uncertain_pair_is_linked_for_review(store: MemoryStore) -> None:
    old, new = _legacy_supersede(store, "u", "We plan to tile the bathroom floor with slate.",
                                 "We plan to tile the bathroom floor with marble.")
    [f] = store.repair("u", apply=True)
    assert f.verdict == "uncertain"
    [p] = store.review("u")
    assert (p.older.id, p.newer.id) == (old, new)


def test_a_caller_named_supersession_is_left_alone(store: MemoryStore) -> None:
    old = store.remember("I am allergic to penicillin.", "e", kind="fact", valid_from="2026-01-01T00:00:00Z")
    store.remember("I am allergic to shellfish as well.", "e", kind="fact", supersedes=old.id)
    assert store.repair("e") == []


def test_a_repair_cut_half_way_is_finished_by_the_next_run(store: MemoryStore) -> None:
    old, new = _legacy_supersede(store, "cut", "Lea dislikes a red bike.", "Dara dislikes a red bike.")
    found = list(repair.findings(store.catalog, "cut", store.merge))

    def cut(ops):
        raise ConnectionError("cut")

    with pytest.raises(ConnectionError):
        repair.apply(store.catalog, found, now=NOW, run=cut)  # the successor was changed, the retire not undone
    assert store.get("cut", old).status == "superseded" and store.get("cut", new).supersedes == ()
    [again] = store.repair("cut", apply=True)
    assert again.older == old and store.get("cut", old).status == "active"
    assert len(store.get("cut", new).reviews) == 1 and store.repair("cut") == []


def test_cli_repair_dry_run_then_apply(engine, installed, store: MemoryStore) -> None:
    old, new = _legacy_supersede(store, "cli", "I am allergic to penicillin.", "I am allergic to shellfish as well.")
    base = ["--url", engine.url, "--prefix", installed, "repair", "-n", "cli"]
    dry = CliRunner().invoke(cli, base)
    assert dry.exit_code == 0 and "dry run" in dry.stdout and old in dry.stdout
    done = CliRunner().invoke(cli, [*base, "--apply", "--json"])
    assert done.exit_code == 0, done.output
    assert [(f["older"], f["newer"]) for f in json.loads(done.stdout)] == [(old, new)]
    assert json.loads(CliRunner().invoke(cli, [*base, "--json"]).stdout) == []
