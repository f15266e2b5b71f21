"""The merge look-up of a memory: the searches that find its candidates and how their answers combine.

BM25 (`lookup`) finds candidates sharing words; with an embedder the kNN leg (`lookup_knn`) finds a
paraphrased update sharing few words with what it replaces. Both look only at active memories of the
same namespace and kind.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from esmem.domain.analysis import truncate_query
from esmem.domain.merge import Candidate, MergePolicy
from esmem.index.catalog import Search

MAX_QUERY_TERMS = 140  # the recall query repeats the terms in up to 7 clauses; the engine allows 1024 in all


def candidates(resp: Mapping[str, Any], exclude: str | None = None) -> list[Candidate]:
    """Merge candidates from a `lookup` response."""
    return [Candidate(h["_id"], h["_score"], h["_source"])
            for h in resp["hits"]["hits"] if h["_id"] != exclude]


def searches(doc: Mapping[str, Any], policy: MergePolicy, semantic: bool,
             after_seq_no: int | None = None) -> list[Search]:
    """The look-up legs of a document: BM25, and the kNN leg when the store has an embedder and the
    document a vector; `after_seq_no`: only memories written after that sequence number (the settle step)."""
    since = {} if after_seq_no is None else {"after_seq_no": after_seq_no}
    lexical = Search("lookup", {"namespace": doc["namespace"], "query": truncate_query(doc["content"], MAX_QUERY_TERMS),
                                "size": policy.candidates, "kinds": [doc["kind"]], **since}, routing=doc["namespace"])
    if not (semantic and doc.get("embedding")):
        return [lexical]
    return [lexical, Search("lookup_knn", {"namespace": doc["namespace"], "vector": doc["embedding"],
                                           "size": policy.candidates, "kinds": [doc["kind"]], **since},
                            routing=doc["namespace"])]


def combined(responses: Sequence[Mapping[str, Any]], exclude: str | None = None,
             scale: Callable[[float], float] = lambda cosine: cosine) -> list[Candidate]:
    """The look-up legs' candidates, BM25's first; one only the kNN leg found has bm25 0. The kNN
    leg's score is (1 + cosine) / 2 (cosine similarity, OpenSearch's lucene engine and
    Elasticsearch alike): each candidate it found carries its cosine to the new memory on the merge's
    scale (`scale`: embedding.on_merge_scale), for the reading of a reworded change (pairs.read). No
    responses: a look-up the write skipped."""
    if not responses:
        return []
    out = {c.id: c for c in candidates(responses[0], exclude)}
    for resp in responses[1:]:
        for c in candidates(resp, exclude):
            cosine = round(scale(2 * c.bm25 - 1), 6)
            out[c.id] = replace(out.get(c.id, replace(c, bm25=0.0)), cosine=cosine)
    return list(out.values())


def grouped(items: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
    """`items` cut into consecutive groups of `sizes` (the legs of each document's look-up)."""
    out, at = [], 0
    for n in sizes:
        out.append(list(items[at:at + n]))
        at += n
    return out
