"""A speed device of the settle step: look up again only the written memories that could have a twin.

Without a judge a twin is a same-kind memory written since the decision's checkpoint that
`merge.conflict` accepts, so one read of what was written since rules out the rest and their
look-ups are skipped, with the same outcome. A full page: every memory is looked up. It acts only when
another writer wrote since the checkpoint (a lone writer skips the settle read first, lone_writer.py):
a 5k single-writer import sends the same 511 requests with or without it; its gain under concurrent
writers is not measured here.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from esmem.domain.merge import MergePolicy, conflict
from esmem.index.catalog import Catalog, Search


def may_have_twins(catalog: Catalog, policy: MergePolicy, semantic: bool, written: list[tuple[str, dict[str, Any]]],
                   seen: int) -> list[tuple[str, dict[str, Any]]]:
    """The written memories whose settle look-up could find a twin written after `seen`."""
    size = min(10 * len(written) + 100, 10_000)
    hits = catalog.search(Search("written_since", {  # without the batch's own: no two of them could merge
        "namespaces": sorted({d["namespace"] for _, d in written}), "after_seq_no": seen, "size": size,
        "exclude": [doc_id for doc_id, _ in written]}))["hits"]["hits"]
    if len(hits) >= size:
        return written
    since: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for h in hits:
        since[(h["_source"]["namespace"], h["_source"]["kind"])].append((h["_id"], h["_source"]["content"]))
    return [(doc_id, d) for doc_id, d in written if any(
        other != doc_id and conflict(d["content"], content, d["kind"], policy, semantic)
        for other, content in since[(d["namespace"], d["kind"])])]
