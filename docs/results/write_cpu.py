"""A plain write's client CPU per memory and its rate: N memories of the bench corpus written with
`remember_many` (no merge) into a fresh prefix. Run it from two checkouts alternately to compare them:

    PYTHONPATH=<checkout> python docs/results/write_cpu.py $ESMEM_URL 30000
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import esmem
from esmem.apps import bench
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.store import MemoryStore
from esmem.index.engine import Engine
from esmem.index.install import uninstall


def checkout() -> str:
    """The commit of the checkout esmem was imported from."""
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(esmem.__file__).parent,
                           capture_output=True, text=True)
    return found.stdout.strip() or "not a git checkout"


def main(url: str, size: int) -> None:
    engine, prefix = Engine(url), "write-cpu"
    items = bench.generate(size, 100, 0).inputs()
    uninstall(engine, prefix)
    install(engine, prefix)
    try:
        with MemoryStore(engine, prefix, merge=MergePolicy(enabled=False)) as store:
            started, cpu = time.perf_counter(), time.process_time()
            store.remember_many(items)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(f"{checkout()}: {size / wall:,.0f} memories/s, client CPU {cpu / size * 1e6:.1f} µs a memory")
    finally:
        uninstall(engine, prefix)
        engine.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
