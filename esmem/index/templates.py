"""Rendering of the request bodies, stored scripts and search templates kept as files.

Jinja2 renders `templates/` and `painless/` with StrictUndefined (a missing variable is an error)
and delimiters that do not collide with mustache: `[[ var ]]`, `[% block %]`, `[# comment #]`.
Like Rally's track loader, rendering reports unknown or missing parameters by file name and shows
the lines around invalid JSON.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import meta

from esmem.errors import TemplateRenderError

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # esmem/


def assets_root() -> Path:
    """The folder holding templates/ and painless/: the repo checkout, or the copy in the wheel."""
    for root in (PACKAGE_DIR.parent, PACKAGE_DIR / "_assets"):
        if (root / "templates").is_dir() and (root / "painless").is_dir():
            return root
    raise TemplateRenderError("templates/ and painless/ not found next to the esmem package")


@lru_cache(maxsize=4)
def _loader(root: str) -> jinja2.FileSystemLoader:
    return jinja2.FileSystemLoader(root)


@lru_cache(maxsize=4)
def _environment(root: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=_loader(root),
        undefined=jinja2.StrictUndefined,
        variable_start_string="[[", variable_end_string="]]",
        block_start_string="[%", block_end_string="%]",
        comment_start_string="[#", comment_end_string="#]",
        keep_trailing_newline=True,
        autoescape=False,
    )


@lru_cache(maxsize=256)
def _declared(root: str, source: str) -> frozenset[str]:
    """The variables a template source uses, parsed once per source text (the test suite renders
    ~5,000 times per engine; parsing each time took ~5 s of it)."""
    return frozenset(meta.find_undeclared_variables(_environment(root).parse(source)))


def render(name: str, variables: dict[str, Any], root: Path | None = None,
           shared: frozenset[str] = frozenset()) -> str:
    """Render one file (path relative to the assets root); unknown and missing variables are errors.

    `shared` names context variables offered to every file of a kind (the prefix), which a file
    may leave unused."""
    root = root or assets_root()
    env = _environment(str(root))
    try:
        unknown = sorted(set(variables) - _declared(str(root), _loader(str(root)).get_source(env, name)[0]) - shared)
        if unknown:
            raise TemplateRenderError(f"{name}: unknown template variable(s): {', '.join(unknown)}")
        return env.get_template(name).render(**variables)
    except jinja2.TemplateNotFound:
        raise TemplateRenderError(f"{name}: no such template under {root}") from None
    except jinja2.UndefinedError as e:
        raise TemplateRenderError(f"{name}: missing template variable: {e.message}") from None
    except jinja2.TemplateSyntaxError as e:
        raise TemplateRenderError(f"{name}:{e.lineno}: template syntax error: {e.message}") from None


def render_json(name: str, variables: dict[str, Any], root: Path | None = None) -> Any:
    """Render a JSON body; a parse error names the file and shows the lines around it."""
    return parse_json(render(name, variables, root), name)


def parse_json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        lines = text.splitlines()
        lo, hi = max(0, e.lineno - 3), min(len(lines), e.lineno + 2)
        excerpt = "\n".join(f"{'>' if i + 1 == e.lineno else ' '} {i + 1:4d} | {lines[i]}" for i in range(lo, hi))
        raise TemplateRenderError(f"{name}:{e.lineno}:{e.colno}: invalid JSON after rendering: {e.msg}\n{excerpt}") from None


@lru_cache(maxsize=1)
def han_folding() -> dict[str, str]:
    """templates/han_t2s.txt: traditional Chinese characters to simplified, one for one - the table the
    index's analyzers fold with (char filter esmem_han) and the Python mirror too."""
    text = (assets_root() / "templates" / "han_t2s.txt").read_text(encoding="utf-8")
    return dict(line.split(" ") for line in text.splitlines() if line and not line.startswith("#"))


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """templates/stopwords_en.txt: the one list the index analyzers and the Python mirror share."""
    text = (assets_root() / "templates" / "stopwords_en.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in text.splitlines() if w.strip() and not w.startswith("#"))
