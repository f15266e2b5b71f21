"""A pluggable merge judge: a caller with an LLM settles the pairs the merge reading leaves uncertain.

The reading (esmem/domain/pairs.py) decides a pair when the texts say enough: a restatement, a change
cue, another subject, an addition. Where they do not ("My manager is Tom" / "... is Priya" without a
cue, a rule rewritten in several places) it leaves the pair uncertain: both memories stay active and
the newer links the older. A judge gets a batch of those pairs - the new memory, the older candidate,
their kind - and answers one verdict per question: True = the new memory replaces that candidate (it is
no longer true or in force), False = both stay true (they coexist), None = the judge cannot tell (the
pair stays uncertain; a judge also answers None for a question its backend failed on). A ready-made
judge for OpenAI-compatible chat endpoints: esmem/domain/llm_judge.py.

Like the importance scorer (esmem/domain/importance.py), every answer is checked before anything is
written: a judge that raises, answers for the wrong number of questions or answers anything but
True, False or None fails the write with JudgeError, and the memories of that write are not stored.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from esmem.domain.merge import Candidate, MergePolicy, judgeable, ordered
from esmem.errors import ConfigError
from esmem.index.bridge import off_loop


class JudgeError(ConfigError):
    """The merge judge failed or answered garbage; nothing of the write was stored."""


@dataclass(frozen=True)
class Question:
    """Is `new` an update of `old` (the new memory replaces it)?"""

    new: str
    old: str
    kind: str


MergeJudge = Callable[[Sequence[Question]], Sequence[bool | None]]


def ask(judge: MergeJudge, questions: Sequence[Question]) -> list[bool | None]:
    """Run the judge and check what it returned; a failing judge never yields a decision."""
    if not questions:
        return []
    try:
        answers = off_loop(lambda: list(judge(questions)))  # a model's answer: the event loop does not wait on it
    except JudgeError:
        raise
    except Exception as e:
        raise JudgeError(f"merge judge failed: {type(e).__name__}: {e}") from e
    if len(answers) != len(questions):
        raise JudgeError(f"merge judge returned {len(answers)} answers for {len(questions)} questions")
    for a in answers:
        if not (isinstance(a, bool) or a is None):
            raise JudgeError(f"merge judge returned {a!r}; answers must be True, False or None")
    return answers


def verdicts(judge: MergeJudge, items: Sequence[tuple[str, str, str | None, Sequence[Candidate]]],
             policy: MergePolicy, known: dict[tuple[str, str], bool | None],
             turns: Sequence[bool] = ()) -> list[dict[str, bool | None]]:
    """The judge's answer for every judgeable candidate of each (content, kind, valid_from, candidates)
    item (`turns`: which items are conversation turns, never asked about), in one call for the questions
    `known` (content, candidate id -> answer) does not answer yet.
    Each question puts the older of the pair as `old`: a late-arriving memory is asked about as replaced."""
    todo: dict[tuple[str, str], Question] = {}
    turn = list(turns) or [False] * len(items)
    asked = [judgeable(content, kind, cands, policy, valid_from, t)
             for (content, kind, valid_from, cands), t in zip(items, turn)]
    for (content, kind, valid_from, _), cands in zip(items, asked):
        for c in cands:
            if (content, c.id) not in known:
                old, new = ordered(content, valid_from, c)
                todo.setdefault((content, c.id), Question(new, old, kind))
    known.update(zip(todo, ask(judge, list(todo.values()))))
    return [{c.id: known[(content, c.id)] for c in cands} for (content, _, _, _), cands in zip(items, asked)]
