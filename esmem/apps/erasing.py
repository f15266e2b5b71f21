"""Erase as the HTTP API and the MCP server offer it: confined to one namespace, one selector, and an
explicit confirmation before anything is deleted."""
from __future__ import annotations

from typing import Sequence

from esmem.apps.schemas import EraseOut
from esmem.domain.store import MemoryStore
from esmem.errors import InvalidInput


def erase_in(store: MemoryStore, namespace: str, *, entity: str | None = None, ids: Sequence[str] | None = None,
             everything: bool = False, dry_run: bool = False, confirm: bool = False) -> EraseOut:
    """Erase within `namespace` what exactly one selector names: `entity`, `ids` or `everything`.
    Refuses (InvalidInput) without `confirm` unless `dry_run`, so that nothing is deleted by accident."""
    if sum((entity is not None, bool(ids), everything)) != 1:
        raise InvalidInput("name exactly one of `entity`, `ids` or `everything`")
    if not (confirm or dry_run):
        raise InvalidInput("erase deletes memories for good: set `confirm` to true (or `dry_run` to list them)")
    done = store.erase(namespaces=[namespace], entity=entity, ids=tuple(ids or ()), dry_run=dry_run)
    return EraseOut(selector=done.selector, erased=done.deleted, covered=list(done.ids), remaining=done.remaining,
                    audit_id=done.audit_id)
