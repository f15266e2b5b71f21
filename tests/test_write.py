"""The write path on the real engine: supersede-merge, history, undo, bi-temporal recall,
concurrency, bulk import and bad input."""
from __future__ import annotations

import gc
import json
import random
import threading
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from esmem.cli.main import cli
from esmem.domain.merge import MergePolicy, decide
from esmem.domain.ranking import RecallParams
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.domain.validate import Limits, document
from esmem.errors import InvalidInput, NotFound
from esmem.values import parse_time
from writers import run_writers  # tests/writers.py

pytestmark = pytest.mark.contract  # a container engine beside the embedded ones runs these too

NOW = parse_time("2026-10-08T12:00:00Z")
DAY = timedelta(days=1)
RULES = Path(__file__).resolve().parent.parent / "datasets" / "rules.jsonl"


def rule_lines() -> list[dict]:
    return [json.loads(line) for line in RULES.read_text(encoding="utf-8").splitlines()
            if json.loads(line)["type"] == "memory"]


@pytest.fixture
def clocked(make_store, installed) -> MemoryStore:
    return make_store(installed, clock=lambda: NOW)


def _inputs(lines: list[dict], ns: str = "rules") -> list[MemoryInput]:
    return [MemoryInput(o["content"], ns, kind=o["kind"], importance=o["importance"],
                        valid_from=o["valid_from"], external_id=o["id"]) for o in lines]


RESTATEMENTS = {  # new wording of an existing rule -> the rule it restates
    "发布文章之前一定要先跑 privacy-scan 隐私扫描，内网 IP、真实姓名、手机号和 API key 都得打码": "r01",
    "文章统一用第一人称「我」的口吻来写，别写成「本文将带大家」的讲师腔": "r02",
    "每天最多只发布一篇文章，按 Asia/Shanghai 时区的自然日算，当天发过的新稿放进 drafts/": "r03",
    "接口返回 HTTP 429 限流时要按指数退避加随机 jitter 再重试，最多重试 5 次": "r09",
}
NEW_FACTS = [
    "每次发布后重新生成 RSS feed，并用 xmllint 校验 XML 格式",
    "周报类文章统一放在 weekly/ 目录下，文件名用年份加周数",
    "数据库连接串只放在 .env 里，绝不提交到 git 仓库",
    "评论区的 spam 每周一上午清理一次",
    "文章里引用的外部图片要下载到本地 assets/ 目录再引用",
    "sitemap.xml 在每次发布后自动提交给 Google Search Console",
]


def _update_of_s01(lines: dict) -> str:
    """The rule store's r09 saying that it changes s01 (改成): without a cue the two differ in two places,
    which the reading leaves uncertain."""
    return lines["r09"]["content"].replace("限流时按", "限流时改成按")


def test_restatements_merge_or_link_and_new_facts_add(clocked: MemoryStore) -> None:
    current = [o for o in rule_lines() if o["id"].startswith("r")]
    assert len(current) == 24
    ids = {o["id"]: r.id for o, r in zip(current, clocked.remember_many(_inputs(current)))}
    assert clocked.count("rules") == 24
    writes = list(RESTATEMENTS) + NEW_FACTS
    random.Random(3).shuffle(writes)
    kinds = {o["id"]: o["kind"] for o in current}
    results = [clocked.remember(text, "rules", kind=kinds.get(RESTATEMENTS.get(text, ""), "rule"),
                                valid_from=NOW - DAY) for text in writes]
    merged = {text: r for text, r in zip(writes, results) if r.action in ("superseded", "duplicate", "uncertain")}
    assert sum(r.action == "added" for r in results) == 6 and len(merged) == 4
    for text, res in merged.items():  # each restatement merges with, or links, the rule it restates
        old = ids[RESTATEMENTS[text]]
        assert old in (res.superseded + res.possibly_updates + (res.duplicate_of,)), text
    uncertain = sum(r.action == "uncertain" for r in results)
    assert clocked.count("rules") == 30 + uncertain
    for text, res in merged.items():  # superseded, never deleted
        if res.action == "superseded":
            old = clocked.get("rules", ids[RESTATEMENTS[text]])
            assert old.status == "superseded" and old.superseded_by == res.id
            assert old.invalid_at == NOW - DAY


def test_dry_run_decides_without_writing(clocked: MemoryStore) -> None:
    clocked.remember("每天最多只发布一篇文章，当天发过的新稿就放进 drafts/", "d", kind="rule")
    res = clocked.remember("每天最多只发布一篇文章，当天发过的新稿就放进 drafts/ 目录", "d", kind="rule", dry_run=True)
    assert res.dry_run and res.action in ("superseded", "duplicate")
    assert clocked.count("d") == 1 and clocked.count("d", status="superseded") == 0


def test_conflict_update_wins_and_as_of_returns_the_old_version(clocked: MemoryStore) -> None:
    lines = {o["id"]: o for o in rule_lines()}
    old = clocked.remember(lines["s01"]["content"], "c", kind="rule", valid_from="2026-07-05T09:00:00Z")
    new = clocked.remember(_update_of_s01(lines), "c", kind="rule", valid_from="2026-08-21T09:00:00Z")
    assert new.action == "superseded" and new.superseded == (old.id,)
    for mode in ("blend", "multiply", "weighted"):
        res = clocked.recall("429 怎么重试", "c", 5, params=RecallParams(mode=mode), now=NOW, touch=False)
        assert res.items[0].memory.id == new.id
        assert old.id not in [r.memory.id for r in res.items]
    past = clocked.recall("429 怎么重试", "c", 5, as_of="2026-08-01T00:00:00Z", now=NOW, touch=False)
    assert [r.memory.id for r in past.items] == [old.id]
    later = clocked.recall("429 怎么重试", "c", 5, as_of="2026-09-01T00:00:00Z", now=NOW, touch=False)
    assert [r.memory.id for r in later.items] == [new.id]
    assert [m.id for m in clocked.history("c", new.id)] == [old.id, new.id]


def test_english_update_named_explicitly(clocked: MemoryStore) -> None:
    old = clocked.remember("on HTTP 429 wait 1 s and retry three times", "e", kind="rule",
                           valid_from="2026-08-01T09:00:00Z")
    auto = clocked.remember("on 429 back off with jitter", "e", kind="rule", dry_run=True)
    assert auto.action == "added"  # too little lexical overlap for the thresholds: the caller must say so
    new = clocked.remember("on 429 back off with jitter", "e", kind="rule", supersedes=old.id,
                           valid_from="2026-09-01T09:00:00Z")
    assert new.superseded == (old.id,)
    res = clocked.recall("429 怎么重试", "e", 5, now=NOW, touch=False)
    assert [r.memory.id for r in res.items] == [new.id]
    with pytest.raises(InvalidInput, match="supersedes"):
        clocked.remember("x", "e", supersedes=old.id)  # already superseded


def test_restore_undoes_a_wrong_merge(clocked: MemoryStore) -> None:
    # BM25's IDF comes from the whole index: give it the rule store, as a real deployment has
    clocked.remember_many(_inputs([o for o in rule_lines() if o["id"].startswith("r")], "others"))
    a = clocked.remember("每周日把 Markdown 源文件备份到本机的 blog-backup 目录，保留 30 天", "u", kind="rule")
    b = clocked.remember("每周日把 Markdown 源文件改成备份到 NAS 的 blog-backup 目录，保留 90 天", "u", kind="rule")
    assert b.superseded == (a.id,)
    restored = clocked.restore("u", a.id)
    assert restored.status == "active" and restored.superseded_by is None and restored.invalid_at is None
    assert clocked.get("u", b.id).status == "retired"
    assert clocked.count("u") == 1 and clocked.count("u", status=None) == 2
    # keep both: the merge joined two different facts
    c = clocked.remember("每周日把 Markdown 源文件改成备份到移动硬盘的 blog-backup 目录，保留 60 天", "u", kind="rule")
    assert c.superseded == (a.id,), c
    clocked.restore("u", a.id, retire_successor=False)
    assert clocked.get("u", a.id).status == "active" and clocked.get("u", c.id).status == "active"
    assert clocked.get("u", c.id).supersedes == ()
    with pytest.raises(InvalidInput, match="already active"):
        clocked.restore("u", a.id)


@pytest.mark.parametrize("bad_id", ["", "  ", 5, None, "lone \ud800"])
def test_get_history_and_restore_refuse_a_missing_id(clocked: MemoryStore, bad_id: object) -> None:
    """An empty id used to reach the engine as `GET /alias/_doc/` (HTTP 405)."""
    for call in (clocked.get, clocked.history, clocked.restore):
        with pytest.raises(InvalidInput, match="memory id must be a non-empty string"):
            call("ids", bad_id)


@pytest.mark.parametrize("odd_id", ["a/b", "a?b", "a#b", "../x", "_search"])
def test_an_id_with_url_characters_names_a_memory_that_is_not_there(clocked: MemoryStore, odd_id: str) -> None:
    """The id is one path segment: never another endpoint of the engine (HTTP 400 'no handler')."""
    with pytest.raises(NotFound, match="no memory"):
        clocked.get("ids", odd_id)


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("batch_size", [0, -1, True, 2.5])
def test_remember_many_refuses_a_batch_size_that_is_not_a_positive_integer(engine, installed, merge: bool,
                                                                          batch_size: object) -> None:
    """0 raised IndexError, -1 never returned, True and 2.5 were taken as numbers."""
    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=merge))
    with pytest.raises(InvalidInput, match="batch_size must be a positive integer"):
        store.remember_many([MemoryInput("one memory", "bs"), MemoryInput("another one", "bs")], batch_size=batch_size)
    assert store.count("bs", status=None) == 0


def _topic(rng: random.Random, i: int) -> str:
    city = rng.choice(["北京", "上海", "深圳", "杭州", "成都"])
    return f"project{i} service{i} host{i} owner{i} region{i} 部署{city}"


@pytest.mark.slow
def test_concurrent_writers_leave_one_active_successor(engine, installed) -> None:
    rng = random.Random(11)
    base = [(f"ns{i % 4}", _topic(rng, i)) for i in range(300)]
    restated = [(ns, text + f" note{i}") for i, (ns, text) in enumerate(rng.sample(base, 100))]
    work = base + restated
    rng.shuffle(work)
    chunks = [work[i::8] for i in range(8)]
    results, errors = run_writers(lambda: MemoryStore(engine, installed), chunks,
                                  lambda store, job: (job[0], job[1], store.remember(job[1], job[0], kind="fact")))
    assert not errors, errors[:1]
    assert len(results) == 400
    actions = [r.action for _, _, r in results]
    # every write is one of the documented actions; under contention a restatement can also land as
    # `outdated` (another writer stored a newer version of its topic first), seen once on the secured engine
    assert actions.count("added") + actions.count("superseded") + actions.count("duplicate") \
        + actions.count("outdated") == 400
    store = MemoryStore(engine, installed)
    for ns, text, res in results:  # every input findable, active or in a history chain
        chain = store.history(ns, res.id)
        assert any(m.content == text for m in chain) or res.action == "duplicate"
    for ns in {ns for ns, _ in base}:
        hits = engine.request("POST", f"/{store.alias}/_search", {"size": 1000, "seq_no_primary_term": True,
                              "query": {"bool": {"filter": [{"term": {"namespace": ns}},
                                                            {"term": {"status": "active"}}]}}})["hits"]["hits"]
        for h in hits:
            twins = decide(h["_source"]["content"], "fact", store.writer.lookup(h["_source"], exclude=h["_id"]), store.merge)
            assert twins.action == "add", (h["_source"]["content"], [t.source["content"] for t in twins.targets])
    assert store.count(None) == 300  # one active memory per topic


BAD = [
    ({"content": ""}, "empty"),
    ({"content": "   \n"}, "empty"),
    ({"content": "x" * (64 * 1024 + 1)}, "cap"),
    ({"content": b"\xff\xfe bad"}, "UTF-8"),
    ({"content": "lone \ud800 surrogate"}, "UTF-8"),
    # control characters are refused, not stored verbatim (a terminal or a prompt would act on them)
    ({"content": "a NUL \x00 inside"}, "content contains the control character U\\+0000 at position 6"),
    ({"content": "\x1b[2J\x1b[31mred alert"}, "content contains the control character U\\+001B at position 0"),
    ({"content": "bell \x07 and form feed \x0c"}, "U\\+0007"),
    ({"content": "delete \x7f"}, "U\\+007F"),
    ({"content": "C1 CSI \x9b31m"}, "U\\+009B"),
    ({"valid_from": "yesterday-ish"}, "unparseable"),
    ({"valid_from": "2031-01-01T00:00:00Z"}, "future"),
    ({"namespace": "has space"}, "namespace"),
    ({"namespace": "../etc"}, "namespace"),
    ({"namespace": ""}, "namespace"),
    ({"importance": 0}, "importance"),
    ({"kind": "gossip"}, "kind"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_bad_input_is_refused_and_nothing_is_written(clocked: MemoryStore, change: dict, message: str) -> None:
    kept = clocked.remember("the one memory that must survive", "bad", kind="fact")
    fields = {"content": "ok content", "namespace": "bad", **change}
    with pytest.raises(InvalidInput, match=message):
        clocked.remember(fields.pop("content"), fields.pop("namespace"), **fields)
    with pytest.raises(InvalidInput, match=message):  # in a batch, nothing of the batch is written
        clocked.remember_many([MemoryInput("first good one", "bad"),
                               MemoryInput(**{"content": "ok content", "namespace": "bad", **change})])
    assert clocked.count("bad", status=None) == 1
    assert clocked.get("bad", kept.id).content == "the one memory that must survive"


def test_tab_newline_and_carriage_return_are_kept_as_written(clocked: MemoryStore) -> None:
    res = clocked.remember("line one\r\n\tline two", "ctl")
    assert clocked.get("ctl", res.id).content == "line one\r\n\tline two"


def test_long_memories_merge_without_hitting_the_clause_limit(clocked: MemoryStore) -> None:
    words = " ".join(f"w{i}" for i in range(6000))  # ~40 KB, far over the engine's 1024 clauses
    first = clocked.remember(words, "long", kind="note")
    again = clocked.remember(words + " w-extra", "long", kind="note")
    assert first.action == "added" and again.action in ("duplicate", "superseded")
    assert clocked.recall(words, "long", 1, touch=False).items[0].memory.content.startswith("w0 w1")


def test_content_cap_is_configurable(engine, installed) -> None:
    small = MemoryStore(engine, installed, max_content_bytes=10)
    with pytest.raises(InvalidInput, match="10-byte cap"):
        small.remember("more than ten bytes", "cap")


def test_import_cli_counts_and_reports_malformed_lines(engine, installed, tmp_path: Path) -> None:
    lines = [json.dumps({"id": o["id"], "content": o["content"], "kind": o["kind"], "importance": o["importance"],
                         "valid_from": o["valid_from"], "namespace": "imp"}, ensure_ascii=False)
             for o in rule_lines()]
    good = tmp_path / "rules.jsonl"
    good.write_text("\n".join(lines) + "\n", encoding="utf-8")
    runner = CliRunner()
    base = ["--url", engine.url, "--prefix", installed]
    res = runner.invoke(cli, [*base, "import", str(good)])
    assert res.exit_code == 0, res.output
    # s05 -> r19 says what changed (改到) and is merged; s01-s03 are rewritten in several places with no
    # cue: linked as uncertain, both active (recall puts the newer first); s04 -> r15 opens differently
    # ("每周日" / "每次发布成功后") and reads as another subject: both active, unlinked
    assert res.stdout.strip() == "29 memories: 25 added, 1 merged, 0 duplicate, 0 outdated, 3 uncertain"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n" + '{"content": "x", "namespace": "imp2"}\n{"content": oops}\n', encoding="utf-8")
    res = runner.invoke(cli, [*base, "import", str(bad)])
    assert res.exit_code == 2 and "bad.jsonl:3: invalid JSON" in res.output
    store = MemoryStore(engine, installed)
    assert store.count("imp2", status=None) == 0
    assert store.count("imp") == 28
    again = runner.invoke(cli, [*base, "import", str(good)])  # a re-import is a replay: nothing new at all
    assert again.stdout.strip() == \
        "29 memories: 0 added, 0 merged, 0 duplicate, 0 outdated, 0 uncertain, 29 already imported"
    assert store.count("imp", status=None) == 29
    assert store.count("imp") == 28
    newest = {h.memory.external_id for h in store.recall("429 怎么重试", "imp", 1, touch=False).items}
    assert newest == {"r09"}


def test_import_cli_accepts_a_utf8_file_with_a_byte_order_mark(engine, installed, tmp_path: Path) -> None:
    text = '{"content": "周一例会改到上午十点"}\n{"content": "the office wifi password rotates monthly"}\n'
    bom = tmp_path / "bom.jsonl"
    bom.write_text(text, encoding="utf-8-sig")
    plain = tmp_path / "plain.jsonl"
    plain.write_text(text, encoding="utf-8")
    base = ["--url", engine.url, "--prefix", installed, "import", "-n", "bom"]
    res = CliRunner().invoke(cli, [*base, str(bom)])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "2 memories: 2 added, 0 merged, 0 duplicate, 0 outdated, 0 uncertain"
    again = CliRunner().invoke(cli, [*base, str(plain)])  # the same lines: a replay
    assert again.stdout.strip().endswith("2 already imported"), again.output


def test_late_older_statement_becomes_history(clocked: MemoryStore) -> None:
    clocked.remember_many(_inputs([o for o in rule_lines() if o["id"].startswith("r")], "bg"))
    lines = {o["id"]: o for o in rule_lines()}
    new = clocked.remember(_update_of_s01(lines), "late", kind="rule", valid_from="2026-08-21T09:00:00Z")
    old = clocked.remember(lines["s01"]["content"], "late", kind="rule", valid_from="2026-07-05T09:00:00Z")
    assert old.action == "outdated" and old.outdated_by == new.id
    stored = clocked.get("late", old.id)
    assert stored.status == "superseded" and stored.superseded_by == new.id
    assert stored.invalid_at == parse_time("2026-08-21T09:00:00Z")
    assert [m.id for m in clocked.history("late", new.id)] == [old.id, new.id]
    assert clocked.count("late") == 1
    past = clocked.recall("429 怎么重试", "late", 5, as_of="2026-08-01T00:00:00Z", now=NOW, touch=False)
    assert [r.memory.id for r in past.items] == [old.id]


def test_cli_remember_dry_run_history_and_restore(engine, installed) -> None:
    MemoryStore(engine, installed).remember_many(_inputs([o for o in rule_lines() if o["id"].startswith("r")], "bg"))
    runner = CliRunner()
    base = ["--url", engine.url, "--prefix", installed]
    first = runner.invoke(cli, [*base, "remember", "每周日把 Markdown 源文件备份到本机的 blog-backup 目录，保留 30 天",
                                "-n", "cli", "--kind", "rule", "--json"])
    old_id = json.loads(first.stdout)["id"]
    text = "每周日把 Markdown 源文件改成备份到 NAS 的 blog-backup 目录，保留 90 天"
    dry = runner.invoke(cli, [*base, "remember", text, "-n", "cli", "--kind", "rule", "--dry-run"])
    assert dry.exit_code == 0 and dry.stdout.startswith(f"(dry run) superseded {old_id}")
    assert "bm25=" in dry.stdout and "overlap=" in dry.stdout
    real = runner.invoke(cli, [*base, "remember", text, "-n", "cli", "--kind", "rule", "--json"])
    new_id = json.loads(real.stdout)["id"]
    hist = runner.invoke(cli, [*base, "history", new_id, "-n", "cli"])
    assert [line.split()[:2] for line in hist.stdout.splitlines()] == [[old_id, "superseded"], [new_id, "active"]]
    undo = runner.invoke(cli, [*base, "restore", old_id, "-n", "cli"])
    assert undo.exit_code == 0 and undo.stdout.strip() == f"{old_id} is active again"
    assert MemoryStore(engine, installed).get("cli", new_id).status == "retired"
    missing = runner.invoke(cli, [*base, "history", "nope", "-n", "cli"])
    assert missing.exit_code == 2 and missing.output.startswith("error: no memory 'nope'")


def test_settle_looks_only_at_what_was_written_after_the_decision_saw_the_index(clocked: MemoryStore) -> None:
    """The settle step reads the memories written since the global checkpoint read before the
    batch's look-ups (this batch's and a concurrent writer's) and looks up again only a memory that
    could merge with one of them, with that checkpoint, so the engine scores only what is new."""
    store = clocked
    older = store.remember_many([MemoryInput(f"the {w} service deploys on Fridays", "settle", kind="fact")
                                 for w in ("billing", "search", "auth")])
    other = MemoryStore(store.engine, store.catalog.names.prefix, clock=lambda: NOW)
    searches: list[list] = []
    real = store.catalog.msearch

    def recorded(batch, what):  # records what is sent; the real engine answers
        searches.append(list(batch))
        out = real(batch, what)
        if len(searches) == 1:  # a concurrent writer adds a twin after this batch's look-ups
            twin.append(other.remember("payments service deploys on Mondays", "settle", kind="fact",
                                       valid_from=NOW - timedelta(hours=1)))
        return out

    twin: list = []
    store.catalog.msearch = recorded
    new = store.remember_many([MemoryInput("the payments service deploys on Mondays", "settle", kind="fact"),
                               MemoryInput("the checkout service runs canaries first", "settle", kind="fact")])
    settle = searches[-1]
    assert len(searches) == 2 and [s.template for s in settle] == ["lookup"] and all(
        "after_seq_no" not in s.params for s in searches[0])
    assert settle[0].params["query"] == "the payments service deploys on Mondays"
    seen = {s.params["after_seq_no"] for s in settle}
    assert len(seen) == 1
    seq = {h["_id"]: h["_seq_no"] for h in store.engine.request(
        "POST", f"/{store.alias}/_search", {"seq_no_primary_term": True, "query": {"term": {"namespace": "settle"}}},
        {"routing": "settle"})["hits"]["hits"]}
    (after,) = seen
    assert all(seq[r.id] <= after for r in older) and all(seq[r.id] > after for r in new)
    settled = store.get("settle", twin[0].id)  # the older twin: superseded by the newer memory
    assert settled.status == "superseded" and settled.superseded_by == new[0].id


def test_settle_skips_the_look_ups_when_nothing_written_since_could_merge(clocked: MemoryStore) -> None:
    """Two memories of one batch never merge with each other (the batch is made so), so a lone
    writer's settle step is one read of what was written since, and no look-up."""
    store = clocked
    searches: list[list] = []
    real = store.catalog.msearch

    def recorded(batch, what):
        searches.append(list(batch))
        return real(batch, what)

    store.catalog.msearch = recorded
    store.remember_many([MemoryInput("the payments service deploys on Mondays", "settle", kind="fact"),
                         MemoryInput("the checkout service runs canaries first", "settle", kind="fact")])
    assert len(searches) == 1 and [s.template for s in searches[0]].count("lookup") == 2


def _requests(store: MemoryStore, monkeypatch) -> list[str]:
    """Records "METHOD path" of every call the store makes (the real engine answers)."""
    seen: list[str] = []
    real = store.engine.request

    def recorded(method, path, *args, **kwargs):
        seen.append(f"{method} {path.split('/', 2)[-1]}")  # without the index
        return real(method, path, *args, **kwargs)

    monkeypatch.setattr(store.engine, "request", recorded)
    return seen


def test_a_lone_writer_skips_the_settle_read_and_the_refresh_before_each_look_up(clocked, monkeypatch) -> None:
    """When every write numbered after the checkpoint its look-ups saw is the writer's own (the
    shard's sequence numbers say so), no twin can exist: the settle step reads nothing, and the next
    batch's look-ups, with nothing written since the last refresh, neither read a checkpoint nor refresh."""
    store = clocked
    steps = "payments service deploys run through the jenkins pipeline with canary stages and manual approval"
    alerts = "the billing dashboards page the on call engineer through pagerduty when error budgets burn"
    texts = [f"{steps} on fridays", f"{alerts} fast", f"{steps} on mondays", "the search cluster has three nodes",
             f"{alerts} twice as fast", "auth tokens expire after one hour"]
    calls = _requests(store, monkeypatch)
    out = store.remember_many([MemoryInput(t, "lone", kind="fact", valid_from=NOW - (9 - n) * DAY)
                               for n, t in enumerate(texts)], batch_size=2)
    assert [r.action for r in out] == ["added", "added", "superseded", "added", "duplicate", "added"]
    assert "POST _search/template" not in calls and calls.count("POST _msearch/template") == 3  # no settle read
    # one per batch, after its creates (and one before the first look-ups, unless a refresh of the process
    # was recent), each preceded by its checkpoint read
    assert calls.count("POST _refresh") in (3, 1 + 3) and calls.count("GET _stats/docs") == calls.count("POST _refresh")
    assert calls[calls.index("POST _msearch/template") + 1:].count("POST _refresh") == 3


def test_a_batch_s_refresh_and_settle_run_beside_the_next_batch_s_planning_never_beside_a_request(engine, installed,
                                                                                                   monkeypatch) -> None:
    """The last step of a batch (its refresh and settle step) runs in a worker thread while the
    client plans the next batch; the next batch's requests wait for it, so the engine never has two of
    the write's requests at once and sees them in the order a sequential write sends them. (The sync
    store's: an async store sends every request from the loop's thread and runs that step in line.)"""
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    spans: list[tuple[str, str, float, float]] = []  # (request, thread, start, end)
    real = store.engine.request

    def timed(method, path, *args, **kwargs):
        start = time.perf_counter()
        try:
            return real(method, path, *args, **kwargs)
        finally:
            spans.append((f"{method} {path.split('/', 2)[-1]}", threading.current_thread().name,
                          start, time.perf_counter()))

    monkeypatch.setattr(store.engine, "request", timed)
    steps = "payments service deploys run through the jenkins pipeline with canary stages and manual approval"
    alerts = "the billing dashboards page the on call engineer through pagerduty when error budgets burn"
    texts = [f"{steps} on fridays", f"{alerts} fast", f"{steps} on mondays", "the search cluster has three nodes",
             f"{alerts} twice as fast", "auth tokens expire after one hour"]
    out = store.remember_many([MemoryInput(t, "overlap", kind="fact", valid_from=NOW - (9 - n) * DAY)
                               for n, t in enumerate(texts)], batch_size=2)
    assert [r.action for r in out] == ["added", "added", "superseded", "added", "duplicate", "added"]
    main = threading.current_thread().name
    refreshes = [thread for what, thread, _, _ in spans if what == "POST _refresh"]
    assert refreshes.count(main) < len(refreshes)  # some batch's refresh ran in the worker
    spans.sort(key=lambda s: s[2])
    assert all(a[3] <= b[2] for a, b in zip(spans, spans[1:]))  # one request at a time


def test_a_write_by_another_writer_between_look_up_and_create_is_settled_after_a_quiet_batch(clocked) -> None:
    """The batch after a quiet one looks up without a refresh of its own; a twin another writer adds
    after those look-ups has a sequence number that is not the writer's, so the settle step reads what
    was written since and retires the older twin, as it does without the skip."""
    store = clocked
    other = MemoryStore(store.engine, store.catalog.names.prefix, clock=lambda: NOW)
    searches: list[list[str]] = []
    real = store.catalog.msearch
    twin: list = []

    def recorded(batch, what):
        out = real(batch, what)
        searches.append([s.template for s in batch])
        if len(searches) == 2:  # after the second batch's look-ups
            twin.append(other.remember("the payments service deploys on Mondays", "twins", kind="fact",
                                       valid_from=NOW - 3 * DAY))
        return out

    store.catalog.msearch = recorded
    texts = ["Alice owns the billing dashboards", "the search cluster has three nodes",
             "payments service deploys on Mondays", "auth tokens expire after one hour"]
    out = store.remember_many([MemoryInput(t, "twins", kind="fact", valid_from=NOW - DAY) for t in texts], batch_size=2)
    assert [r.action for r in out] == ["added"] * 4 and twin[0].action == "added"
    older = store.get("twins", twin[0].id)
    assert older.status == "superseded" and older.superseded_by == out[2].id
    assert store.count("twins") == 4


def test_a_look_up_soon_after_a_refresh_sends_no_refresh_and_a_twin_it_could_not_see_is_settled(
        engine, installed, monkeypatch) -> None:
    """A remember whose look-up comes soon after a refresh of the process sends no refresh before it
    (one refresh per remember, after its create): every write numbered up to the checkpoint read
    before that refresh is searchable. A twin another process created since, not yet searchable (its
    writer has not refreshed), is numbered after that point, so the settle step finds it, and the
    newer of the two supersedes the older."""
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    # Nothing but the writers' own refreshes makes a write searchable: the periodic refresh is off from
    # the start, so one it had already scheduled cannot fire between the twin's create and the look-up.
    engine.request("PUT", f"/{store.alias}/_settings", {"index": {"refresh_interval": "-1"}})
    try:
        store.remember("the search cluster has three nodes", "soon", kind="fact", valid_from=NOW - 5 * DAY)
        twin_id, twin = document(MemoryInput("the payments service deploys on Mondays", "soon", kind="fact",
                                             importance=5, valid_from=NOW - 3 * DAY), NOW, Limits())
        store.catalog.create([(twin_id, {**twin, "written_as": "add"})])
        calls = _requests(store, monkeypatch)
        new = store.remember("payments service deploys on Mondays", "soon", kind="fact", valid_from=NOW - DAY)
    finally:
        engine.request("PUT", f"/{store.alias}/_settings", {"index": {"refresh_interval": "1s"}})
    before_look_up = calls[:calls.index("POST _msearch/template")]
    assert "POST _refresh" not in before_look_up and calls.count("POST _refresh") == 1
    assert new.action == "added"  # its look-up could not see the twin
    older = store.get("soon", twin_id)
    assert older.status == "superseded" and older.superseded_by == new.id
    assert store.count("soon") == 2


def _everything(store: MemoryStore) -> dict:
    """Every memory of the index: status, links and counters (`recorded_at`, wall-clock, left out)."""
    store.engine.request("POST", f"/{store.alias}/_refresh")
    hits = store.engine.request("POST", f"/{store.alias}/_search", {"size": 10000, "sort": ["_doc"]})["hits"]["hits"]
    return {h["_id"]: {k: v for k, v in h["_source"].items() if k != "recorded_at"} for h in hits}


@pytest.mark.fresh_prefix("deletes and re-creates the index between its two runs")
def test_a_long_write_into_new_groups_skips_look_ups_and_decides_as_with_them(engine, installed, monkeypatch) -> None:
    """In a (namespace, kind) group that held no active memory when a long write began, a memory
    that none of the write's earlier ones could merge with is added without a look-up. The results
    (but the candidate scores of those adds) and every stored document equal a run that looks all up."""
    from esmem.apps.bench import generate
    from esmem.domain.installation import install
    from esmem.domain.novelty import Novelty
    from esmem.index.install import current_index

    items = generate(400, 3, seed=1, now=NOW).inputs()
    runs = []
    for skip in (False, True):
        if runs:  # the same empty index again (a deleted document would stay in BM25's statistics)
            engine.request("DELETE", f"/{current_index(engine, installed)}")
            install(engine, installed)
        with monkeypatch.context() as m:
            if not skip:
                m.setattr(Novelty, "skips", lambda self, doc: False)
            store = MemoryStore(engine, installed, clock=lambda: NOW)
            searches: list[str] = []
            real = store.catalog.msearch

            def recorded(batch, what):
                searches.extend(s.template for s in batch)
                return real(batch, what)

            store.catalog.msearch = recorded
            results = store.remember_many(items, batch_size=40)
            runs.append(([replace(r, scores={}) for r in results], _everything(store), searches.count("lookup")))
    (looked, stored, all_lookups), (skipped, stored_skipping, lookups) = runs
    assert {r.action for r in looked} >= {"added", "duplicate"} and {r.action for r in looked} & {"superseded", "uncertain"}
    assert skipped == looked and stored_skipping == stored
    # a memory carrying a change cue may be read against one sharing a quarter of its words, so fewer skip
    assert all_lookups >= len(items) - 40 and lookups < 0.7 * all_lookups


def test_a_write_that_skipped_look_ups_settles_with_a_twin_written_before_its_batch(clocked: MemoryStore) -> None:
    """Another writer adds a twin to a group the long write found empty, after the write's last read
    of what others wrote and before the batch whose memory it twins: that memory is added without a
    look-up, and the settle step, reading what was written since the last read, retires the older one."""
    store = clocked
    other = MemoryStore(store.engine, store.catalog.names.prefix, clock=lambda: NOW)
    fillers = [MemoryInput(text, "fresh", kind="fact", valid_from=NOW - 9 * DAY) for text in (
        "Alice owns the billing dashboards", "the search cluster has three nodes", "auth tokens expire after 1h",
        "checkout runs canaries first")]
    late = MemoryInput("the payments service deploys on Mondays", "fresh", kind="fact", valid_from=NOW - DAY)
    searches: list[list] = []
    real = store.catalog.msearch
    twin: list = []

    def recorded(batch, what):
        out = real(batch, what)
        searches.append([s.template for s in batch])
        if len(searches) == 1:  # after the first batch's read: the twin appears
            twin.append(other.remember("payments service deploys on Mondays", "fresh", kind="fact",
                                       valid_from=NOW - 2 * DAY))
        return out

    store.catalog.msearch = recorded
    new = store.remember_many(fillers + [late], batch_size=4)
    assert new[-1].action == "added" and "lookup" not in searches[1][:-1]  # decided without a look-up
    assert searches[0][-1] == "groups" and searches[1][-1] == "written_since"
    older = store.get("fresh", twin[0].id)
    assert older.status == "superseded" and older.superseded_by == new[-1].id
    assert store.get("fresh", new[-1].id).status == "active"


def test_a_long_write_does_not_look_up_a_memory_that_could_merge_only_with_one_it_retired(clocked: MemoryStore) -> None:
    """A memory that could merge only with one the write has since superseded is added without a
    look-up (the look-up finds active memories only), and the write decides as with the look-up."""
    from esmem.domain.merge import MergePolicy, could_merge

    store = clocked
    steps = "payments service deploys run through the jenkins pipeline with canary stages and manual approval"
    old, new, later = f"{steps} after the berlin standup", f"{steps} on fridays now", "the berlin standup is early"
    policy = MergePolicy()
    assert could_merge(later, old, "fact", policy) and not could_merge(later, new, "fact", policy)
    fillers = ["Alice owns the billing dashboards", "the search cluster has three nodes",
               "auth tokens expire after one hour", "checkout runs canaries first"]
    texts = [old, fillers[0], new, fillers[1], fillers[2], fillers[3], later]
    items = [MemoryInput(t, "forgot", kind="fact", valid_from=NOW - (9 - n) * DAY) for n, t in enumerate(texts)]
    searches: list[list[str]] = []
    real = store.catalog.msearch

    def recorded(batch, what):
        searches.append([s.template for s in batch])
        return real(batch, what)

    store.catalog.msearch = recorded
    out = store.remember_many(items, batch_size=2)
    assert [r.action for r in out] == ["added", "added", "superseded", "added", "added", "added", "added"]
    assert out[2].superseded == (out[0].id,)
    assert searches[1].count("lookup") == 1  # `new`, which `old` could merge with
    assert searches[-1] == ["restated", "superseded_by", "written_since"]  # `later`: no look-up
    assert store.get("forgot", out[0].id).status == "superseded"  # so a look-up would not find it


def test_plain_batches_in_flight_keep_input_order_replays_and_progress(engine, installed) -> None:
    """Without merge two batches are in flight: a memory repeated in a later batch is still the
    replay of the first, results come back in input order, and progress counts every memory once."""
    from esmem.domain.merge import MergePolicy

    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=False))
    items = [MemoryInput(f"plain memory number {i}", "p", valid_from="2026-01-01T00:00:00Z") for i in range(9)]
    items.insert(3, items[1])  # position 3 repeats position 1, in the next batch (batch_size 2)
    counted: list[int] = []
    out = store.remember_many(items, batch_size=2, progress=counted.append)
    assert [r.replayed for r in out] == [n == 3 for n in range(10)]
    assert out[3].id == out[1].id and len({r.id for r in out}) == 9
    assert sum(counted) == 10 and all(0 < c <= 2 for c in counted)
    assert store.count("p") == 9  # searchable: one refresh at the end
    again = store.remember_many(items, batch_size=2)
    assert all(r.replayed for r in again) and [r.id for r in again] == [r.id for r in out]


@pytest.mark.parametrize("merge", [True, False])
def test_a_long_write_pauses_the_garbage_collector_and_restores_it(engine, installed, merge: bool) -> None:
    """A write of more than one batch runs with Python's cyclic collector paused; it runs again
    after the write, after a write refused for bad input, and a collector the caller stopped stays stopped."""
    from esmem.domain.merge import MergePolicy

    store = MemoryStore(engine, installed, merge=MergePolicy(enabled=merge))
    items = [MemoryInput(f"collector note {i} on topic{i}", "gc", valid_from="2026-01-01T00:00:00Z") for i in range(5)]
    during: list[bool] = []
    store.remember_many(items, batch_size=2, progress=lambda n: during.append(gc.isenabled()))
    assert during and not any(during) and gc.isenabled()
    store.remember_many(items[:2], batch_size=2, progress=lambda n: during.append(gc.isenabled()))
    assert during[-1]  # one batch: not paused
    with pytest.raises(InvalidInput):
        store.remember_many([*items, MemoryInput("", "gc")], batch_size=2)
    assert gc.isenabled()
    gc.disable()
    try:
        store.remember_many(items, batch_size=2)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_concurrent_writes_share_one_collector_pause() -> None:
    """The first write in stops the collector, the last one out restarts it, whatever the order."""
    from esmem.domain.collector import paused_collector

    first, second = paused_collector(), paused_collector()
    first.__enter__()
    second.__enter__()
    try:
        first.__exit__(None, None, None)
        assert not gc.isenabled()  # the second write is still running
    finally:
        second.__exit__(None, None, None)
    assert gc.isenabled()
