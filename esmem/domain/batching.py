"""How a long write is cut into batches: merge order inside a batch, and plain batches in flight.

A batch holds no two memories of which the decision could read the later as anything but coexisting
with the earlier (`merge.conflict`: the pair reading itself, not only a shared topic), so the
decisions of one batch's look-ups are the decisions made one memory at a time in input order, but for
a memory whose top candidates would have been others had an earlier one of its batch already retired
one: on 3,000 bench memories in 4 namespaces (chains of updates of one template), 10 of 3,000
decisions differ from one-at-a-time writes. Reading the pair rather than the shared topic cut the
bench's 10k merge sample from 129 batches to 51 (memories of one template with other values share
a topic but read as two facts). Without merge, batches are independent and two `_bulk` calls are in
flight at once.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Mapping, Sequence

from esmem.domain.merge import Mergeable, MergePolicy
from esmem.domain.types import WriteResult

Pairs = Sequence[tuple[str, Mapping[str, Any]]]


def next_batch(pairs: Pairs, todo: Sequence[int], batch_size: int, policy: MergePolicy, semantic: bool) -> list[int]:
    """The next batch: positions of `todo` (in input order, the first always in it) of which none is in
    conflict with an earlier one; one that is waits, and so does every later memory in conflict with one
    waiting. Looks at most 4 x batch_size memories ahead."""
    ids: set[str] = set()
    looked_at: dict[tuple[str, str], Mergeable] = {}  # per group: the memories taken or waiting
    batch: list[int] = []
    for looked, n in enumerate(todo):
        if len(batch) == batch_size or looked == 4 * batch_size:  # bounded: all alike is one at a time
            break
        doc_id, d = pairs[n]
        if policy.enabled:
            key = (d["namespace"], d["kind"])
            group = looked_at.get(key) or looked_at.setdefault(key, Mergeable(d["kind"], policy, semantic))
            waits = doc_id in ids or group.any(d["content"], d["valid_from"])
            group.add(d["content"], valid_from=d["valid_from"])
            if waits:
                ids.add(doc_id)
                continue
        elif doc_id in ids:  # the same memory twice: the second is a replay of the first
            break
        ids.add(doc_id)
        batch.append(n)
    return batch


def write_plain_all(pairs: Pairs, batch_size: int, write: Callable[[list[Any]], list[WriteResult]],
                    progress: Callable[[int], None] | None, in_flight: int = 2) -> list[WriteResult]:
    """Without merge: `in_flight` batches written at once (`write` of a batch's pairs, in threads), so
    the engine indexes one while the client encodes the next; 1: one after the other in the caller's
    thread. A batch that repeats an earlier id (its replay) waits for every batch before it; `progress`
    counts batches in input order."""
    results: list[WriteResult] = []
    pending: deque[tuple[int, Future[list[WriteResult]]]] = deque()
    off = MergePolicy(enabled=False)
    if in_flight < 2:
        start = 0
        while start < len(pairs):
            batch = next_batch(pairs, range(start, len(pairs)), batch_size, off, False)
            results.extend(write([pairs[n] for n in batch]))
            if progress:
                progress(len(batch))
            start = batch[-1] + 1
        return results

    def land() -> None:  # the oldest batch in flight; on an error, the other lands first
        size, fut = pending.popleft()
        try:
            results.extend(fut.result())
        except BaseException:
            wait([f for _, f in pending])
            raise
        if progress:
            progress(size)

    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        seen: set[str] = set()
        start = 0
        while start < len(pairs):
            batch = next_batch(pairs, range(start, len(pairs)), batch_size, off, False)
            if any(pairs[n][0] in seen for n in batch):
                while pending:
                    land()
            seen.update(pairs[n][0] for n in batch)
            while len(pending) >= in_flight:
                land()
            pending.append((len(batch), pool.submit(write, [pairs[n] for n in batch])))
            start = batch[-1] + 1
        while pending:
            land()
    return results
