"""Percentiles of simulated latencies, with the confidence an order statistic gives them."""

from __future__ import annotations

import math

from ..calcs.goodput import percentile
from ..calcs.percentiles import order_statistic_ci


def percentile_with_ci(values, pct: float, confidence: float = 0.95) -> tuple[float, float, float]:
    """(nearest-rank pct-th percentile, lower, upper) of the values; the bounds are the order statistics
    that hold the true percentile with at least `confidence` (the binomial argument in percentiles.py);
    a bound the sample cannot give is 0 (lower: latencies are not negative) or inf (upper)."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return 0.0, 0.0, 0.0
    lo, hi, _ = order_statistic_ci(n, pct / 100, confidence)
    return percentile(ordered, pct), ordered[lo - 1] if lo >= 1 else 0.0, ordered[hi - 1] if hi <= n else math.inf
