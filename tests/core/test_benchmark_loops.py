"""Open versus closed loop on the simulator: the client model, the rate, and what the closed loop hides."""

from __future__ import annotations

import pytest

from calculators.api import run
from calculators.engine.loops import closed_loop


def test_closed_loop_requests_follow_the_same_user():
    draws = [(1.0, 100 + i, 10) for i in range(7)]
    reqs = closed_loop(draws, users=3, think_s=1.5)
    assert [r.after for r in reqs] == [-1, -1, -1, 0, 1, 2, 3]
    assert [r.arrival_s for r in reqs[:3]] == [0.0, 0.5, 1.0]
    assert all(r.think_s == 1.5 for r in reqs[3:])
    assert [r.prompt_tokens for r in reqs] == [100 + i for i in range(7)]


def test_rate_is_the_response_time_law():
    r = run("benchmark_loops", {"think_s": 0.5})
    assert r["closed_rate_requests_per_s"] == pytest.approx(16 / (r["closed_mean_e2e_s"] + 0.5))


def test_one_user_never_waits_behind_anyone():
    """One closed-loop user with no think time: every request runs alone; its TTFT is a lone prefill, and the
    open loop at the same rate sees at least as long a tail (its arrivals can overlap)."""
    r = run("benchmark_loops", {"users": 1, "input_distribution": "fixed", "output_distribution": "fixed"})
    assert r["closed_ttft_p50_s"] == pytest.approx(r["closed_ttft_p99_s"])
    assert r["open_ttft_p99_s"] >= r["closed_ttft_p99_s"] - 1e-12


def test_open_loop_shows_the_tail_the_closed_loop_hides_at_the_defaults():
    r = run("benchmark_loops", {})
    assert r["open_ttft_p99_s"] > r["closed_ttft_p99_s"]
    assert r["ttft_p99_ratio"] == pytest.approx(r["open_ttft_p99_s"] / r["closed_ttft_p99_s"])


def test_more_users_more_throughput_until_the_server_fills():
    rates = [run("benchmark_loops", {"users": n})["closed_rate_requests_per_s"] for n in (2, 8, 32)]
    assert rates == sorted(rates)


def test_think_time_lowers_the_rate():
    assert (
        run("benchmark_loops", {"think_s": 2.0})["closed_rate_requests_per_s"]
        < run("benchmark_loops", {})["closed_rate_requests_per_s"]
    )


def test_vllm_bench_serve_semantics_at_0_33_0():
    """vLLM v0.33.0, vllm/benchmarks/serve.py: get_request() draws gaps from a gamma distribution of shape
    `burstiness` and scale 1 ÷ (rate × burstiness) (burstiness 1: Poisson); limited_request_func() waits on an
    asyncio.Semaphore(max_concurrency) before sending and records the wait as client_queue_time, which the
    e2el_including_client_queue metric adds back. The simulator's workload draws the same gaps (mean 1 ÷ rate,
    squared coefficient of variation 1 ÷ burstiness)."""
    from calculators.engine.workload import Workload

    v = {
        "seed": 3,
        "burstiness": 0.5,
        "input_distribution": "fixed",
        "input_tokens_mean": 10,
        "input_tokens_cv": 0,
        "output_distribution": "fixed",
        "output_tokens_mean": 5,
        "output_tokens_cv": 0,
    }
    gaps = [g for g, _, _ in Workload(v).first(20_000)]
    mean = sum(gaps) / len(gaps)
    cv2 = sum((g - mean) ** 2 for g in gaps) / len(gaps) / mean**2
    assert mean == pytest.approx(1.0, rel=0.03) and cv2 == pytest.approx(1 / 0.5, rel=0.06)
