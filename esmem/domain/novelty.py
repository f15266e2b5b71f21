"""A speed device of long writes into new groups: skip the merge look-up of a memory nothing could match.

In a (namespace, kind) group that held no active memory when a write began (an import into a new
namespace), every memory a look-up could find is one the write added and has not retired, or one
another writer wrote since, which the write reads with each batch's look-ups. A memory that none of
them is in conflict with (`merge.Mergeable`: the pair reading) is decided "add" without a look-up,
with the decision a look-up would have made (tests/test_write.py checks both runs equal). A memory
that shares a topic with more than 3 x `candidates` of them is looked up instead: one look-up costs
about 0.6 ms of engine time (the bench's 10k index, 2 cores), a pair reading about 0.07 ms of client
time. On the bench's 10k merge sample the write makes 2,059 look-ups for 10,000 memories with it
(one per memory without; 3,057 with at most 5 readings, 2,125 with no limit but 11.3 s of client CPU
instead of 8.2).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from esmem.domain.merge import Mergeable, MergePolicy
from esmem.index.catalog import Search
from esmem.index.refresh import Checkpoint


class Novelty:
    """What a long write knows of the groups that held no active memory when it began; a memory it
    `skips` is decided "add" without a look-up (its result then lists no candidate scores). `cover`:
    every write numbered up to it is known here, so the settle step of a batch that skipped look-ups
    looks at what was written after `cover`."""

    def __init__(self, policy: MergePolicy, groups: set[tuple[str, str]], page: int, semantic: bool = False):
        self.policy, self.groups, self.page, self.semantic = policy, groups, page, semantic
        self.empty: set[tuple[str, str]] | None = None  # known from the first batch's read on
        self.cover: Checkpoint | None = None
        self.fresh: list[str] = []  # written by this write since the last read: that read need not return them
        self._known: dict[tuple[str, str], Mergeable] = {}

    def skips(self, doc: Mapping[str, Any]) -> bool:
        key = (doc["namespace"], doc["kind"])
        if self.empty is None or self.cover is None or key not in self.empty:
            return False
        return key not in self._known or not self._known[key].any(doc["content"], doc.get("valid_from"),
                                                                  reads=3 * self.policy.candidates)

    def learn(self, doc_id: str, doc: Mapping[str, Any], written: bool = False) -> None:
        """An active memory of the group: added by this write (`written`: just now, so the next read of
        what was written since need not return it) or read from what others wrote."""
        key = (doc["namespace"], doc["kind"])
        if key not in self._known:
            self._known[key] = Mergeable(doc["kind"], self.policy, self.semantic)
        self._known[key].add(doc["content"], doc_id, doc.get("valid_from"))
        if written:
            self.fresh.append(doc_id)

    def forget(self, doc: Mapping[str, Any], retired: Sequence[str]) -> None:
        """Memories this write retired in `doc`'s group: no look-up can find them any more. (Forgetting
        less only costs look-ups; a retired memory made active again is read as written since.)"""
        known = self._known.get((doc["namespace"], doc["kind"]))
        if known:
            for doc_id in retired:
                known.discard(doc_id)

    def search(self) -> Search:
        """The read a batch adds to its look-ups: the groups holding active memories (first batch), then
        what others wrote in the empty groups' namespaces after `cover`."""
        if self.empty is None:
            return Search("groups", {"namespaces": sorted({ns for ns, _ in self.groups})})
        return Search("written_since", {"namespaces": sorted({ns for ns, _ in self.empty}), "size": self.page,
                                        "after_seq_no": self.cover.seen if self.cover else None, "exclude": self.fresh})

    def read(self, resp: Mapping[str, Any]) -> bool:
        """Take in the answer to `search()`; False: it was cut short (a full page, a truncated
        aggregation) or left nothing to skip, so nothing may be skipped from now on."""
        self.fresh = []
        if self.empty is None:
            ns = resp["aggregations"]["ns"]
            if ns["sum_other_doc_count"] or any(b["kind"]["sum_other_doc_count"] for b in ns["buckets"]):
                return False
            self.empty = self.groups - {(b["key"], k["key"]) for b in ns["buckets"] for k in b["kind"]["buckets"]}
            return bool(self.empty)
        hits = resp["hits"]["hits"]
        for h in hits:
            self.learn(h["_id"], h["_source"])
        return len(hits) < self.page
