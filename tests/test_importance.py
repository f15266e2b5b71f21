"""Importance scoring: the keyword lexicon, pluggable judges, and a bad judge never writing anything."""
from __future__ import annotations

from typing import Sequence

import pytest

from esmem.domain.importance import DEFAULT_IMPORTANCE, batched, gated, rule_scorer, score_batch
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import ConfigError


@pytest.mark.parametrize("text, score, rule", [
    ("我对花生过敏", 10, "health:allergy"),
    ("Severe penicillin allergy", 10, "health:allergy"),
    ("昨天查出胃溃疡，医生说不能吃辣", 9, "health:condition"),
    ("Was diagnosed with diabetes last year", 9, "health:condition"),
    ("每天早上要吃降压药", 9, "health:medication"),
    ("最近在看抑郁症的心理医生", 9, "health:mental"),
    ("The staging API key is in the vault", 9, "secret"),
    ("路由器的密码是门牌号", 9, "secret"),
    ("下个月和女朋友结婚", 8, "life:event"),
    ("Her grandfather passed away in May", 8, "life:event"),
    ("信用卡账单每月 5 号还", 8, "finance"),
    ("My daughter starts school in September", 8, "family"),
    ("妈妈下周来北京", 8, "family"),
    ("Never deploy on Fridays", 7, "rule:absolute"),
    ("回复里禁止使用表情符号", 7, "rule:absolute"),
    ("The report deadline is the 15th", 7, "deadline"),
    ("周报最晚周五交", 7, "deadline"),
    ("My name is Lin and my birthday is in March", 7, "identity"),
    ("我住在杭州西湖区", 7, "identity"),
    ("I hate meetings before 10am", 6, "preference:strong"),
    ("最喜欢的编辑器是 Vim", 6, "preference:strong"),
    ("I prefer tabs over spaces", 5, "preference"),
    ("喜欢喝深度烘焙的咖啡", 5, "preference"),
    ("早上喝了一杯水", DEFAULT_IMPORTANCE, "default"),
    ("Had a sandwich for lunch", DEFAULT_IMPORTANCE, "default"),
])
def test_lexicon(text: str, score: float, rule: str) -> None:
    assert rule_scorer([text]) == [(score, rule)]


def test_the_highest_matching_rule_wins() -> None:
    assert rule_scorer(["My son is allergic to peanuts"]) == [(10.0, "health:allergy")]


def test_score_batch_accepts_pairs_lists_and_bare_numbers() -> None:
    assert score_batch(lambda ts: [(7, "llm"), [4.5, "llm"], 2][:len(ts)], ["a", "b", "c"]) == \
        [(7.0, "llm"), (4.5, "llm"), (2.0, "custom")]


def _raises(texts: Sequence[str]) -> list[tuple[float, str]]:
    raise TimeoutError("judge timed out")


@pytest.mark.parametrize("scorer, message", [
    (_raises, "importance scorer failed: TimeoutError: judge timed out"),
    (lambda ts: [(11, "llm") for _ in ts], "returned 11"),
    (lambda ts: [(0.5, "llm") for _ in ts], "returned 0.5"),
    (lambda ts: [(float("nan"), "llm") for _ in ts], "returned nan"),
    (lambda ts: [(True, "llm") for _ in ts], "returned True"),
    (lambda ts: [("8", "llm") for _ in ts], "returned '8'"),
    (lambda ts: [], "returned 0 scores for 1 texts"),
])
def test_a_bad_scorer_is_a_config_error_and_nothing_is_written(engine, installed, scorer, message: str) -> None:
    store = MemoryStore(engine, installed, scorer=scorer)
    with pytest.raises(ConfigError, match=message):
        store.remember("The user is allergic to shellfish", "bad")
    assert store.count("bad") == 0 and store.count(status=None) == 0


def test_one_bad_score_in_a_batch_writes_none_of_it(engine, installed) -> None:
    store = MemoryStore(engine, installed, scorer=lambda ts: [(5, "llm"), (42, "llm"), (5, "llm")])
    with pytest.raises(ConfigError, match="returned 42"):
        store.remember_many([MemoryInput(f"memory number {i} about tea", "batch") for i in range(3)])
    assert store.count(status=None) == 0


def test_a_given_importance_skips_the_scorer(engine, installed) -> None:
    store = MemoryStore(engine, installed, scorer=_raises)
    w = store.remember("Tea over coffee", "given", importance=4)
    m = store.get("given", w.id)
    assert (m.importance, m.importance_rule) == (4.0, "given")


def test_the_chosen_score_and_rule_are_stored(engine, installed) -> None:
    store = MemoryStore(engine, installed)
    w = store.remember("我对青霉素过敏", "stored")
    m = store.get("stored", w.id)
    assert (m.importance, m.importance_rule) == (10.0, "health:allergy")


def test_batched_calls_the_judge_in_bounded_batches() -> None:
    calls: list[int] = []

    def judge(texts: Sequence[str]) -> list[tuple[float, str]]:
        calls.append(len(texts))
        return [(6.0, "llm")] * len(texts)

    assert batched(judge, 4)([str(i) for i in range(10)]) == [(6.0, "llm")] * 10
    assert calls == [4, 4, 2]
    with pytest.raises(ConfigError, match="batch size"):
        batched(judge, 0)


def test_gated_asks_the_judge_only_about_flagged_texts_and_stores_its_rule(engine, installed) -> None:
    asked: list[str] = []

    def judge(texts: Sequence[str]) -> list[tuple[float, str]]:
        asked.extend(texts)
        return [(9.5, "llm:judge")] * len(texts)

    store = MemoryStore(engine, installed, scorer=gated(judge, batch_size=2))
    results = store.remember_many([MemoryInput(t, "gate") for t in
                                   ["Had a sandwich for lunch", "Allergic to penicillin", "Walked the dog",
                                    "The wifi password is on the fridge", "Never call after 9pm"]])
    assert asked == ["Allergic to penicillin", "The wifi password is on the fridge", "Never call after 9pm"]
    stored = {store.get("gate", r.id).content: store.get("gate", r.id) for r in results}
    assert (stored["Allergic to penicillin"].importance, stored["Allergic to penicillin"].importance_rule) == \
        (9.5, "llm:judge")
    assert (stored["Walked the dog"].importance, stored["Walked the dog"].importance_rule) == \
        (DEFAULT_IMPORTANCE, "default")


def test_a_gated_judge_that_fails_blocks_the_write(engine, installed) -> None:
    store = MemoryStore(engine, installed, scorer=gated(_raises))
    with pytest.raises(ConfigError, match="judge timed out"):
        store.remember_many([MemoryInput("Walked the dog", "gfail"), MemoryInput("Allergic to cats", "gfail")])
    assert store.count(status=None) == 0
