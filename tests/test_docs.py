"""The documentation is executable and honest: every code block of docs/ and README.md runs against the
engine (or says why not), printed outputs match what runs, the defaults and CLI flags it names are the
code's, and it carries no development history.

Markers, an HTML comment on the line before a fenced block:
  <!-- no-test: WHY -->            not run, with the reason (credentials, a cluster of one's own...)
  <!-- file: NAME -->              written to NAME in the page's working directory for later blocks
  <!-- requires: minilm -->        run only when the MiniLM embedder loads (a failure in CI)
  <!-- tested-by: tests/X.py -->   run, with closer assertions, by that test (which reads this page)
A bash or python block followed by "It prints:" and a text block must print exactly that text.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, fields
from pathlib import Path

import click
import pytest

from esmem.cli.main import cli
from esmem.domain.hybrid import Fusion
from esmem.domain.installation import install
from esmem.domain.merge import MergePolicy
from esmem.domain.ranking import RecallParams
from esmem.index.engine import Engine
from esmem.index.install import uninstall

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [README]
RUNNABLE = ("bash", "python")
OUTPUT = ("text",)
FENCE = re.compile(r"^```([\w-]*)\s*$")
MARKER = re.compile(r"^<!--\s*(no-test|file|requires|tested-by):\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    marker: tuple[str, str] | None
    prints: str | None = None  # the "It prints:" text that follows it

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = MARKER.match(lines[i - 1]) if i else None
        block = Block(page, i + 1, m[1], "\n".join(lines[i + 1:end]) + "\n",
                      (marker[1], marker[2]) if marker else None)
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        if before == "It prints:" and m[1] in OUTPUT and blocks and blocks[-1].lang in RUNNABLE:
            blocks[-1].prints = block.code
        blocks.append(block)
        i = end + 1
    return blocks


BLOCKS = [b for page in PAGES for b in parse(page)]


def test_the_docs_have_pages_and_blocks() -> None:
    assert len(PAGES) >= 25 and len([b for b in BLOCKS if b.lang in RUNNABLE]) >= 20


def test_every_block_runs_or_says_why_not() -> None:
    unlabelled = [b.where for b in BLOCKS if not b.lang]
    assert not unlabelled, f"blocks without a language: {unlabelled}"
    for b in BLOCKS:
        kind, value = b.marker or ("", "")
        if kind in ("no-test", "file", "requires", "tested-by"):
            assert value, f"{b.where}: {kind} without a value"
        if b.lang in RUNNABLE + OUTPUT or kind in ("no-test", "file", "tested-by"):
            continue
        pytest.fail(f"{b.where}: a {b.lang} block that nothing runs: write it to a file, or say why not")


def test_tested_by_names_a_test_that_reads_the_page() -> None:
    for b in BLOCKS:
        if b.marker and b.marker[0] == "tested-by":
            test = ROOT / b.marker[1]
            assert test.is_file(), b.where
            assert str(b.page.relative_to(ROOT)) in test.read_text(encoding="utf-8"), \
                f"{b.where}: {b.marker[1]} does not read {b.page.relative_to(ROOT)}"


def _has_minilm() -> bool:
    try:
        from esmem.domain.embedding import load_embedder

        load_embedder("minilm")
        return True
    except Exception:  # noqa: BLE001 - any reason the model does not load means: no embedder here
        return False


RUN_PAGES = sorted({b.page for b in BLOCKS if b.lang in RUNNABLE and (b.marker or ("",))[0] not in ("no-test", "tested-by")})


# plain_http: the examples connect as a reader would, with the URL alone (the secured engine's own tests
# cover credentials and TLS)
@pytest.mark.plain_http
@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES])
def test_the_code_blocks_of_a_page_run_as_written(page: Path, engine_url: str, tmp_path: Path) -> None:
    """In a prefix of its own (its blocks install policies and write memories), in a directory of its own."""
    prefix = f"d{uuid.uuid4().hex[:10]}"
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")  # the docs name the bundled datasets by path
    engine = Engine(engine_url)
    install(engine, prefix)
    env = {**os.environ, "ESMEM_URL": engine_url, "ESMEM_PREFIX": prefix, "COLUMNS": "200",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    try:
        for b in parse(page):
            kind, value = b.marker or ("", "")
            if kind in ("no-test", "tested-by"):
                continue
            if kind == "file":
                (tmp_path / value).write_text(b.code, encoding="utf-8")
                continue
            if b.lang not in RUNNABLE:
                continue
            if kind == "requires" and value == "minilm" and not _has_minilm():
                if os.environ.get("ESMEM_REQUIRE_EMBEDDER") == "1":
                    pytest.fail(f"{b.where} needs the MiniLM embedder, which does not load")
                continue
            argv = ["bash", "-euo", "pipefail", "-c", b.code] if b.lang == "bash" else [sys.executable, "-c", b.code]
            run = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, f"{b.where} failed:\n{run.stderr[-3000:]}\n{run.stdout[-2000:]}"
            if b.prints is not None:
                assert run.stdout.rstrip() == b.prints.rstrip(), f"{b.where} printed:\n{run.stdout}"
    finally:
        uninstall(engine, prefix, delete_data=True)
        engine.close()


# -- the README -----------------------------------------------------------------------------------
QUICKSTART = "pip install -e '.[dev]' && esmem demo"
TEST_COMMAND = "python -m pytest tests"


def test_the_readme_is_short_and_keeps_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    codes = [b.code.strip() for b in parse(README)]
    assert QUICKSTART in codes and TEST_COMMAND in codes


# -- what the docs say matches the code ------------------------------------------------------------
def _defaults() -> dict[str, object]:
    out: dict[str, object] = {}
    for cls in (RecallParams, MergePolicy):
        for f in fields(cls):
            value = getattr(cls(), f.name)
            if isinstance(value, (bool, int, float)) or value is None:
                out[f.name] = value
    fusion = Fusion()
    out.update({"knn_weight": fusion.weight, "knn_window": fusion.knn_window, "keep_top": fusion.keep_top,
                "rrf_k": fusion.rrf_k})
    return out


VALUE = r"(?:\(\s*)?(?:default\s+|=\s*)?(true|false|-?\d+(?:\.\d+)?)\b"


def _mentions(text: str, name: str) -> list[str]:
    """The values written right after `name` (as `name` 0.5, `name` (0.5), `name` default 0.5, or
    "`name` | type | 0.5" in a table); `name=0.5` is an override, not a default, and so not read."""
    pattern = rf"(?<!`, )(?<!`/)`{re.escape(name)}`\s*(?:\|\s*(?:[a-z ]+\|\s*)?)?{VALUE}"
    return re.findall(pattern, text)


def _same(written: str, value: object) -> bool:
    if isinstance(value, bool):
        return written == str(value).lower()
    try:
        return float(written) == float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


# where the docs write another value on purpose: a sweep, or an example that sets a knob
SWEEPS = re.compile(r"--sweep|--set|→|->| at \d|example|policy file", re.I)


def test_every_default_the_docs_mention_is_the_codes() -> None:
    wrong = []
    for page in PAGES:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if SWEEPS.search(line):
                continue
            for name, value in _defaults().items():
                for written in _mentions(line, name):
                    if not _same(written, value):
                        wrong.append(f"{page.relative_to(ROOT)}:{n}: {name} {written}, the code says {value}")
    assert not wrong, "\n".join(wrong)


def test_the_default_check_finds_a_wrong_default() -> None:
    assert _mentions("`mmr_lambda` (0.7)", "mmr_lambda") == ["0.7"] and not _same("0.7", RecallParams().mmr_lambda)
    assert _mentions("| `must_not_miss` | boolean | true |", "must_not_miss") == ["true"]
    assert _mentions("| `alpha`, `beta`, `gamma` | numbers | 0.5, 0.3, 0.2 |", "gamma") == []
    assert _mentions("`alpha`/`beta`/`gamma` (0.5/0.3/0.2)", "gamma") == []
    assert _mentions("the relevance top `rescore_window` (default 100, per shard)", "rescore_window") == ["100"]


def _command_options() -> dict[str, set[str]]:
    """Every esmem command path ("recall", "engine up") with the options it and the group take."""
    out: dict[str, set[str]] = {}

    def walk(cmd: click.Command, path: tuple[str, ...], inherited: set[str]) -> None:
        names = {o for p in cmd.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts}
        out[" ".join(path)] = names | inherited | {"--help"}
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, (*path, name), names | inherited)

    walk(cli, (), set())
    return out


ESMEM_CALL = re.compile(r"(?:^|[\s`(|;&$])esmem((?: +[^\s`|;&)#]+)+)")


COMMANDS = _command_options()


def _unknown_flags(line: str) -> list[str]:
    """The flags of each `esmem COMMAND ...` call in a line that COMMAND (or the group) does not take."""
    wrong = []
    for call in ESMEM_CALL.findall(line):
        words = call.split()
        path: list[str] = []
        for w in words:
            if " ".join((*path, w)) not in COMMANDS:
                break
            path.append(w)
        if not path:
            continue
        known = COMMANDS[" ".join(path)]
        for w in words[len(path):]:
            if w.lstrip("[(").startswith("-"):
                wrong += [f"esmem {' '.join(path)} has no {flag}"
                          for flag in re.findall(r"(?<![\w-])--?[a-z][\w-]*", w.split("=", 1)[0]) if flag not in known]
    return wrong


def test_every_esmem_flag_the_docs_mention_exists() -> None:
    wrong = [f"{page.relative_to(ROOT)}:{n}: {w}" for page in PAGES
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) for w in _unknown_flags(line)]
    assert not wrong, "\n".join(wrong)


def test_the_flag_check_finds_a_flag_a_command_lacks() -> None:
    assert _unknown_flags("`esmem recall q -n alice --nope`") == ["esmem recall has no --nope"]
    assert _unknown_flags("esmem engine up --engine opensearch-3 [--port P]") == []
    assert _unknown_flags("`esmem install --k 3`") == ["esmem install has no --k"]


# -- no development history in the product ---------------------------------------------------------
HISTORY = re.compile(r"session [0-9]|issue[ -][0-9]|\(#[0-9]+\)|scratch" + "/")
DEV_PATHS = re.compile(r"(?<![\w.])/(?:work|home/\w+|Users/\w+)/")
SCANNED = ["README.md", "docs", "esmem", "tests", "templates", "painless", ".ci", "CHANGELOG.md", "mkdocs.yml",
           "pyproject.toml", "datasets/README.md", "engine/src"]


def _files() -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out += [p for p in path.rglob("*") if p.is_file() and p.suffix not in (".png", ".pyc", ".class", ".jar")
                    and "__pycache__" not in p.parts]
    return out


def test_no_development_history_in_the_product() -> None:
    found = []
    for path in _files():
        if path.name == "CHANGELOG.md":
            continue  # history belongs there
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not found, "\n".join(found)


def test_no_path_of_a_development_machine() -> None:
    found = [f"{p.relative_to(ROOT)}:{n}" for p in _files()
             for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if DEV_PATHS.search(line)]
    assert not found, found


def test_the_history_check_finds_history() -> None:
    for line in ("as measured in session " + "11", "since issue " + "15", "the pruning (#" + "18) change",
                 "see scratch" + "/ab.py"):
        assert HISTORY.search(line), line
    assert DEV_PATHS.search("python /work" + "/ab/x.py") and not DEV_PATHS.search("ESMEM_HOME=/tmp/x")


# -- generated reference ----------------------------------------------------------------------------
def test_the_generated_reference_tables_match_the_code() -> None:
    """docs/reference/gen.py writes the configuration and template tables from the code; `cog --check`
    fails when a page was not regenerated after a default, a knob or a template parameter changed."""
    pages = ["configuration.md", "templates.md"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    run = subprocess.run([sys.executable, "-m", "cogapp", "--check", "-I", ".", *pages], cwd=ROOT / "docs" / "reference",
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, (run.stdout + run.stderr)[-2000:] + \
        "\nregenerate: cog -r -I docs/reference docs/reference/configuration.md docs/reference/templates.md"
