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


def cand(cid: str, content: str, kind: str = "rule", bm25: float = 9.0) -> Candidate:
    return Candidate(cid, bm25, {"content": content, "kind": kind})


def test_verdicts_replace_only_the_supersede_rule() -> None:
    policy = MergePolicy()
    c = [cand("a", OLD), cand("b", OTHER, bm25=0.0)]
    # lexical: a paraphrase sharing no words is no supersede; a judge's yes on a bm25-0 candidate is
    assert decide(PARAPHRASE, "rule", c, policy).action == "add"
    dec = decide(PARAPHRASE, "rule", c, policy, verdicts={"a": False, "b": True})
    assert dec.action == "supersede" and [t.id for t in dec.targets] == ["b"]
    # a restatement is a duplicate without asking; events are never superseded; nothing to ask then
    assert judgeable(OLD, "rule", c, policy) == [] and decide(OLD, "rule", c, policy, verdicts={}).action == "duplicate"
    assert judgeable(PARAPHRASE, "event", [cand("e", OLD, "event")], policy) == []
    assert [x.id for x in judgeable(PARAPHRASE, "rule", c + [cand("f", OLD, "fact")], policy)] == ["a", "b"]


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


def test_ask_takes_none_as_cannot_tell_unless_strict() -> None:
    qs = [Question(PARAPHRASE, OLD, "rule"), Question(OTHER, OLD, "rule"), Question(OLD, OTHER, "rule")]
    assert ask(lambda qs: [True, None, False], qs) == [True, None, False]
    with pytest.raises(JudgeError, match="True or False"):
        ask(lambda qs: [True, None, False], qs, strict=True)


def _store(engine: Engine, prefix: str, judge, embedder=None, merge: MergePolicy | None = None) -> MemoryStore:
    return MemoryStore(engine, prefix, clock=lambda: NOW, merge_judge=judge, embedder=embedder, merge=merge)


def test_judge_supersedes_a_lexical_candidate_on_the_engine(engine, installed) -> None:
    new = "Production is frozen; releases happen on Tuesdays."
    judge = Recording(lambda q: q.new == new)
    store = _store(engine, installed, judge)
    first = store.remember(OLD, "j", kind="rule", valid_from="2026-01-01T00:00:00Z")
    # shares words with OLD (a lexical candidate) but too few for the lexical rule (overlap < 0.5)
    lexical = _store(engine, installed, None).remember(new, "j", kind="rule", valid_from="2026-02-01T00:00:00Z",
                                                        dry_run=True)
    assert lexical.action == "added" and lexical.scores[first.id]["overlap"] < 0.5
    res = store.remember(new, "j", kind="rule", valid_from="2026-02-01T00:00:00Z")
    assert res.action == "superseded" and res.superseded == (first.id,)
    assert store.get("j", first.id).status == "superseded"
    assert [(q.old, q.kind) for q in judge.asked[0]] == [(OLD, "rule")]
    # the judge says no: both stay active
    no = _store(engine, installed, Recording(lambda q: False))
    other = no.remember("Deploys to production need a second reviewer on Fridays", "j2", kind="rule",
                        valid_from="2026-01-01T00:00:00Z")
    kept = no.remember("Deploys to production only happen on Fridays", "j2", kind="rule",
                       valid_from="2026-03-01T00:00:00Z")
    assert kept.action == "added" and no.get("j2", other.id).status == "active"


# None too: the writer has no undecided outcome, so it asks strictly
@pytest.mark.parametrize("bad", [lambda qs: 1 / 0, lambda qs: [], lambda qs: ["no"] * len(qs), lambda qs: [None] * len(qs)])
def test_a_failing_judge_writes_nothing(engine, installed, bad) -> None:
    store = _store(engine, installed, bad)
    old = store.remember(OLD, "f", kind="rule", valid_from="2026-01-01T00:00:00Z")  # no candidate: not asked
    assert old.action == "added"
    before = store.count("f", status=None)
    items = [MemoryInput("A new rule about lunch orders on Mondays.", "f", kind="rule", valid_from="2026-02-01T00:00:00Z"),
             MemoryInput("Deploys to production happen on Tuesdays now.", "f", kind="rule",
                         valid_from="2026-02-02T00:00:00Z")]
    with pytest.raises(JudgeError):
        store.remember_many(items)
    assert store.count("f", status=None) == before  # nothing of the write: not even the memory before it
    assert store.get("f", old.id).status == "active"
    assert _store(engine, installed, lambda qs: [False] * len(qs)).remember_many(items)[1].action == "added"  # retry


def test_default_write_is_unchanged_without_judge(engine, installed) -> None:
    store = _store(engine, installed, None, merge=MergePolicy(min_bm25=2.0))  # a two-memory namespace scores low
    first = store.remember(OLD, "d", kind="rule", valid_from="2026-01-01T00:00:00Z")
    assert store.remember(PARAPHRASE, "d", kind="rule", valid_from="2026-02-01T00:00:00Z").action == "added"
    upd = store.remember("Deploys to production only happen on Fridays and Mondays.", "d", kind="rule",
                         valid_from="2026-03-01T00:00:00Z")
    assert upd.action == "superseded" and upd.superseded == (first.id,)


def test_knn_leg_makes_a_paraphrased_update_a_candidate(engine, installed_semantic) -> None:
    prefix = installed_semantic
    judge = Recording(updates)
    store = _store(engine, prefix, judge, minilm())
    first = store.remember(OLD, "k", kind="rule", valid_from="2026-01-01T00:00:00Z")
    store.remember(OTHER, "k", kind="rule", valid_from="2026-01-02T00:00:00Z")
    res = store.remember(PARAPHRASE, "k", kind="rule", valid_from="2026-02-01T00:00:00Z")
    assert res.action == "superseded" and res.superseded == (first.id,)
    asked = {q.old for batch in judge.asked for q in batch}
    assert OLD in asked  # found by the kNN leg: BM25 shares no word with it
    assert res.scores[first.id]["bm25"] == 0.0
    # without a judge the kNN candidate is offered to the lexical rule, which never takes a bm25-0 one
    plain = _store(engine, prefix, None, minilm())
    old2 = plain.remember(OLD, "k2", kind="rule", valid_from="2026-01-01T00:00:00Z")
    again = plain.remember(PARAPHRASE, "k2", kind="rule", valid_from="2026-02-01T00:00:00Z")
    assert again.action == "added" and again.scores[old2.id]["bm25"] == 0.0
    assert plain.get("k2", old2.id).status == "active"
