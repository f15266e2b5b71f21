"""Regular expressions that keep the GIL while they match.

esmem matches with the `regex` module where the standard `re` falls short (Unicode word boundaries,
script properties such as \\p{Han}). `regex` releases the GIL during every match on a `str`, and in a
process where other threads run Python (an `esmem serve` worker pool, an agent with a store per
thread, a recall's background write-back) the thread that released it queues behind them to get it
back. One `split` of a 65-character memory on word boundaries, three other threads busy in Python:
6.8 ms with the release, 0.005 ms without; a remember with two busy threads, 628-835 ms against
140-173 ms (docs/results/benchmark.md, "Regular expressions and threads"). esmem matches short
texts (a memory, a query, a pair of them), far quicker than a hand-off, so every pattern here
matches with `concurrent=False`.
"""
from __future__ import annotations

from typing import Callable, Iterator

import regex

IGNORECASE = regex.IGNORECASE
escape = regex.escape
Match = regex.Match


class Pattern:
    """A compiled `regex` pattern whose matching methods keep the GIL (same arguments and results)."""

    __slots__ = ("compiled",)

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.compiled = regex.compile(pattern, flags)

    def search(self, string: str, pos: int = 0) -> regex.Match[str] | None:
        return self.compiled.search(string, pos, concurrent=False)

    def match(self, string: str, pos: int = 0) -> regex.Match[str] | None:
        return self.compiled.match(string, pos, concurrent=False)

    def fullmatch(self, string: str) -> regex.Match[str] | None:
        return self.compiled.fullmatch(string, concurrent=False)

    def finditer(self, string: str) -> Iterator[regex.Match[str]]:
        return self.compiled.finditer(string, concurrent=False)

    def findall(self, string: str) -> list[str]:
        return list(self.compiled.findall(string, concurrent=False))

    def split(self, string: str) -> list[str]:
        return list(self.compiled.split(string, concurrent=False))

    def sub(self, repl: str | Callable[[regex.Match[str]], str], string: str, count: int = 0) -> str:
        return str(self.compiled.sub(repl, string, count, concurrent=False))
