"""Percentile explorer: mean against p50/p90/p99/p99.9 for a heavy-tailed latency, and tail amplification.

Latency model: a lognormal body (median m, log-space spread σ), optionally mixed with a slow path
that a fraction f of requests take, also lognormal with the same σ but median k × m:
  F(x) = (1 − f) Φ(ln(x / m) / σ) + f Φ(ln(x / (k m)) / σ)
  mean = ((1 − f) + f k) × m × exp(σ² / 2)                  (lognormal mean; mixture is linear)
Fan-out: a task that makes n independent calls sees none above the per-call p-quantile with
probability p^n (Dean and Barroso, "The Tail at Scale", CACM 56(2), 2013: 1 − 0.99^100 ≈ 63%);
the slowest of n calls has CDF F(x)^n, so its q-quantile is F⁻¹(q^(1/n)).
Confidence in a measured percentile (distribution-free, exact binomial): the number B of n requests
faster than the true q-quantile ξ is Binomial(n, q), so the r-th and s-th fastest bracket ξ,
X_(r) ≤ ξ < X_(s), with probability P(r ≤ B ≤ s − 1) (David and Nagaraja, "Order Statistics",
3rd ed., Wiley 2003, §7.1). The sample's slowest request bounds ξ from above at confidence 1 − α/2
only once q^n ≤ α/2, i.e. n ≥ ln(α/2) ÷ ln q requests.
Closed form throughout (quantiles of the mixture by bisection); no randomness.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from ..schema import integer, mark, number, output, series, step

_STD = NormalDist()
FANOUTS = (1, 2, 5, 10, 20, 30, 50, 70, 100, 150, 200)  # the plot; the reader's n is added
LEVELS = (50.0, 90.0, 99.0, 99.9)
NAMES = {"p99": "p99", "p999": "p99.9"}


def _binomial_cdf(n: int, q: float):
    """k -> P(Binomial(n, q) ≤ k), summed in log space over mean ± 12 standard deviations (the terms
    outside are below 1e-30 together)."""
    mean, sd = n * q, math.sqrt(n * q * (1 - q))
    lo, hi = max(0, math.floor(mean - 12 * sd - 12)), min(n, math.ceil(mean + 12 * sd + 12))
    base = math.lgamma(n + 1)
    pmf = [
        math.exp(base - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(q) + (n - k) * math.log1p(-q))
        for k in range(lo, hi + 1)
    ]
    cum, total = [], 0.0
    for x in pmf:
        total += x
        cum.append(total)
    return lambda k: 0.0 if k < lo else 1.0 if k >= hi else min(1.0, cum[k - lo])


def order_statistic_ci(n: int, q: float, confidence: float) -> tuple[int, int, float]:
    """(r, s, coverage): the r-th and s-th fastest of n bracket the true q-quantile with probability
    coverage ≥ confidence, each tail ≤ (1 − confidence) ÷ 2; s = n + 1 when even the slowest request is
    not an upper bound at that confidence."""
    cdf, tail = _binomial_cdf(n, q), (1 - confidence) / 2
    centre = min(n, max(1, math.ceil(n * q)))
    r = centre
    while r > 1 and cdf(r - 1) > tail:
        r -= 1
    if cdf(r - 1) > tail:
        r = 0  # not even the fastest request is a lower bound
    s = centre
    while s <= n and cdf(s - 1) < 1 - tail:
        s += 1
    return r, s, min(cdf(s - 1), 1.0) - (cdf(r - 1) if r else 0.0)


def requests_for_upper_bound(q: float, confidence: float) -> int:
    """Fewest requests whose slowest bounds the true q-quantile from above at one-sided confidence
    1 − (1 − confidence) ÷ 2: q^n ≤ (1 − confidence) ÷ 2."""
    return math.ceil(math.log((1 - confidence) / 2) / math.log(q) - 1e-12)


class Latency:
    """The lognormal-plus-slow-path distribution, with its CDF, quantile and mean."""

    def __init__(self, median_s: float, sigma: float, slow_fraction: float, slow_multiplier: float):
        self.m, self.sigma, self.f, self.k = median_s, sigma, slow_fraction, slow_multiplier

    def cdf(self, x: float) -> float:
        def body(median):
            return _STD.cdf(math.log(x / median) / self.sigma)

        return (1 - self.f) * body(self.m) + self.f * body(self.k * self.m)

    def mean(self) -> float:
        return ((1 - self.f) + self.f * self.k) * self.m * math.exp(self.sigma**2 / 2)

    def quantile(self, q: float) -> float:
        """x with F(x) = q, for 0 < q < 1: closed form without a slow path, else bisection in ln x."""
        z = _STD.inv_cdf(q)
        if self.f == 0 or self.k == 1:
            return self.m * math.exp(self.sigma * z)
        # The mixture's quantile lies between its two components' quantiles at the same level.
        lo, hi = math.log(self.m) + self.sigma * z, math.log(self.k * self.m) + self.sigma * z
        for _ in range(200):
            mid = (lo + hi) / 2
            if self.cdf(math.exp(mid)) < q:
                lo = mid
            else:
                hi = mid
            if hi - lo < 1e-14:
                break
        return math.exp((lo + hi) / 2)

    def slowest_of(self, n: int, q: float) -> float:
        """The q-quantile of the slowest of n independent calls."""
        return self.quantile(q ** (1 / n))


SCHEMA = {
    "name": "percentiles",
    "title": "Percentile explorer: means, tails and fan-out",
    "description": (
        "Latency of one call as a lognormal (median and log-space spread σ), optionally "
        "mixed with a slow path taken by a share of calls (queueing behind a long "
        "prefill, a preemption, a retry). Shows the mean against the percentiles, and "
        "what a task that makes n independent calls sees. Closed form; calls are "
        "assumed independent, which understates the tail when slowness is shared."
    ),
    "inputs": [
        number("median_s", "Median latency (p50)", 0.4, 0.000001, 100_000.0, "s"),
        number(
            "sigma",
            "Spread σ (standard deviation of ln latency)",
            0.5,
            0.01,
            3.0,
            "",
            "0.1 is tight, 0.5 moderate, 1 or more heavy-tailed. p99 ÷ p50 = exp(2.326 σ).",
        ),
        number(
            "slow_fraction",
            "Share of calls on a slow path",
            0.0,
            0.0,
            0.5,
            "",
            "A fraction between 0 and 0.5; 0 gives a plain lognormal.",
        ),
        number(
            "slow_multiplier",
            "Slow-path slowdown",
            10.0,
            1.0,
            1000.0,
            "×",
            "Median of the slow path ÷ median of the fast path.",
        ),
        integer("calls_per_task", "Calls per task (fan-out) n", 10, 1, 100_000, "calls"),
        number("percentile", "Per-call percentile p", 99.0, 50.0, 99.999, "%"),
        number("slo_s", "Latency SLO threshold", 1.0, 0.000001, 100_000.0, "s"),
        integer("sample_size", "Requests measured (for the confidence intervals)", 1000, 1, 100_000, "requests"),
        number("confidence", "Confidence level", 95.0, 50.0, 99.99, "%"),
    ],
    "outputs": [
        output("mean_s", "Mean", "s", "seconds"),
        output("p50_s", "p50 (median)", "s", "seconds"),
        output("p90_s", "p90", "s", "seconds"),
        output("p99_s", "p99", "s", "seconds"),
        output("p999_s", "p99.9", "s", "seconds"),
        output("mean_over_p50", "Mean ÷ median", "×", "number"),
        output("p99_over_p50", "p99 ÷ median", "×", "number"),
        output("p99_over_mean", "p99 ÷ mean", "×", "number"),
        output("share_above_mean", "Share of calls slower than the mean", "", "percent"),
        output("per_call_threshold_s", "Per-call p-th percentile", "s", "seconds"),
        output("task_all_below_fraction", "Tasks with no call above the p-th percentile", "", "percent"),
        output("task_any_above_fraction", "Tasks with at least one call above it", "", "percent"),
        output("slowest_call_p50_s", "Slowest call in a task, median task", "s", "seconds"),
        output("slowest_call_p99_s", "Slowest call in a task, p99 task", "s", "seconds"),
        output(
            "per_call_miss_for_task_p99",
            "Share of calls that may miss, for the task p99 (1 − 0.99^(1/n))",
            "",
            "percent",
        ),
        output("slo_attainment_per_call", "Calls within the SLO", "", "percent"),
        output("slo_attainment_per_task", "Tasks with every call within the SLO", "", "percent"),
        output("p99_ci_low_rank", "p99 interval: r-th fastest request (lower end)", "", "integer"),
        output("p99_ci_high_rank", "p99 interval: s-th fastest request (upper end; n + 1 = none)", "", "integer"),
        output(
            "p99_ci_low_s", "p99 interval, lower end (quantile at rank ÷ (n + 1), this distribution)", "s", "seconds"
        ),
        output(
            "p99_ci_high_s", "p99 interval, upper end (quantile at rank ÷ (n + 1), this distribution)", "s", "seconds"
        ),
        output("p999_ci_low_rank", "p99.9 interval: r-th fastest request (lower end)", "", "integer"),
        output("p999_ci_high_rank", "p99.9 interval: s-th fastest request (upper end; n + 1 = none)", "", "integer"),
        output(
            "p999_ci_low_s", "p99.9 interval, lower end (quantile at rank ÷ (n + 1), this distribution)", "s", "seconds"
        ),
        output(
            "p999_ci_high_s",
            "p99.9 interval, upper end (quantile at rank ÷ (n + 1), this distribution)",
            "s",
            "seconds",
        ),
        output("requests_for_p99_bound", "Requests before the slowest bounds the p99", "requests", "integer"),
        output("requests_for_p999_bound", "Requests before the slowest bounds the p99.9", "requests", "integer"),
    ],
}


def _series(dist: Latency, n: int, p: float) -> dict:
    xs = sorted(set(FANOUTS) | {n})
    levels = sorted({90.0, 99.0, 99.9, p})
    tail = series(
        "Tasks with no call above the per-call percentile",
        "Calls per task n",
        "calls",
        xs,
        [(f"p{lv:g}", "%", [100 * (lv / 100) ** x for x in xs]) for lv in levels],
    )
    slowest = series(
        "Slowest call per task against fan-out",
        "Calls per task n",
        "calls",
        xs,
        [
            ("median task", "s", [dist.slowest_of(x, 0.5) for x in xs]),
            ("p99 task", "s", [dist.slowest_of(x, 0.99) for x in xs]),
            ("one call, p99", "s", [dist.quantile(0.99)] * len(xs)),
        ],
    )
    return {
        "task_tail": mark(tail, "calls_per_task", n, on=f"p{p:g}"),
        "slowest_call": mark(slowest, "calls_per_task", n),
    }


def _derivation(v, dist, q, mean, per_call, all_below) -> list:
    m, s, f, k, n = v["median_s"], v["sigma"], v["slow_fraction"], v["slow_multiplier"], v["calls_per_task"]
    p = v["percentile"] / 100
    return [
        step(
            "Mean",
            "((1 − f) + f × k) × m × exp(σ² ÷ 2)",
            "((1 − {}) + {} × {}) × {} × exp({}² ÷ 2)",
            [f, f, k, (m, "s"), s],
            mean,
            "s",
        ),
        step(
            "p99 (one call)",
            "F⁻¹(0.99); with f = 0: m × exp(2.326 × σ)",
            "F⁻¹(0.99) with m = {}, σ = {}",
            [(m, "s"), s],
            q[99.0],
            "s",
        ),
        step("Per-call p-th percentile", "F⁻¹(p ÷ 100)", "F⁻¹({} ÷ 100)", [v["percentile"]], per_call, "s"),
        step("No call above it in a task of n", "(p ÷ 100)^n", "{}^{}", [p, n], all_below, "share"),
        step(
            "Slowest call, median task",
            "F⁻¹(0.5^(1 ÷ n))",
            "F⁻¹(0.5^(1 ÷ {})) = F⁻¹({})",
            [n, 0.5 ** (1 / n)],
            dist.slowest_of(n, 0.5),
            "s",
        ),
        step(
            "Tasks with every call within the SLO",
            "F(SLO)^n",
            "{}^{}",
            [dist.cdf(v["slo_s"]), n],
            dist.cdf(v["slo_s"]) ** n,
            "share",
        ),
    ]


def _intervals(dist: Latency, n: int, confidence: float) -> tuple[dict, list]:
    """Order-statistic intervals for p99 and p99.9, with the latency the r-th and s-th fastest of n have
    on average under this distribution (at level rank ÷ (n + 1); an open end is shown as the p99.99... of
    level n ÷ (n + 1))."""
    out, notes = {}, []
    for key, q in (("p99", 0.99), ("p999", 0.999)):
        r, s, _ = order_statistic_ci(n, q, confidence)
        out[f"{key}_ci_low_rank"], out[f"{key}_ci_high_rank"] = r, s
        out[f"{key}_ci_low_s"] = dist.quantile(max(r, 1) / (n + 1))
        out[f"{key}_ci_high_s"] = dist.quantile(min(s, n) / (n + 1))
        out[f"requests_for_{key}_bound"] = requests_for_upper_bound(q, confidence)
        if s > n:
            notes.append(
                f"with {n:,} requests not even the slowest bounds the {NAMES[key]} from above at "
                f"{100 * confidence:g}% confidence: the upper end is open (shown at the slowest request)"
            )
    return out, notes


def compute(v: dict) -> dict:
    dist = Latency(v["median_s"], v["sigma"], v["slow_fraction"], v["slow_multiplier"])
    n, p = v["calls_per_task"], v["percentile"] / 100
    q = {lv: dist.quantile(lv / 100) for lv in LEVELS}
    mean = dist.mean()
    per_call = dist.quantile(p)
    all_below = p**n
    per_call_slo = dist.cdf(v["slo_s"])
    intervals, ci_notes = _intervals(dist, v["sample_size"], v["confidence"] / 100)
    return {
        "mean_s": mean,
        "p50_s": q[50.0],
        "p90_s": q[90.0],
        "p99_s": q[99.0],
        "p999_s": q[99.9],
        "mean_over_p50": mean / q[50.0],
        "p99_over_p50": q[99.0] / q[50.0],
        "p99_over_mean": q[99.0] / mean,
        "share_above_mean": 1 - dist.cdf(mean),
        "per_call_threshold_s": per_call,
        "task_all_below_fraction": all_below,
        "task_any_above_fraction": 1 - all_below,
        "slowest_call_p50_s": dist.slowest_of(n, 0.5),
        "slowest_call_p99_s": dist.slowest_of(n, 0.99),
        "per_call_level_for_task_p99": 0.99 ** (1 / n),
        "per_call_miss_for_task_p99": 1 - 0.99 ** (1 / n),
        **intervals,
        "slo_attainment_per_call": per_call_slo,
        "slo_attainment_per_task": per_call_slo**n,
        "derivation": _derivation(v, dist, q, mean, per_call, all_below),
        "series": _series(dist, n, v["percentile"]),
        "notes": [
            "Calls are treated as independent; shared causes (one overloaded replica, a "
            "long prefill ahead of all of them) make the task tail worse than shown."
        ]
        + ci_notes,
    }
