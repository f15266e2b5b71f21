"""What an installation's memories cost on disk and how that grows: versions per active memory (history
is never deleted until erase or retention), bytes per memory, and the size at a given number of memories
or after a given time at a given write rate.

Bytes come from the engine's own index statistics (`_stats/store,docs` of the primaries, after a
refresh): `bytes_per_document` = store.size_in_bytes / docs.count over the whole index. The index
holds every namespace, so a namespace's bytes are its documents (all versions) times that average: a
namespace of longer texts costs more than it shows. Deleted documents (an erase, a retention run, an
update) keep their bytes until a segment merge: `deleted_documents` says how many are still counted
in the store size, so bytes per document run high right after a large delete.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from esmem.domain.store import TOMBSTONE, MemoryStore
from esmem.errors import InvalidInput
from esmem.index.catalog import Search
from esmem.values import check_namespace


@dataclass(frozen=True)
class NamespaceGrowth:
    """One namespace's versions: `active` memories, the `superseded` versions replaced by a newer one,
    the `outdated` ones (written already superseded: older than what was there), the `forgotten` ones
    (superseded by a tombstone of `forget`), and `other` non-active statuses (e.g. imported `retired`)."""

    namespace: str
    active: int
    superseded: int
    outdated: int
    forgotten: int
    other: int
    versions: int                  # every document of the namespace, active or not
    versions_per_active: float     # versions / active (0 when nothing is active)
    bytes: float                   # versions x the index's bytes per document (an estimate: see module)
    bytes_per_memory: float        # bytes / active


@dataclass(frozen=True)
class Growth:
    """`esmem stats --growth`; `as_dict()` is JSON-ready."""

    prefix: str
    namespace: str | None
    index_documents: int           # primaries' docs.count: every version of every namespace
    deleted_documents: int         # primaries' docs.deleted: erased, still on disk until a merge
    store_bytes: int               # primaries' store.size_in_bytes
    bytes_per_document: float      # store_bytes / index_documents
    namespaces: tuple[NamespaceGrowth, ...]
    active: int
    versions: int
    versions_per_active: float
    bytes_per_memory: float        # bytes per active memory, its history included
    projected_memories: int | None
    projected_bytes: float | None  # projected_memories x bytes_per_memory
    rate: float | None             # writes per day (each one that is not a duplicate adds a document)
    days: int                      # over how many days `rate` is projected
    projected_rate_bytes: float | None  # store_bytes + rate x days x bytes_per_document

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _namespace(name: str, counts: dict[str, int], outdated: int, forgotten: int, per_doc: float) -> NamespaceGrowth:
    versions = sum(counts.values())
    active = counts.get("active", 0)
    superseded = counts.get("superseded", 0)
    forgotten = min(forgotten, superseded)  # a tombstone someone superseded again forgot nothing now visible
    nbytes = versions * per_doc
    return NamespaceGrowth(
        namespace=name, active=active, superseded=superseded - outdated - forgotten, outdated=outdated,
        forgotten=forgotten, other=versions - active - superseded, versions=versions,
        versions_per_active=versions / active if active else 0.0, bytes=nbytes,
        bytes_per_memory=nbytes / active if active else 0.0)


def growth(store: MemoryStore, namespace: str | None = None, *, project: int | None = None,
           rate: float | None = None, days: int = 365) -> Growth:
    """Versions and bytes per namespace (one, or every namespace of the prefix), the size at `project`
    active memories at today's bytes per memory (history included), and the size after `days` days of
    `rate` writes a day: every write that is not a duplicate adds one document (a superseded version
    stays), so the index grows by rate x days documents at today's bytes per document."""
    if project is not None and (isinstance(project, bool) or not isinstance(project, int) or project < 1):
        raise InvalidInput(f"project must be a positive integer, got {project!r}")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0):
        raise InvalidInput(f"rate must be a positive number of writes per day, got {rate!r}")
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise InvalidInput(f"days must be a positive integer, got {days!r}")
    if namespace:
        check_namespace(namespace)
    store.flush()
    prim = store.catalog.store_stats()  # refreshes first
    docs, deleted = int(prim["docs"]["count"]), int(prim["docs"].get("deleted", 0))
    size = int(prim["store"]["size_in_bytes"])
    per_doc = size / docs if docs else 0.0
    params: dict[str, Any] = {"tombstone": TOMBSTONE, **({"namespace": namespace} if namespace else {"every": True})}
    resp = store.catalog.search(Search("growth", params, routing=namespace))
    spaces = tuple(_namespace(b["key"], {s["key"]: s["doc_count"] for s in b["status"]["buckets"]},
                              b["outdated"]["doc_count"], b["tombstones"]["doc_count"], per_doc)
                   for b in sorted(resp["aggregations"]["ns"]["buckets"], key=lambda b: b["key"]))
    active, versions = sum(n.active for n in spaces), sum(n.versions for n in spaces)
    per_memory = versions * per_doc / active if active else 0.0
    return Growth(
        prefix=store.names.prefix, namespace=namespace, index_documents=docs, deleted_documents=deleted,
        store_bytes=size, bytes_per_document=per_doc, namespaces=spaces, active=active, versions=versions,
        versions_per_active=versions / active if active else 0.0, bytes_per_memory=per_memory,
        projected_memories=project, projected_bytes=project * per_memory if project else None,
        rate=rate, days=days, projected_rate_bytes=size + rate * days * per_doc if rate else None)
