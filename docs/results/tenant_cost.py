"""Cost of one prefix (index) per tenant: install time, shards and disk of an empty tenant (docs/security.md)."""
import json, os, statistics, time, urllib.request, uuid
from esmem.domain.installation import install
from esmem.index.connection import ConnectionConfig
from esmem.index.engine import Engine
from esmem.index.install import uninstall
url = os.environ["ESMEM_URL"]
def get(p):
    return json.load(urllib.request.urlopen(url + p))
def store_bytes():
    return get("/_stats/store")["_all"]["total"]["store"]["size_in_bytes"]
eng = Engine(ConnectionConfig.from_env())
shards0 = len(get("/_cat/shards?format=json"))
s0 = store_bytes()
prefixes, times = [f"cost-{uuid.uuid4().hex[:8]}" for _ in range(20)], []
for p in prefixes:
    t = time.perf_counter(); install(eng, p); times.append(time.perf_counter() - t)
urllib.request.urlopen(urllib.request.Request(url + "/_refresh", method="POST"))
time.sleep(2)
s1 = store_bytes(); shards1 = len(get("/_cat/shards?format=json"))
print(f"install p50 {statistics.median(times):.2f}s max {max(times):.2f}s; shards per tenant {(shards1-shards0)/len(prefixes):.1f}; "
      f"store per tenant {(s1-s0)/len(prefixes)/1024:.0f} KiB")
for p in prefixes:
    uninstall(eng, p)
