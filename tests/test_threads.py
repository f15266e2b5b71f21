"""Conversation turns: the neighbours field at write time, neighbour expansion at recall (esmem/threads.py)."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from esmem.errors import InvalidInput
from esmem.apps.evaluate import locomo_records
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams, fuse, recency
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.domain.threads import neighbour_rel, neighbour_text, thread_fields

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
SESSION = ["Joanna: I made coconut milk ice cream yesterday, want the recipe?",
           "Nate: Super good! Rich and creamy, might be my new favourite snack.",
           "Joanna: Glad you liked it. How are the turtles doing?",
           "Nate: They are fine, thanks for asking."]


def test_neighbour_text_is_the_previous_and_next_turn() -> None:
    assert neighbour_text(SESSION, 0) == SESSION[1]
    assert neighbour_text(SESSION, 1) == SESSION[0] + "\n" + SESSION[2]
    assert neighbour_text(SESSION, 3) == SESSION[2]
    assert neighbour_text(["a" * 50, "b"], 1, max_chars=10) == "a" * 10


@pytest.mark.parametrize("thread, seq, neighbours", [("", None, None), ("t", -1, None), ("t", True, None),
                                                     (None, 3, None), ("t", 1, 5), (7, None, None)])
def test_bad_thread_fields_are_refused(thread, seq, neighbours) -> None:
    with pytest.raises(InvalidInput):
        thread_fields(thread, seq, neighbours)


def test_neighbour_rel_reference() -> None:
    assert neighbour_rel(None, 10.0, 0.8) == 8.0
    assert neighbour_rel(9.0, 10.0, 0.8) == 9.0
    assert neighbour_rel(1.0, 10.0, 0.0) == 1.0


def _turns(ns: str, thread: str) -> list[MemoryInput]:
    return [MemoryInput(text, ns, kind="event", valid_from=NOW, thread=thread, seq=i,
                        neighbours=neighbour_text(SESSION, i), external_id=f"{thread}:{i}")
            for i, text in enumerate(SESSION)]


@pytest.fixture
def turns(engine, installed) -> MemoryStore:
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    store.remember_many(_turns("chat", "s1") + _turns("other", "s1")
                        + [MemoryInput("Nate: the best ice cream shop is downtown", "chat", kind="event",
                                       valid_from=NOW)])
    return store


def _rels(store: MemoryStore, query: str, params: RecallParams) -> dict[str, float]:
    from esmem.domain.ranking import template_overrides

    tp = {"namespace": "chat", "query": query, "size": 20, "now": NOW.isoformat(), "rel_only": True,
          **template_overrides(params)}
    resp = store.engine.request("POST", f"/{store.alias}/_search/template",
                                {"id": store.names.script("recall"), "params": tp}, {"routing": "chat"})
    return {h["_id"]: h["_score"] for h in resp["hits"]["hits"]}


def test_the_reply_inherits_a_share_of_the_questions_relevance_as_the_reference_says(turns: MemoryStore) -> None:
    query = "What did Nate think of the coconut milk ice cream?"
    params = RecallParams(mmr=False)
    res = turns.recall(query, "chat", 5, params=params, now=NOW, touch=False)
    by_content = {r.memory.content: r for r in res.items}
    question, reply = by_content[SESSION[0]], by_content[SESSION[1]]
    assert reply.neighbour_of == question.memory.id and question.neighbour_of is None
    rels = _rels(turns, query, params)
    src = {"kind": "event", "valid_from": NOW.isoformat()}
    want = fuse(neighbour_rel(rels.get(reply.memory.id), rels[question.memory.id], params.neighbour_next),
                recency(src, params, NOW), reply.memory.importance, params)
    assert reply.score == pytest.approx(want, rel=1e-6)
    assert reply.score > fuse(rels.get(reply.memory.id, 0.0), 1.0, reply.memory.importance, params)  # raised
    # only the namespace's own thread: the identical thread id of another namespace is never pulled in
    assert all(r.memory.namespace == "chat" for r in res.items)


def test_the_reply_to_the_reply_inherits_the_square_of_the_share(turns: MemoryStore) -> None:
    # an answer often comes two turns on, after the other speaker asks about what was said
    query = "coconut milk ice cream recipe"
    params = RecallParams(mmr=False, neighbour_prev=0.0)
    res = turns.recall(query, "chat", 5, params=params, now=NOW, touch=False)
    by_content = {r.memory.content: r for r in res.items}
    first, second = by_content[SESSION[0]], by_content[SESSION[2]]
    assert second.neighbour_of == first.memory.id
    rels = _rels(turns, query, params)
    src = {"kind": "event", "valid_from": NOW.isoformat()}
    inherited = neighbour_rel(rels.get(second.memory.id), rels[first.memory.id], params.neighbour_next ** 2)
    assert second.answer < 1  # it asks ("How are the turtles doing?"): its own damping still applies
    want = fuse(inherited * second.answer, recency(src, params, NOW), second.memory.importance, params)
    assert second.score == pytest.approx(want, rel=1e-6)
    one_hop = turns.recall(query, "chat", 5, params=params.with_(neighbour_next=0.0), now=NOW, touch=False)
    assert SESSION[2] not in {r.memory.content for r in one_hop.items}


def test_the_neighbours_field_finds_a_turn_by_what_was_said_around_it(turns: MemoryStore) -> None:
    query = "coconut milk recipe"
    off = RecallParams(mmr=False, neighbour_prev=0.0, neighbour_next=0.0)
    rels = _rels(turns, query, off)
    ids = {r.memory.content: r.memory.id for r in turns.recall(query, "chat", 10, params=off, now=NOW,
                                                                touch=False).items}
    assert SESSION[1] in ids  # no word of the reply is in the query: only its neighbours field matched
    assert 0 < rels[ids[SESSION[1]]] < rels[ids[SESSION[0]]]
    assert _rels(turns, query, off.with_(neighbour_boost=0.0)).get(ids[SESSION[1]], 0.0) == 0.0


def test_expansion_off_and_unthreaded_memories_keep_their_engine_score(turns: MemoryStore) -> None:
    query = "ice cream shop"
    on = turns.recall(query, "chat", 10, params=RecallParams(mmr=False), now=NOW, touch=False)
    off = turns.recall(query, "chat", 10, params=RecallParams(mmr=False, neighbour_prev=0.0, neighbour_next=0.0),
                       now=NOW, touch=False)
    shop = "Nate: the best ice cream shop is downtown"
    assert {r.memory.content: r.score for r in on.items}[shop] == {r.memory.content: r.score for r in off.items}[shop]
    assert any(r.neighbour_of for r in on.items) and not any(r.neighbour_of for r in off.items)


def test_locomo_sessions_become_threads(tmp_path: Path) -> None:
    conv = {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:00 pm on 8 May, 2023",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hello"},
                          {"speaker": "B", "dia_id": "D1:2", "text": "I moved to Paris"},
                          {"speaker": "A", "dia_id": "D1:3", "text": "nice"}],
            "qa": [{"question": "Where did B move?", "evidence": ["D1:2"], "category": 4}]}
    (tmp_path / "c.json").write_text(json.dumps(conv))
    mems = [r for r in locomo_records(tmp_path) if r["type"] == "memory"]
    assert [(m["thread"], m["seq"]) for m in mems] == [("c/session_1", 0), ("c/session_1", 1), ("c/session_1", 2)]
    assert mems[1]["neighbours"] == "A: hello\nA: nice"
