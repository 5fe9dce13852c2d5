"""Keep, offload or recompute during a tool wait: hand-computed prices and break-evens, and the
properties that decide the choice."""

from __future__ import annotations

import pytest

from calculators import run
from calculators.calcs import tool_wait
from calculators.calcs.memory import kv_pool_tokens
from calculators.calcs.steptime import StepModel, deployment
from calculators.errors import InputError
from calculators.schema import validate

# Qwen3-32B in BF16: 2 (K and V) × 64 layers × 8 KV heads × 128 dims × 2 bytes = 262,144 B per token
KV_PER_TOKEN = 2 * 64 * 8 * 128 * 2


def _v(**kw):
    return validate(tool_wait.SCHEMA["inputs"], kw)


def test_prices_by_hand():
    v = _v(context_tokens=48_000, wait_s=5.0, usd_per_gpu_hour=3.6, link_efficiency=0.5)
    out = run("tool_wait", v)
    pool = kv_pool_tokens(v)
    kv = 48_000 * KV_PER_TOKEN
    assert out["kv_bytes_session"] == kv
    k = 48_000 / pool * 3.6 / 3600
    assert out["keep_usd_per_s"] == pytest.approx(k)
    assert out["keep_usd"] == pytest.approx(5 * k)
    copy = kv / (64e9 * 0.5)
    assert out["copy_s"] == pytest.approx(copy)
    host = 0.0002 / 3600 * kv / 1e9
    assert out["offload_usd"] == pytest.approx(2 * copy * k + 5 * host)
    prefill = StepModel(deployment(v)).prefill_time([48_000])
    assert out["recompute_usd"] == pytest.approx(prefill * 3.6 / 3600)
    assert out["break_even_keep_recompute_s"] == pytest.approx(prefill * 3.6 / 3600 / k)
    assert out["break_even_keep_offload_s"] == pytest.approx(2 * copy * k / (k - host))


def test_at_the_break_even_the_two_cost_the_same():
    out = run("tool_wait", {})
    at = run("tool_wait", {"wait_s": out["break_even_keep_recompute_s"]})
    assert at["keep_usd"] == pytest.approx(at["recompute_usd"])
    at = run("tool_wait", {"wait_s": out["break_even_keep_offload_s"]})
    assert at["keep_usd"] == pytest.approx(at["offload_usd"])


@pytest.mark.parametrize("short, long", [(0.1, 1.0), (1.0, 60.0), (10.0, 1000.0)])
def test_longer_waits_favour_offload_and_recompute_over_keep(short, long):
    a, b = run("tool_wait", {"wait_s": short}), run("tool_wait", {"wait_s": long})
    assert b["keep_usd"] / b["offload_usd"] > a["keep_usd"] / a["offload_usd"]
    assert b["keep_usd"] / b["recompute_usd"] > a["keep_usd"] / a["recompute_usd"]


def test_the_choice_moves_keep_offload_recompute_as_the_wait_grows():
    out = run("tool_wait", {})
    order = [run("tool_wait", {"wait_s": w})["cheapest"] for w in (0.01, 5.0, 86_400.0)]
    assert order == [1, 2, 3]
    assert out["break_even_keep_offload_s"] < out["break_even_keep_recompute_s"]


def test_free_host_memory_never_loses_to_recompute_and_the_per_task_sums():
    out = run("tool_wait", {"host_usd_per_gb_hour": 0.0, "waits_per_task": 19})
    assert out["break_even_offload_recompute_s"] == -1  # never
    assert out["offload_usd_per_task"] == pytest.approx(19 * out["offload_usd"])


def test_a_host_price_too_small_for_a_float_wait_is_never_not_infinite():
    # hypothesis found it (tests/core/test_properties.py): $1e-308 per GB-hour made the offload-recompute wait
    # overflow to inf, and the output was refused
    out = run("tool_wait", {"host_usd_per_gb_hour": 1.1125369292536007e-308, "context_tokens": 1, "wait_s": 0.0})
    assert out["break_even_offload_recompute_s"] == -1


def test_a_longer_context_takes_longer_to_recompute_than_to_copy():
    short, long = run("tool_wait", {"context_tokens": 4000}), run("tool_wait", {"context_tokens": 64_000})
    # recompute grows faster than linearly (causal attention), the copy linearly
    assert long["recompute_s"] / short["recompute_s"] > long["copy_s"] / short["copy_s"]


def test_no_kv_pool_is_refused():
    with pytest.raises(InputError) as err:
        run("tool_wait", {"model": "llama-3.1-405b", "hardware": "h100-sxm"})
    assert err.value.field == "num_gpus"
