"""The package's layers import downwards only: the index layer (which talks to the engine) knows
nothing of memories' rules, the apps or the CLI; a fusion mode knows nothing of the ranking policy
built on it. Imports are read from the source with `ast`, those inside functions included."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "esmem"


def imported(source: str, package: str) -> set[str]:
    """Every module a file of `package` imports, at any depth of its `source`, as absolute names
    (relative imports resolved)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def offending(source: str, package: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in imported(source, package) if any(m == f or m.startswith(f + ".") for f in forbidden))


def offending_file(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
    return offending(path.read_text(encoding="utf-8"), package, forbidden)


INDEX_MODULES = sorted((PACKAGE / "index").rglob("*.py"))


@pytest.mark.parametrize("path", INDEX_MODULES, ids=lambda p: p.name)
def test_index_layer_imports_no_domain_app_or_cli(path: Path) -> None:
    assert offending_file(path, ("esmem.domain", "esmem.apps", "esmem.cli")) == []


def test_fusion_modes_do_not_import_the_ranking_policy() -> None:
    assert offending_file(PACKAGE / "domain" / "fusion.py", ("esmem.domain.ranking",)) == []


def test_the_import_reader_sees_imports_inside_functions_and_relative_ones() -> None:
    source = "import json\n\ndef f():\n    from esmem.domain import ranking\n    from ..apps import bench\n"
    assert offending(source, "esmem.index", ("esmem.domain", "esmem.apps")) == [
        "esmem.apps", "esmem.apps.bench", "esmem.domain", "esmem.domain.ranking"]
