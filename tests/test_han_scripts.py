"""Traditional and simplified Chinese read as one script: the index's analyzers (char filter esmem_han)
and every Python reader of a text's words fold traditional characters to simplified, one for one, so
a memory written in either script is recalled by a query in the other, the merge reads a restatement
in the other script as it reads one in the same, and importance rules, pinned triggers, update cues
and time cues see the same words."""
from __future__ import annotations

from pathlib import Path

from esmem.domain.analysis import fold_han, tokens
from esmem.domain.importance import rule_scorer
from esmem.domain.pinned import TRIGGERS, derive_applies_to
from esmem.domain.resolve import reads_as_update
from esmem.domain.when import asks_when, tells_time
from esmem.index.engine import Engine
from esmem.index.templates import han_folding
from han_table import text as derived_table
from test_analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
SIMPLIFIED = "我对花生过敏，点餐时请记住提醒服务员。数据库的备份改为每周三下午两点发布。"
TRADITIONAL = "我對花生過敏，點餐時請記住提醒服務員。數據庫的備份改為每週三下午兩點發佈。"


def test_the_table_is_the_one_derived_from_opencc_and_leaves_simplified_text_alone() -> None:
    assert (ROOT / "templates" / "han_t2s.txt").read_text(encoding="utf-8") == derived_table()
    assert fold_han(TRADITIONAL) == SIMPLIFIED and fold_han(SIMPLIFIED) == SIMPLIFIED
    assert not set(han_folding()) & set(han_folding().values())  # no character is both folded and a fold
    assert fold_han("什么 干杯 乾隆 后来 里面") == "什么 干杯 乾隆 后来 里面"  # simplified characters stay
    assert fold_han("軟體 資料庫") == "软体 资料库"  # a region's words stay its own (软件, 数据库 elsewhere)


def test_the_engine_and_the_mirror_read_both_scripts_as_the_same_tokens(engine: Engine, installed: str) -> None:
    for analyzer in ("esmem_index", "esmem_search"):
        simplified = analyze(engine, installed, analyzer, SIMPLIFIED)
        assert analyze(engine, installed, analyzer, TRADITIONAL) == simplified
        assert tokens(TRADITIONAL, query=analyzer == "esmem_search") == simplified


def test_a_memory_in_one_script_is_recalled_by_a_query_in_the_other_with_the_same_score(store) -> None:
    store.remember("我對花生過敏，點餐時請提醒服務員。", "zh")
    store.remember("数据库的备份改到每周三下午两点。", "zh")
    store.remember("周末喜欢去公园跑步。", "zh")
    store.remember("日本語の会議は金曜日です。", "zh")  # kanji fold too, memory and query alike
    for query, expected in (("我对什么过敏", "我對花生過敏，點餐時請提醒服務員。"),
                            ("數據庫什麼時候備份", "数据库的备份改到每周三下午两点。"),
                            ("会議は何曜日", "日本語の会議は金曜日です。")):
        found = store.recall(query, "zh", 1, touch=False).items
        same = store.recall(fold_han(query), "zh", 1, touch=False).items
        assert [r.memory.content for r in found] == [expected]
        assert found[0].score == same[0].score


def test_the_merge_reads_a_restatement_in_the_other_script_as_one_in_the_same(make_store, installed) -> None:
    outcomes = {}
    for script, restate in (("simplified", lambda t: t), ("traditional", lambda t: t.translate(_TO_TRADITIONAL))):
        store = make_store(installed)
        ns = f"merge-{script}"
        first = store.remember("数据组的周会是每周二下午3点。", ns)
        again = store.remember(restate("数据组的周会是每周二下午3点。"), ns)
        moved = store.remember(restate("数据组的周会改到每周四上午10点了。"), ns)
        outcomes[script] = (first.action, again.action, moved.action, moved.superseded == (first.id,))
    assert outcomes["traditional"] == outcomes["simplified"] == ("added", "duplicate", "superseded", True)


def test_importance_pinned_triggers_update_cues_and_time_cues_read_traditional_text() -> None:
    assert rule_scorer(["我對青黴素過敏"]) == rule_scorer(["我对青霉素过敏"]) == [(10.0, "health:allergy")]
    seafood = [{"content": text, "importance_rule": "health:allergy"} for text in ("我對海鮮過敏", "我对海鲜过敏")]
    for doc in seafood:
        derive_applies_to(doc)
    assert seafood[0]["applies_to"] == seafood[1]["applies_to"] != TRIGGERS["health:allergy"]  # the food pattern
    assert reads_as_update("週會現在是週三", 1.0, 1.0, 2.0, "fact") and reads_as_update("周会现在是周三", 1.0, 1.0, 2.0, "fact")
    assert asks_when("他們什麼時候搬家的？") and asks_when("他们什么时候搬家的？")
    assert tells_time("我們後天見") and tells_time("我们后天见")


# simplified -> traditional for the characters these tests write (the table read backwards)
_TO_TRADITIONAL = str.maketrans({s: t for t, s in han_folding().items() if s in "数组会周进时间点发后们这说为"})
