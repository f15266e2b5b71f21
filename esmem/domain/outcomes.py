"""What a write answers: the `WriteResult` of a merge decision, or of a memory stored by an earlier run."""
from __future__ import annotations

from typing import Any, Mapping

from esmem.domain.merge import Candidate, Decision
from esmem.domain.types import WriteResult


def result(doc_id: str, dec: Decision, dry_run: bool = False, doc: Mapping[str, Any] | None = None) -> WriteResult:
    """The answer for a memory written (or, `dry_run`, only decided) by this write."""
    if dec.action == "duplicate":
        return WriteResult("duplicate", dec.targets[0].id, duplicate_of=dec.targets[0].id,
                           scores=dec.scores, dry_run=dry_run)
    if dec.action == "supersede":
        return WriteResult("superseded", doc_id, tuple(t.id for t in dec.targets), scores=dec.scores,
                           dry_run=dry_run)
    if dec.action == "outdated":
        return WriteResult("outdated", doc_id, outdated_by=dec.targets[0].id, scores=dec.scores,
                           dry_run=dry_run)
    if dec.action == "uncertain":
        link = uncertain_link(doc, dec.targets[0]) if doc is not None else {}
        return WriteResult("uncertain", doc_id, possibly_updates=tuple(link.get("possibly_updates", ())),
                           possibly_updated_by=_first(link.get("possibly_updated_by")),
                           scores=dec.scores, dry_run=dry_run)
    return WriteResult("added", doc_id, scores=dec.scores, dry_run=dry_run)


def replayed(doc_id: str, src: Mapping[str, Any], dry_run: bool) -> WriteResult:
    """The answer for a memory an earlier run stored: what that run answered, `replayed=True`."""
    action = src.get("written_as", "add")
    sup = src.get("supersedes") or []
    if action == "outdated":
        return WriteResult("outdated", doc_id, outdated_by=src.get("superseded_by"), replayed=True, dry_run=dry_run)
    if action in ("supersede", "explicit"):  # explicit: the caller named the predecessor
        return WriteResult("superseded", doc_id, tuple(sup if isinstance(sup, list) else [sup]), replayed=True,
                           dry_run=dry_run)
    if action == "uncertain":
        return WriteResult("uncertain", doc_id, possibly_updates=tuple(listed(src.get("possibly_updates"))),
                           possibly_updated_by=_first(listed(src.get("possibly_updated_by"))),
                           replayed=True, dry_run=dry_run)
    return WriteResult("added", doc_id, replayed=True, dry_run=dry_run)


def uncertain_link(doc: Mapping[str, Any], target: Candidate) -> dict[str, list[str]]:
    """The link an uncertain memory records on itself: the older memory it may update or, arriving
    late, the newer one that may update it. It is written with the memory (one create: no link can be
    lost to a cut), so the newer of the pair carries it when written second and the older otherwise."""
    if str(target.source.get("valid_from", "")) > doc["valid_from"]:
        return {"possibly_updated_by": [target.id]}
    return {"possibly_updates": [target.id]}


def _first(values: list[str] | None) -> str | None:
    return values[0] if values else None


def listed(value: Any) -> list[str]:
    """A keyword field as a list (the engine returns one value unwrapped when it was written so)."""
    return [] if value is None else list(value) if isinstance(value, list) else [value]
