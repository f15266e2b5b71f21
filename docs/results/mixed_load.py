"""Why remember stalls under concurrent recall: 4 remember threads alone, then with 16 recall threads,
with the recalls' reheat on (one store per thread, as the library's users run it), off, and on
through one shared store (one reheat writer). For each: latencies, the engine's refresh/search/write
thread pools (sampled every 0.25 s), and where a remember's time goes, per REST call and waiting for a
refresh (a coalesced refresh is waited for without sending one: that wait is not in the REST calls).

    PYTHONPATH=. python docs/results/mixed_load.py http://127.0.0.1:59927 5000 15 > docs/results/mixed-load.txt
"""
import json
import random
import string
import sys
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from statistics import median

from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.index.engine import Engine
from esmem.index.install import uninstall
from esmem.index.refresh import Refreshes

URL, SIZE, SECONDS = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
WRITERS, READERS = 4, 16
rng = random.Random(7)
WORDS = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))) for _ in range(3000)]
local = threading.local()
spent: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])  # (run, call) -> [calls, seconds]
lock = threading.Lock()
_call = Engine._call


def timed(self, method, path, body=None, params=None):  # what each remember spends per REST call
    t = time.perf_counter()
    try:
        return _call(self, method, path, body, params)
    finally:
        if getattr(local, "run", None):
            with lock:
                e = spent[(local.run, f"{method} {path.rsplit('/', 1)[-1]}")]
                e[0] += 1
                e[1] += time.perf_counter() - t


Engine._call = timed
_share = Refreshes.__call__


def shared(self):  # a refresh asked for, sent or joined (coalesced): what the caller waited
    t = time.perf_counter()
    try:
        return _share(self)
    finally:
        if getattr(local, "run", None):
            with lock:
                e = spent[(local.run, "refresh wait (coalesced)")]
                e[0] += 1
                e[1] += time.perf_counter() - t


Refreshes.__call__ = shared


def sentence(r: random.Random) -> str:
    return " ".join(r.choices(WORDS, k=12))


def run(name: str, eng: Engine, prefix: str, readers: int, touch: bool = True, shared: bool = False) -> None:
    stop = time.monotonic() + SECONDS
    lat: dict[str, list[float]] = defaultdict(list)
    pools: dict[str, list[tuple[int, int]]] = defaultdict(list)
    one = MemoryStore(eng, prefix)

    def writer(n: int) -> None:
        local.run = name
        r, s = random.Random(f"{name}{n}"), MemoryStore(eng, prefix)
        while time.monotonic() < stop:
            t = time.perf_counter()
            s.remember(sentence(r), "mix")
            lat["remember"].append(time.perf_counter() - t)

    def reader(n: int) -> None:
        r, s = random.Random(f"r{name}{n}"), one if shared else MemoryStore(eng, prefix)
        while time.monotonic() < stop:
            t = time.perf_counter()
            s.recall(" ".join(r.choices(WORDS, k=4)), "mix", 5, touch=touch)
            lat["recall"].append(time.perf_counter() - t)

    def sampler() -> None:
        while time.monotonic() < stop:
            for row in json.loads(urllib.request.urlopen(
                    f"{URL}/_cat/thread_pool/refresh,search,write?format=json&h=name,active,queue").read()):
                pools[row["name"]].append((int(row["active"]), int(row["queue"])))
            time.sleep(0.25)

    threads = [threading.Thread(target=sampler)] + [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    threads += [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"== {name}")
    for k, v in sorted(lat.items()):
        v.sort()
        print(f"  {k:>8}: n={len(v)} p50={median(v) * 1000:.0f} ms p99={v[max(0, int(len(v) * 0.99) - 1)] * 1000:.0f} ms "
              f"{len(v) / SECONDS:.1f}/s")
    for pool, v in sorted(pools.items()):
        print(f"  pool {pool:<8} mean active {sum(a for a, _ in v) / len(v):.2f}  mean queue {sum(q for _, q in v) / len(v):.2f}")
    n = len(lat["remember"]) or 1
    for (r, call), (calls, sec) in sorted(spent.items(), key=lambda kv: -kv[1][1]):
        if r == name and calls / n >= 0.5:
            print(f"  remember -> {call:<22} {calls / n:.2f} calls, {sec / calls * 1000:.0f} ms each, {sec / n * 1000:.0f} ms per remember")
    one.flush()


eng = Engine(URL)
prefix = "mix" + uuid.uuid4().hex[:8]
install(eng, prefix)
try:
    r = random.Random(1)
    MemoryStore(eng, prefix, merge=MergePolicy(enabled=False)).remember_many([MemoryInput(sentence(r), "mix")
                                                                              for _ in range(SIZE)])
    print(f"{SIZE} memories in one namespace; {WRITERS} remember threads, {READERS} recall threads, {SECONDS:.0f} s each")
    run("remember alone", eng, prefix, 0)
    run("mixed, reheat on (a store per thread)", eng, prefix, READERS)
    run("mixed, reheat off", eng, prefix, READERS, touch=False)
    run("mixed, reheat on, one shared store (one reheat writer)", eng, prefix, READERS, shared=True)
finally:
    uninstall(eng, prefix)
