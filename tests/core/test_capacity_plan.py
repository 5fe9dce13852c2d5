"""Capacity plan: traffic → replicas → GPUs → dollars; hand sums, properties, and the Day-6 figures."""

from __future__ import annotations

import math

import pytest

from calculators.api import run
from calculators.calcs.capacity_plan import HOURS_PER_MONTH, replicas_for
from calculators.errors import InputError


def test_bill_and_cost_per_task_are_hand_sums():
    r = run("capacity_plan", {})
    # defaults: 1 GPU per replica at $2/GPU-h, peak 20 requests/s, average half of it, 30% headroom
    assert r["replicas"] == math.ceil(20 * 1.3 / r["capacity_requests_per_s"])
    assert r["gpus"] == r["replicas"]
    assert r["usd_per_month"] == pytest.approx(r["gpus"] * 2.0 * 730)
    assert r["usd_per_task"] == pytest.approx(r["usd_per_month"] / (10 * 730 * 3600))
    # the task's cost splits into its input and its output parts exactly
    uncached, out = round(2000 * 0.5), 400
    split = (r["usd_per_million_input_tokens"] * uncached + r["usd_per_million_output_tokens"] * out) / 1e6
    assert split == pytest.approx(r["usd_per_task"])
    assert r["average_utilisation"] == pytest.approx(10 / (r["replicas"] * r["capacity_requests_per_s"]))


def test_tpot_is_within_target_and_one_more_sequence_would_break_it_or_not_fit():
    r = run("capacity_plan", {})
    assert r["tpot_s"] <= 0.05
    tighter = run("capacity_plan", {"tpot_slo_s": r["tpot_s"] * 0.999})
    assert tighter["batch"] < r["batch"] and tighter["capacity_requests_per_s"] < r["capacity_requests_per_s"]


def test_replicas_round_up_and_headroom_only_adds():
    assert replicas_for(10, 0.0, 5.0) == 2
    assert replicas_for(10.0001, 0.0, 5.0) == 3
    assert replicas_for(10, 0.3, 5.0) == 3
    base = run("capacity_plan", {"headroom": 0.0})["gpus"]
    assert all(run("capacity_plan", {"headroom": h})["gpus"] >= base for h in (0.1, 0.5, 1.0))


def test_caching_more_of_the_prompt_never_costs_more():
    costs = [run("capacity_plan", {"cached_share": s})["usd_per_task"] for s in (0.0, 0.3, 0.6, 0.9)]
    assert costs == sorted(costs, reverse=True)
    r = run("capacity_plan", {})
    assert r["usd_per_task_uncached"] > r["usd_per_task"]


def test_more_gpus_per_replica_for_a_70b_model():
    r = run("capacity_plan", {"model": "llama-3.1-70b", "num_gpus": 4})
    assert r["gpus"] == 4 * r["replicas"]


def test_a_target_no_batch_meets_names_the_field():
    with pytest.raises(InputError) as e:
        run("capacity_plan", {"tpot_slo_s": 0.0001})
    assert e.value.field == "tpot_slo_s"


def test_deepseek_day6_daily_cost():
    """DeepSeek, open-infra-index, 202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md
    (2025-02-28): average 226.75 nodes of 8 H800 at $2/GPU-h → $87,072 a day. The plan's bill is
    GPUs × price × hours: the same sum over 24 h (exact)."""
    assert 226.75 * 8 * 2.0 * 24 == pytest.approx(87_072, abs=0.5)
    assert HOURS_PER_MONTH == 730.0
