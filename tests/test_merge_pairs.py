"""The labelled merge-pair set and its measurement: the lexical decision on the real engine."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from esmem.domain.merge import MergePolicy
from esmem.errors import InvalidInput
from esmem.apps.merge_pairs import Pair, Scored, groups, load_pairs, precision_recall, report, score_pairs, wrong
from semantic_support import embedder, minilm

DATASET = Path(__file__).resolve().parent.parent / "datasets" / "merge_pairs.jsonl"


def test_the_shipped_set_is_big_enough_and_balanced() -> None:
    pairs = load_pairs(DATASET)
    assert len(pairs) >= 60
    for lang in ("en", "zh"):
        for label in ("update", "different"):
            assert sum(p.lang == lang and p.label == label for p in pairs) >= 15
    assert {p.type for p in pairs} >= {"rule-paraphrase", "reschedule", "preference-change", "hard-negative"}


def test_bad_lines_are_refused(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"old": "a", "new": "b", "kind": "fact", "label": "maybe"}) + "\n")
    with pytest.raises(InvalidInput, match="label"):
        load_pairs(path)
    path.write_text('{"old": "a"}\n')
    with pytest.raises(InvalidInput, match=":1:"):
        load_pairs(path)


def test_precision_recall_by_hand() -> None:
    up, diff = Pair("a", "b", "fact", "update", "en", "x"), Pair("c", "d", "rule", "different", "zh", "y")
    scored = [Scored(up, "superseded", cosine=0.9), Scored(up, "uncertain", cosine=0.8),
              Scored(diff, "duplicate", cosine=0.2), Scored(diff, "added", cosine=0.85)]
    assert precision_recall([s.merged for s in scored], scored) == {
        "precision": 0.5, "recall": 0.5, "merges": 2.0, "true_updates": 2.0, "pairs": 4.0, "uncertain": 1.0}
    rows = {r["criterion"]: r for r in report(scored, [0.8])}
    assert rows["semantic cos>=0.8"]["precision"] == pytest.approx(2 / 3)
    assert rows["semantic cos>=0.8"]["recall"] == 1.0
    assert rows["either (esmem or cos>=0.8)"]["merges"] == 4.0
    assert set(groups(scored)) == {"all", "lang=en", "lang=zh", "kind=fact", "kind=rule", "type=x", "type=y",
                                   "label=update", "label=different"}
    assert wrong(scored) == [scored[1], scored[2]]  # an uncertain update counts as not merged


def test_decisions_come_from_the_engines_write_path(engine) -> None:
    pairs = [Pair("Deploys to production only happen on Fridays.",
                  "Deploys to production only happen on Fridays!", "rule", "update"),  # a restatement: duplicate
             Pair("My laptop is a ThinkPad X1.", "My work phone is a Pixel 8.", "fact", "different"),
             Pair("I am allergic to penicillin.", "I am allergic to shellfish as well.", "fact", "different")]
    def scratch() -> set[str]:
        return {r["index"] for r in engine.request("GET", "/_cat/indices/esmem-pairs-*", params={"format": "json"})}
    before = scratch()  # other runs on a shared engine may hold theirs
    scored = score_pairs(engine, pairs)
    assert [s.action for s in scored] == ["duplicate", "added", "added"]
    assert scored[2].why.startswith("coexists: an additive cue") and all(s.cosine is None for s in scored)
    assert not scratch() - before  # its scratch index is gone


def test_with_an_embedder_each_pair_has_its_own_cosine(engine) -> None:
    pairs = [Pair("Deploys to production only happen on Fridays.",
                  "Deploys to production only happen on Fridays!", "rule", "update"),
             Pair("My laptop is a ThinkPad X1.", "My work phone is a Pixel 8.", "fact", "different")]
    scored = score_pairs(engine, pairs, minilm())
    for s in scored:  # each pair's own two vectors, in order
        a, b = minilm().embed([s.pair.old, s.pair.new])
        assert s.cosine == pytest.approx(sum(x * y for x, y in zip(a, b)), abs=1e-6)
    assert scored[0].cosine > 0.9 and scored[1].cosine < 0.5


def test_with_an_embedder_a_reworded_change_replaces_and_a_cue_about_another_thing_does_not(engine) -> None:
    pairs = [Pair("Every commit must be signed with GPG.", "Commits no longer need to be GPG-signed.", "rule", "update"),
             Pair("我平时无肉不欢。", "我现在已经不吃肉了。", "preference", "update"),  # few shared characters
             Pair("The user lives in Denver.", "The user's brother just moved to Phoenix.", "fact", "different"),
             Pair("I drink two cups of coffee a day.", "I no longer drink soda.", "preference", "different")]
    lexical, semantic = score_pairs(engine, pairs), score_pairs(engine, pairs, minilm())
    assert [s.action for s in lexical] == ["superseded", "added", "added", "uncertain"]
    assert [s.action for s in semantic] == ["superseded", "superseded", "added", "uncertain"]
    assert "the same meaning in other words" in semantic[1].why
    assert min(semantic[0].cosine, semantic[1].cosine) >= MergePolicy().same_meaning > semantic[3].cosine


def test_a_models_cosines_are_read_on_the_merge_scale_so_unrelated_changes_stay_apart(engine) -> None:
    # e5-small-v2 puts two unrelated memories near 0.83: read raw, any text with a change cue would be
    # "the same meaning in other words" as whatever the kNN leg found
    pairs = [Pair("周会改到周四上午 10 点了", "房租改成每月 15 号交了", "event", "different"),
             Pair("Switched from Vim to VS Code last month", "Lunch is now a salad most days", "preference", "different"),
             Pair("Every commit must be signed with GPG.", "Commits no longer need to be GPG-signed.", "rule", "update")]
    scored = score_pairs(engine, pairs, embedder("e5-small-q"))
    assert min(s.cosine for s in scored[:2]) >= MergePolicy().same_meaning  # the raw cosines
    assert [s.action for s in scored] == ["added", "added", "superseded"]
