"""Merge decisions at scale on the engine: distinct facts that share a sentence frame and a provenance
note all stay visible, and an update retires exactly its own predecessor, in English and Chinese."""
from __future__ import annotations

import itertools
import random

import pytest
from click.testing import CliRunner

from esmem.apps.bench import generate
from esmem.cli.main import cli
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.values import parse_time

NOW = parse_time("2026-10-08T12:00:00Z")

NAMES_EN = ("Dara Lea Tom Priya Marco Aisha Noah Emma Liam Olivia Mateo Sofia Yuki Omar Chen Ines Raj Mia Leo Zoe "
            "Hugo Nina Ivan Sara Kofi Ana Ben Lucy Max Iris").split()
FRAMES_EN = {  # predicate -> objects: everything a person can have several of
    "likes": "jazz hiking sushi chess tennis poetry gardening pottery cycling opera".split(),
    "dislikes": ["sourdough bread", "a red bike", "loud offices", "cold coffee", "rainy days", "long meetings",
                 "spicy food", "early flights", "crowded trains", "small talk"],
    "owns": ["a blue kayak", "an old piano", "a vintage camera", "two cats", "a road bike", "a tiny garden",
             "a film projector", "a sailboat", "a drone", "a telescope"],
    "is learning": "Spanish Korean welding calligraphy Rust statistics salsa woodworking Latin astronomy".split(),
}
SUFFIXES_EN = (" according to the onboarding call.", " as mentioned in the weekly sync.", " (from the intake form).",
               " as noted in the HR profile.", ".")
NAMES_ZH = "老张 老李 小王 阿梅 小周 大刘 小陈 老赵 阿杰 小林 老孙 小吴 老郑 小何 阿芳 老高 小马 老罗 小宋 阿彬".split()
FRAMES_ZH = {
    "喜欢": "爵士乐 爬山 寿司 下棋 网球 诗歌 园艺 陶艺 骑车 歌剧".split(),
    "不喜欢": "Python 加班 香菜 早起 开长会 挤地铁 冷咖啡 下雨天 吵闹的办公室 红色的自行车".split(),
    "养了": "一只橘猫 两条金鱼 一只柯基 一只鹦鹉 一缸热带鱼 一只仓鼠 一只乌龟 一只兔子 一只布偶猫 一只边牧".split(),
    "在学": "西班牙语 韩语 焊接 书法 Rust 统计学 萨尔萨舞 木工 拉丁语 天文".split(),
}
SUFFIXES_ZH = ("（去年开始）", "（来自入职面谈）", "，据周会纪要。", "（见人事档案）", "。")


def _facts() -> list[tuple[str, str, str, str, str]]:
    """(language, subject, predicate, object, suffix) of 1,120 distinct facts, shuffled."""
    rng = random.Random(7)
    out = []
    for names, frames, suffixes, lang in ((NAMES_EN, FRAMES_EN, SUFFIXES_EN, "en"), (NAMES_ZH, FRAMES_ZH, SUFFIXES_ZH, "zh")):
        for name, (pred, objects) in itertools.product(names, frames.items()):
            for obj in rng.sample(objects, 6 if lang == "en" else 5):
                out.append((lang, name, pred, obj, rng.choice(suffixes)))
    rng.shuffle(out)
    return out


def _text(lang: str, name: str, pred: str, obj: str, suffix: str) -> str:
    return f"{name} {pred} {obj}{suffix}" if lang == "en" else f"{name}{pred}{obj}{suffix}"


def _retraction(lang: str, name: str, pred: str, obj: str, suffix: str) -> str:
    if lang == "zh":
        return f"{name}不再{pred.replace('了', '')}{obj}了{suffix}"
    said = "is no longer learning" if pred == "is learning" else f"no longer {pred}"
    return f"{name} {said} {obj}{suffix}"


@pytest.mark.slow
def test_distinct_facts_sharing_frames_and_notes_stay_active_and_updates_retire_their_own(engine, installed) -> None:
    store = MemoryStore(engine, installed, clock=lambda: NOW)
    facts = _facts()
    assert len(facts) == 1120 and len({_text(*f) for f in facts}) == 1120
    items = [MemoryInput(_text(*f), f"corpus-{f[0]}", kind="fact", valid_from=f"2026-01-01T{i // 60 % 24:02d}:{i % 60:02d}:00Z")
             for i, f in enumerate(facts)]
    results = store.remember_many(items)
    active = sum(store.count(f"corpus-{lang}") for lang in ("en", "zh"))
    assert active >= 0.99 * len(facts), [(i.content, r.action) for i, r in zip(items, results) if r.action != "added"][:10]
    assert not [r for r in results if r.action in ("superseded", "duplicate", "outdated")]
    # updates mixed in: each retracts one fact and must retire exactly that one
    rng = random.Random(8)
    chosen = rng.sample(range(len(facts)), 120)
    updates = [MemoryInput(_retraction(*facts[n]), f"corpus-{facts[n][0]}", kind="fact",
                           valid_from=f"2026-03-01T{j // 60:02d}:{j % 60:02d}:00Z") for j, n in enumerate(chosen)]
    done = store.remember_many(updates)
    wrong = [(u.content, d.action, [store.get(u.namespace, s).content for s in d.superseded])
             for n, u, d in zip(chosen, updates, done) if d.superseded != (results[n].id,)]
    assert not wrong, wrong[:10]


@pytest.mark.slow
def test_a_second_allergy_keeps_the_first_in_a_busy_index(engine, installed) -> None:
    """The CLI transcript of a user's two allergies, in an index that holds thousands of other memories
    (whose statistics once made the pair a supersede)."""
    MemoryStore(engine, installed, merge=MergePolicy(enabled=False)).remember_many(
        generate(3000, 20, seed=3, now=NOW).inputs())
    base = ["--url", engine.url, "--prefix", installed]
    first = CliRunner().invoke(cli, [*base, "remember", "I am allergic to penicillin.", "-n", "u3", "--kind", "fact"])
    second = CliRunner().invoke(cli, [*base, "remember", "I am allergic to shellfish as well.", "-n", "u3", "--kind", "fact"])
    assert first.exit_code == 0 and first.stdout.startswith("added")
    assert second.exit_code == 0 and second.stdout.startswith("added"), second.stdout
    assert "coexists (an additive cue)" in second.stdout
    assert MemoryStore(engine, installed).count("u3") == 2
    recall = CliRunner().invoke(cli, [*base, "recall", "can I take penicillin antibiotics", "-n", "u3", "--json",
                                      "--no-touch"])
    assert recall.exit_code == 0, recall.output
    assert "penicillin" in recall.stdout.split("shellfish")[0]  # the penicillin allergy ranks first


def test_a_new_value_of_one_attribute_replaces_it_in_one_write_and_in_a_long_one(engine, installed) -> None:
    """"My doctor is Anna Smith" -> "My doctor is John Lee": one word of three in common, yet one
    attribute; the dentist of the same name stays. Written one by one and as one import (whose
    batching and look-up skipping read the pair with the same filters)."""
    texts = ["My dentist is Anna Smith.", "My doctor is Anna Smith.", "My doctor is John Lee."]
    store = MemoryStore(engine, installed)
    one = [store.remember(t, "one", kind="fact", valid_from=f"2026-0{i + 1}-01T00:00:00Z") for i, t in enumerate(texts)]
    many = store.remember_many([MemoryInput(t, "many", kind="fact", valid_from=f"2026-0{i + 1}-01T00:00:00Z")
                                for i, t in enumerate(texts)])
    for ns, results in (("one", one), ("many", many)):
        assert [r.action for r in results] == ["added", "added", "superseded"], ns
        assert results[2].superseded == (results[1].id,)
        assert store.get(ns, results[1].id).status == "superseded"
        assert {store.get(ns, r.id).status for r in (results[0], results[2])} == {"active"}
