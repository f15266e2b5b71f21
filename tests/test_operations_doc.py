"""The examples of docs/guides/lifecycle.md run as written (shell blocks through the CLI of this
checkout, the Python block as a script) against an installed prefix, and do what the page says."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from esmem.domain.store import MemoryStore
from esmem.domain.types import MemoryInput
from esmem.index.engine import Engine
from esmem.index.install import uninstall
from listening import free_port

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guides" / "lifecycle.md"
MAIN = "python -c 'from esmem.cli import main; main()'"
# `esmem serve ... &` runs the server itself in the background (exec), so the block's `kill $!` stops it
SHELL = f'esmem() {{ if [ "$1" = serve ]; then exec {MAIN} "$@"; fi; {MAIN} "$@"; }}\nset -e\n'
STOP_SERVERS = "trap 'kill $(jobs -p) 2>/dev/null' EXIT\n"  # also when a line of the block fails

pytestmark = pytest.mark.fresh_prefix("erase and retention create the prefix's audit index")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)


# plain_http: the page's commands connect as a reader would, with ESMEM_URL alone (as tests/test_docs.py)
@pytest.mark.plain_http
def test_the_operations_page_runs_as_written(engine: Engine, installed: str, tmp_path: Path) -> None:
    store = MemoryStore(engine, installed)
    store.remember_many([
        MemoryInput("Alice prefers window seats", "alice", kind="preference", valid_from="2023-01-01T00:00:00Z"),
        MemoryInput("Alice's phone number is 555-0100", "alice", valid_from="2023-02-01T00:00:00Z"),
        MemoryInput("Zed's phone number is 555-0199", "alice", valid_from="2023-03-01T00:00:00Z", entities=["Zed"]),
        MemoryInput("Bob went to the Berlin marathon", "bob", kind="event", valid_from="2023-04-01T00:00:00Z"),
        MemoryInput("Bob prefers aisle seats", "bob", kind="preference", valid_from="2024-01-01T00:00:00Z"),
    ])
    store.remember("Alice now prefers aisle seats", "alice", kind="preference", valid_from="2024-05-01T00:00:00Z",
                   supersedes=store.recall("window seats", "alice", 1, touch=False).items[0].memory.id)
    copy = f"t{uuid.uuid4().hex[:12]}"
    env = {**os.environ, "ESMEM_URL": engine.url, "ESMEM_PREFIX": installed,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def run(code: str, *argv: str) -> str:
        done = subprocess.run([*argv, code.replace("esmem-copy", copy)], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    export, resume, erase, retention, growth, metrics = _blocks("bash")
    python, tracing = _blocks("python")
    (toml,) = _blocks("toml")
    try:
        out = run(SHELL + export, "bash", "-c")
        assert out.rstrip().endswith("6 memories restored")
        restored = MemoryStore(engine, copy)
        assert restored.count(None, status=None) == 6 and restored.count("alice") == 3

        assert run(python, sys.executable, "-c").split() == ["4", "4"]  # alice's 4 versions, already there

        run(SHELL + resume, "bash", "-c")  # a complete file: the resume adds nothing
        lines = (tmp_path / "backup.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 1 + 6 + 1 and json.loads(lines[-1]) == {"end": True, "memories": 6}

        out = run(SHELL + erase, "bash", "-c")
        assert "(dry run) 1 memories would be erased" in out
        assert out.count("still matching after refresh: 0") == 2
        audit = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert [(r["selector"], r["deleted"]) for r in audit] == [("namespace", 2), ("entity", 1)]
        assert store.count(None, status=None) == 3 and store.count("bob", status=None) == 0

        (tmp_path / "retention.toml").write_text(toml, encoding="utf-8")
        out = run(SHELL + retention, "bash", "-c")
        assert "(dry run) 1 memories would be erased" in out  # the window seats, replaced over 180 days ago
        assert "erased 1 memories; still due after refresh: 0" in out
        seats = store.recall("aisle seats", "alice", 1, touch=False).items[0].memory
        assert [m.content for m in store.history("alice", seats.id)] == ["Alice now prefers aisle seats"]

        lines = run(SHELL + growth, "bash", "-c").splitlines()
        rows = {line.split()[0]: line.split()[1:] for line in lines}
        assert rows["alice"] == ["2", "0", "0", "0", "0", "1.00", rows["alice"][-1]]  # history erased above
        projected = [line.split()[1:6] for line in lines if line.startswith("projected:")]
        assert projected[0][0] == "1000000" and projected[1][:5] == ["5000", "writes", "a", "day", "for"]

        port = str(free_port())
        out = run(SHELL + STOP_SERVERS + metrics.replace("8080", port), "bash", "-c")
        route = "/v1/namespaces/{namespace}/recall"
        assert f'esmem_http_requests_total{{method="POST",route="{route}",status="200"}} 1.0' in out.splitlines()
        assert "esmem_recalls_total 1.0" in out.splitlines() and "alice" not in out

        names = [line.split()[0] for line in run(tracing, sys.executable, "-c").splitlines()]
        assert names[0] == "esmem.recall" and {"esmem.recall.search", "esmem.recall.rank", "esmem.engine"} <= set(names)
    finally:
        uninstall(engine, copy)
