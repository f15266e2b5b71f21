"""Whether a memory asks rather than states: the share of its text in sentences that are questions.

A turn that asks ("What kind are they?") shares the words of a question about the same thing, so
plain BM25 can rank it above the turn that answers. The writer stores this share as `asks` (0..1)
and the `recall` template damps such a memory's relevance by `1 - question_penalty * asks`
(painless/fuse.painless, `esmem.domain.ranking.answer_factor`). Language-neutral: a sentence is a
question when it ends with a question mark, ASCII or full-width. The share counts letters and digits,
not sentences: "Wow! How long have you been surfing?" asks (0.893), "We went to the parade last week, it
was packed. Have you been?" mostly states (0.234); counted by sentences, both would be 0.5.
"""
from __future__ import annotations

from esmem.domain.patterns import Pattern

# A sentence: text up to its run of terminators (. ! ? … and the CJK full stops), or the end.
_SENTENCE = Pattern(r"[^.!?\u2026\u3002\uff01\uff1f\uff0e]+([.!?\u2026\u3002\uff01\uff1f\uff0e]*)")
_WORD = Pattern(r"[\p{L}\p{N}]")
_QUESTION_MARKS = ("?", "\uff1f")


def asks(content: str) -> float:
    """The share of the letters and digits of `content` that are in sentences ending with a question
    mark, rounded to 3 decimals; 0 for text without any. Every write derives it, and most memories
    hold no question mark: that text is 0 without reading its sentences (6 µs a memory on the bench
    corpus)."""
    if not any(q in content for q in _QUESTION_MARKS):
        return 0.0
    return _share(content)


def _share(content: str) -> float:
    total = questions = 0
    for m in _SENTENCE.finditer(content):
        size = len(_WORD.findall(m.group(0)))
        total += size
        if any(q in m.group(1) for q in _QUESTION_MARKS):
            questions += size
    return round(questions / total, 3) if total else 0.0
