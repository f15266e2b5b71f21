"""A pluggable merge judge: a caller with an LLM decides whether a new memory updates a candidate.

Without a judge esmem's lexical rule decides supersede (esmem/domain/merge.py), which misses updates
phrased differently from what they replace. A judge gets a batch of questions - the new memory, one
merge candidate the lookup found (lexical leg, and the kNN leg when an embedder is configured), their
kind - and answers one bool per question: True = the new memory replaces that candidate. It replaces
only the supersede rule: restatements (Jaccard >= dup_overlap) stay duplicates without asking, and
kinds in `never_supersede` are never superseded.

Like the importance scorer (esmem/domain/importance.py), every answer is checked before anything is
written: a judge that raises, answers for the wrong number of questions or answers anything but a
bool fails the write with JudgeError, and the memories of that write are not stored.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from esmem.domain.merge import Candidate, MergePolicy, judgeable
from esmem.errors import ConfigError


class JudgeError(ConfigError):
    """The merge judge failed or answered garbage; nothing of the write was stored."""


@dataclass(frozen=True)
class Question:
    """Is `new` an update of `old` (the new memory replaces it)?"""

    new: str
    old: str
    kind: str


MergeJudge = Callable[[Sequence[Question]], Sequence[bool]]


def ask(judge: MergeJudge, questions: Sequence[Question]) -> list[bool]:
    """Run the judge and check what it returned; a failing judge never yields a decision."""
    if not questions:
        return []
    try:
        answers = list(judge(questions))
    except JudgeError:
        raise
    except Exception as e:
        raise JudgeError(f"merge judge failed: {type(e).__name__}: {e}") from e
    if len(answers) != len(questions):
        raise JudgeError(f"merge judge returned {len(answers)} answers for {len(questions)} questions")
    for a in answers:
        if not isinstance(a, bool):
            raise JudgeError(f"merge judge returned {a!r}; answers must be True or False")
    return answers


def verdicts(judge: MergeJudge, items: Sequence[tuple[str, str, str | None, Sequence[Candidate]]],
             policy: MergePolicy, known: dict[tuple[str, str], bool | None]) -> list[dict[str, bool | None]]:
    """The judge's answer for every judgeable candidate of each (content, kind, valid_from, candidates)
    item, in one call for the questions `known` (content, candidate id -> answer) does not answer yet."""
    todo: dict[tuple[str, str], Question] = {}
    asked = [judgeable(content, kind, cands, policy, valid_from) for content, kind, valid_from, cands in items]
    for (content, kind, _, _), cands in zip(items, asked):
        for c in cands:
            if (content, c.id) not in known:
                todo.setdefault((content, c.id), Question(content, str(c.source["content"]), kind))
    known.update(zip(todo, ask(judge, list(todo.values()))))
    return [{c.id: known[(content, c.id)] for c in cands} for (content, _, _, _), cands in zip(items, asked)]
