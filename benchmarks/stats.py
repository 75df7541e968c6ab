"""Summaries of repeated measurements: median, percentiles, spread. Nothing here measures."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["median", "percentile", "spread"]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The *q*-th percentile (0-100) of *values*, interpolated linearly between the nearest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def spread(values: Sequence[float]) -> tuple[float, float]:
    """The smallest and the largest value."""
    return min(values), max(values)
