"""Fields the writer derives from a memory's content: `asks` (esmem/domain/questions.py) and
`tells_time` (esmem/domain/when.py), which the `recall` template ranks with.

A memory written before a derived field existed has none, and recall gives it no factor. `fill`
writes them for such memories (a scroll, so our own writes do not move it; idempotent: a rerun finds
nothing left); `esmem install --migrate` runs it after copying the memories into the new index.
"""
from __future__ import annotations

from typing import Any, Callable

from esmem.domain.questions import asks
from esmem.domain.when import tells_time
from esmem.index.catalog import Catalog, Search


def derived(content: str) -> dict[str, Any]:
    """Every field the writer derives from `content`."""
    return {"asks": asks(content), "tells_time": tells_time(content)}


def fill(catalog: Catalog, *, batch_size: int = 500, progress: Callable[[int, int], None] | None = None) -> int:
    """Write the derived fields of every memory that lacks them; returns how many were written."""
    catalog.refresh()
    return catalog.update_each(Search("underived", {"size": batch_size}), batch_size,
                               lambda hits: [derived(h["_source"]["content"]) for h in hits], progress)
