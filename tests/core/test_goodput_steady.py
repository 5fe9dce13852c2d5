"""goodput: the default run describes steady state.

The reference is a long run of the same simulator (5,000 requests, cold start, every request
counted), as a technical review checked by hand: Llama 3.1 8B on one H100, prompts ~1,024,
outputs ~256, TTFT ≤ 500 ms, TPOT ≤ 50 ms, capacity ~21 requests/s.
"""

import pytest

from calculators import run
from calculators.calcs.goodput import SCHEMA, max_num_seqs, run_server, summarise
from calculators.calcs.offered_load import offered_load
from calculators.engine.steps import StepTimes
from calculators.engine.workload import Workload
from calculators.calcs.memory import budget, footprint, usable_bytes_per_gpu
from calculators.calcs.steptime import StepModel, deployment
from calculators.schema import validate

PART3 = dict(
    model="llama-3.1-8b",
    hardware="h100-sxm",
    input_tokens_mean=1024,
    output_tokens_mean=256,
    ttft_slo_s=0.5,
    tpot_slo_s=0.05,
)
KNEE = (20, 22, 25)  # within ~10% of capacity (~22 at vLLM's 1,024 cap): only the verdict has to agree


def _setup(inputs: dict):
    v = validate(SCHEMA["inputs"], inputs)
    pool = budget(footprint(v), usable_bytes_per_gpu(v), v["num_gpus"]).tokens
    dep = deployment(v)
    return dict(v, max_batch_size=max_num_seqs(v, dep.accelerator)), StepModel(dep), pool


def _long_run(rate: float, seed: int, n: int = 5000) -> dict:
    v, steps, pool = _setup(dict(PART3, seed=seed))
    return summarise(run_server(StepTimes(steps), pool, v["max_batch_size"], Workload(v).first(n), rate), 0.5, 0.05)


@pytest.mark.parametrize("rate", [10, 20, 22, 25, 30, 40])
def test_default_run_agrees_with_a_5000_request_run(rate):
    # At the knee one seed of five may land on the other side of 90 % (with the per-step overhead, seed 1 at
    # 20 requests/s gives 0.872 against the long run's 0.976); away from it every seed must agree.
    disagree = []
    for seed in range(5):
        short = run("goodput", dict(PART3, request_rate_per_s=rate, seed=seed))
        long = _long_run(rate, seed)
        if (short["slo_attainment"] >= 0.9) != (long["attainment"] >= 0.9):
            disagree.append((seed, short["slo_attainment"], long["attainment"]))
        if rate not in KNEE:
            assert short["slo_attainment"] == pytest.approx(long["attainment"], abs=0.06), (rate, seed)
        if rate == 10:  # well below capacity: the warm start gives the long run's pace
            assert short["tpot_p50_s"] == pytest.approx(long["tpot_p50"], rel=0.1), seed
    assert len(disagree) <= (1 if rate in KNEE else 0), (rate, disagree)


def test_part3_capacity_sits_between_20_and_22_requests_per_s():
    out = run("goodput", dict(PART3, request_rate_per_s=20))
    assert 20 < out["capacity_requests_per_s"] < 22.5
    assert out["stable"] and 18 < out["max_rate_meeting_slo_requests_per_s"] < out["capacity_requests_per_s"]


def _saturated_rate(inputs: dict, n: int = 3000) -> tuple[float, float]:
    """(completions per second in the middle of a run with every request queued at t = 0, estimate)."""
    v, steps, pool = _setup(inputs)
    work = Workload(v).first(n)
    load = offered_load(steps, work[:300], v["max_batch_size"], pool)
    queued = [(0.0, a, b) for _, a, b in work]
    ends = sorted(
        r[0] + r[1] * (b - 1)
        for r, (_, _, b) in zip(run_server(StepTimes(steps), pool, v["max_batch_size"], queued, 1.0), queued)
        if r is not None
    )
    lo, hi = n // 3, n - n // 6
    return (hi - lo) / (ends[hi] - ends[lo]), load.capacity()


AT_256 = dict(max_seqs_rule="set", max_batch_size=256)  # the cap these cases were first checked at


@pytest.mark.parametrize(
    "inputs",
    [
        dict(AT_256, **case)
        for case in (
            {},
            dict(input_tokens_mean=1024, output_tokens_mean=256),
            dict(input_tokens_mean=32, output_tokens_mean=256),
            dict(model="gpt-oss-120b", weight_dtype="bf16", expert_weight_dtype="mxfp4"),
            dict(model="qwen3-30b-a3b"),
            dict(model="gemma-3-27b", input_tokens_mean=4000),
            dict(input_distribution="fixed", output_distribution="fixed"),
            dict(input_tokens_mean=1024, output_tokens_mean=256, max_batch_size=32),
        )
    ]
    + [
        dict(input_tokens_mean=1024, output_tokens_mean=256)  # Part 3's example at vLLM's cap on an H100 (1,024)
    ],
)
def test_capacity_estimate_matches_a_saturated_simulation(inputs):
    simulated, estimate = _saturated_rate(inputs)
    assert estimate == pytest.approx(simulated, rel=0.07)


@pytest.mark.parametrize(
    "inputs", [dict(input_tokens_mean=256, output_tokens_mean=256), dict(input_tokens_mean=32, output_tokens_mean=256)]
)
def test_capacity_estimate_errs_low_at_vllms_1024_sequence_cap(inputs):
    """Known bias: past a few hundred sequences the estimate is below a saturated run (8% with the fitted
    per-step overhead, 10-16% with launches alone), never above it; Part 3 says "low by up to an eighth".
    The edge of steady state (and any goodput that sits on it) is therefore conservative there."""
    simulated, estimate = _saturated_rate(inputs)
    assert 0.875 * simulated <= estimate <= 1.02 * simulated


def test_overload_is_reported_plainly():
    over = run("goodput", dict(PART3, request_rate_per_s=40))
    assert over["stable"] == 0 and over["utilisation"] > 1
    assert over["slo_attainment"] == 0 and over["goodput_requests_per_s"] == 0
    assert any("queues grow without bound" in note for note in over["notes"])
    calm = run("goodput", dict(PART3, request_rate_per_s=10))
    assert calm["stable"] == 1 and calm["notes"] == [] and calm["utilisation"] < 0.6


def test_overloaded_rates_share_one_schedule_and_ttft_grows_with_the_rate():
    runs = [run("goodput", dict(PART3, request_rate_per_s=r)) for r in (30, 45, 60)]
    assert all(not r["stable"] and r["slo_attainment"] == 0 for r in runs)
    assert runs[0]["ttft_p90_s"] < runs[1]["ttft_p90_s"] < runs[2]["ttft_p90_s"]
    assert runs[0]["tpot_p90_s"] == runs[1]["tpot_p90_s"] == runs[2]["tpot_p90_s"]  # a full batch paces them alike
    plot = runs[0]["series"]["goodput_vs_rate"]
    assert plot["y"][0]["values"][-1] == 0  # the one overloaded point on the plot


def test_workload_prefix_does_not_depend_on_the_length_asked_for():
    v = validate(SCHEMA["inputs"], {"seed": 4})
    assert Workload(v).first(50) == Workload(v).first(700)[:50]
