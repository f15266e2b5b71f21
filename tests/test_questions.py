"""`asks`: the share of a memory's text in sentences that end with a question mark."""
from __future__ import annotations

import pytest

from esmem.domain.questions import asks


def test_a_short_exclamation_does_not_make_a_question_half_a_statement() -> None:
    # 25 letters in the question, 3 in "Wow"
    assert asks("Wow! How long have you been surfing?") == pytest.approx(25 / 28, abs=1e-3)


def test_a_statement_that_ends_by_asking_back_mostly_states() -> None:
    text = "We went to the parade last week, it was packed. Have you been?"
    assert asks(text) == pytest.approx(11 / 47, abs=1e-3)


def test_every_sentence_asks_or_none_does() -> None:
    assert asks("Which flowers are in the tattoo?") == 1.0
    assert asks("They are sunflowers. I love them!") == 0.0
    assert asks("") == 0.0 and asks("?!") == 0.0  # no letters or digits: nothing asks


def test_cjk_questions_count_their_characters_and_full_width_marks() -> None:
    assert asks("你去过吗？我上周去了游行，非常热闹。") == pytest.approx(4 / 15, abs=1e-3)
    assert asks("周末去哪里？") == 1.0


def test_text_without_a_question_mark_is_read_as_the_sentences_would_read_it() -> None:
    """Text with no question mark is 0 without being split into sentences: the same as reading them."""
    import random

    from esmem.domain.questions import _share

    rng = random.Random(20261205)
    pieces = ["What", "is", "it", "?", "？", "!", ".", "。", "…", "你好", "吗", "42", " ", " ", "，"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(2000)]
    assert [asks(t) for t in texts] == [_share(t) for t in texts]
    assert any(asks(t) > 0 for t in texts) and any(asks(t) == 0 and any(c.isalnum() for c in t) for t in texts)
