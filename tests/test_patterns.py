"""Patterns match without handing the GIL to other threads (esmem/domain/patterns.py)."""
from __future__ import annotations

from typing import Any, Callable

import regex

from esmem.domain.patterns import Pattern

TEXT = "周一和 王芳 讨论了安全，决定用 BigQuery，和 Nginx 有关"


class Recording:
    """The compiled pattern, recording the keyword arguments of every call it answers."""

    def __init__(self, compiled: Any) -> None:
        self.compiled, self.calls = compiled, []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.compiled, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            return method(*args, **kwargs)
        return call


def test_every_method_asks_regex_to_keep_the_gil() -> None:
    han = Pattern(r"(\p{Han})(\p{Han})")
    plain = regex.compile(r"(\p{Han})(\p{Han})")
    recording = Recording(han.compiled)
    han.compiled = recording
    assert han.search(TEXT).span() == plain.search(TEXT).span()  # type: ignore[union-attr]
    assert han.match(TEXT).span() == plain.match(TEXT).span()  # type: ignore[union-attr]
    assert han.fullmatch(TEXT) is None and han.fullmatch("王芳") is not None
    assert [m.span() for m in han.finditer(TEXT)] == [m.span() for m in plain.finditer(TEXT)]
    assert han.findall(TEXT) == plain.findall(TEXT)
    assert han.split(TEXT) == plain.split(TEXT)
    assert han.sub(r"\2\1", TEXT) == plain.sub(r"\2\1", TEXT)
    assert {name for name, _ in recording.calls} == {"search", "match", "fullmatch", "finditer", "findall", "split", "sub"}
    assert all(kwargs == {"concurrent": False} for _, kwargs in recording.calls)


def test_word_boundaries_split_as_the_regex_module_does() -> None:
    assert Pattern(r"(?V1w)\b").split(TEXT) == regex.compile(r"(?V1w)\b").split(TEXT)
