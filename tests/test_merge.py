"""The pure merge decision and its measures."""
from __future__ import annotations

import difflib
import json
from pathlib import Path

import cydifflib
import pytest
from hypothesis import given
from hypothesis import strategies as st

from esmem.domain.merge import Candidate, Mergeable, MergePolicy, conflict, could_merge, decide
from esmem.domain import pairs
from esmem.domain.pairs import read
from esmem.errors import ConfigError


def cand(cid: str, content: str, bm25: float = 5.0, kind: str = "rule", valid_from: str = "2026-01-01T00:00:00Z") -> Candidate:
    return Candidate(cid, bm25, {"content": content, "kind": kind, "valid_from": valid_from})


OLD = "接口返回 HTTP 429 限流时固定等 1 秒再重试，最多重试 3 次"
NEW = "接口返回 HTTP 429 限流时改成按指数退避加随机 jitter 再重试，最多重试 5 次"
LATER = "2026-02-01T00:00:00Z"


def test_topic_overlap_is_the_overlap_coefficient_and_jaccard_is_symmetric() -> None:
    wider = read("redis cache", "redis cache warmup script", "fact")
    assert (wider.overlap, wider.jaccard) == (1.0, 0.5)
    assert read("a", "", "fact").overlap == 0.0
    assert read(OLD, NEW, "rule").jaccard == read(NEW, OLD, "rule").jaccard


def test_a_change_cue_on_the_same_topic_supersedes_whatever_the_bm25() -> None:
    for bm25 in (0.5, 12.0):  # BM25 only finds candidates: the decision reads the two texts
        d = decide(NEW, "rule", [cand("old", OLD, bm25)], MergePolicy(), LATER)
        assert d.action == "supersede" and [t.id for t in d.targets] == ["old"]
        assert d.scores["old"]["verdict"] == "replaces" and d.scores["old"]["why"] == "a change cue"


def test_an_update_replaces_its_own_topic_and_every_active_version_of_it() -> None:
    other = "接口返回 HTTP 500 时固定等 1 秒再重试"
    d = decide(NEW, "rule", [cand("far", other), cand("old", OLD)], MergePolicy(), LATER)
    assert d.action == "supersede" and [t.id for t in d.targets] == ["old"]
    # two writers left two versions active for a moment: the newer statement retires both
    twin = OLD.replace("1 秒", "2 秒")
    both = decide(NEW, "rule", [cand("old", OLD), cand("twin", twin)], MergePolicy(), LATER)
    assert both.action == "supersede" and sorted(t.id for t in both.targets) == ["old", "twin"]
    # a change told of one person replaces that person's fact, not another's of the same shape
    lea, dara = "Lea dislikes rye bread.", "Dara dislikes sourdough bread."
    mine = decide("Dara now dislikes rye bread instead.", "fact", [cand("lea", lea, kind="fact"),
                                                                   cand("dara", dara, kind="fact")], MergePolicy(), LATER)
    assert [t.id for t in mine.targets] == ["dara"]


def test_a_late_older_statement_that_the_active_one_replaces_is_outdated() -> None:
    d = decide(OLD, "rule", [cand("new", NEW, valid_from=LATER)], MergePolicy(), "2026-01-01T00:00:00Z")
    assert d.action == "outdated" and d.targets[0].id == "new"


OLD_PLAN, NEW_PLAN = "We plan to tile the bathroom floor with slate.", "We plan to tile the bathroom floor with marble."


def test_a_second_value_without_a_cue_is_uncertain_and_links_the_older() -> None:
    d = decide(NEW_PLAN, "fact", [cand("plan", OLD_PLAN, kind="fact")], MergePolicy(), LATER)
    assert d.action == "uncertain" and d.targets[0].id == "plan"


def test_one_value_of_an_attribute_is_replaced_without_a_cue() -> None:
    d = decide("The home Wi-Fi password is bluejay-2077.", "fact",
               [cand("pw", "The home Wi-Fi password is sunflower42.", kind="fact")], MergePolicy(), LATER)
    assert d.action == "supersede" and d.scores["pw"]["why"] == "one attribute of one subject took a new value"
    allergy = decide("I am allergic to shellfish.", "fact", [cand("p", "I am allergic to penicillin.", kind="fact")],
                     MergePolicy(), LATER)  # "I am" names no attribute, and allergies are many
    assert allergy.action == "add"


@pytest.mark.parametrize("old, new, verdict", [
    ("My boss is Ana.", "My boss is Ben.", "replaces"),                       # a name for a name
    ("My timezone is PST.", "My timezone is CET.", "replaces"),
    ("My car is a Civic.", "My car is a Tesla Model 3.", "replaces"),        # "a ..." for "a ..."
    ("My manager is Priya.", "My manager is out sick today.", "coexists"),  # a state of the same manager
    ("My car is a Civic.", "My car is in the shop.", "coexists"),
    ("My brother is Tom.", "My brother is Max.", "coexists"),               # a relative: there may be two
    ("Ana likes vim.", "Ben likes vim.", "coexists"),                       # another name opens the statement
])
def test_a_one_word_attribute_takes_a_value_of_the_same_form(old: str, new: str, verdict: str) -> None:
    assert read(old, new, "fact").verdict == verdict


def test_a_person_named_in_the_value_of_one_attribute_is_the_value_not_another_subject() -> None:
    r = read("My emergency contact is my sister Ana.", "My emergency contact is my brother Luis.", "fact")
    assert r.verdict == "replaces" and not r.other_subject
    other = read("My sister's favourite colour is blue.", "My brother's favourite colour is green.", "fact")
    assert other.verdict == "coexists" and other.other_subject


def test_a_number_that_names_the_thing_or_two_numbers_apart_are_not_one_value_changing() -> None:
    assert read("Room 4 has a projector.", "Room 7 has a projector.", "fact").verdict == "uncertain"
    assert read("一楼的租客没养宠物。", "三楼的租客没养宠物。", "fact").verdict == "uncertain"
    assert read("Sample S-14 is stored in freezer 2.", "Sample S-19 is stored in freezer 4.", "fact").verdict == "uncertain"
    assert read("The database backup job runs at 2am on Sunday.", "The database backup job runs at 3am on Monday.",
                "rule").verdict == "replaces"


@pytest.mark.parametrize("old, new, kind", [
    ("病人每天打胰岛素10个单位。", "病人的胰岛素自今天起加到12个单位。", "fact"),  # 自……起 "from ... on", 加到 "raised to"
    ("客户开通了自动续费。", "客户把自动续费关掉了。", "fact"),
    ("The customer is subscribed to the newsletter.", "The customer opted out of the newsletter.", "fact"),
    ("周日下午在中庭办跳蚤市场。", "周日的跳蚤市场停办。", "event"),
    ("Grandpa plans to fly to Manila in December.", "Grandpa's December trip to Manila is off.", "event"),
    ("Mom's birthday dinner is on the 21st.", "Oops, Mom's birthday dinner is the 23rd, I mixed up the date.", "event"),
    ("周日约了老同学吃火锅。", "周日的火锅黄了，他临时要加班。", "event"),
])
def test_change_words_of_both_languages_replace(old: str, new: str, kind: str) -> None:
    assert read(old, new, kind).verdict == "replaces"


def test_a_correction_is_about_the_same_thing_even_when_only_the_old_text_names_the_person() -> None:
    assert read("女儿的家长会是周四下午。", "记错了，家长会是周五下午，不是周四。", "event").verdict == "replaces"
    # without a correction, a person opening one side only is another subject
    assert read("女儿的家长会是周四下午。", "家长会改到周五下午了。", "event").verdict == "coexists"


def test_a_cancellation_word_inside_a_longer_phrase_is_not_a_cancellation() -> None:
    # 停了半天水: the water was off for half a day, another happening on the same Saturday
    assert read("上周六小区做了消防演练。", "上周六小区停了半天水。", "event").verdict == "coexists"
    assert read("周六的读书会。", "周六的读书会停了。", "event").verdict == "replaces"


def test_a_retraction_replaces_unless_it_names_something_the_old_text_does_not() -> None:
    assert read("The user smokes about half a pack a day.", "The user quit smoking in January.", "fact").verdict == "replaces"
    assert read("Every commit must be signed with GPG.", "Commits no longer need to be GPG-signed.", "rule").verdict == "replaces"
    assert read("每个 commit 都必须 GPG 签名。", "commit 不再强制要求 GPG 签名。", "rule").verdict == "replaces"
    assert read("I like getting a daily summary email.", "Please stop the daily summary emails.", "preference").verdict == "replaces"
    # another drink is retracted, not the coffee
    assert read("I drink two cups of coffee a day.", "I no longer drink soda.", "preference").verdict == "uncertain"


def test_an_occasion_told_with_another_time_is_moved_a_happening_with_another_date_may_be_another() -> None:
    assert read("The sprint demo is on Thursday at 2pm.", "The sprint demo is on Friday at 11am.", "event").verdict == "replaces"
    assert read("迭代评审会定在周四下午两点。", "迭代评审会定在周五上午十一点。", "event").verdict == "replaces"
    assert read("Went hiking with Anna on Saturday.", "Went hiking with Anna on Sunday.", "event").verdict == "uncertain"


def test_a_delay_asked_for_reschedules_the_occasion_it_names() -> None:
    old = "The roof inspection is on June 3 at 9am."
    moved = "The contractor asked for a delay, so the roof inspection happens June 10 at 1pm."
    assert read(old, moved, "event").verdict == "replaces"
    other = "The plumber asked for a delay, so the boiler repair happens June 10 at 1pm."
    assert read(old, other, "event").verdict == "coexists"


def test_a_role_of_one_holder_takes_a_new_holder_a_shared_role_does_not() -> None:
    r = read("Marco is the tech lead of the search team.", "Aisha is the tech lead of the search team.", "fact")
    assert r.verdict == "replaces"
    assert read("Marco is a member of the search team.", "Aisha is a member of the search team.", "fact").verdict == "coexists"
    assert read("Marco is the tech lead of the search team.", "Aisha is the tech lead of the infra team.",
                "fact").verdict == "coexists"


def test_how_strongly_a_rule_binds_and_why_it_holds_are_not_what_it_is_about() -> None:
    r = read("每晚的 ETL 任务要在早上6点前跑完。", "每晚的ETL任务必须在凌晨4点半之前跑完，这样早会之前看到的报表都是最新的。", "rule")
    assert r.verdict == "replaces" and r.why == "a time, date or amount changed"
    assert read("孩子每天玩手机不超过30分钟。", "孩子每天玩手机不超过1小时。", "rule").verdict == "replaces"


def test_a_change_cue_reaches_a_topic_told_in_fewer_shared_characters() -> None:
    # 婆婆 and 医保 are two words shared, written in four characters (three distinct)
    assert read("婆婆的医保在老家参保。", "婆婆的医保已经转到上海了。", "fact").verdict == "replaces"


def test_a_chinese_switch_to_another_thing_of_the_same_verb_replaces() -> None:
    # 改坐 / 改吃: "now takes", "now eats"; the verb stays shared with the old statement
    assert read("我通勤坐公交车。", "我通勤改坐地铁了。", "preference").verdict == "replaces"
    assert read("我早饭一般吃包子。", "我早饭改吃燕麦了。", "preference").verdict == "replaces"
    # 改善 (improve) switches nothing
    assert not read("我早饭一般吃包子。", "食堂改善了早饭的包子。", "preference").change_cue


def test_a_change_cue_reaches_a_chinese_topic_of_three_shared_characters() -> None:
    # 周会 and one more character: less than two words, yet the cancellation is about the same meeting
    assert read("团队周会在每周一上午。", "周会取消了，以后改成线上同步。", "rule").verdict == "replaces"
    # 今年 is a time, not something else the retraction names
    assert read("老王每周去健身房练三次。", "老王今年三月起不去健身房了。", "fact").verdict == "replaces"


@pytest.mark.parametrize("old, new, kind, verdict", [
    ("Write the release notes in English.", "Write the release notes in German.", "rule", "replaces"),
    ("Paint the fence dark brown.", "Paint the fence white.", "intent", "replaces"),
    ("我们的官网默认显示简体中文。", "我们的官网默认显示繁体中文。", "rule", "replaces"),
    ("卧室的墙刷成米色。", "卧室的墙刷成浅蓝色。", "intent", "replaces"),
    ("The gym is quietest before 7am.", "The gym is quietest after 9 pm.", "fact", "replaces"),  # a time, placed
    ("I drink green tea after lunch.", "I drink black tea after lunch.", "preference", "uncertain"),  # a sort of tea
    ("I run in the morning.", "I run after work.", "preference", "replaces"),  # a time of the day, placed by a word
    ("Team lunch is on Friday.", "Team dinner is on Friday.", "event", "coexists"),  # a meal that is the occasion
    ("前台的值班时间是8点到17点。", "前台的值班时间是9点到18点。", "fact", "replaces"),  # one range of times
    ("My son speaks French.", "My son speaks Italian.", "fact", "coexists"),  # languages spoken are many
    ("我会说英语。", "我会说日语。", "fact", "coexists"),
])
def test_a_colour_a_language_or_a_time_for_another_is_a_new_value(old: str, new: str, kind: str, verdict: str) -> None:
    assert read(old, new, kind).verdict == verdict


@pytest.mark.parametrize("old, new, verdict", [
    ("The search service runs Elasticsearch version 7.", "The search service is on Elasticsearch version 8.", "replaces"),
    ("The worker pool of the ingest service holds 8 threads.", "The ingest service worker pool holds 16 threads.",
     "replaces"),
    # a word the old text lacks may say which one it is about
    ("The worker pool of the ingest service holds 8 threads.",
     "The ingest service worker pool holds 16 threads on staging.", "uncertain"),
    # what is left out may be what the statement was about
    ("The Q1 budget is 40k.", "The budget is 60k.", "uncertain"),
])
def test_a_statement_told_again_in_other_words_with_another_amount_replaces(old: str, new: str, verdict: str) -> None:
    assert read(old, new, "fact").verdict == verdict


@pytest.mark.parametrize("old", [
    "王磊 下周二去深圳出差，周五晚上回来，详情见 飞书 里的讨论",
    "Priya signed off on the quarterly access review for the payments cluster, the audit log export, the backup "
    "retention change and the on-call runbook updates after the Tuesday standup in Berlin.",
])
def test_a_long_statement_about_another_person_is_not_a_restatement(old: str) -> None:
    # one name in a long shared text: the search tokens' Jaccard reaches the restatement bar
    new = old.replace("王磊", "李娜").replace("Priya", "Omar")
    r = read(old, new, "fact")
    assert r.jaccard >= 0.9 and r.verdict == "coexists" and r.other_subject


@pytest.mark.parametrize("old, new, verdict", [
    ("My doctor is Anna Smith.", "My doctor is John Lee.", "replaces"),           # one word of three shared
    ("My address is 12 Baker Street, London.", "My address is 7 Elm Road, Leeds.", "replaces"),
    ("My car is a red Honda Civic.", "My car is a Tesla Model 3.", "replaces"),
    ("My doctor is Anna Smith.", "My doctor is very patient.", "coexists"),       # a state, not a value
    ("My brother is Tom Smith.", "My brother is Max Lee.", "coexists"),           # a relative: there may be two
])
def test_one_attribute_with_values_of_one_form_is_read_however_little_the_values_share(old: str, new: str,
                                                                                        verdict: str) -> None:
    assert read(old, new, "fact").verdict == verdict
    # the write path's filters let the pair through to that reading
    assert could_merge(new, old, "fact", MergePolicy())
    index = Mergeable("fact", MergePolicy())
    index.add(old, "o")
    assert index.any(new) == (verdict != "coexists")


def test_a_judge_settles_only_the_uncertain_pairs() -> None:
    old, new = OLD_PLAN, NEW_PLAN
    policy = MergePolicy()
    assert decide(new, "fact", [cand("t", old, kind="fact")], policy, LATER, {"t": True}).action == "supersede"
    assert decide(new, "fact", [cand("t", old, kind="fact")], policy, LATER, {"t": False}).action == "add"
    assert decide(new, "fact", [cand("t", old, kind="fact")], policy, LATER, {"t": None}).action == "uncertain"
    allergy = decide("I am allergic to shellfish as well.", "fact",
                     [cand("p", "I am allergic to penicillin.", kind="fact")], policy, LATER, {"p": True})
    assert allergy.action == "add"  # the judge is not asked about, nor can it flip, a pair the reading settled


def test_restatement_is_a_duplicate_and_kinds_must_match() -> None:
    same = "每天最多发布一篇文章"
    assert decide(same, "rule", [cand("x", same, 9.0)], MergePolicy()).action == "duplicate"
    assert decide(same, "fact", [cand("x", same, 9.0)], MergePolicy()).action == "add"


def test_events_are_replaced_only_by_a_reschedule_or_a_cancellation() -> None:
    a = "Hiking on Mount Tai with Anna on Saturday"
    assert decide("Hiking on Mount Tai with Anna on Sunday", "event", [cand("x", a, kind="event")],
                  MergePolicy(), LATER).action == "uncertain"  # another hike, or the same one moved?
    assert decide("Dinner with Anna on Sunday", "event", [cand("x", a, kind="event")],
                  MergePolicy(), LATER).action == "add"
    assert decide("Hiking on Mount Tai with Anna moved to Sunday", "event", [cand("x", a, kind="event")],
                  MergePolicy(), LATER).action == "supersede"
    assert decide("Hiking on Mount Tai with Anna is cancelled", "event", [cand("x", a, kind="event")],
                  MergePolicy(), LATER).action == "supersede"
    assert decide(a, "event", [cand("x", a, kind="event")], MergePolicy()).action == "duplicate"


def test_never_supersede_kinds_are_only_deduplicated() -> None:
    policy = MergePolicy(never_supersede=("rule",))
    assert decide(NEW, "rule", [cand("old", OLD)], policy, LATER).action == "add"
    assert decide(OLD, "rule", [cand("old", OLD)], policy, LATER).action == "duplicate"


def test_disabled_policy_always_adds_and_bad_policy_is_refused() -> None:
    assert decide(OLD, "rule", [cand("x", OLD, 99.0)], MergePolicy(enabled=False)).action == "add"
    with pytest.raises(ConfigError):
        MergePolicy(min_overlap=0)
    with pytest.raises(ConfigError):
        MergePolicy(candidates=0)


WORDS = ["deploy", "friday", "billing", "window", "redis", "cache", "部署", "缓存", "18:00", "20:00", "team", "coffee",
         "now", "instead", "also", "not", "moved", "改成", "也", "sister", "allergic", "is", "my", "是", "lives in",
         "according to the onboarding call", "(据周会纪要)", "doctor", "Ana Smith", "John Lee", "a Honda Civic"]


@given(a=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), b=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
       kind=st.sampled_from(["rule", "event"]), min_overlap=st.sampled_from([0.3, 0.5, 0.95]),
       dup_overlap=st.sampled_from([0.4, 0.9]))
def test_could_merge_lets_through_every_pair_decide_does_not_simply_add(a, b, kind, min_overlap, dup_overlap) -> None:
    """The write path's batching and settle filter (could_merge) never rules out a pair that decide would
    merge, supersede or link as uncertain, in either order of time."""
    policy = MergePolicy(min_overlap=min_overlap, dup_overlap=dup_overlap)
    new, old = " ".join(a), " ".join(b)
    for valid_from in ("2025-01-01T00:00:00Z", LATER):
        if decide(new, kind, [cand("o", old, kind=kind, valid_from="2026-01-01T00:00:00Z")], policy, valid_from).action != "add":
            assert could_merge(new, old, kind, policy)
            assert conflict(new, old, kind, policy) and conflict(old, new, kind, policy)


def test_the_batching_measure_reads_the_topic_without_provenance_as_the_decision_does() -> None:
    """A long provenance clause on one side must not hide a pair the decision reads on the rest of the
    texts (here "with more detail": a replacement) from the batching and settle filter."""
    old, new = "deploy friday (据周会纪要)", "deploy friday window according to the weekly onboarding sync call notes"
    assert decide(new, "rule", [cand("o", old, kind="rule", valid_from="2026-01-01T00:00:00Z")], MergePolicy(), LATER).action == "supersede"
    assert could_merge(new, old, "rule", MergePolicy()) and conflict(new, old, "rule", MergePolicy())


def test_one_template_with_other_values_is_two_facts_the_batching_need_not_separate() -> None:
    """Memories of one frame with two slots changed share a topic (could_merge) but read as two facts:
    no conflict, so a long write puts them in one batch."""
    a, b = "Ana prefers vim for the apollo project", "Ben prefers emacs for the apollo project"
    assert could_merge(a, b, "preference", MergePolicy())
    assert decide(b, "preference", [cand("o", a, kind="preference")], MergePolicy(), LATER).action == "add"
    assert not conflict(a, b, "preference", MergePolicy())


@given(earlier=st.lists(st.lists(st.sampled_from(WORDS), max_size=6), max_size=8),
       new=st.lists(st.sampled_from(WORDS), max_size=6), kind=st.sampled_from(["rule", "event"]),
       min_overlap=st.sampled_from([0.3, 0.5, 0.95]), dup_overlap=st.sampled_from([0.4, 0.9]),
       gone=st.sets(st.integers(0, 7)), back=st.sets(st.integers(0, 7)))
def test_mergeable_answers_conflict_against_every_added_content(earlier, new, kind, min_overlap, dup_overlap,
                                                                   gone, back) -> None:
    """The token index a long write keeps per group says yes exactly when some pair conflicts, leaving
    out what was discarded (a memory the write retired) unless it was added again."""
    policy = MergePolicy(min_overlap=min_overlap, dup_overlap=dup_overlap)
    index = Mergeable(kind, policy)
    for n, words in enumerate(earlier):
        index.add(" ".join(words), f"m{n}")
    for n in gone:
        index.discard(f"m{n}")
    for n in back:
        index.add(" ".join(earlier[n]) if n < len(earlier) else "", f"m{n}")
    alive = [w for n, w in enumerate(earlier) if n not in gone or n in back]
    assert index.any(" ".join(new)) == any(conflict(" ".join(new), " ".join(w), kind, policy) for w in alive)


def test_conversation_turns_are_only_deduplicated() -> None:
    """A transcript records what was said: a turn that says "now" or "instead" replaces nothing."""
    said = "Mia: the book club meets on Tuesdays"
    turn = "Mia: actually the book club now meets on Thursdays instead"
    assert decide(turn, "event", [cand("t", said, kind="event")], MergePolicy(), LATER).action == "supersede"
    assert decide(turn, "event", [cand("t", said, kind="event")], MergePolicy(), LATER, turn=True).action == "add"
    threaded = Candidate("t", 5.0, {"content": said, "kind": "event", "valid_from": "2026-01-01T00:00:00Z", "thread": "s1"})
    assert decide(turn, "event", [threaded], MergePolicy(), LATER).action == "add"
    assert decide(said, "event", [threaded], MergePolicy(), LATER, turn=True).action == "duplicate"


def test_the_compiled_alignment_is_the_one_difflib_makes() -> None:
    """The reading aligns with cydifflib where a wheel of it exists: every labelled pair's alignment,
    both ways round, must be difflib's, so that which one is installed never changes a decision."""
    assert pairs._ALIGNER is cydifflib
    compared = 0
    for path in sorted((Path(__file__).resolve().parents[1] / "datasets").glob("merge_pairs*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            p = json.loads(line)
            a, b = pairs._read_text(p["old"]).plain, pairs._read_text(p["new"]).plain
            for x, y in ((a, b), (b, a)):
                compiled = [tuple(op) for op in cydifflib.SequenceMatcher(None, x, y, autojunk=False).get_opcodes()]
                assert compiled == difflib.SequenceMatcher(None, x, y, autojunk=False).get_opcodes(), (x, y)
                compared += 1
    assert compared > 1000
