"""How many memory documents the reheat write-backs re-index: 16 recalling stores (reheat on) ask
QUERIES distinct queries of a 20k-memory namespace for 10 s; prints the accesses written and the
documents the engine indexed meanwhile (one per update).

    PYTHONPATH=<checkout> python docs/results/reheat_coalesce.py $ESMEM_URL 100
"""
import json, random, string, sys, threading, time, urllib.request, uuid
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.index.engine import Engine
from esmem.index.install import uninstall
URL = sys.argv[1]
rng = random.Random(7)
WORDS = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))) for _ in range(3000)]
QUERIES = [" ".join(rng.choices(WORDS, k=4)) for _ in range(int(sys.argv[2]))]
def sentence(r): return " ".join(r.choices(WORDS, k=12))
def get(path): return json.loads(urllib.request.urlopen(URL + path).read())
eng = Engine(URL); prefix = "co" + uuid.uuid4().hex[:8]; install(eng, prefix)
try:
    r = random.Random(1)
    MemoryStore(eng, prefix, merge=MergePolicy(enabled=False)).remember_many([MemoryInput(sentence(r), "mix") for _ in range(20000)])
    st0 = get(f"/{prefix}-memories/_stats/indexing")["_all"]["primaries"]["indexing"]["index_total"]
    stop = time.monotonic() + 10; stores = []; lat = []
    def reader(n):
        r, s = random.Random(n), MemoryStore(eng, prefix); stores.append(s)
        while time.monotonic() < stop:
            t = time.perf_counter(); s.recall(r.choice(QUERIES), "mix", 5, touch=True); lat.append(time.perf_counter() - t)
        s.flush()
    ts = [threading.Thread(target=reader, args=(i,)) for i in range(16)]; [t.start() for t in ts]; [t.join() for t in ts]
    st1 = get(f"/{prefix}-memories/_stats/indexing")["_all"]["primaries"]["indexing"]["index_total"]
    lat.sort()
    print("queries", len(QUERIES), "accesses written", sum(s.recaller.reheater.written for s in stores), "documents re-indexed", st1 - st0, "recall p50 %.0f p99 %.0f" % (lat[len(lat)//2]*1000, lat[int(len(lat)*.99)]*1000))
finally:
    uninstall(eng, prefix)
