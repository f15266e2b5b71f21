"""Review of the merge decisions the write path left uncertain: list them, settle each one.

An uncertain pair (esmem/domain/merge.py) keeps both memories active and records the link on the one
written second. A person or a judge then says what it is: `replaces` retires the older memory in
favour of the newer one, as a supersede would have (the version chain and `restore` work as for any
merge); `coexists` drops the link. Either way the verdict is recorded on both memories (`reviews`: the
pair, the verdict, when and by whom), so `history` shows who decided what.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Sequence

from esmem.domain.merge_judge import MergeJudge, Question, ask
from esmem.domain.types import Memory
from esmem.errors import InvalidInput
from esmem.index.catalog import Catalog, ScriptOp, Search
from esmem.values import iso

VERDICTS = ("replaces", "coexists")


@dataclass(frozen=True)
class Pending:
    """An open uncertain pair of one namespace: `newer` may replace `older`."""

    older: Memory
    newer: Memory


def _listed(value: Any) -> list[str]:
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def pending(catalog: Catalog, namespace: str, size: int = 1000) -> list[Pending]:
    """The open pairs of a namespace, newest first: both memories still active and linked."""
    catalog.refresh()
    hits = catalog.search(Search("uncertain", {"namespace": namespace, "size": size}, routing=namespace))["hits"]["hits"]
    pairs: list[tuple[str, str]] = []  # (older, newer)
    for h in hits:
        pairs += [(old, h["_id"]) for old in _listed(h["_source"].get("possibly_updates"))]
        pairs += [(h["_id"], new) for new in _listed(h["_source"].get("possibly_updated_by"))]
    docs = catalog.mget([(i, namespace) for i in {i for pair in pairs for i in pair}])
    out, seen = [], set()
    for old, new in pairs:
        if (old, new) in seen or old not in docs or new not in docs:
            continue
        seen.add((old, new))
        a, b = Memory.from_hit(old, docs[old]), Memory.from_hit(new, docs[new])
        if a.status == "active" and b.status == "active":
            out.append(Pending(a, b))
    return out


def settle(catalog: Catalog, namespace: str, older_id: str, newer_id: str, verdict: str, *, by: str,
           now: datetime, run: Callable[[Sequence[ScriptOp]], list[bool]]) -> None:
    """Record a verdict on an open pair; `run` applies the stored update scripts (the writer's
    compare-and-set step). Settling a pair again with the same verdict changes nothing."""
    if verdict not in VERDICTS:
        raise InvalidInput(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
    docs = catalog.mget([(older_id, namespace), (newer_id, namespace)])
    if older_id not in docs or newer_id not in docs:
        raise InvalidInput(f"no memories {older_id!r} and {newer_id!r} in {namespace!r}")
    older, newer = docs[older_id], docs[newer_id]
    linked = older_id in _listed(newer.get("possibly_updates")) or newer_id in _listed(older.get("possibly_updated_by"))
    record = {"older": older_id, "newer": newer_id, "verdict": verdict, "by": by, "at": iso(now)}
    if not linked:
        if any(isinstance(r, dict) and (r.get("older"), r.get("newer"), r.get("verdict")) == (older_id, newer_id, verdict)
               for r in _listed(newer.get("reviews"))):
            return  # settled before, the same way
        raise InvalidInput(f"{newer_id!r} and {older_id!r} are no open uncertain pair of {namespace!r}")
    if verdict == "replaces":
        if not run([ScriptOp(namespace, older_id, "retire", {"winner": newer_id, "invalid_at": newer["valid_from"]})])[0]:
            raise InvalidInput(f"{older_id!r} is no longer active: nothing to replace")
        run([ScriptOp(namespace, newer_id, "link", {"loser": older_id})])
    for doc_id, src, field, other in ((newer_id, newer, "possibly_updates", older_id),
                                      (older_id, older, "possibly_updated_by", newer_id)):
        left = [i for i in _listed(src.get(field)) if i != other]
        catalog.set_fields(namespace, doc_id, {field: left or None, "reviews": _listed(src.get("reviews")) + [record]})


def judge_all(catalog: Catalog, namespace: str, judge: MergeJudge, *, now: datetime,
              run: Callable[[Sequence[ScriptOp]], list[bool]], by: str = "judge") -> dict[str, int]:
    """Ask a merge judge about every open pair of a namespace and settle those it answers; a pair it
    cannot tell (None) stays open. Returns how many were settled each way and left open."""
    open_pairs = pending(catalog, namespace)
    answers = ask(judge, [Question(p.newer.content, p.older.content, p.newer.kind) for p in open_pairs])
    counts = {"replaces": 0, "coexists": 0, "open": 0}
    for p, answer in zip(open_pairs, answers):
        if answer is None:
            counts["open"] += 1
            continue
        verdict = "replaces" if answer else "coexists"
        settle(catalog, namespace, p.older.id, p.newer.id, verdict, by=by, now=now, run=run)
        counts[verdict] += 1
    return counts
