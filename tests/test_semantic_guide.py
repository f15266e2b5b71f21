"""docs/guides/semantic.md: its examples run as written against the engine with the Chinese model."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from semantic_support import embedder

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs/guides/semantic.md"
TESTED = re.compile(r"<!-- tested-by: tests/test_semantic_guide.py -->\n```(\w+)\n(.*?)```\n\n[^`]*```text\n(.*?)```",
                    re.S)


@pytest.mark.plain_http
def test_the_guide_examples_print_what_it_says(engine, prefix, tmp_path) -> None:
    """The CLI block installs the Chinese model and writes the memories the Python block then recalls."""
    embedder("bge-small-zh-q")  # fetched (or a skip / failure) before the examples need it
    examples = TESTED.findall(GUIDE.read_text(encoding="utf-8"))
    assert [lang for lang, _, _ in examples] == ["bash", "python"]
    env = {**os.environ, "ESMEM_URL": engine.url, "ESMEM_PREFIX": prefix, "COLUMNS": "200",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    for lang, code, prints in examples:
        argv = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.rstrip().splitlines()[-1] == prints.strip()
