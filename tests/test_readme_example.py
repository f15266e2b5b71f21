"""The "Use it in your agent" example of docs/guides/python.md runs as written against the engine."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from esmem.domain.store import MemoryStore

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "python.md"


def test_the_agent_example_runs_and_prints_a_context_block(engine, installed) -> None:
    section = GUIDE.read_text(encoding="utf-8").split("## Use it in your agent", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    assert len(blocks) == 1, "the guide's agent section should hold exactly one python example"
    env = {**os.environ, "ESMEM_URL": engine.url, "ESMEM_PREFIX": installed}
    run = subprocess.run([sys.executable, "-c", blocks[0]], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    block, footer = run.stdout.rsplit("\n-- ", 1)
    pinned, relevant, recent = block.split("\n\n")
    assert relevant.splitlines()[0] == "## Relevant memories"
    assert "Redis 7" in relevant.splitlines()[1]  # the filler last turn did not hide the Redis topic
    assert pinned.splitlines()[0] == "## Keep in mind" and "Always answer with runnable code examples" in pinned
    assert "我对花生过敏" not in block  # pinned, but it does not apply to a Redis question
    assert recent.splitlines() == ["## Recent conversation", recent.splitlines()[-1]]
    assert recent.splitlines()[-1].startswith("- [intent, 20 hours ago (") and "周末想去杭州徒步" in recent
    assert footer.startswith(f"{len(block)} chars;") and len(block) <= 600
    store = MemoryStore(engine, installed)
    assert store.count("alice") == 4  # it wrote into the test's own prefix
    rule = store.recall("runnable code examples", "alice", 1, touch=False).items[0].memory
    assert rule.kind == "rule" and rule.evergreen
