"""Distributions given by a mean and a coefficient of variation (spread ÷ mean), shared by the
calculators that draw or tabulate request lengths (the engine's workloads, paging).

  lognormal: σ² = ln(1 + cv²), μ = ln(mean) − σ²/2   (so that E[X] = mean and sd(X) = cv × mean)
  uniform:   half-width a = cv × √3 × mean            (a uniform of half-width a has sd a ÷ √3)
"""

from __future__ import annotations

import math

from ..schema import choice, integer, number

DISTRIBUTIONS = [("fixed", "Fixed"), ("uniform", "Uniform"), ("lognormal", "Log-normal")]


def lognormal_mu_sigma(mean: float, cv: float) -> tuple[float, float]:
    """(μ, σ) of the log of a lognormal with this mean and coefficient of variation."""
    sigma2 = math.log1p(cv * cv)
    return math.log(mean) - sigma2 / 2, math.sqrt(sigma2)


def uniform_half_width(mean: float, cv: float, max_ratio: float = math.inf) -> float:
    """Half-width of a uniform with this mean and coefficient of variation; at most max_ratio × mean."""
    return min(cv * math.sqrt(3), max_ratio) * mean


def length_fields(
    input_mean: int,
    output_mean: int,
    input_cv: float = 0.5,
    output_cv: float = 0.5,
    input_max: int = 100_000,
    output_max: int = 20_000,
    output_cv_help: str = "",
) -> list[dict]:
    """The inputs of a drawn workload's lengths, prompt then output: each one's distribution, mean and spread."""
    return [
        choice("input_distribution", "Prompt length distribution", "lognormal", DISTRIBUTIONS),
        integer("input_tokens_mean", "Mean prompt length", input_mean, 1, input_max, "tokens"),
        number("input_tokens_cv", "Prompt length spread (std ÷ mean)", input_cv, 0.0, 4.0, "", step=0.05),
        choice("output_distribution", "Output length distribution", "lognormal", DISTRIBUTIONS),
        integer("output_tokens_mean", "Mean output length", output_mean, 1, output_max, "tokens"),
        number(
            "output_tokens_cv", "Output length spread (std ÷ mean)", output_cv, 0.0, 4.0, "", output_cv_help, step=0.05
        ),
    ]
