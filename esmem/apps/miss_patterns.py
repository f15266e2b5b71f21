"""Why a question's top-1 is not its gold: three patterns counted by `esmem eval`.

- question turn: the top-1 asks (a larger share of question sentences than any gold memory),
  so it echoes the question's words instead of answering it;
- another speaker: the query names an entity of a gold memory (its speaker or subject) and the
  top-1 does not carry that entity;
- compound variant: the query and a gold memory share a word only as a compound or spelling
  variant ("smartwatch"/"smart watch", "e-mail"/"email"), which the analyzer does not join.

The patterns can overlap; each count is of queries whose top-1 is not gold."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import regex

from esmem.domain.questions import asks

if TYPE_CHECKING:
    from esmem.apps.evaluate import Dataset, QueryOutcome
    from esmem.domain.types import MemoryInput

PATTERNS = ("question_turn", "other_speaker", "compound_variant")
_WORD = regex.compile(r"[\p{L}\p{N}]+(?:['\u2019\-\u2010\u2011][\p{L}\p{N}]+)*")  # keeps "e-mail", "it's"
_CJK = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
MIN_COMPOUND = 5  # a join shorter than this ("a"+"n") is a coincidence, not a compound


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _joined(words: Sequence[str]) -> set[str]:
    """Hyphenated words without their hyphens, and each two adjacent words written as one."""
    out = {regex.sub(r"[-\u2010\u2011]", "", w) for w in words if regex.search(r"[-\u2010\u2011]", w)}
    out |= {a + b for a, b in zip(words, words[1:])}
    return {w for w in out if len(w) >= MIN_COMPOUND}


def compound_variant(query: str, memory: str) -> bool:
    """The query and the memory share a word that one of them writes as a compound or hyphenated."""
    q, m = _words(query), _words(memory)
    return bool((_joined(q) & set(m)) | (set(q) & _joined(m)))


def names(query: str, entity: str) -> bool:
    """The query names the entity: as a whole word, or (CJK) as a substring."""
    e = entity.strip().lower()
    if not e:
        return False
    if _CJK.search(e):
        return e in query.lower()
    return regex.search(rf"(?<![\p{{L}}\p{{N}}]){regex.escape(e)}(?![\p{{L}}\p{{N}}])", query.lower()) is not None


def count(outcomes: Sequence[QueryOutcome], dataset: Dataset) -> dict[str, int]:
    """Per pattern, the queries whose top-1 is not gold and that show it."""
    memories: dict[str, MemoryInput] = dict(dataset.memories)
    counts = dict.fromkeys(PATTERNS, 0)
    for o in outcomes:
        gold = [memories[g] for g in o.query.gold if g in memories]
        if not gold or not o.ranked or not o.ranked[0] or o.ranked[0] & set(o.query.gold):
            continue
        top = memories[sorted(o.ranked[0])[0]]
        if asks(top.text) > max(asks(g.text) for g in gold):
            counts["question_turn"] += 1
        named = {e for g in gold for e in g.entities if names(o.query.text, e)}
        if named and not named & set(top.entities):
            counts["other_speaker"] += 1
        if any(compound_variant(o.query.text, g.text) for g in gold):
            counts["compound_variant"] += 1
    return counts
