"""The quickstart's job: install, load the demo memories, recall each demo query with explanations."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from esmem.apps.evaluate import load_dataset
from esmem.domain.installation import install
from esmem.domain.store import MemoryStore
from esmem.domain.types import RecallResult, WriteResult
from esmem.index.engine import Engine
from esmem.index.install import InstallReport
from esmem.index.templates import assets_root


@dataclass(frozen=True)
class Demo:
    installed: InstallReport
    written: list[WriteResult]
    recalls: list[RecallResult]


def run(engine: Engine, prefix: str, data: Path | None = None) -> Demo:
    """Idempotent: a second run replays the memories (nothing new is written) and recalls again."""
    report = install(engine, prefix)
    dataset = load_dataset(data or assets_root() / "datasets" / "demo.jsonl")
    store = MemoryStore(engine, prefix)
    written = store.remember_many([m for _, m in dataset.memories])
    recalls = [store.recall(q.text, q.namespace, 3, now=q.now, touch=False, explain=True) for q in dataset.queries]
    return Demo(report, written, recalls)
