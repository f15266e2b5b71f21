"""The shape of the labelled merge-pair sets: big enough, both languages, every kind, no repeats.

A merge rule measured on these files is only meaningful if each holds both labels in both languages
for every memory kind, and no pair is counted twice; the held-out files must not reuse the main
file's pairs (nor each other's), or they would not check a rule on unseen wording.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from esmem.apps.merge_pairs import LABELS, Pair, load_pairs

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
MAIN = DATASETS / "merge_pairs.jsonl"
HOLDOUT = DATASETS / "merge_pairs_holdout.jsonl"
BLIND = DATASETS / "merge_pairs_blind.jsonl"
KINDS = ("fact", "preference", "rule", "event", "intent")


@pytest.mark.parametrize(("path", "at_least"), [(MAIN, 320), (HOLDOUT, 100), (BLIND, 160)],
                         ids=["main", "holdout", "blind"])
def test_each_set_is_big_enough_and_covers_every_language_kind_and_label(path: Path, at_least: int) -> None:
    pairs = load_pairs(path)
    assert len(pairs) >= at_least
    langs = Counter(p.lang for p in pairs)
    assert set(langs) == {"en", "zh"}
    assert all(n >= 0.4 * len(pairs) for n in langs.values()), langs
    assert {(p.lang, p.kind) for p in pairs} == {(lang, kind) for lang in ("en", "zh") for kind in KINDS}
    assert {(p.lang, p.label) for p in pairs} == {(lang, label) for lang in ("en", "zh") for label in LABELS}


@pytest.mark.parametrize("path", [MAIN, HOLDOUT, BLIND], ids=["main", "holdout", "blind"])
def test_every_pair_is_typed_distinct_and_two_different_texts(path: Path) -> None:
    pairs = load_pairs(path)
    assert all(p.type.strip() for p in pairs)
    assert all(p.old.strip() and p.new.strip() and p.old != p.new for p in pairs)
    repeated = [key for key, n in Counter((p.old, p.new) for p in pairs).items() if n > 1]
    assert not repeated


def test_the_held_out_sets_share_no_pair_with_each_other_or_the_main_set() -> None:
    def keys(pairs: list[Pair]) -> set[tuple[str, str]]:
        return {(p.old, p.new) for p in pairs}

    main, holdout, blind = (keys(load_pairs(p)) for p in (MAIN, HOLDOUT, BLIND))
    assert not main & holdout and not main & blind and not holdout & blind
