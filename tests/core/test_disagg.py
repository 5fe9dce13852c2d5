"""Prefill/decode disaggregation: the two-pool simulator (engine/disagg.py), the KV transfer, pool sizing
(Dynamo's formulas), and the published figures they are held to."""

import math

import pytest

from calculators.api import run
from calculators.calcs.kv_transfer import prompt_kv_bytes
from calculators.calcs.pd_pool_sizing import decode_batch_meeting, pool_sizes
from calculators.calcs.steptime import StepModel, deployment
from calculators.engine.config import Request
from calculators.engine.disagg import (
    KvArrivedTimes,
    Link,
    Pool,
    exposed_transfer_s,
    simulate_colocated,
    simulate_disaggregated,
    transfer_s,
)
from calculators.engine.run import simulate
from calculators.engine.steps import StepTimes
from calculators.engine.workload import Workload, open_loop
from calculators.schema import validate
from calculators.calcs import disagg_goodput

INF = float("inf")


def _v(**over):
    return validate(disagg_goodput.SCHEMA["inputs"], over)


def _setup(rate=6.0, n=60, **over):
    v = _v(request_rate_per_s=rate, num_requests=n, **over)
    co, pre, dec = disagg_goodput._pools(v)
    dep = deployment(v)
    requests = open_loop(Workload(v).first(n), rate)
    return v, co, pre, dec, dep, requests


# ---- hand-computable transfer times ----------------------------------------------------------------


def test_llama_8b_prompt_kv_over_one_ndr_nic():
    """Llama 3.1 8B, BF16 KV: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 B = 131,072 B a token; 8,192
    tokens = 1 GiB; over one 400 Gb/s NIC (50 GB/s a direction) that is 2³⁰ ÷ 5 × 10¹⁰ s."""
    r = run("kv_transfer", {"prompt_tokens": 8192, "link": "ib-ndr-400", "nics": 1})
    assert r["kv_bytes_per_token"] == 131072
    assert r["kv_bytes_per_prompt"] == 2**30
    assert r["transfer_s"] == pytest.approx(2**30 / 50e9, rel=1e-12)
    assert r["exposed_overlap_s"] == pytest.approx(2**30 / 50e9 / 32, rel=1e-12)  # the link keeps up: T ÷ L
    two = run("kv_transfer", {"prompt_tokens": 8192, "link": "ib-ndr-400", "nics": 8})
    assert two["transfer_s"] == pytest.approx(r["transfer_s"] / 8, rel=1e-12)


def test_custom_link_in_gigabits():
    r = run("kv_transfer", {"prompt_tokens": 1000, "link": "custom", "custom_link_gbps": 8.0})
    assert r["link_gb_per_s"] == pytest.approx(1.0)
    assert r["transfer_s"] == pytest.approx(1000 * 131072 / 1e9)


def test_exposed_transfer_cases():
    assert exposed_transfer_s(1.0, 5.0, 10, False) == 1.0
    assert exposed_transfer_s(1.0, 5.0, 10, True) == pytest.approx(0.1)  # hidden but the last layer's share
    assert exposed_transfer_s(5.0, 1.0, 10, True) == pytest.approx(5.0 - 0.9)  # the link is the bottleneck
    assert transfer_s(1e9, INF) == 0.0


def test_break_even_link_makes_transfer_equal_prefill():
    r = run("kv_transfer", {"prompt_tokens": 4096})
    even = run("kv_transfer", {"prompt_tokens": 4096, "link": "custom", "custom_link_gbps": r["break_even_gbps"]})
    assert even["transfer_s"] == pytest.approx(even["prefill_s"], rel=1e-9)
    # at the break-even link, overlap exposes exactly one layer's share (the two branches of the max meet)
    assert even["exposed_overlap_s"] == pytest.approx(even["transfer_s"] / 32, rel=1e-9)


def test_mla_sends_its_latent_only():
    """DeepSeek-V3's MLA caches kv_lora_rank 512 + rope 64 = 576 elements a layer, 61 layers: 576 × 61 ×
    2 B = 70,272 B a token at BF16 (an MHA model of its width would hold about 70 times more)."""
    r = run("kv_transfer", {"model": "deepseek-v3", "num_gpus": 8, "weight_dtype": "fp8", "compute_dtype": "fp8"})
    assert r["kv_bytes_per_token"] == 576 * 61 * 2


# ---- the two-pool simulator ------------------------------------------------------------------------


def test_one_request_alone_is_prefill_plus_transfer_plus_one_decode_step():
    v, _, pre, dec, dep, _ = _setup()
    req = [Request(0.0, 3000, 10)]
    bw = 50e9
    link = Link(bw, dep.model.num_layers, False)
    out = simulate_disaggregated(req, pre, dec, link, lambda t: prompt_kv_bytes(dep, t))
    (s,) = out.served
    prefill = pre.times.mixed(0, 0.0, [(0, 3000)])
    moved = prompt_kv_bytes(dep, 3000) / bw
    first = dec.times.decode(1, 3000)
    assert s.prefill_s == pytest.approx(prefill, rel=1e-12)
    assert s.transfer_s == pytest.approx(moved, rel=1e-12)
    assert s.ttft_s == pytest.approx(prefill + moved + first, rel=1e-12)
    # every later token is a decode step of one sequence at its context
    steps = [dec.times.decode(1, 3000 + k) for k in range(1, 10)]
    assert s.tpot_s == pytest.approx(sum(steps) / 9, rel=1e-3)


def test_kv_arrived_step_is_a_decode_step():
    model = StepModel(deployment(_v()))
    times = KvArrivedTimes(model)
    assert times.mixed(3, 3 * 1000.0, [(0, 2000)]) == times.decode(4, 3000 + 2000)


def test_one_colocated_replica_is_the_engine():
    v, co, _, _, _, requests = _setup(n=40)
    one = Pool(co.times, co.config, 1, 1)
    a = simulate_colocated(requests, one)
    b = simulate(co.times, requests, co.config)
    assert [s.ttft_s for s in a.served] == list(b.ttft_s)
    assert [s.tpot_s for s in a.served] == list(b.tpot_s)


def test_infinite_link_zero_transfer():
    v, _, pre, dec, dep, requests = _setup(n=60)
    out = simulate_disaggregated(requests, pre, dec, Link(INF, dep.model.num_layers), lambda t: prompt_kv_bytes(dep, t))
    assert all(s.transfer_s == 0.0 for s in out.served)


@pytest.mark.parametrize("overlap", [False, True])
def test_a_faster_link_never_raises_ttft(overlap):
    v, _, pre, dec, dep, requests = _setup(rate=6.0, n=80)
    kv = lambda t: prompt_kv_bytes(dep, t)  # noqa: E731
    ttfts, moved, steps = [], [], []
    for gbps in (10, 50, 400, 3200):
        out = simulate_disaggregated(requests, pre, dec, Link(gbps * 1e9 / 8, dep.model.num_layers, overlap), kv)
        ttfts.append(sorted(s.ttft_s for s in out.served))
        moved.append([s.transfer_s for s in out.served])
        steps.append(max(s.tpot_s for s in out.served))
    for slow, fast, step in zip(ttfts, ttfts[1:], steps):
        assert sum(fast) <= sum(slow) + 1e-9
        # a faster link lands KV earlier, which shifts the decode replica's step grid (a request admitted earlier
        # slows every later step a little): any request, the median too, can start up to a step later
        assert fast[len(fast) // 2] <= slow[len(slow) // 2] + step
    # every request's KV lands on the decode side no later (the prefill pool is the same run each time);
    # its decode replica's batch then differs, so one request's TTFT may move by a step either way
    for slow, fast in zip(moved, moved[1:]):
        assert all(f <= s + 1e-12 for f, s in zip(fast, slow))


def test_overlap_never_slower_than_no_overlap():
    v, _, pre, dec, dep, requests = _setup(rate=6.0, n=80)
    kv = lambda t: prompt_kv_bytes(dep, t)  # noqa: E731
    for gbps in (10, 400):
        plain = simulate_disaggregated(requests, pre, dec, Link(gbps * 1e9 / 8, dep.model.num_layers, False), kv)
        lay = simulate_disaggregated(requests, pre, dec, Link(gbps * 1e9 / 8, dep.model.num_layers, True), kv)
        assert sum(s.transfer_s for s in lay.served) <= sum(s.transfer_s for s in plain.served) + 1e-12


def test_decode_pool_tpot_has_no_prefill_stalls():
    """A decode replica never runs a prompt's prefill: its steps are decode steps only, so at a moderate
    load every request's mean TPOT is at most the decode step of the largest batch it could have seen."""
    v, co, pre, dec, dep, requests = _setup(rate=6.0, n=100)
    b = simulate_disaggregated(requests, pre, dec, Link(50e9, dep.model.num_layers), lambda t: prompt_kv_bytes(dep, t))
    a = simulate_colocated(requests, co)
    worst = dec.times.decode(100, 100 * 20_000)
    assert max(s.tpot_s for s in b.served) < worst
    # the co-located replicas' prefill chunks stall decodes: their worst TPOT is the higher one
    assert max(s.tpot_s for s in a.served) > max(s.tpot_s for s in b.served)


# ---- the calculators -------------------------------------------------------------------------------


def test_goodput_defaults_worked_example_direction():
    """The page's worked example: Llama 3.1 8B on H100s, 4,096-token prompts, a 15 ms TPOT target, 8
    requests/s on 2 GPUs: co-located chunked prefill misses TPOT more often than 1 prefill + 1 decode GPU.
    DistServe (arXiv 2401.09670) reports its gains for tight TPOT targets like this one."""
    r = run("disagg_goodput", {"request_rate_per_s": 8.0, "tpot_slo_s": 0.015})
    assert r["colocated_gpus"] == r["disagg_gpus"] == 2
    assert r["disagg_attainment"] > r["colocated_attainment"]
    assert r["gain"] > 1.0
    assert r["disagg_tpot_p90_s"] < r["colocated_tpot_p90_s"]


def test_goodput_slow_link_loses():
    fast = run("disagg_goodput", {"tpot_slo_s": 0.015})
    slow = run("disagg_goodput", {"tpot_slo_s": 0.015, "link": "custom", "custom_link_gbps": 10.0})
    assert slow["transfer_mean_s"] > 10 * fast["transfer_mean_s"]
    assert slow["disagg_attainment"] < slow["colocated_attainment"]


def test_pool_sizing_formulas_by_hand():
    assert pool_sizes(10, 1000, 100, 0.0, 5000, 1000, 1, 1) == (2.0, 1.0)
    assert pool_sizes(10, 1000, 100, 0.5, 5000, 1000, 1, 1)[0] == pytest.approx(1.0)
    assert pool_sizes(10, 1000, 100, 0.0, 5000, 1000, 2, 4) == (1.0, 0.25)


def test_pool_sizing_calculator_consistent():
    r = run("pd_pool_sizing", {})
    assert r["prefill_replicas"] == math.ceil(r["prefill_replicas_exact"])
    assert r["decode_replicas"] == math.ceil(r["decode_replicas_exact"])
    exact = 20.0 * 2048 / r["prefill_tokens_per_s_per_gpu"]
    assert r["prefill_replicas_exact"] == pytest.approx(exact)
    assert r["decode_replicas_exact"] == pytest.approx(20.0 * 256 / r["decode_tokens_per_s_per_gpu"])
    assert r["decode_step_s"] <= 0.030
    # a prefix-cache hit share of one half halves the prefill work, very nearly
    half = run("pd_pool_sizing", {"prefix_hit_percent": 50.0})
    assert half["prefill_replicas_exact"] < 0.6 * r["prefill_replicas_exact"]


def test_decode_batch_meeting_is_the_largest():
    times = StepTimes(StepModel(deployment(_v())))
    b = decode_batch_meeting(times, 3000, 0.02, 4096)
    assert times.decode(b, b * 3000) <= 0.02 < times.decode(b + 1, (b + 1) * 3000)
    assert decode_batch_meeting(times, 3000, 1e-6, 4096) == 0


def test_short_prompts_leave_the_prefill_pool_idle():
    """When disaggregation loses: 256-token prompts at 5 requests/s need a few percent of one prefill GPU,
    but a pool cannot hold less than a whole replica."""
    r = run("pd_pool_sizing", {"input_tokens": 256, "request_rate_per_s": 5.0})
    assert r["prefill_replicas"] == 1
    assert r["prefill_utilisation"] < 0.05


# ---- published figures -----------------------------------------------------------------------------
# DeepSeek, "Day 6: One More Thing, DeepSeek-V3/R1 Inference System Overview", deepseek-ai/open-infra-index,
# 202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md (commit 3122a25,
# 2025-03-01): over 24 h, 608B input tokens (342B, 56.3%, cache hits), 168B output tokens; ~73.7k input
# tokens/s per H800 node during prefill (cache hits included), ~14.8k output tokens/s per node during
# decode; average occupancy 226.75 nodes (peak 278); prefill units of 4 nodes, decode units of 18.

DAY = 24 * 3600


def test_deepseek_day6_cache_hit_rate():
    assert 342 / 608 == pytest.approx(0.563, abs=0.0005)


def test_deepseek_day6_node_count_from_dynamo_formulas():
    """Dynamo's two formulas with DeepSeek's own per-node throughputs (one 'GPU' = one node here; the
    prefill figure counts hits, so h = 0) give the nodes DeepSeek ran on average, within 1%."""
    tokens_in, tokens_out = 608e9 / DAY, 168e9 / DAY
    rate = 1.0  # requests cancel: rate × ISL and rate × OSL are the token rates
    p, d = pool_sizes(rate, tokens_in, tokens_out, 0.0, 73.7e3, 14.8e3, 1, 1)
    assert p == pytest.approx(95.5, abs=0.1)
    assert d == pytest.approx(131.4, abs=0.1)
    assert p + d == pytest.approx(226.75, rel=0.01)
    assert p + d < 278  # below the peak
    # prefill gets about 42% of the nodes, in about 24 units of 4; decode about 7.3 units of 18
    assert p / (p + d) == pytest.approx(0.42, abs=0.01)
    assert p / 4 == pytest.approx(23.9, abs=0.1) and d / 18 == pytest.approx(7.3, abs=0.05)


def test_deepseek_day6_decode_concurrency():
    """14.8k output tokens/s per node at an average 20–22 tokens/s per user is 670–740 sequences decoding
    per node, 84–93 per GPU."""
    low, high = 14.8e3 / 22, 14.8e3 / 20
    assert 670 < low < high < 741
    assert 83 < low / 8 < high / 8 < 93


def test_defaults_are_fast_enough_to_run():
    """Timing is never asserted; this checks the default calculators run and return their plots."""
    for name in ("kv_transfer", "pd_pool_sizing", "disagg_goodput"):
        r = run(name, {})
        assert r["series"]


def test_deepseek_day6_through_the_calculator():
    """The same with the calculator's measured mode: DeepSeek's units (prefill 32 GPUs = 4 nodes, decode
    144 GPUs = 18 nodes), per-GPU throughputs = per-node ÷ 8, tokens per day as rate × lengths."""
    r = run(
        "pd_pool_sizing",
        {
            "throughput_source": "measured",
            "request_rate_per_s": 1e9 / DAY,
            "input_tokens": 608,
            "output_tokens": 168,
            "num_gpus": 32,
            "decode_gpus": 144,
            "prefill_tps_measured": 73.7e3 / 8,
            "decode_tps_measured": 14.8e3 / 8,
        },
    )
    assert r["total_nodes_exact"] == pytest.approx(226.75, rel=0.01)
    assert (r["prefill_replicas"], r["decode_replicas"]) == (24, 8)
