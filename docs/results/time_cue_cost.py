"""What a write's `tells_time` costs, with and without the checks that stand before its patterns.

Times `esmem.domain.when.tells_time` (the checks first) against the patterns alone (the definition
the checks must agree with) on the bench corpus's memories, the turns of the LoCoMo conversations in
DIR as `esmem eval --locomo` writes them ("speaker: text") and the texts of datasets/*.jsonl, `rounds`
times each; checks that both give the same answer on every text. Prints microseconds a text (best
round).

    python docs/results/time_cue_cost.py DIR 5
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Callable

from esmem.apps import bench
from esmem.apps.evaluate import locomo_dataset
from esmem.domain import when
from esmem.domain.analysis import fold_han


def unchecked(text: str) -> bool:
    text = fold_han(text)
    return bool(when._TELLS_TIME.search(text)) or bool(when._periods(text))


def texts(locomo: Path) -> dict[str, list[str]]:
    turns = [m.content for _, m in locomo_dataset(locomo).memories]  # as `esmem eval --locomo` writes them
    sets = [json.loads(line) for f in sorted(Path("datasets").glob("*.jsonl")) for line in f.read_text().splitlines()
            if line.strip()]
    return {"bench corpus": [m.text for m in bench.generate(20000, 100, 0).inputs()], "LoCoMo turns": turns,
            "datasets": [o[k] for o in sets for k in ("text", "old", "new", "query") if isinstance(o.get(k), str)]}


def best(fn: Callable[[str], bool], items: list[str], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for t in items:
            fn(t)
        times.append((time.perf_counter() - started) / len(items) * 1e6)
    return min(times)


def main(locomo: str, rounds: int) -> None:
    for name, items in texts(Path(locomo)).items():
        told = [when.tells_time(t) for t in items]
        assert told == [unchecked(t) for t in items], name
        print(f"{name:14s} {len(items):6d} texts, {sum(told):5d} tell a time: patterns alone "
              f"{best(unchecked, items, rounds):5.1f} µs, checks first {best(when.tells_time, items, rounds):5.1f} µs")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
