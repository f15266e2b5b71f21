"""A pluggable merge judge: a caller with an LLM decides whether a new memory updates a candidate.

Without a judge esmem's lexical rule decides supersede (esmem/domain/merge.py), which misses updates
phrased differently from what they replace. A judge gets a batch of questions - the new memory, one
merge candidate the lookup found (lexical leg, and the kNN leg when an embedder is configured), their
kind - and answers one verdict per question: True = the new memory replaces that candidate (it is no
longer true or in force), False = both stay true (they coexist), None = the judge cannot tell (the pair
stays undecided; a judge also answers None for a question its backend failed on). It replaces only the
supersede rule: restatements (Jaccard >= dup_overlap) stay duplicates without asking, and kinds in
`never_supersede` are never superseded. A ready-made judge for OpenAI-compatible chat endpoints:
esmem/domain/llm_judge.py.

Like the importance scorer (esmem/domain/importance.py), every answer is checked before anything is
written: a judge that raises, answers for the wrong number of questions or answers anything but
True, False or None fails the write with JudgeError, and the memories of that write are not stored.
The writer has no "undecided" outcome yet, so it asks strictly: a None fails its write too.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence, overload

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


MergeJudge = Callable[[Sequence[Question]], Sequence[bool | None]]


@overload
def ask(judge: MergeJudge, questions: Sequence[Question], *, strict: Literal[True]) -> list[bool]: ...


@overload
def ask(judge: MergeJudge, questions: Sequence[Question], *, strict: bool = False) -> list[bool | None]: ...


def ask(judge: MergeJudge, questions: Sequence[Question], *, strict: bool = False) -> list[bool | None] | list[bool]:
    """Run the judge and check what it returned; a failing judge never yields a decision. `strict`:
    None (cannot tell) is refused too, for a caller that has no undecided outcome."""
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
    allowed = "True or False" if strict else "True, False or None"
    for a in answers:
        if not (isinstance(a, bool) or (a is None and not strict)):
            raise JudgeError(f"merge judge returned {a!r}; answers must be {allowed}")
    return answers


def verdicts(judge: MergeJudge, items: Sequence[tuple[str, str, Sequence[Candidate]]], policy: MergePolicy,
             known: dict[tuple[str, str], bool]) -> list[dict[str, bool]]:
    """The judge's answer for every judgeable candidate of each (content, kind, candidates) item, in
    one call for the questions `known` (content, candidate id -> answer) does not answer yet."""
    todo: dict[tuple[str, str], Question] = {}
    for content, kind, cands in items:
        for c in judgeable(content, kind, cands, policy):
            if (content, c.id) not in known:
                todo.setdefault((content, c.id), Question(content, str(c.source["content"]), kind))
    known.update(zip(todo, ask(judge, list(todo.values()), strict=True)))
    return [{c.id: known[(content, c.id)] for c in judgeable(content, kind, cands, policy)}
            for content, kind, cands in items]
