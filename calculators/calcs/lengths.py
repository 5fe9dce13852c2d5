"""Distributions given by a mean and a coefficient of variation (spread ÷ mean), shared by the
calculators that draw or tabulate request lengths (the engine's workloads, paging).

  lognormal: σ² = ln(1 + cv²), μ = ln(mean) − σ²/2   (so that E[X] = mean and sd(X) = cv × mean)
  uniform:   half-width a = cv × √3 × mean            (a uniform of half-width a has sd a ÷ √3)
"""

from __future__ import annotations

import math


def lognormal_mu_sigma(mean: float, cv: float) -> tuple[float, float]:
    """(μ, σ) of the log of a lognormal with this mean and coefficient of variation."""
    sigma2 = math.log1p(cv * cv)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


def uniform_half_width(mean: float, cv: float, max_ratio: float = math.inf) -> float:
    """Half-width of a uniform with this mean and coefficient of variation; at most max_ratio × mean."""
    return min(cv * math.sqrt(3), max_ratio) * mean
