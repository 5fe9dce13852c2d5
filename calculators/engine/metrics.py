"""Percentiles of simulated latencies, with the confidence an order statistic gives them, and the
inter-token gaps of a run, pooled by value."""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import accumulate

from ..calcs.percentiles import order_statistic_ci


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile; 0.0 for no values."""
    if not sorted_values:
        return 0.0
    return sorted_values[max(0, math.ceil(pct / 100 * len(sorted_values)) - 1)]


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


class Gaps:
    """Inter-token gaps of the measured requests, pooled, as values with weights (how many): every
    sequence in the batch shares each decode step, so a run of k identical steps over m measured
    sequences is one value, the step, of weight (k − 1) × m, and the first step after a prefill is the
    stall plus the step for the sequences that were waiting on it. Filled by the engine; weights are
    never 0 (a gap nobody saw moves no percentile)."""

    def __init__(self):
        self.values, self.weights = [], []

    @property
    def pairs(self) -> list[tuple[float, int]]:
        return list(zip(self.values, self.weights))

    def percentiles(self, pcts) -> list[float]:
        """Nearest-rank percentiles: the smallest gap whose cumulative weight reaches ⌈pct% × total⌉
        (at least 1); 0.0 for none. One sort (of floats, by index) and one running total for all."""
        values, weights = self.values, self.weights
        order = sorted(range(len(values)), key=values.__getitem__)
        cumulative = list(accumulate([weights[i] for i in order]))
        total = cumulative[-1] if cumulative else 0
        if not total:
            return [0.0 for _ in pcts]
        return [values[order[bisect_left(cumulative, max(1, math.ceil(pct / 100 * total)))]] for pct in pcts]

    def longest(self) -> float:
        return max(self.values, default=0.0)
