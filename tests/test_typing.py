"""The package type-checks under `mypy --strict` (pyproject.toml's [tool.mypy]), so a caller's type
checker and IDE can trust every annotation esmem publishes (esmem/py.typed)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_mypy_strict_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "esmem"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"mypy --strict esmem failed:\n{proc.stdout}{proc.stderr}"
