"""Latency summaries: one percentile definition for `esmem eval` and `esmem bench`."""
from __future__ import annotations

import statistics
from typing import Sequence


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 (inclusive interpolation between samples) and the mean; zeros without samples."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0}
    if len(values) == 1:
        return {"p50": values[0], "p95": values[0], "p99": values[0], "mean": values[0]}
    qs = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": qs[49], "p95": qs[94], "p99": qs[98], "mean": statistics.fmean(values)}
