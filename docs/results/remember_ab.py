"""Remember (and recall) latency of one code checkout, for A/B runs of two checkouts interleaved on one
engine: 4 remember threads (and READERS recall threads, reheat on) on one namespace of SIZE memories
(force-merged), a 3-second warm-up, then SECONDS measured.

    for i in 1 2; do for p in /path/to/old /path/to/new; do
        PYTHONPATH=$p python docs/results/remember_ab.py $ESMEM_URL 20000 15 16; done; done
"""
import random, string, sys, threading, time, uuid
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.index.engine import Engine
from esmem.index.install import uninstall
import esmem
URL, SIZE, SECONDS, READERS = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rng = random.Random(7)
WORDS = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))) for _ in range(3000)]
def sentence(r): return " ".join(r.choices(WORDS, k=12))
eng = Engine(URL); prefix = "ab" + uuid.uuid4().hex[:8]; install(eng, prefix)
try:
    r = random.Random(1)
    MemoryStore(eng, prefix, merge=MergePolicy(enabled=False)).remember_many([MemoryInput(sentence(r), "mix") for _ in range(SIZE)])
    eng.request("POST", f"/{prefix}-memories/_forcemerge", params={"max_num_segments": "1"})
    lat = {"remember": [], "recall": []}
    for phase in ("warm", "run"):
        stop = time.monotonic() + (3 if phase == "warm" else SECONDS)
        for v in lat.values(): v.clear()
        def writer(n):
            r, s = random.Random(f"{phase}{n}"), MemoryStore(eng, prefix)
            while time.monotonic() < stop:
                t = time.perf_counter(); s.remember(sentence(r), "mix"); lat["remember"].append(time.perf_counter() - t)
        def reader(n):
            r, s = random.Random(f"r{phase}{n}"), MemoryStore(eng, prefix)
            while time.monotonic() < stop:
                t = time.perf_counter(); s.recall(" ".join(r.choices(WORDS, k=4)), "mix", 5, touch=True); lat["recall"].append(time.perf_counter() - t)
            s.flush()
        ts = [threading.Thread(target=writer, args=(i,)) for i in range(4)] + [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
        [t.start() for t in ts]; [t.join() for t in ts]
    out = []
    for k, v in lat.items():
        if v: v.sort(); out.append(f"{k} n={len(v)} p50={v[len(v)//2]*1000:.0f} p99={v[int(len(v)*.99)]*1000:.0f}")
    print(esmem.__file__.split("/esmem/")[0], "readers", READERS, "; ".join(out))
finally:
    uninstall(eng, prefix)
