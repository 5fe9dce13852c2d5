"""Tenants on the simulator (engine/tenants.py): VTC fair queueing, token buckets, and the
noisy_neighbour calculator."""

from __future__ import annotations

import random

import pytest

from calculators import api
from calculators.calcs import goodput
from calculators.calcs.steptime import StepModel, deployment
from calculators.engine.config import EngineConfig, Request
from calculators.engine.run import simulate
from calculators.engine.steps import StepTimes
from calculators.engine.tenants import W_OUTPUT, W_PROMPT, TokenBucket, simulate_tenants
from calculators.errors import InputError
from calculators.schema import validate


def _times():
    dep = deployment(validate(goodput.SCHEMA["inputs"], {"model": "llama-3.1-8b", "hardware": "h100-sxm"}))
    return StepTimes(StepModel(dep))


def _two_tenants(rate_a, rate_b, duration, prompt=(100, 400), output=(20, 120), seed=3):
    rng, out = random.Random(seed), []
    for tenant, rate in (("a", rate_a), ("b", rate_b)):
        t = rng.expovariate(rate)
        while t < duration:
            out.append(Request(t, rng.randint(*prompt), rng.randint(*output), tenant=tenant))
            t += rng.expovariate(rate)
    return sorted(out, key=lambda r: r.arrival_s)


def test_with_neither_feature_it_is_the_engine():
    times, reqs = _times(), _two_tenants(30.0, 5.0, 4.0)
    cfg = EngineConfig(kv_blocks=600, max_num_seqs=16)
    plain = simulate(times, reqs, cfg)
    mine, limited = simulate_tenants(times, reqs, cfg)
    assert mine == plain and limited == {}


def test_one_tenant_under_vtc_is_fcfs():
    """One tenant: the lowest counter is always its own, so VTC serves in arrival order, preempted
    requests first (the latest first), as FCFS does; a small pool makes preemptions happen."""
    times = _times()
    reqs = [r._replace(tenant="only") for r in _two_tenants(30.0, 5.0, 4.0)]
    cfg = EngineConfig(kv_blocks=80, max_num_seqs=16)
    plain = simulate(times, reqs, cfg)
    assert sum(plain.preemptions) > 0
    fair, _ = simulate_tenants(times, reqs, cfg, fair=True)
    assert fair == plain


def _service_and_backlog(result, reqs):
    """Per traced step: each tenant's cumulative service (w_p × prompt at first admission, w_q per output
    token) at the step's end, and the tenants with a request waiting during it."""
    done, seen, served, rows = {}, set(), {"a": 0.0, "b": 0.0}, []
    for _, _, ran, waiting in result.trace:
        for i, tokens in ran:
            t = reqs[i].tenant
            if i not in seen:
                seen.add(i)
                served[t] += W_PROMPT * reqs[i].prompt_tokens
            done[i] = done.get(i, 0) + tokens
            if done[i] >= reqs[i].prompt_tokens:  # the step emitted a token of i
                served[t] += W_OUTPUT
        rows.append((dict(served), {reqs[j].tenant for j in waiting}))
    return rows


def _worst_gap_while_both_backlogged(rows) -> float:
    worst, start = 0.0, None
    for k, (served, backlogged) in enumerate(rows):
        if {"a", "b"} <= backlogged:
            if start is None:
                start = rows[k - 1][0] if k else {"a": 0.0, "b": 0.0}
            gap = (served["a"] - start["a"]) - (served["b"] - start["b"])
            worst = max(worst, abs(gap))
        else:
            start = None
    return worst


def test_vtc_bounds_the_service_gap_between_backlogged_tenants():
    """Sheng et al. (arXiv 2401.00588) prove a tight bound on the difference in service two backlogged
    clients receive under VTC; this checks one of that kind, 2 × max(w_p × L_input, w_q × M), L_input the
    longest prompt and M the most tokens a running batch holds (here the KV pool). Tenant a sends six times
    b's rate, both far above capacity: under FCFS a takes most of the service and the gap grows past the
    bound (by more than ten times); under VTC it stays inside."""
    times = _times()
    reqs = _two_tenants(60.0, 10.0, 6.0)
    cfg = EngineConfig(kv_blocks=64, block_size_tokens=16, max_num_seqs=8, trace_steps=100_000)
    bound = 2 * max(W_PROMPT * max(r.prompt_tokens for r in reqs), W_OUTPUT * cfg.kv_blocks * cfg.block_size_tokens)
    fcfs, _ = simulate_tenants(times, reqs, cfg)
    fair, _ = simulate_tenants(times, reqs, cfg, fair=True)
    assert len(fair.trace) == fair.steps  # every step traced, so the service is counted exactly
    fcfs_gap = _worst_gap_while_both_backlogged(_service_and_backlog(fcfs, reqs))
    fair_gap = _worst_gap_while_both_backlogged(_service_and_backlog(fair, reqs))
    assert fair_gap <= bound and fcfs_gap > 10 * bound


def test_vtc_lifts_a_returning_tenant():
    """A tenant idle while another was served does not bank the idle time: it is lifted to the backlogged
    tenants' lowest counter, so it shares from then on instead of taking everything until it catches up."""
    times = _times()
    early = [Request(0.001 * k, 200, 50, tenant="a") for k in range(60)]
    late = [Request(2.0 + 0.001 * k, 200, 50, tenant="b") for k in range(20)]
    reqs = sorted(early + late, key=lambda r: r.arrival_s)
    cfg = EngineConfig(kv_blocks=2000, max_num_seqs=4)
    fair, _ = simulate_tenants(times, reqs, cfg, fair=True)
    # after b arrives, a is still admitted while b waits: its requests keep finishing during b's backlog
    first_b = min(fair.arrival_s[k] + fair.queue_s[k] for k, t in enumerate(fair.tenants) if t == "b")
    last_b = max(fair.arrival_s[k] + fair.queue_s[k] for k, t in enumerate(fair.tenants) if t == "b")
    a_during = [
        k for k, t in enumerate(fair.tenants) if t == "a" and first_b < fair.arrival_s[k] + fair.queue_s[k] < last_b
    ]
    assert a_during


def test_token_bucket_admits_no_more_than_burst_plus_rate_times_time():
    bucket = TokenBucket(rate_per_s=2.0, burst=5.0)
    times = [0.01 * k for k in range(300)]  # 100 requests/s for 3 s
    admitted = [t for t in times if bucket.take("x", t, 1.0)]
    for k, t0 in enumerate(admitted):
        for t1 in admitted[k:]:
            window = [t for t in admitted if t0 <= t <= t1]
            assert len(window) <= 5 + 2.0 * (t1 - t0) + 1e-9
    assert len(admitted) == pytest.approx(5 + 2.0 * 3, abs=1)


def test_token_bucket_never_rejects_traffic_below_its_rate():
    bucket = TokenBucket(rate_per_s=2.0, burst=1.0)
    assert all(bucket.take("x", 0.6 * k, 1.0) for k in range(100))
    assert bucket.take("y", 0.0, 1.0)  # buckets are per tenant: y starts full
    assert not TokenBucket(1.0, 3.0).take("z", 0.0, 4.0)  # a request costing more than the burst never passes


def test_bucket_in_the_engine_answers_429_per_tenant():
    times, reqs = _times(), _two_tenants(30.0, 1.0, 4.0)
    cfg = EngineConfig(kv_blocks=600, max_num_seqs=16)
    result, limited = simulate_tenants(times, reqs, cfg, bucket=TokenBucket(3.0, 5.0))
    sent_a = sum(r.tenant == "a" for r in reqs)
    assert limited["a"] >= sent_a - (5 + 3.0 * 4.0) - 1 and limited.get("b", 0) == 0
    assert result.rejected == sum(limited.values())
    by_tokens, _ = simulate_tenants(times, reqs, cfg, bucket=TokenBucket(3.0 * 300, 5 * 300), bucket_cost="tokens")
    assert by_tokens.rejected > 0


def test_noisy_neighbour_defaults_tell_the_story():
    r = api.run("noisy_neighbour", {})
    # FCFS: the quiet tenants wait behind the aggressive one's queue; VTC serves them first
    assert r["vtc_quiet_ttft_p95_s"] < r["fcfs_quiet_ttft_p95_s"] / 4
    # VTC is work-conserving: the same requests served, throughput kept
    assert r["vtc_aggressive_served"] == r["fcfs_aggressive_served"] and r["vtc_rejected"] == 0
    assert r["vtc_output_tokens_per_s"] == pytest.approx(r["fcfs_output_tokens_per_s"], rel=0.05)
    # the rate limit protects too, by rejecting: throughput falls below capacity
    assert r["limit_rejected"] > 0 and r["limit_output_tokens_per_s"] < 0.8 * r["fcfs_output_tokens_per_s"]
    assert r["limit_quiet_ttft_p95_s"] < r["fcfs_quiet_ttft_p95_s"]


def test_validation():
    times, reqs = _times(), _two_tenants(5.0, 5.0, 1.0)
    with pytest.raises(ValueError):
        simulate_tenants(times, reqs, EngineConfig(kv_blocks=100, policy="priority"), fair=True)
    with pytest.raises(ValueError):
        TokenBucket(0.0, 1.0)
    with pytest.raises(ValueError):
        simulate_tenants(times, reqs, EngineConfig(kv_blocks=100), bucket_cost="dollars")


def test_noisy_neighbour_refuses_a_run_too_long_to_recompute():
    with pytest.raises(InputError) as e:
        api.run("noisy_neighbour", {"aggressive_rate_per_s": 1000.0, "duration_s": 60.0})
    assert e.value.field == "duration_s"
