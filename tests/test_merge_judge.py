"""The pluggable merge judge on the real engine: it decides supersede over the lookup's candidates
(the kNN leg's too, with an embedder); a judge that raises or answers garbage writes nothing."""
from __future__ import annotations

from typing import Sequence

import pytest

from esmem.domain.merge import Candidate, MergePolicy, decide, judgeable
from esmem.domain.merge_judge import JudgeError, Question, ask
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import ConfigError
from esmem.index.engine import Engine
from esmem.values import parse_time
from semantic_support import minilm

NOW = parse_time("2026-10-08T12:00:00Z")
OLD = "Deploys to production only happen on Fridays."
PARAPHRASE = "Shipping to prod now takes place on Tuesdays."  # an update sharing no search token with OLD
OTHER = "The staging cluster is rebuilt every night."


class Recording:
    """A judge that answers from a table and records what it was asked."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def __call__(self, questions: Sequence[Question]):
        self.asked.append(list(questions))
        return [self.answer(q) for q in questions]


def updates(q: Question) -> bool:
    return q.old == OLD and q.new == PARAPHRASE


# a pair the reading leaves uncertain: one slot differs, no cue either way
PLAN, REPAINT = "We plan to tile the bathroom floor with slate.", "We plan to tile the bathroom floor with marble."


def cand(cid: str, content: str, kind: str = "rule", bm25: float = 9.0) -> Candidate:
    return Candidate(cid, bm25, {"content": content, "kind": kind})


def test_the_judge_is_asked_only_about_uncertain_pairs() -> None:
    policy = MergePolicy()
    c = [cand("a", PLAN, "fact"), cand("b", OTHER, "fact", bm25=0.0)]
    assert decide(REPAINT, "fact", c, policy).action == "uncertain"
    assert [x.id for x in judgeable(REPAINT, "fact", c, policy)] == ["a"]
    assert decide(REPAINT, "fact", c, policy, verdicts={"a": True}).action == "supersede"
    assert decide(REPAINT, "fact", c, policy, verdicts={"a": False}).action == "add"
    # a restatement is a duplicate without asking; a pair the reading settles is not asked about
    assert judgeable(PLAN, "fact", c, policy) == [] and decide(PLAN, "fact", c, policy, verdicts={}).action == "duplicate"
    assert judgeable("We now plan to tile the bathroom floor with marble.", "fact", c, policy) == []
    assert judgeable(PARAPHRASE, "rule", [cand("o", OLD)], policy) == []


@pytest.mark.parametrize("judge, message", [
    (lambda qs: 1 / 0, "ZeroDivisionError"),
    (lambda qs: [True] * (len(qs) + 1), "answers for"),
    (lambda qs: ["yes"] * len(qs), "True, False or None"),
    (lambda qs: [1] * len(qs), "True, False or None"),
])
def test_ask_checks_every_answer(judge, message) -> None:
    with pytest.raises(JudgeError, match=message) as e:
        ask(judge, [Question(PARAPHRASE, OLD, "rule")])
    assert isinstance(e.value, ConfigError)
    assert ask(lambda qs: 1 / 0, []) == []  # nothing to ask: the judge is not called


def test_ask_takes_none_as_cannot_tell() -> None:
    qs = [Question(PARAPHRASE, OLD, "rule"), Question(OTHER, OLD, "rule"), Question(OLD, OTHER, "rule")]
    assert ask(lambda qs: [True, None, False], qs) == [True, None, False]


def _store(engine: Engine, prefix: str, judge, embedder=None, merge: MergePolicy | None = None) -> MemoryStore:
    return MemoryStore(engine, prefix, clock=lambda: NOW, merge_judge=judge, embedder=embedder, merge=merge)


def test_judge_settles_an_uncertain_pair_on_the_engine(engine, installed) -> None:
    judge = Recording(lambda q: q.new == REPAINT)
    store = _store(engine, installed, judge)
    first = store.remember(PLAN, "j", kind="fact", valid_from="2026-01-01T00:00:00Z")
    unjudged = _store(engine, installed, None).remember(REPAINT, "j", kind="fact", valid_from="2026-02-01T00:00:00Z",
                                                        dry_run=True)
    assert unjudged.action == "uncertain" and unjudged.possibly_updates == (first.id,)
    res = store.remember(REPAINT, "j", kind="fact", valid_from="2026-02-01T00:00:00Z")
    assert res.action == "superseded" and res.superseded == (first.id,)
    assert store.get("j", first.id).status == "superseded"
    assert [(q.old, q.kind) for q in judge.asked[0]] == [(PLAN, "fact")]
    # the judge says no: both stay active, unlinked
    no = _store(engine, installed, Recording(lambda q: False))
    other = no.remember(PLAN, "j2", kind="fact", valid_from="2026-01-01T00:00:00Z")
    kept = no.remember(REPAINT, "j2", kind="fact", valid_from="2026-03-01T00:00:00Z")
    assert kept.action == "added" and no.get("j2", other.id).status == "active"


@pytest.mark.parametrize("bad", [lambda qs: 1 / 0, lambda qs: [], lambda qs: ["no"] * len(qs)])
def test_a_failing_judge_writes_nothing(engine, installed, bad) -> None:
    store = _store(engine, installed, bad)
    old = store.remember(PLAN, "f", kind="fact", valid_from="2026-01-01T00:00:00Z")  # no candidate: not asked
    assert old.action == "added"
    before = store.count("f", status=None)
    items = [MemoryInput("A new rule about lunch orders on Mondays.", "f", kind="fact", valid_from="2026-02-01T00:00:00Z"),
             MemoryInput(REPAINT, "f", kind="fact", valid_from="2026-02-02T00:00:00Z")]
    with pytest.raises(JudgeError):
        store.remember_many(items)
    assert store.count("f", status=None) == before  # nothing of the write: not even the memory before it
    assert store.get("f", old.id).status == "active"
    assert _store(engine, installed, lambda qs: [False] * len(qs)).remember_many(items)[1].action == "added"  # retry


def test_a_judge_that_cannot_tell_leaves_the_pair_uncertain(engine, installed) -> None:
    store = _store(engine, installed, lambda qs: [None] * len(qs))
    first = store.remember(PLAN, "n", kind="fact", valid_from="2026-01-01T00:00:00Z")
    res = store.remember(REPAINT, "n", kind="fact", valid_from="2026-02-01T00:00:00Z")
    assert res.action == "uncertain" and res.possibly_updates == (first.id,)
    assert store.get("n", first.id).status == "active" and store.get("n", res.id).status == "active"


def test_without_a_judge_an_uncertain_pair_stays_linked_and_a_cue_supersedes(engine, installed) -> None:
    store = _store(engine, installed, None)
    first = store.remember(PLAN, "d", kind="fact", valid_from="2026-01-01T00:00:00Z")
    unsure = store.remember(REPAINT, "d", kind="fact", valid_from="2026-02-01T00:00:00Z")
    assert unsure.action == "uncertain" and store.get("d", first.id).status == "active"
    upd = store.remember("We now plan to tile the bathroom floor with terracotta instead.", "d", kind="fact",
                         valid_from="2026-03-01T00:00:00Z")
    assert upd.action == "superseded" and len(upd.superseded) == 1


def test_knn_leg_makes_a_paraphrased_update_a_candidate(engine, installed_semantic) -> None:
    prefix = installed_semantic
    judge = Recording(updates)
    store = _store(engine, prefix, judge, minilm())
    first = store.remember(OLD, "k", kind="rule", valid_from="2026-01-01T00:00:00Z")
    store.remember(OTHER, "k", kind="rule", valid_from="2026-01-02T00:00:00Z")
    res = store.remember(PARAPHRASE, "k", kind="rule", valid_from="2026-02-01T00:00:00Z")
    # found by the kNN leg (BM25 shares no word with it) and read: too little in common to be uncertain,
    # so the judge is not asked and both stay active
    assert res.scores[first.id]["bm25"] == 0.0 and res.scores[first.id]["verdict"] == "coexists"
    assert res.action == "added" and not judge.asked
    # without a judge the same
    plain = _store(engine, prefix, None, minilm())
    old2 = plain.remember(OLD, "k2", kind="rule", valid_from="2026-01-01T00:00:00Z")
    again = plain.remember(PARAPHRASE, "k2", kind="rule", valid_from="2026-02-01T00:00:00Z")
    assert again.action == "added" and again.scores[old2.id]["bm25"] == 0.0
    assert plain.get("k2", old2.id).status == "active"
