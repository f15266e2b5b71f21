"""What the GIL hand-off of a `regex` match costs a remember and a recall when other threads run Python.

esmem/domain/patterns.py matches with `concurrent=False` (the thread keeps the GIL). This script puts
the `regex` module's default back (the GIL released around every match) for one variant, and times
one thread remembering (with merge) and recalling, while 0 or 2 other threads of the process run
Python (a busy loop, standing for an agent's own work), alternating the variants, two rounds. Then
one word-boundary split of a 40-character memory with three busy threads, both ways.

    PYTHONPATH=. python docs/results/regex_gil.py $ESMEM_URL 20000 > docs/results/regex-gil.txt
"""
import statistics
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

import regex

from esmem.apps.bench import generate
from esmem.domain import patterns
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from esmem.index.install import uninstall

URL, SIZE = sys.argv[1], int(sys.argv[2])
PREFIX, CALLS = "regex-gil", 40
KEPT = {name: getattr(patterns.Pattern, name) for name in ("search", "match", "fullmatch", "finditer", "findall",
                                                           "split", "sub")}
RELEASED: dict[str, Any] = {
    "search": lambda self, string, pos=0: self.compiled.search(string, pos),
    "match": lambda self, string, pos=0: self.compiled.match(string, pos),
    "fullmatch": lambda self, string: self.compiled.fullmatch(string),
    "finditer": lambda self, string: self.compiled.finditer(string),
    "findall": lambda self, string: list(self.compiled.findall(string)),
    "split": lambda self, string: list(self.compiled.split(string)),
    "sub": lambda self, repl, string, count=0: str(self.compiled.sub(repl, string, count)),
}


def variant(methods: dict[str, Any]) -> None:
    for name, method in methods.items():
        setattr(patterns.Pattern, name, method)


@contextmanager
def busy(threads: int) -> Iterator[None]:
    stop = threading.Event()

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    running = [threading.Thread(target=spin, daemon=True) for _ in range(threads)]
    for t in running:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in running:
            t.join()


def main() -> None:
    engine = Engine(URL)
    corpus = generate(SIZE + 8 * CALLS * 2, 1, 0)
    items = corpus.inputs()
    uninstall(engine, PREFIX)
    install(engine, PREFIX)
    try:
        MemoryStore(engine, PREFIX, merge=MergePolicy(enabled=False)).remember_many(items[:SIZE])
        engine.request("POST", f"/{PREFIX}-memories/_refresh")
        store = MemoryStore(engine, PREFIX)
        writes = iter(items[SIZE:])
        print(f"{engine.info}, {SIZE} memories in one namespace; {CALLS} remembers (with merge) and recalls a row")
        print("other threads   GIL during a match   remember p50 ms   recall p50 ms")
        for threads in (0, 2):
            for _ in range(2):
                for label, methods in (("kept", KEPT), ("released", RELEASED)):
                    variant(methods)
                    remember, recall = [], []
                    with busy(threads):
                        for _ in range(CALLS):
                            m = next(writes)
                            started = time.perf_counter()
                            store.remember_many([m])
                            remember.append((time.perf_counter() - started) * 1000)
                            started = time.perf_counter()
                            store.recall(m.content, m.namespace, 5, touch=False)
                            recall.append((time.perf_counter() - started) * 1000)
                    print(f"{threads:13d}   {label:18s} {statistics.median(remember):17.1f} "
                          f"{statistics.median(recall):15.1f}")
        variant(KEPT)
        text = items[0].content
        words = regex.compile(r"(?V1w)\b")
        print(f"\none word-boundary split of {text!r}, three other threads busy (ms a call, 200 calls)")
        with busy(3):
            for label, kwargs in (("kept", {"concurrent": False}), ("released", {})):
                started = time.perf_counter()
                for _ in range(200):
                    words.split(text, **kwargs)
                print(f"{label:9s} {(time.perf_counter() - started) * 1000 / 200:.3f}")
    finally:
        variant(KEPT)
        uninstall(engine, PREFIX)


if __name__ == "__main__":
    main()
