"""Percentile explorer: closed forms, a seeded sampling oracle, and the published fan-out figure."""

import math
import random

import pytest

from calculators import InputError, run
from calculators.calcs.percentiles import Latency

Z99 = 2.3263478740408408  # Φ⁻¹(0.99)


def test_lognormal_closed_forms():
    r = run("percentiles", {"median_s": 0.4, "sigma": 0.5})
    assert r["p50_s"] == pytest.approx(0.4, rel=1e-10)
    assert r["mean_s"] == pytest.approx(0.4 * math.exp(0.125), rel=1e-10)
    assert r["p99_s"] == pytest.approx(0.4 * math.exp(0.5 * Z99), rel=1e-10)
    assert r["p99_over_p50"] == pytest.approx(math.exp(0.5 * Z99), rel=1e-10)
    # Share above the mean of a lognormal: 1 − Φ(σ/2)
    assert r["share_above_mean"] == pytest.approx(1 - 0.5 * (1 + math.erf(0.25 / math.sqrt(2))), rel=1e-9)


def test_tail_at_scale_fanout():
    """Dean and Barroso, CACM 56(2) 2013: p99 of 1 s per server, fan-out 100 → 63% of requests over 1 s."""
    r = run("percentiles", {"calls_per_task": 100, "percentile": 99})
    assert r["task_any_above_fraction"] == pytest.approx(0.634, abs=0.001)
    assert r["task_all_below_fraction"] == pytest.approx(0.99**100, rel=1e-10)


def test_slowest_call_and_slo_consistency():
    r = run("percentiles", {"median_s": 1.0, "sigma": 0.8, "calls_per_task": 20, "slo_s": 2.0})
    d = Latency(1.0, 0.8, 0.0, 10.0)
    # The median task's slowest call sits at the per-call 0.5^(1/n) quantile.
    assert d.cdf(r["slowest_call_p50_s"]) ** 20 == pytest.approx(0.5, rel=1e-9)
    assert r["slo_attainment_per_task"] == pytest.approx(r["slo_attainment_per_call"] ** 20, rel=1e-10)
    assert r["per_call_level_for_task_p99"] == pytest.approx(0.99 ** (1 / 20), rel=1e-10)


@pytest.mark.parametrize("f,k", [(0.02, 8.0), (0.2, 3.0), (0.5, 100.0)])
def test_mixture_quantiles_invert_the_cdf(f, k):
    d = Latency(0.3, 0.6, f, k)
    for q in (0.5, 0.9, 0.99, 0.999):
        assert d.cdf(d.quantile(q)) == pytest.approx(q, abs=1e-9)


def test_mixture_against_seeded_samples():
    """Independent oracle: 200,000 seeded draws from the same mixture."""
    rng, f, k = random.Random(1), 0.03, 8.0
    xs = sorted((0.4 * (k if rng.random() < f else 1.0)) * math.exp(0.5 * rng.gauss(0, 1)) for _ in range(200_000))
    r = run("percentiles", {"median_s": 0.4, "sigma": 0.5, "slow_fraction": f, "slow_multiplier": k})
    assert r["mean_s"] == pytest.approx(sum(xs) / len(xs), rel=0.02)
    for key, q in (("p50_s", 0.5), ("p90_s", 0.9), ("p99_s", 0.99)):
        assert r[key] == pytest.approx(xs[int(q * len(xs))], rel=0.03)


def test_slow_path_moves_the_tail_more_than_the_median():
    base = run("percentiles", {"median_s": 0.4, "sigma": 0.5})
    slow = run("percentiles", {"median_s": 0.4, "sigma": 0.5, "slow_fraction": 0.03, "slow_multiplier": 8})
    assert slow["p50_s"] / base["p50_s"] < 1.1
    assert slow["p99_s"] / base["p99_s"] > 2


def test_monotone_percentiles_and_series():
    r = run("percentiles", {"slow_fraction": 0.1, "calls_per_task": 7, "percentile": 95})
    assert r["p50_s"] < r["p90_s"] < r["p99_s"] < r["p999_s"]
    tail = r["series"]["task_tail"]
    assert 7 in tail["x"]["values"]
    for y in tail["y"]:
        if y.get("marker"):  # the reader's point (reader walk #29): one value, on the p95 curve at n = 7
            assert [v for v in y["values"] if v is not None] == [pytest.approx(100 * 0.95**7)]
            continue
        assert all(a >= b for a, b in zip(y["values"], y["values"][1:]))  # falls with n


def test_extremes_stay_finite():
    r = run(
        "percentiles",
        {"calls_per_task": 100_000, "percentile": 50, "sigma": 3.0, "slow_fraction": 0.5, "slow_multiplier": 1000},
    )
    assert r["task_all_below_fraction"] == 0.0
    assert math.isfinite(r["slowest_call_p99_s"])


@pytest.mark.parametrize(
    "field,value", [("sigma", 0), ("slow_fraction", 0.9), ("percentile", 100), ("calls_per_task", 0), ("median_s", -1)]
)
def test_bad_inputs_name_the_field(field, value):
    with pytest.raises(InputError) as exc:
        run("percentiles", {field: value})
    assert exc.value.field == field


# --- Confidence in a measured percentile (review parts-1-3 (c) Part 3; exact binomial) ---------------------

from fractions import Fraction  # noqa: E402
from math import comb  # noqa: E402

from calculators.calcs.percentiles import order_statistic_ci, requests_for_upper_bound  # noqa: E402
from calculators.calcs.percentiles import SCHEMA  # noqa: E402
from calculators.display import by_output_format  # noqa: E402


def _exact_cdf(n, q, k):
    """P(Binomial(n, q) ≤ k) in exact rational arithmetic."""
    q = Fraction(str(q))
    return float(sum(comb(n, j) * q**j * (1 - q) ** (n - j) for j in range(0, k + 1))) if k >= 0 else 0.0


@pytest.mark.parametrize("n, q", [(100, 0.9), (500, 0.99), (1000, 0.99), (1000, 0.999)])
def test_order_statistic_interval_is_the_tightest_with_both_tails_within_alpha_over_2(n, q):
    r, s, coverage = order_statistic_ci(n, q, 0.95)
    assert _exact_cdf(n, q, r - 1) <= 0.025 < _exact_cdf(n, q, r)  # r as large as it may be
    assert _exact_cdf(n, q, s - 1) >= 0.975 > _exact_cdf(n, q, s - 2)  # s as small as it may be
    assert coverage == pytest.approx(_exact_cdf(n, q, s - 1) - _exact_cdf(n, q, r - 1), abs=1e-9)
    assert coverage >= 0.95


def test_requests_needed_before_the_slowest_bounds_the_tail():
    assert requests_for_upper_bound(0.99, 0.95) == 368  # 0.99^368 ≤ 0.025 < 0.99^367
    assert requests_for_upper_bound(0.999, 0.95) == 3688
    assert order_statistic_ci(367, 0.99, 0.95)[1] == 368  # open: no request bounds it
    assert order_statistic_ci(368, 0.99, 0.95)[1] <= 368


def test_200_requests_cannot_bound_a_p99_and_say_so():
    out = run("percentiles", {"sample_size": 200})
    assert out["p99_ci_high_rank"] == 201 and any("p99 from above" in n for n in out["notes"])


def test_fan_out_miss_share_is_shown_without_rounding_it_away():
    """Review parts-1-3 row 20: the level 0.999498 was shown as '99.9%', doubling the allowed misses."""
    out = run("percentiles", {"calls_per_task": 20})
    assert by_output_format(out["per_call_miss_for_task_p99"], "percent") == "0.0502%"
    shown = {o["key"] for o in SCHEMA["outputs"]}
    assert "per_call_level_for_task_p99" not in shown and "per_call_miss_for_task_p99" in shown
