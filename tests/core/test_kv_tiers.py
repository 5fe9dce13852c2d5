"""Fetch against recompute per tier: hand-computed fetch times, the break-even's defining property."""

from __future__ import annotations

import pytest

from calculators import run
from calculators.calcs import kv_tiers
from calculators.schema import validate

# Llama 3.1 8B in BF16: 2 (K and V) × 32 layers × 8 KV heads × 128 dims × 2 bytes = 131,072 B per token
KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2


def test_fetch_is_kv_bytes_over_the_tier_bandwidth():
    out = run("kv_tiers", {"prefix_tokens": 8192})
    assert out["kv_bytes_per_token_per_gpu"] == KV_PER_TOKEN
    assert out["fetch_host_pcie5_s"] == pytest.approx(8192 * KV_PER_TOKEN / 64e9)
    assert out["fetch_ssd_gen4_x4_s"] == pytest.approx(8192 * KV_PER_TOKEN / 8e9)
    assert out["fetch_custom_s"] == pytest.approx(8192 * KV_PER_TOKEN / 2e9)


def test_setup_time_and_efficiency_enter_as_written():
    out = run("kv_tiers", {"prefix_tokens": 1000, "setup_ms": 2.0, "tier_efficiency": 0.5})
    assert out["fetch_host_pcie5_s"] == pytest.approx(1000 * KV_PER_TOKEN / 32e9 + 0.002)


def test_two_way_tensor_parallel_halves_what_each_gpu_fetches():
    one = run("kv_tiers", {"num_gpus": 1})
    two = run("kv_tiers", {"num_gpus": 2})
    assert two["kv_bytes_per_token_per_gpu"] == pytest.approx(one["kv_bytes_per_token_per_gpu"] / 2)


@pytest.mark.parametrize("tier", [*kv_tiers.TIERS, "custom"])
@pytest.mark.parametrize("inputs", [{"setup_ms": 1.0}, {"custom_gb_per_s": 2.0}, {"custom_gb_per_s": 0.5}])
def test_the_break_even_is_the_first_length_at_which_fetching_wins(tier, inputs):
    c = kv_tiers.Tiers(validate(kv_tiers.SCHEMA["inputs"], inputs))
    even = c.break_even(tier)
    if even == 0:  # never below the search's limit
        assert c.fetch(tier, kv_tiers.MAX_SEARCH_TOKENS) >= c.recompute(kv_tiers.MAX_SEARCH_TOKENS)
    else:
        assert c.fetch(tier, even) < c.recompute(even)
        assert even == 1 or c.fetch(tier, even - 1) >= c.recompute(even - 1)


def test_a_fast_tier_wins_from_the_first_token_without_setup_time():
    assert run("kv_tiers", {})["break_even_host_pcie5_tokens"] == 1


def test_a_slow_tier_breaks_even_only_at_long_prefixes():
    """2 GB/s: 131,072 B per token is 65.5 µs a token, against 32.5 µs of linear prefill per token (16 GFLOP
    at 0.5 × 989 TFLOP/s): only the causal attention term, growing with L, closes the gap, far out."""
    out = run("kv_tiers", {"custom_gb_per_s": 2.0})
    assert 16_384 < out["break_even_custom_tokens"] < 262_144


def test_at_the_tie_bandwidth_fetch_and_recompute_are_equal():
    v = {"prefix_tokens": 32768, "setup_ms": 0.5}
    out = run("kv_tiers", v)
    tied = run("kv_tiers", {**v, "custom_gb_per_s": out["bandwidth_to_tie_gb_per_s"]})
    assert tied["fetch_custom_s"] == pytest.approx(out["recompute_s"], rel=1e-9)


def test_recompute_is_the_preemption_calculators_recompute():
    """One prefill model for both pages: the same deployment gives the same recompute time."""
    tiers = run("kv_tiers", {"prefix_tokens": 8192})
    pre = run("preemption", {"context_tokens": 8192, "compute_efficiency": 0.5})
    assert tiers["recompute_s"] == pytest.approx(pre["recompute_time_s"], rel=1e-12)
