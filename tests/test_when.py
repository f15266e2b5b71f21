"""Time in a recall: the periods a query names (English, Chinese, ISO dates; a word that is also a month
name is a month only next to a day, a year or a time preposition), a query that asks when, a memory
that tells a time; on the engine, a memory from the named period leads its equal from another month,
and a memory that tells a time leads its equal when the query asks when, each with its factor in explain."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.merge import MergePolicy
from esmem.domain.when import Period, as_param, asks_when, named_periods, tells_time, time_cues
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import InvalidInput
from esmem.values import parse_time

pytestmark = pytest.mark.contract

NOW = parse_time("2026-10-08T12:00:00Z")


@pytest.mark.parametrize("query,want", [
    ("When did Maria go camping in June?", "*-06"),
    ("What did they paint in July 2023?", "2023-07"),
    ("What did she show on October 13, 2023?", "2023-10"),
    ("What did Gina find on 1 February, 2023?", "2023-02"),
    ("the week before Aug. 3, 2022", "2022-08"),
    ("Sept 2021 trip", "2021-09"),
    ("How often did we meet in 2024?", "2024"),
    ("deployed on 2025-03-07", "2025-03"),
    ("in May and again in June", "*-05,*-06"),
    ("since March", "*-03"),
    ("what we planned for ſeptember 2024", "2024-09"),  # the long s folds to s, as the pattern matches it
    ("2023年6月我们去了哪里", "2023-06"),
    ("六月的会议说了什么", "*-06"),
    ("十二月的账单", "*-12"),
    ("2022年的计划", "2022"),
])
def test_a_named_period_is_found(query: str, want: str) -> None:
    assert as_param(named_periods(query)) == want


@pytest.mark.parametrize("query", [
    "What may I eat before the run?", "Did you march with them?", "jan said hello", "call 555-2023-1234",
    "order 120233 shipped", "what is the plan", "a 10 km run",
])
def test_a_word_or_number_that_is_no_period_names_none(query: str) -> None:
    assert named_periods(query) == ()


def test_the_template_form_names_each_period_and_a_period_names_a_year_or_a_month() -> None:
    periods = (Period(2023, 6), Period(None, 12), Period(2021, None))
    assert as_param(periods) == "2023-06,*-12,2021"
    for year, month in ((None, None), (2023, 13), (2023, 0), (0, 6)):
        with pytest.raises(InvalidInput):
            Period(year, month)


@pytest.mark.parametrize("query", [
    "When did Maria donate her car?", "when is my dentist appointment", "What year did they move?",
    "Which day is the release?", "since when do you run", "How long ago was the outage?", "How long has she had the dog?",
    "他什么时候搬家的",
    "发布是哪天", "会议几点开始",
])
def test_a_query_that_asks_for_a_time(query: str) -> None:
    assert asks_when(query)


@pytest.mark.parametrize("query", [
    "What should I do when the build fails?", "What did Maria donate?", "How do I retry a 429?", "构建失败时怎么办",
])
def test_when_as_a_conjunction_or_no_when_asks_for_no_time(query: str) -> None:
    assert not asks_when(query)


@pytest.mark.parametrize("text", [
    "I donated my old car yesterday.", "We went hiking last weekend", "See you on Friday", "the call is at 5 pm",
    "it opens at 9:30", "due on the 5th", "three weeks ago", "In May we moved", "back in 2019",
    "we have had him for 3 years", "it took a few weeks",
    "我们上周去了", "三天前的事", "周五见", "6月搬家", "明天下午3点开会",
])
def test_a_memory_that_tells_a_time(text: str) -> None:
    assert tells_time(text)


@pytest.mark.parametrize("text", [
    "I love pizza", "May I ask something?", "last time I checked it worked", "we just did it", "the 429 retry policy",
    "我喜欢咖啡", "重试三次",
])
def test_a_memory_that_tells_no_time(text: str) -> None:
    assert not tells_time(text)


def test_the_checks_before_the_patterns_never_change_an_answer() -> None:
    """`tells_time` and `named_periods` look for what every match holds before running their patterns:
    on texts built around each pattern's pieces, in both cases, with unicode digits and case variants
    (ſ folds to s, K to k), the answers are the patterns' alone."""
    import random

    from esmem.domain import when
    from esmem.domain.analysis import fold_han

    pieces = ["yesterday", "Today", "tonight", "TOMORROW", "ago", "the other day", "mondays", "weekend", "last",
              "next", "this", "week", "months", "year", "night", "morning", "summer", "Fall", "a", "three",
              "couple of", "days", "hours", "decades", "5", "12", "9:30", "3pm", "p.m.", "5th", "2023", "2023-07",
              "١٢", "２０２３", "June", "jan", "Sept.", "may", "March", "ſeptember", "in", "on", "of", "since",
              "上周", "昨天", "三天前", "6月", "六月", "2023年", "年", "月", "号", "点", "星期五", "週五", "咖啡",
              "the", "cat", "pizza", ",", ".", "-", "?", " "]
    rng = random.Random(20261205)
    texts = ["".join(rng.choice(pieces) + rng.choice(["", " ", " ", "-"]) for _ in range(rng.randint(1, 6)))
             for _ in range(3000)]
    for text in texts:
        folded = fold_han(text)
        assert when.named_periods(text) == when._periods(text), text
        assert tells_time(text) == (bool(when._TELLS_TIME.search(folded)) or bool(when._periods(folded))), text
    assert sum(tells_time(t) for t in texts) not in (0, len(texts))


def test_the_cues_become_template_parameters_only_when_the_query_has_them() -> None:
    assert time_cues("what is the plan").template_params() == {}
    assert time_cues("When did we meet in June 2024?").template_params() == {"periods": "2024-06", "asks_when": True}


@pytest.fixture
def plain(make_store, installed) -> MemoryStore:
    return make_store(installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)


def test_the_memory_from_the_named_month_leads_its_equal_from_another(plain: MemoryStore) -> None:
    june = "We went camping by the lake with the kids."
    august = "We went camping in the hills with the kids."
    plain.remember_many([MemoryInput(june, "trips", kind="event", importance=3,
                                     valid_from=parse_time("2026-06-20T10:00:00Z")),
                         MemoryInput(august, "trips", kind="event", importance=3,
                                     valid_from=parse_time("2026-08-20T10:00:00Z"))])
    base = RecallParams(mmr=False, resolve=False, neighbour_prev=0.0, neighbour_next=0.0)
    plain_order = [r.memory.content for r in plain.recall("went camping with the kids", "trips", 2, params=base,
                                                          now=NOW, touch=False).items]
    for query, first in (("When did we go camping with the kids in June?", june),
                         ("When did we go camping with the kids in August 2026?", august)):
        res = plain.recall(query, "trips", 2, params=base, now=NOW, touch=False)
        assert res.items[0].memory.content == first, (query, plain_order)
        assert res.items[0].period == base.period_boost and res.items[1].period == 1.0
        off = plain.recall(query, "trips", 2, params=base.with_(period_boost=1.0), now=NOW, touch=False)
        assert {r.period for r in off.items} == {1.0}
        # explain: rel before the factor, the same as without it
        by_content = {r.memory.content: r for r in off.items}
        assert res.items[0].rel == pytest.approx(by_content[first].rel, rel=1e-4)
    assert {r.period for r in plain.recall("went camping in 2025", "trips", 2, params=base, now=NOW,
                                           touch=False).items} == {1.0}  # a period no memory is from


def test_when_asked_when_the_memory_that_tells_a_time_leads_its_equal(plain: MemoryStore) -> None:
    told = "Maria donated her old car to the shelter yesterday."
    untold = "Maria donated her old car to the shelter, it felt good."
    plain.remember_many([MemoryInput(told, "cars", kind="event", importance=3, valid_from=NOW),
                         MemoryInput(untold, "cars", kind="event", importance=3, valid_from=NOW)])
    stored = {h["_source"]["content"]: h["_source"]["tells_time"] for h in plain.engine.request(
        "POST", f"/{plain.alias}/_search", {"query": {"term": {"namespace": "cars"}}})["hits"]["hits"]}
    assert stored == {told: True, untold: False}
    base = RecallParams(mmr=False, resolve=False, neighbour_prev=0.0, neighbour_next=0.0)
    asked = plain.recall("When did Maria donate her old car to the shelter?", "cars", 2, params=base, now=NOW, touch=False)
    assert [r.memory.content for r in asked.items] == [told, untold]
    assert [r.when for r in asked.items] == [base.when_boost, 1.0]
    neutral = plain.recall("Maria donated her old car to the shelter, it felt good", "cars", 2, params=base, now=NOW,
                           touch=False)
    assert neutral.items[0].memory.content == untold and {r.when for r in neutral.items} == {1.0}
    off = plain.recall("When did Maria donate her old car to the shelter?", "cars", 2,
                       params=base.with_(when_boost=1.0), now=NOW, touch=False)
    assert {r.when for r in off.items} == {1.0}
    assert asked.items[0].rel == pytest.approx({r.memory.content: r for r in off.items}[told].rel, rel=1e-4)


def test_explain_names_each_time_factor_in_the_cli_and_in_json(plain: MemoryStore) -> None:
    plain.remember_many([MemoryInput("Maria moved the book club to Thursdays yesterday.", "club", kind="event",
                                     importance=3, valid_from=parse_time("2026-06-20T10:00:00Z")),
                         MemoryInput("Maria runs the book club at the library.", "club", kind="event",
                                     importance=3, valid_from=parse_time("2026-08-20T10:00:00Z"))])
    base = ["--url", plain.engine.url, "--prefix", plain.names.prefix, "recall",
            "When did Maria move the book club in June?", "-n", "club", "-k", "2", "--now", "2026-10-08T12:00:00Z"]
    text = CliRunner().invoke(cli, [*base, "--explain"])
    assert text.exit_code == 0, text.output
    assert "from a period the query names: rel x 2" in text.output
    assert "tells a time the query asks for: rel x 1.5" in text.output
    as_json = CliRunner().invoke(cli, [*base, "--json"])
    items = json.loads(as_json.stdout)["items"]
    assert [(i["period"], i["when"]) for i in items] == [(2.0, 1.5), (1.0, 1.0)]
