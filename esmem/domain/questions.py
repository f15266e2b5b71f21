"""Whether a memory asks rather than states: the share of its sentences that are questions.

A turn that asks ("What kind are they?") shares the words of a question about the same thing, so
plain BM25 can rank it above the turn that answers. The writer stores this share as `asks` (0..1)
and the `recall` template damps such a memory's relevance by `1 - question_penalty * asks`
(painless/fuse.painless, `esmem.domain.ranking.answer_factor`). Language-neutral: a sentence is a
question when it ends with a question mark, ASCII or full-width.
"""
from __future__ import annotations

from esmem.domain.patterns import Pattern

# A sentence: text up to its run of terminators (. ! ? … and the CJK full stops), or the end.
_SENTENCE = Pattern(r"[^.!?\u2026\u3002\uff01\uff1f\uff0e]+([.!?\u2026\u3002\uff01\uff1f\uff0e]*)")
_WORD = Pattern(r"[\p{L}\p{N}]")
_QUESTION_MARKS = ("?", "\uff1f")


def asks(content: str) -> float:
    """The share of the sentences of `content` (those holding a letter or digit) that end with a
    question mark, rounded to 3 decimals; 0 for text without sentences."""
    sentences = [m.group(1) for m in _SENTENCE.finditer(content) if _WORD.search(m.group(0))]
    if not sentences:
        return 0.0
    questions = sum(1 for end in sentences if any(q in end for q in _QUESTION_MARKS))
    return round(questions / len(sentences), 3)
