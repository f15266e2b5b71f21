"""Repair of an existing index: read every supersession again with today's merge decision.

An index written by an earlier decision rule (or by a wrong judge) may hold supersessions the pair
reading (esmem/domain/pairs.py) would not make: a second allergy that retired the first, a relative's
fact that retired the person's own. `findings` lists them, with the verdict the reading gives now;
`apply` undoes each one: the older memory is active again, the successor no longer lists it in
`supersedes`, and when the reading says `uncertain` the pair is linked for review
(`possibly_updates`); both memories record the repair in `reviews`.

Only supersessions the merge made are read again (the successor was written as `supersede`, or the
older memory as `outdated`); one a caller asked for (`supersedes=`, a forget tombstone) is left alone.
Repair is idempotent and resumable: a finding applied is no longer a finding, and one cut half-way is
found and finished by the next run.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterator, Sequence

from esmem.domain import pairs
from esmem.domain.merge import MergePolicy
from esmem.index.catalog import Catalog, ScriptOp, Search
from esmem.values import iso

KEEP = (pairs.REPLACES, pairs.RESTATES)


@dataclass(frozen=True)
class Finding:
    """A supersession the decision would not make again: `older` was retired by `newer`."""

    namespace: str
    older: str
    newer: str
    older_text: str
    newer_text: str
    verdict: str  # what the reading says now: coexists or uncertain
    why: str


def _listed(value: Any) -> list[str]:
    return [] if value is None else list(value) if isinstance(value, list) else [value]


def findings(catalog: Catalog, namespace: str, policy: MergePolicy, page: int = 500) -> Iterator[Finding]:
    """The supersessions of a namespace the reading would not make again, oldest first."""
    catalog.refresh()
    for resp in catalog.scroll(Search("superseded", {"namespace": namespace, "size": page}, routing=namespace), page):
        hits = resp["hits"]["hits"]
        winners = catalog.mget([(w, namespace) for w in {h["_source"]["superseded_by"] for h in hits}])
        for h in hits:
            loser, won_by = h["_source"], h["_source"]["superseded_by"]
            winner = winners.get(won_by)
            if winner is None or not _merged(loser, winner):
                continue
            older, newer = (loser, winner) if loser["valid_from"] <= winner["valid_from"] else (winner, loser)
            reading = pairs.read(older["content"], newer["content"], loser["kind"], dup_overlap=policy.dup_overlap,
                                 min_overlap=policy.min_overlap, events=policy.events)
            if reading.verdict not in KEEP and not (loser["kind"] in policy.never_supersede and reading.verdict == pairs.RESTATES):
                yield Finding(namespace, h["_id"], won_by, loser["content"], winner["content"], reading.verdict, reading.why)


def _merged(loser: dict[str, Any], winner: dict[str, Any]) -> bool:
    """Whether the merge decided this supersession (not a caller naming the predecessor)."""
    return winner.get("written_as") == "supersede" or loser.get("written_as") == "outdated"


def apply(catalog: Catalog, found: Sequence[Finding], *, now: datetime,
          run: Callable[[Sequence[ScriptOp]], list[bool]]) -> int:
    """Undo each finding (see the module docstring); returns how many were undone."""
    done = 0
    for f in found:
        docs = catalog.mget([(f.older, f.namespace), (f.newer, f.namespace)])
        loser, winner = docs.get(f.older), docs.get(f.newer)
        if loser is None or winner is None or loser.get("superseded_by") != f.newer:
            continue  # changed since it was found
        record = {"older": f.older, "newer": f.newer, "verdict": f"repaired: {f.verdict}", "by": "repair", "at": iso(now)}
        changes: dict[str, Any] = {"supersedes": [i for i in _listed(winner.get("supersedes")) if i != f.older] or None}
        if f.verdict == pairs.UNCERTAIN and loser["valid_from"] <= winner["valid_from"]:
            changes["possibly_updates"] = sorted(set(_listed(winner.get("possibly_updates"))) | {f.older})
        if not any(isinstance(r, dict) and r.get("verdict") == record["verdict"] and r.get("older") == f.older
                   for r in _listed(winner.get("reviews"))):
            changes["reviews"] = _listed(winner.get("reviews")) + [record]
        catalog.set_fields(f.namespace, f.newer, changes)  # first the successor: a cut here is found again
        run([ScriptOp(f.namespace, f.older, "unretire", {"winner": f.newer})])
        mine: dict[str, Any] = {"reviews": _listed(loser.get("reviews")) + [record]}
        if f.verdict == pairs.UNCERTAIN and loser["valid_from"] > winner["valid_from"]:
            mine["possibly_updated_by"] = [f.newer]
        catalog.set_fields(f.namespace, f.older, mine)
        done += 1
    return done
