"""A recall with its explanation as JSON: what `esmem explain --json` prints and the inspector draws."""
from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from esmem.domain.types import Memory, RecallResult
from esmem.values import iso


def memory_json(m: Memory) -> dict[str, Any]:
    """A memory's fields, times as ISO-8601 strings."""
    d = asdict(m)
    for key, v in d.items():
        if isinstance(v, datetime):
            d[key] = iso(v)
    return d


def result_json(res: RecallResult) -> dict[str, Any]:
    """Every ranked item with the parts of its score, the BM25 terms and the legs; the recent and pinned sections."""
    return {"query": res.query, "namespace": res.namespace, "now": iso(res.now),
            "items": [{**memory_json(r.memory), "score": r.score, "rel": r.rel, "recency": r.recency,
                       "importance_part": r.importance_part, "reheat": r.reheat, "mmr_penalty": r.mmr_penalty,
                       "answer": r.answer, "period": r.period, "when": r.when, "rank_before_mmr": r.rank_before_mmr, "neighbour_of": r.neighbour_of,
                       "demoted_by": r.demoted_by, "terms": dict(r.terms),
                       "legs": {k: dict(v) for k, v in r.legs.items()}} for r in res.items],
            "recent": [memory_json(m) for m in res.recent], "pinned": [memory_json(m) for m in res.pinned],
            "took_ms": res.took_ms}
