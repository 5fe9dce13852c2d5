"""Price-sheet decoder: revenue sums, break-even, margins, and DeepSeek's Day-6 published figures."""

from __future__ import annotations

import pytest

from calculators.api import run
from calculators.calcs.price_decoder import revenue
from calculators.errors import InputError

DAY6_SHEET = (0.55, 0.14, 2.19)  # DeepSeek-R1: $/M input (cache miss), $/M input (cache hit), $/M output


def test_day6_theoretical_revenue_and_margin():
    """DeepSeek, open-infra-index, 202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md
    (2025-02-28): 608B input tokens of which 342B hit the cache, 168B output, all at R1's prices → $562,027 a day;
    cost $87,072; "cost profit margin of 545%". Token counts are given to 1B, so the sum is good to about 0.1%."""
    day = revenue(608e9 - 342e9, 342e9, 168e9, DAY6_SHEET)
    assert day == pytest.approx(562_027, rel=1e-3)
    assert 562_027 / 87_072 - 1 == pytest.approx(5.45, abs=0.005)


def test_revenue_is_the_hand_sum():
    assert revenue(1000, 1000, 400, DAY6_SHEET) == pytest.approx((1000 * 0.55 + 1000 * 0.14 + 400 * 2.19) / 1e6)


def test_break_even_rate_and_margins_are_consistent():
    r = run("price_decoder", {})
    assert r["break_even_tasks_per_s_per_gpu"] == pytest.approx(2.0 / 3600 / r["revenue_per_task"])
    assert r["break_even_output_tokens_per_s_per_gpu"] == pytest.approx(400 * r["break_even_tasks_per_s_per_gpu"])
    assert r["cost_per_task"] == pytest.approx(2.0 / 3600 / r["tasks_per_s_per_gpu"])
    assert r["margin"] == pytest.approx(1 - r["cost_per_task"] / r["revenue_per_task"])
    assert 1 + r["cost_profit_margin"] == pytest.approx(1 / (1 - r["margin"]))


def test_break_even_batch_is_the_smallest_that_breaks_even():
    r = run("price_decoder", {})
    b = r["break_even_batch"]
    assert b >= 1
    at = run("price_decoder", {"batch_size": b})
    assert at["margin"] >= -1e-12
    if b > 1:
        assert run("price_decoder", {"batch_size": b - 1})["margin"] < 0


def test_cheaper_prices_need_a_bigger_batch():
    batches = [
        run(
            "price_decoder",
            {"usd_per_million_output": p, "usd_per_million_input": p / 4, "usd_per_million_cached_input": p / 16},
        )["break_even_batch"]
        for p in (4.0, 1.0, 0.5)
    ]
    assert batches == sorted(batches) and batches[0] < batches[-1]


def test_a_batch_that_does_not_fit_names_the_field():
    with pytest.raises(InputError) as e:
        run("price_decoder", {"batch_size": 100_000})
    assert e.value.field == "batch_size"


def test_a_free_sheet_is_refused():
    with pytest.raises(InputError):
        run(
            "price_decoder",
            {"usd_per_million_input": 0, "usd_per_million_cached_input": 0, "usd_per_million_output": 0},
        )
