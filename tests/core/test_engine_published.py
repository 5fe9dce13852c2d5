"""The engine simulator against queueing theory and against figures that papers publish.

Each test builds a paper's setting on the engine (step times from the core's StepModel, built as the
goodput calculator builds them, at its default efficiencies: 0.8 of peak bandwidth, 0.6 of peak FLOP/s)
and asserts the published effect in direction and rough size. The docstring names the figure, the
values read and why the tolerance is what it is. Every run is seeded: the tests are deterministic, and
the tolerances cover what the model leaves out, not luck.
"""

from __future__ import annotations

import functools
import random
import statistics

import pytest

from calculators.calcs import goodput
from calculators.engine.workload import Workload
from calculators.calcs.steptime import StepModel, deployment
from calculators.engine import workload
from calculators.engine.config import EngineConfig, Request
from calculators.engine.run import simulate
from calculators.engine.steps import StepTimes
from calculators.schema import validate

GIB = 2**30


def _times(model: str, hardware: str, num_gpus: int = 1) -> StepTimes:
    v = validate(goodput.SCHEMA["inputs"], {"model": model, "hardware": hardware, "num_gpus": num_gpus})
    return StepTimes(StepModel(deployment(v)))


def _mean_running(result, t0: float, t1: float) -> float:
    """Time-averaged number of running sequences between t0 and t1 (the occupancy is a step function)."""
    occ, area = result.occupancy, 0.0
    for a, b in zip(occ, occ[1:]):
        lo, hi = max(a[0], t0), min(b[0], t1)
        if hi > lo:
            area += (hi - lo) * a[1]
    return area / (t1 - t0)


# ---- G/G/1: Kingman's approximation with bursty (gamma) arrivals ------------------------------------


@functools.lru_cache(maxsize=4)
def _gamma_single_server(shape: float, rho: float, n: int, seed: int):
    """max_num_seqs = 1 on Llama 3.1 8B / H100: one sequence at a time, so the engine is a single FCFS
    server. Prompts of 256 tokens, outputs exponential with mean 64 (at least 2); gaps gamma with the
    given shape, as vLLM's `vllm bench serve --burstiness` draws them (squared CV of the gaps 1 ÷ shape)."""
    times = _times("llama-3.1-8b", "h100-sxm")
    mean_service = simulate(times, [Request(0.0, 256, 64)], EngineConfig(kv_blocks=1000)).e2e_s[0]
    rate = rho / mean_service
    rng, t, reqs = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.gammavariate(shape, 1.0 / (shape * rate))
        reqs.append(Request(t, 256, max(2, round(rng.expovariate(1 / 64)))))
    result = simulate(times, reqs, EngineConfig(kv_blocks=20000, max_num_seqs=1))
    return reqs, result


def test_one_sequence_at_a_time_waits_as_lindleys_recursion_says():
    """A single FCFS server's waits obey Lindley's recursion W(n+1) = max(0, W(n) + S(n) − A(n+1)),
    whatever the distributions. Fed the engine's own service times (first scheduled to finished) and
    the arrival gaps, it must give the engine's queueing delays to rounding: this checks that at
    max_num_seqs = 1 the engine admits the next request at the very instant the last one finishes and
    never earlier, with bursty (gamma, shape 0.5) arrivals."""
    reqs, r = _gamma_single_server(0.5, 0.8, 5000, seed=11)
    service = [e - q for e, q in zip(r.e2e_s, r.queue_s)]
    wait = 0.0
    for i in range(1, len(reqs)):
        wait = max(0.0, wait + service[i - 1] - (reqs[i].arrival_s - reqs[i - 1].arrival_s))
        assert r.queue_s[i] == pytest.approx(wait, abs=1e-9)
    assert statistics.mean(r.queue_s) > statistics.mean(service)  # a real queue formed (ρ = 0.8, bursty)


def test_one_sequence_at_a_time_with_bursty_arrivals_is_a_g_g_1_queue():
    """Kingman's approximation for a G/G/1 queue (J. F. C. Kingman, "The single server queue in heavy
    traffic", Proc. Cambridge Phil. Soc. 57(4), 1961): E[W] ≈ ρ ÷ (1 − ρ) × (c_a² + c_s²) ÷ 2 × E[S],
    with c_a², c_s² the squared coefficients of variation of the gaps and of the service times.

    Setting: gamma gaps of shape 0.5 (c_a² = 2, twice as bursty as Poisson), ρ ≈ 0.8, service ≈
    exponential (c_s² ≈ 1: a 256-token prefill plus an exponential number of decode steps), 100,000
    requests. Kingman is exact only in heavy traffic; at ρ = 0.8 it under-states the wait of this queue:
    for Γ(½)/M/1, whose exact mean wait is σ ÷ (μ (1 − σ)) with σ the root of σ = A*(μ(1 − σ)) (the
    GI/M/1 result), the exact wait is 1.053 × Kingman at ρ = 0.8 (1.131 at 0.6, 1.024 at 0.9; computed
    in this test). The sample mean of a queue this bursty is noisy: over 8 seeds of 100,000 requests the
    ratio simulated ÷ Kingman was 1.068 ± 0.042 (s.d.; range 0.995–1.128), Kingman evaluated with the
    run's own ρ, c_a² and c_s². Tolerance: the ratio must lie in [0.95, 1.20], the exact GI/M/1 offset
    ± 3 s.d. An engine that let a second sequence in would fall far below the band (measured on this
    trace: max_num_seqs 2 cuts the mean wait from 2.44 s to 0.16 s)."""
    # exact Γ(½)/M/1 at ρ = 0.8 (μ = 1): the fixed point of σ = (kλ ÷ (kλ + 1 − σ))^k
    k, lam, sigma = 0.5, 0.8, 0.5
    for _ in range(2000):
        sigma = (k * lam / (k * lam + 1 - sigma)) ** k
    exact_over_kingman = (sigma / (1 - sigma)) / (lam / (1 - lam) * (1 / k + 1) / 2)
    assert exact_over_kingman == pytest.approx(1.053, abs=0.001)

    reqs, r = _gamma_single_server(0.5, 0.8, 100_000, seed=1)
    service = [e - q for e, q in zip(r.e2e_s, r.queue_s)]
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(reqs, reqs[1:])]
    es, ea = statistics.mean(service), statistics.mean(gaps)
    cs2, ca2 = statistics.pvariance(service) / es**2, statistics.pvariance(gaps) / ea**2
    rho = es / ea
    assert 0.78 < rho < 0.82 and 1.9 < ca2 < 2.1 and 0.9 < cs2 < 1.1
    kingman = rho / (1 - rho) * (ca2 + cs2) / 2 * es
    assert 0.95 < statistics.mean(r.queue_s) / kingman < 1.20


def test_burstier_arrivals_wait_longer_by_kingmans_factor():
    """At the same ρ ≈ 0.8 and service, Kingman scales the wait by (c_a² + c_s²): shape 0.5 gaps
    (c_a² = 2) against Poisson ones (c_a² = 1) should wait (2 + 1) ÷ (1 + 1) = 1.5 times as long. The
    exact GI/M/1 values give 6.32 ÷ 4.00 = 1.58 at ρ = 0.8 (Poisson is exact under Kingman, shape 0.5
    is 5% above it). Measured over 8 seeds of 100,000 requests each: 1.45–1.85 (mean 1.65, s.d. 0.14;
    a ratio of two noisy means). Tolerance [1.25, 2.0]: the exact ratio ± about 3 s.d.; an engine
    whose waits ignored the arrival pattern (ratio 1) fails."""
    _, bursty = _gamma_single_server(0.5, 0.8, 100_000, seed=1)
    _, poisson = _gamma_single_server(1.0, 0.8, 100_000, seed=1)
    assert 1.25 < statistics.mean(bursty.queue_s) / statistics.mean(poisson.queue_s) < 2.0


# ---- vLLM (Kwon et al., SOSP 2023): paged KV against Orca's contiguous reservations --------------------

OPT13B_KV_BYTES_PER_TOKEN = 2 * 5120 * 40 * 2  # key and value × hidden × layers × FP16 bytes = 800 KiB


def _sharegpt_like(n: int, rate: float, seed: int = 0) -> list[Request]:
    """Requests with ShareGPT's mean lengths in the vLLM paper (161.31 input, 337.99 output tokens,
    Fig. 11's legend, as docs/parts/05-paged-attention.md cites them), log-normal with a spread (std ÷
    mean) of 1 (the spread is our assumption; the paper plots histograms), pairs longer than OPT's 2,048
    tokens dropped, Poisson arrivals."""
    w = Workload(
        {
            "seed": seed,
            "burstiness": 1.0,
            "input_distribution": "lognormal",
            "input_tokens_mean": 161,
            "input_tokens_cv": 1.0,
            "output_distribution": "lognormal",
            "output_tokens_mean": 338,
            "output_tokens_cv": 1.0,
        }
    )
    draws = [d for d in w.first(3 * n) if d[1] + d[2] <= 2048][:n]
    return workload.open_loop(draws, rate)


def test_vllm_fig13a_paged_kv_batches_more_requests_than_orca():
    """vLLM arXiv 2309.06180 (v1; SOSP 2023), §6.2 on Fig. 13a (OPT-13B, one A100-40GB, ShareGPT at 2
    requests/s): "vLLM processes 2.2× more requests at the same time than Orca (Oracle) and 4.3× more
    requests than Orca (Max)". Table 1 gives OPT-13B 12 GB of KV cache, 15.7K slots (12 GiB ÷ 800 KiB
    per token = 15,728); Orca (Max) reserves 2,048 slots a request, so it runs ⌊15,728 ÷ 2,048⌋ = 7 at
    once, and the figure's two ratios put vLLM near 4.3 × 7 = 30 and Orca (Oracle) near 30 ÷ 2.2 = 13.7.

    The setting on the engine: OPT-13B on a100-40gb, a pool of 983 blocks of 16 tokens (12 GiB), vLLM
    V0's scheduler (prefill-only steps, no chunking, 2,560 batched tokens, 256 sequences); vLLM = paged
    allocation on demand with recompute preemption, Orca (Oracle) = the whole prompt + output reserved
    on admission (reserve_full_length), Orca (Max) = a cap of 7 sequences. The simulated steps are faster
    than the paper's 2023 system (at 2 requests/s the simulated TPOT is 27 ms; Little's law on the
    figure's 30 running requests at 2 requests/s gives 15 s in the system, against 8.8 s simulated), so
    at the paper's own rate neither simulated system is memory-bound and both batch about 17. The test
    therefore runs at 4 requests/s, where both are (Oracle's queue grows, vLLM preempts), which is the
    regime the paper attributes the gap to ("PagedAttention can efficiently manage the memory usage and
    thus enable batching more requests").

    What the engine leaves out: the paper's Orca keeps each reservation contiguous (a buddy allocator);
    Fig. 2 (averages over the §6.2 experiments, as read in docs/parts/05-paged-attention.md) has Orca
    (Oracle) at 38.2% token states, 25.2% reserved slots and 36.6% external fragmentation and other
    waste. The engine's Oracle reserves exactly from a paged pool, so it has no such waste and its batch
    should exceed the paper's by 1 ÷ (0.382 + 0.252) = 1.58. Asserted, each within its reason:
      - Orca (Max): exactly 7 (the cap binds, as in the paper);
      - Orca (Oracle) × 0.634 within ±15% of 13.7 (seed and length-spread assumption: ±7% measured
        over 3 seeds and spreads 0.7–1.4; the figure's ratios are printed to 2 digits);
      - vLLM ÷ Orca (Max) between 4.3 × 0.9 and 4.3 × 1.35: a saturated pool is an upper bound for the
        paper's vLLM, which at 2 requests/s may sit below its memory limit; measured 5.1;
      - vLLM ÷ Orca (Oracle) above 1.3: paging gains over exact reservations without that waste
        (measured 1.6–1.7; the paper's 2.2 × 0.634 = 1.39 is the same comparison)."""
    times = _times("opt-13b", "a100-40gb")
    slots = int(12 * GIB / OPT13B_KV_BYTES_PER_TOKEN)
    assert slots == 15728
    reqs = _sharegpt_like(1500, 4.0)
    base = {
        "kv_blocks": slots // 16,
        "block_size_tokens": 16,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 2560,
        "chunked_prefill": False,
        "mixed_batches": False,
    }
    systems = {
        "vllm": {},
        "oracle": {"reserve_full_length": True},
        "max": {"reserve_full_length": True, "max_num_seqs": slots // 2048},
    }
    batch, results = {}, {}
    for name, extra in systems.items():
        r = results[name] = simulate(times, reqs, EngineConfig(**{**base, **extra}), measured=(0, 1000))
        batch[name] = _mean_running(r, reqs[200].arrival_s, reqs[999].arrival_s)
    assert sum(results["vllm"].preemptions) > 0  # the paged pool is full: memory binds
    assert statistics.mean(results["oracle"].queue_s) > 10.0  # Oracle is overloaded: its batch is memory's
    assert batch["max"] == pytest.approx(7.0, abs=0.05)
    assert batch["oracle"] * (0.382 + 0.252) == pytest.approx(4.3 * 7 / 2.2, rel=0.15)
    assert 4.3 * 0.9 < batch["vllm"] / batch["max"] < 4.3 * 1.35
    assert batch["vllm"] / batch["oracle"] > 1.3
