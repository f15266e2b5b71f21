"""A speed device of writes: skip the settle read while no other writer is writing.

A write knows the sequence numbers of its own writes. The checkpoint read just before the refresh that
made its memories searchable says how far the numbers went; if every write numbered after the settle
step's point up to there is one of its own, no other writer can have added a twin the look-ups missed
(a later one is its own writer's to settle), so the settle read is skipped. Measured with and without
it on a 5k bench merge import (one writer): 511 requests instead of 802 (88 refreshes instead of 174, no
settle reads instead of 87 searches and 975 look-ups); 113 -> 139 memories/s in one run (a busy 2-core
machine).
"""
from __future__ import annotations

from esmem.index.refresh import Checkpoint


class LoneWriter:
    """The sequence numbers one write used lately, and what they prove about other writers."""

    def __init__(self) -> None:
        self.mine: set[int] | None = set()  # None: not known (a write whose number the engine did not say)

    def wrote(self, seq_no: int | None) -> None:
        """A sequence number this write used (None: the engine did not say, e.g. `update_by_query`)."""
        if self.mine is not None:
            if seq_no is None:
                self.mine = None
            else:
                self.mine.add(seq_no)

    def quiet(self, point: Checkpoint, since: int) -> bool:
        """Was every write numbered after `since`, up to `point` (read after this write's writes were
        acknowledged), one of this write's own? `since` never decreases over a write, so older numbers
        are dropped."""
        if self.mine is None:
            return False
        self.mine = {n for n in self.mine if n > since}
        if point.last is None or point.seen != point.last:
            return False
        return sum(1 for n in self.mine if n <= point.last) == point.last - since
