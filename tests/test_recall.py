"""Recall on the real engine: half-life, evergreen, reheat, MMR, importance, recent-N, isolation, bad input."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from esmem.cli.main import cli
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams, params_from_strings
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.errors import ConfigError, InvalidInput
from esmem.values import epoch_ms, iso, parse_time

pytestmark = pytest.mark.contract  # a container engine beside the embedded ones runs these too

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)


@pytest.fixture
def plain(make_store, installed) -> MemoryStore:
    """A store without merge, with a fixed clock, so tests control every memory."""
    return make_store(installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)


def _by_content(res) -> dict[str, object]:
    return {r.memory.content: r for r in res.items}


def test_one_half_life_old_scores_half_and_evergreen_is_not_discounted(plain: MemoryStore) -> None:
    text = "quarterly planning meeting with the data team"
    plain.remember_many([
        MemoryInput(text + " (x1)", "hl", kind="event", importance=5, valid_from=NOW),
        MemoryInput(text + " (x2)", "hl", kind="event", importance=5, valid_from=NOW - 30 * DAY),
        MemoryInput(text + " (x3)", "hl", kind="event", importance=5, valid_from=NOW - 30 * DAY, evergreen=True),
    ])
    params = params_from_strings(RecallParams(mode="multiply", mmr=False, must_not_miss=False, resolve=False),
                                 {"hl.event": "30d"})  # resolution would put the older twins under x1
    got = _by_content(plain.recall("quarterly planning meeting", "hl", 3, params=params, now=NOW, touch=False))
    fresh, old, evergreen = (got[text + s] for s in (" (x1)", " (x2)", " (x3)"))
    assert fresh.rel == pytest.approx(old.rel, rel=1e-6)  # relevance held equal
    assert old.score / fresh.score == pytest.approx(0.5, rel=1e-4)  # event half-life 30d
    assert evergreen.score == pytest.approx(fresh.score, rel=1e-4)
    assert old.recency == pytest.approx(0.5, rel=1e-6) and evergreen.recency == 1.0


def test_a_just_recalled_old_memory_outranks_its_twin(plain: MemoryStore) -> None:
    a, b = plain.remember_many([
        MemoryInput("booked a table at the ramen place (x1)", "reheat", kind="event", importance=4,
                    valid_from=NOW - 90 * DAY),
        MemoryInput("booked a table at the ramen place (x2)", "reheat", kind="event", importance=4,
                    valid_from=NOW - 90 * DAY),
    ])
    params = params_from_strings(RecallParams(mode="multiply", mmr=False), {"hl.event": "30d"})
    before = plain.recall("ramen table", "reheat", 2, params=params, now=NOW, touch=False)
    assert before.items[0].score == pytest.approx(before.items[1].score, rel=1e-6)
    plain.touch("reheat", [b.id], NOW - DAY, params.rho)
    plain.engine.request("POST", f"/{plain.alias}/_refresh")
    after = plain.recall("ramen table", "reheat", 2, params=params, now=NOW, touch=False)
    assert after.items[0].memory.id == b.id
    assert after.items[0].reheat > 1.0 and after.items[1].reheat == pytest.approx(1.0)
    touched = plain.get("reheat", b.id)
    assert touched.access_count == 1 and touched.last_accessed_at == NOW - DAY


def test_accesses_of_one_memory_queued_together_are_one_write_back_with_the_anchor_of_each_in_turn(
        engine, installed) -> None:
    """A write-back takes everything queued meanwhile; the accesses of one memory among them are one
    update (the stored script applies them in turn), which leaves the count and the recency anchor
    that one update per access leaves: anchor' = anchor + rho * (t - anchor), in queue order."""
    from esmem.domain.recaller import _reheat_ops
    from esmem.domain.reheat import Reheater

    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False), clock=lambda: NOW)
    one, each = store.remember_many([MemoryInput(f"the {x} team meets on Tuesdays", "coalesce", kind="fact",
                                                 valid_from=NOW - 60 * DAY) for x in ("design", "sales")])
    times = [NOW - 20 * DAY, NOW - 3 * DAY, NOW - 9 * DAY]  # queued out of time order
    rho = 0.3
    sent: list[int] = []
    run = store.catalog.run_scripts
    inline = Reheater(lambda ops: sent.append(len(ops)) or run(ops), background=False)
    inline.submit([op for t in times for op in _reheat_ops("coalesce", [one.id], t, rho)])
    for t in times:
        store.touch("coalesce", [each.id], t, rho)
    assert sent == [1] and inline.written == 3 and inline.failed == 0
    anchor = epoch_ms(NOW - 60 * DAY)
    for t in (epoch_ms(t) for t in times):
        anchor = anchor + int(rho * (t - anchor)) if t > anchor else anchor
    a, b = (store.engine.request("GET", f"/{store.alias}/_doc/{m.id}", params={"routing": "coalesce"})["_source"]
            for m in (one, each))
    assert a["access_count"] == 3 and a["anchor_at"] == anchor and a["last_accessed_at"] == iso(times[-1])
    assert (b["access_count"], b["anchor_at"], b["last_accessed_at"]) == (3, anchor, iso(times[-1]))  # one per access


def test_recall_writes_back_access_and_touch_false_is_read_only(plain: MemoryStore) -> None:
    (m,) = plain.remember_many([MemoryInput("prefers green tea over coffee", "touch", kind="preference")])
    plain.recall("green tea", "touch", touch=False, now=NOW)
    assert plain.get("touch", m.id).access_count == 0
    plain.recall("green tea", "touch", now=NOW)
    plain.recall("green tea", "touch", now=NOW)
    got = plain.get("touch", m.id)
    assert got.access_count == 2 and got.last_accessed_at == NOW


def test_mmr_brings_the_different_note_into_the_top_3(plain: MemoryStore) -> None:
    plain.remember_many([
        MemoryInput("writing TypeScript backend with Express for REST API", "mmr", kind="note", valid_from=NOW),
        MemoryInput("building TypeScript backend API using Express framework", "mmr", kind="note", valid_from=NOW),
        MemoryInput("creating TypeScript REST API service with Express", "mmr", kind="note", valid_from=NOW),
        MemoryInput("analyzing data with Python TypeScript integration pipeline", "mmr", kind="note", valid_from=NOW),
    ])
    query = "TypeScript backend API"
    plain_top = plain.recall(query, "mmr", 3, params=RecallParams(mmr=False), now=NOW, touch=False)
    assert all("Express" in r.memory.content for r in plain_top.items)
    diverse = plain.recall(query, "mmr", 3, params=RecallParams(mmr=True, mmr_lambda=0.6), now=NOW, touch=False)
    contents = [r.memory.content for r in diverse.items]
    assert any("Python" in c for c in contents)
    assert diverse.items[0].memory.id == plain_top.items[0].memory.id  # MMR never changes the top-1
    assert any(r.mmr_penalty > 0 for r in diverse.items[1:])


def test_important_old_memory_reaches_top_3_without_lexical_match(plain: MemoryStore) -> None:
    plain.remember_many([
        MemoryInput("allergic to peanuts and seafood", "imp", kind="fact", importance=10, valid_from=NOW - 700 * DAY),
        MemoryInput("I used to love ordering takeout", "imp", kind="preference", importance=2, valid_from=NOW),
        MemoryInput("ordered a new mechanical keyboard online", "imp", kind="event", importance=2, valid_from=NOW - DAY),
        MemoryInput("tonight there is a football game on TV", "imp", kind="event", importance=2, valid_from=NOW),
        MemoryInput("order of the team standup changed", "imp", kind="event", importance=2, valid_from=NOW - 2 * DAY),
    ])
    for mode in ("blend", "multiply", "weighted"):
        res = plain.recall("order takeout tonight", "imp", 3, params=RecallParams(mode=mode), now=NOW, touch=False)
        assert "allergic to peanuts and seafood" in [m.content for m in res.pinned], mode  # its own section
        old = plain.recall("order takeout tonight", "imp", 3, now=NOW, touch=False,
                           params=RecallParams(mode=mode, must_not_miss=True, pinned=0))  # a ranked slot, as before
        assert "allergic to peanuts and seafood" in [r.memory.content for r in old.items], mode


def test_penicillin_reaches_the_doctor(plain: MemoryStore) -> None:
    plain.remember_many([
        MemoryInput("allergic to penicillin", "doc", kind="fact", importance=10, valid_from=NOW - 730 * DAY),
        *[MemoryInput(f"went to the doctor for a checkup number {i}", "doc", kind="event", importance=3,
                      valid_from=NOW - i * DAY) for i in range(1, 8)],
    ])
    res = plain.recall("the doctor wants to prescribe antibiotics", "doc", 5, now=NOW, touch=False)
    assert "allergic to penicillin" in [m.content for m in res.pinned]
    assert "allergic to penicillin" not in [r.memory.content for r in res.items]
    old = plain.recall("the doctor wants to prescribe antibiotics", "doc", 5, now=NOW, touch=False,
                       params=RecallParams(must_not_miss=True, pinned=0))
    assert "allergic to penicillin" in [r.memory.content for r in old.items]
    off = plain.recall("the doctor wants to prescribe antibiotics", "doc", 5, now=NOW, touch=False,
                       params=RecallParams(pinned=0))
    assert "allergic to penicillin" not in [r.memory.content for r in off.items]


def test_recent_n_is_chronological_and_deduplicated(plain: MemoryStore) -> None:
    plain.remember_many([MemoryInput(f"step {i} of the migration runbook", "rec", kind="event",
                                     valid_from=NOW - (10 - i) * DAY) for i in range(10)]
                        + [MemoryInput("the migration runbook lives in the wiki", "rec", kind="fact",
                                       valid_from=NOW - 20 * DAY)])
    res = plain.recall("runbook wiki", "rec", 1, params=RecallParams(recent_n=3), now=NOW, touch=False)
    assert res.items[0].memory.content == "the migration runbook lives in the wiki"
    assert [m.content for m in res.recent] == [f"step {i} of the migration runbook" for i in (7, 8, 9)]
    res2 = plain.recall("step 9 migration", "rec", 1, params=RecallParams(recent_n=3), now=NOW, touch=False)
    assert res2.items[0].memory.content == "step 9 of the migration runbook"
    assert res2.items[0].memory.id not in {m.id for m in res2.recent}
    assert [m.content for m in res2.recent] == [f"step {i} of the migration runbook" for i in (6, 7, 8)]


def test_explain_gives_per_term_bm25(plain: MemoryStore) -> None:
    plain.remember_many([
        MemoryInput("PowerShell 回显不稳，结果要 Set-Content 写文件再读回来", "ex", kind="rule"),
        MemoryInput("无头 Chrome 截图必须加 user-data-dir 和绝对输出路径", "ex", kind="rule"),
    ])
    res = plain.recall("PowerShell 命令没有输出", "ex", 2, now=NOW, touch=False, explain=True)
    by = _by_content(res)
    chrome = by["无头 Chrome 截图必须加 user-data-dir 和绝对输出路径"]
    content_terms = lambda r: {t for t in r.terms if t.startswith("content:")}  # noqa: E731
    assert content_terms(chrome) == {"content:输出"}  # no unigram double counting
    ps = by["PowerShell 回显不稳，结果要 Set-Content 写文件再读回来"]
    assert content_terms(ps) == {"content:powershel"}
    assert sum(ps.terms.values()) == pytest.approx(ps.rel, rel=1e-4)
    assert sum(chrome.terms.values()) == pytest.approx(chrome.rel, rel=1e-4)
    out = CliRunner().invoke(cli, ["--url", plain.engine.url, "--prefix", plain.names.prefix, "explain",
                                   "PowerShell 命令没有输出", "-n", "ex", "--now", "2026-10-08T12:00:00Z"])
    assert out.exit_code == 0 and "content:输出=" in out.output and "content:powershel=" in out.output


def test_as_of_and_kinds_filters(plain: MemoryStore) -> None:
    plain.remember_many([
        MemoryInput("the office wifi password rotates monthly", "flt", kind="fact", valid_from=NOW - 10 * DAY),
        MemoryInput("wants to change the wifi router soon", "flt", kind="intent", valid_from=NOW - DAY),
    ])
    assert [r.memory.kind for r in plain.recall("wifi", "flt", 5, now=NOW, touch=False,
                                               params=RecallParams(kinds=("intent",))).items] == ["intent"]
    past = plain.recall("wifi", "flt", 5, now=NOW, as_of=NOW - 5 * DAY, touch=False)
    assert [r.memory.kind for r in past.items] == ["fact"]


QUERIES = st.one_of(
    st.text(min_size=1, max_size=60).filter(lambda s: s.strip()),
    st.sampled_from(['{{namespace}}', '}}{{#must_not_miss}}', '" OR namespace:*', 'ns-b\\" }', '{"term": {"namespace": "ns-b"}}',
                     'secret* OR secret:*', '\\\\', '"}}]}}', 'secret ' * 1500, '*:*', 'namespace:ns-b AND secret']),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERIES)
def test_a_namespace_never_sees_another(plain: MemoryStore, query: str) -> None:
    if not hasattr(plain, "_seeded"):
        plain.remember_many([MemoryInput("secret of namespace b: {{namespace}} OR * \" \\ 1", "ns-b", kind="fact",
                                         importance=10, evergreen=True),
                             MemoryInput("public note of namespace a", "ns-a", kind="fact", importance=9)])
        plain._seeded = True  # type: ignore[attr-defined]
    res = plain.recall(query, "ns-a", 10, now=NOW, touch=False)
    assert {r.memory.namespace for r in res.items} <= {"ns-a"}


def test_template_without_namespace_returns_nothing(plain: MemoryStore) -> None:
    plain.remember_many([MemoryInput("anything at all", "x", kind="fact", importance=10, evergreen=True)])
    for template in ("recall", "recent", "lookup"):
        body = {"id": plain.names.script(template), "params": {"query": "anything", "size": 10}}
        resp = plain.engine.request("POST", f"/{plain.alias}/_search/template", body)
        assert resp["hits"]["hits"] == [], template
        with_ns = {**body, "params": {**body["params"], "namespace": "x"}}
        assert len(plain.engine.request("POST", f"/{plain.alias}/_search/template", with_ns)["hits"]["hits"]) == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"query": "   "}, "query is empty"),
    ({"query": ""}, "query is empty"),
    ({"namespace": ""}, "invalid namespace"),
    ({"namespace": None}, "invalid namespace"),
    ({"namespace": "a b"}, "invalid namespace"),
    ({"k": 0}, "k must be"),
    ({"k": 1001}, "k must be"),
    ({"params": "kinds"}, "unknown kind"),
])
def test_bad_recall_input_is_a_typed_error(plain: MemoryStore, kwargs: dict, message: str) -> None:
    call = {"query": "tea", "namespace": "ok", "k": 5, **kwargs}
    if call.get("params") == "kinds":
        with pytest.raises(InvalidInput, match=message):
            RecallParams(kinds=("gossip",))
        return
    with pytest.raises(InvalidInput, match=message):
        plain.recall(call["query"], call["namespace"], call["k"])


def test_bad_remember_input_is_a_typed_error_and_nothing_is_written(plain: MemoryStore) -> None:
    plain.remember_many([MemoryInput("kept", "bad", kind="fact")])
    for kwargs in ({"kind": "gossip"}, {"importance": 0}, {"importance": 11}, {"importance": True}):
        with pytest.raises(InvalidInput):
            plain.remember("x", "bad", **kwargs)
    with pytest.raises(ConfigError):
        RecallParams(half_life=timedelta(0))
    assert plain.count("bad") == 1


@pytest.mark.parametrize("args", [
    ["recall", "", "-n", "x"], ["recall", "tea", "-n", "bad space"], ["recall", "tea", "-n", "x", "-k", "0"],
    ["recall", "tea", "-n", "x", "--set", "half_life=-1d"], ["recall", "tea", "-n", "x", "--set", "kinds=gossip"],
    ["remember", "x", "-n", "x", "--importance", "11"], ["remember", "x", "-n", "x", "--kind", "gossip"],
])
def test_cli_bad_input_exits_2_with_one_line(plain: MemoryStore, args: list[str]) -> None:
    res = CliRunner().invoke(cli, ["--url", plain.engine.url, "--prefix", plain.names.prefix, *args])
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and res.output.startswith("error: ")


def test_cli_recall_from_messages_and_json(plain: MemoryStore, tmp_path) -> None:
    plain.remember_many([MemoryInput("订单服务的缓存用 Redis 7，淘汰策略是 allkeys-lru", "msg", kind="fact"),
                         MemoryInput("周末想去杭州徒步", "msg", kind="intent")])
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "Redis 缓存的淘汰策略怎么配？"},
                                {"role": "assistant", "content": "先看 maxmemory-policy。"},
                                {"role": "user", "content": "好的，继续"}], ensure_ascii=False), encoding="utf-8")
    base = ["--url", plain.engine.url, "--prefix", plain.names.prefix]
    res = CliRunner().invoke(cli, [*base, "recall", "--from-messages", str(chat), "-n", "msg", "-k", "1", "--json",
                                   "--no-touch"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert "Redis" in out["query"] and out["items"][0]["content"].startswith("订单服务的缓存用 Redis 7")
    both = CliRunner().invoke(cli, [*base, "recall", "redis", "--from-messages", str(chat), "-n", "msg"])
    assert both.exit_code == 2 and "not both" in both.output


def test_cli_recall_with_a_past_now_records_no_access_unless_asked(plain: MemoryStore) -> None:
    m = plain.remember("the staging cluster runs on port 9400", "past", kind="fact", valid_from="2019-06-01T00:00:00Z")
    base = ["--url", plain.engine.url, "--prefix", plain.names.prefix, "recall", "staging port", "-n", "past"]

    def accesses() -> int:
        plain.catalog.refresh()
        return plain.get("past", m.id).access_count

    replay = CliRunner().invoke(cli, [*base, "--now", "2020-01-01T00:00:00Z"])  # replaying history
    assert replay.exit_code == 0, replay.output
    assert accesses() == 0
    asked = CliRunner().invoke(cli, [*base, "--now", "2020-01-01T00:00:00Z", "--touch"])
    assert asked.exit_code == 0, asked.output
    assert accesses() == 1
    today = CliRunner().invoke(cli, base)  # no --now: a real use
    assert today.exit_code == 0, today.output
    assert accesses() == 2


def test_question_penalty_puts_the_turn_that_answers_above_the_turn_that_asks(plain: MemoryStore) -> None:
    """A turn that asks shares the question's words; `asks`, stored at write time, lets the fusion damp it."""
    asking = "Which flowers are in the tattoo?"
    answer = "They are sunflowers, I got a tattoo of flowers on my arm."
    plain.remember_many([MemoryInput(asking, "qa", kind="event", valid_from=NOW - DAY),
                         MemoryInput(answer, "qa", kind="event", valid_from=NOW - DAY)])
    query = "What flowers are in the tattoo?"
    base = RecallParams(mmr=False, resolve=False, neighbour_prev=0.0, neighbour_next=0.0)
    off = plain.recall(query, "qa", 2, params=base.with_(question_penalty=0.0), now=NOW, touch=False)
    on = plain.recall(query, "qa", 2, params=base.with_(question_penalty=0.6), now=NOW, touch=False)
    assert [r.memory.content for r in off.items] == [asking, answer]
    assert [r.memory.content for r in on.items] == [answer, asking]
    damped = _by_content(on)[asking]
    assert damped.answer == pytest.approx(1 - 0.6, rel=1e-6)  # its one sentence asks
    assert damped.rel == pytest.approx(_by_content(off)[asking].rel, rel=1e-4)  # explain: rel before the factor
    assert _by_content(on)[answer].answer == 1.0


def test_compound_boost_matches_a_compound_written_as_one_word_or_two(plain: MemoryStore) -> None:
    plain.remember_many([MemoryInput("my smart watch counts my steps", "cw", valid_from=NOW),
                         MemoryInput("I bought a smartwatch for running", "cw", valid_from=NOW),
                         MemoryInput("send me an e-mail about the trip", "cw", valid_from=NOW)])
    base = RecallParams(mmr=False, resolve=False)
    for query, want in (("smartwatch", "my smart watch counts my steps"),
                        ("smart watches", "I bought a smartwatch for running"),
                        ("email", "send me an e-mail about the trip")):
        off = _by_content(plain.recall(query, "cw", 3, params=base.with_(compound_boost=0.0), now=NOW, touch=False))
        on = _by_content(plain.recall(query, "cw", 3, params=base.with_(compound_boost=1.0), now=NOW, touch=False,
                                        explain=True))
        assert want not in off or off[want].rel == pytest.approx(0.0, abs=1e-9)  # boost 0: the match adds nothing
        assert on[want].rel > 0.1
        assert any(t.startswith(("content.joined:", "content:")) for t in on[want].terms), on[want].terms


@pytest.mark.parametrize("query, named, other", [
    ("What instrument did James play when he was younger?", "James", "John"),
    ("王小明年轻时弹什么乐器？", "王小明", "李娜"),
])
def test_a_query_naming_a_speaker_prefers_that_speakers_memory_without_hiding_the_other(
        plain: MemoryStore, query: str, named: str, other: str) -> None:
    """Who said a memory is its entity: the name in the query matches it at entity_boost."""
    chinese = named == "王小明"
    said = {other: "年轻的时候我打鼓" if chinese else "I used to play drums when I was younger",
            named: "我弹吉他" if chinese else "I played guitar as a kid"}
    filler = [MemoryInput(f"note {i} about the weather and lunch", "spk", kind="event", entities=[f"p{i}"],
                          valid_from=NOW) for i in range(8)]
    plain.remember_many([MemoryInput(text, "spk", kind="event", entities=[who], valid_from=NOW)
                         for who, text in said.items()] + filler)
    base = RecallParams(mmr=False, resolve=False)
    without = plain.recall(query, "spk", 2, params=base.with_(entity_boost=0.0), now=NOW, touch=False)
    got = plain.recall(query, "spk", 2, params=base, now=NOW, touch=False)
    assert without.items[0].memory.entities == (other,)
    assert [r.memory.entities for r in got.items] == [(named,), (other,)]
