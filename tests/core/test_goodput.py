"""goodput: the simulator's fast step-time paths and the plot series."""

import pytest

from calculators import run
from calculators.calcs.kv_cache import kv_bytes_per_sequence
from calculators.calcs.steptime import StepModel, _causal_keys, attention_flops_per_token, deployment
from calculators.calcs.goodput import SCHEMA, max_num_seqs, run_server
from calculators.engine.metrics import Gaps
from calculators.engine.steps import StepTimes
from calculators.engine.workload import Workload
from calculators.calcs.memory import budget, footprint, usable_bytes_per_gpu
from calculators.schema import validate


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-oss-120b", "llama-4-scout", "deepseek-v3", "mixtral-8x7b"])
def test_fast_paths_equal_the_general_formulas_bit_for_bit(model):
    v = validate(SCHEMA["inputs"], {"model": model, "kv_dtype": "fp8"})
    sm = StepModel(deployment(v))
    fresh = StepModel(deployment(v))  # the simulator's closures, starting with empty memos
    decode_time, prefill_time = fresh.decode_time, fresh.prefill_time
    for context in (1, 100, 128, 129, 4096, 8193, 100_000):
        held = lambda cap, t=context: t if cap is None else min(t, cap)  # noqa: E731
        # attention FLOPs in matmul-rate units: × attention_weight (FP8 KV: attention at the FP8 rate)
        w = sm.attention_weight
        flops, kv = sm.per_sequence(context)
        assert flops == pytest.approx(2 * sm.active + w * attention_flops_per_token(sm.dep.model, held), rel=1e-12)
        assert kv == kv_bytes_per_sequence(sm.dep.model, context, sm.dep.kv_elem_bytes)
        causal = attention_flops_per_token(sm.dep.model, lambda cap, t=context: _causal_keys(cap, t), prefill=True)
        assert sm.per_prompt(context)[0] == pytest.approx(2 * sm.active * context + w * causal, rel=1e-12)
        for batch in (1, 7, 256):
            assert sm.decode_time(batch, context) == sm.decode(batch, context).time_s
            assert decode_time(batch, context) == sm.decode(batch, context).time_s
    for prompts in ([512, 3000, 1], [7], [100_000, 100_000]):
        assert sm.prefill_time(prompts) == prefill_time(prompts) == sm.prefill(prompts).time_s


def test_each_plot_has_one_unit_and_part_3s_series_id_stays():
    out = run("goodput", {})["series"]
    assert {"goodput_vs_rate", "goodput_requests_vs_rate", "latency_vs_rate"} <= set(out)
    for plot in out.values():
        assert len({y["unit"] for y in plot["y"]}) == 1
    assert out["goodput_vs_rate"]["y"][0]["unit"] == "%"
    assert [y["unit"] for y in out["latency_vs_rate"]["y"] if not y.get("marker")] == ["s", "s", "s"]


def test_goodput_is_deterministic():
    assert run("goodput", {"seed": 5}) == run("goodput", {"seed": 5})


# --- Goodput as DistServe defines it (review parts-1-3 row 18; DistServe, arXiv 2401.09670 §2) ---------

PART3 = dict(
    model="llama-3.1-8b",
    hardware="h100-sxm",
    input_tokens_mean=1024,
    output_tokens_mean=256,
    ttft_slo_s=0.5,
    tpot_slo_s=0.05,
)


def test_goodput_does_not_depend_on_the_rate_typed():
    """Row 18: the old 0.25-3x sweep around the typed rate gave 20 req/s when 20 was typed and 12.5 when
    25 was typed, for the same server."""
    at = {
        r: run("goodput", dict(PART3, request_rate_per_s=r))["max_rate_meeting_slo_requests_per_s"]
        for r in (5, 20, 25, 60)
    }
    assert len(set(at.values())) == 1 and at[25] > 15


def test_goodput_meets_the_objectives_and_one_step_more_does_not():
    out = run("goodput", dict(PART3, request_rate_per_s=18))  # Part 3's worked example
    best, cap = out["max_rate_meeting_slo_requests_per_s"], out["capacity_requests_per_s"]
    assert run("goodput", dict(PART3, request_rate_per_s=best))["slo_attainment"] >= 0.9
    above = run("goodput", dict(PART3, request_rate_per_s=best + 0.98 * cap / 64))
    assert above["slo_attainment"] < 0.9 or not above["stable"]
    assert out["goodput_utilisation"] == pytest.approx(best / cap)


def test_per_run_goodput_is_rate_times_attainment():
    """vLLM's `--goodput` figure: good requests ÷ duration, i.e. rate × attainment for one run."""
    out = run("goodput", dict(PART3, request_rate_per_s=21))
    assert out["goodput_requests_per_s"] == pytest.approx(21 * out["slo_attainment"])


def test_an_itl_objective_can_only_lower_goodput():
    free = run("goodput", dict(PART3))
    tight = run("goodput", dict(PART3, itl_p99_slo_s=free["itl_p99_s"] * 0.5))
    assert tight["max_rate_meeting_slo_requests_per_s"] < free["max_rate_meeting_slo_requests_per_s"]


def test_default_sample_is_at_least_1000_requests():
    assert validate(SCHEMA["inputs"], {})["num_requests"] >= 1000


@pytest.mark.parametrize(
    "hardware, cap",
    [("h100-sxm", 1024), ("h200", 1024), ("mi300x", 1024), ("a100-80gb", 256), ("a100-40gb", 256), ("l40s", 256)],
)
def test_running_sequence_cap_is_vllms_default_for_the_accelerator(hardware, cap):
    """vLLM vllm/engine/arg_utils.py at commit 99d7eb5d (EngineArgs._set_default_args): max_num_seqs 1,024
    when device memory ≥ 70 GiB and the name has no 'a100', else 256."""
    v = validate(SCHEMA["inputs"], {"hardware": hardware})
    assert max_num_seqs(v, deployment(v).accelerator) == cap
    assert max_num_seqs(dict(v, max_seqs_rule="set", max_batch_size=77), deployment(v).accelerator) == 77


# --- Inter-token latency: every gap is booked once (exact bookkeeping) ------------------------------------


def test_pooled_gaps_add_up_to_each_requests_decode_time():
    v = validate(SCHEMA["inputs"], dict(PART3))
    dep = deployment(v)
    pool = budget(footprint(v), usable_bytes_per_gpu(v), 1).tokens
    work = Workload(v).first(600)
    gaps = Gaps()
    result = run_server(StepTimes(StepModel(dep)), pool, 1024, work, 18.0, (), (100, 400), gaps)
    outs = [b for _, _, b in work[100:400]]
    assert sum(w for _, w in gaps.pairs) == sum(b - 1 for b in outs)
    decode = sum(r[1] * (b - 1) for r, b in zip(result, outs))
    assert sum(g * w for g, w in gaps.pairs) == pytest.approx(decode, rel=1e-9)


def test_itl_tail_shows_the_prefill_stalls_that_mean_tpot_hides():
    out = run("goodput", dict(PART3, request_rate_per_s=18))
    assert out["itl_p50_s"] < out["tpot_p50_s"] < out["itl_p99_s"] <= out["itl_max_s"]


def test_pooled_gap_percentiles_are_nearest_rank():
    gaps = Gaps()
    gaps.values, gaps.weights = [1.0, 5.0], [98, 2]
    assert gaps.percentiles((98, 99)) == [1.0, 5.0]
    assert Gaps().percentiles((50,)) == [0.0]


# --- Burstiness: gamma gaps with shape k, as vLLM's --burstiness ------------------------------------------


def test_burstiness_one_is_the_old_poisson_draw_and_shape_sets_the_spread():
    import random

    v = validate(SCHEMA["inputs"], {"seed": 3})
    rng = random.Random("arrivals 3")
    assert [g for g, _, _ in Workload(v).first(3)] == [rng.expovariate(1.0) for _ in range(3)]
    bursty = Workload(dict(v, burstiness=0.25)).first(20000)
    assert [w[1:] for w in bursty[:500]] == [w[1:] for w in Workload(v).first(500)]  # same lengths
    gaps = [g for g, _, _ in bursty]
    mean = sum(gaps) / len(gaps)
    cv2 = sum((g - mean) ** 2 for g in gaps) / len(gaps) / mean**2
    assert mean == pytest.approx(1.0, rel=0.05) and cv2 == pytest.approx(4.0, rel=0.15)


def test_burstier_arrivals_lower_goodput():
    calm = run("goodput", dict(PART3))["max_rate_meeting_slo_requests_per_s"]
    bursty = run("goodput", dict(PART3, burstiness=0.25))["max_rate_meeting_slo_requests_per_s"]
    assert bursty < calm


# --- Queueing: Kingman's formula against the simulator (review parts-1-3 (c) Part 3) ----------------------

from calculators.calcs.goodput import kingman_wait  # noqa: E402


def test_kingman_reduces_to_the_textbook_queues():
    assert kingman_wait(0.5, 1.0, 1.0, 2.0) == pytest.approx(2.0)  # M/M/1: ρ ÷ (1 − ρ) × E[S]
    assert kingman_wait(0.5, 1.0, 0.0, 2.0) == pytest.approx(1.0)  # M/D/1: half of it
    assert kingman_wait(1.0, 1.0, 1.0, 2.0) == float("inf")


def test_fixed_lengths_have_no_service_spread():
    out = run("goodput", dict(PART3, input_distribution="fixed", output_distribution="fixed"))
    assert out["service_cv2"] == pytest.approx(0.0, abs=1e-12)


def test_a_batch_with_room_waits_far_less_than_a_single_server_queue():
    """The point Part 3 makes: below the KV limit a request joins the batch at the next step, so the
    simulated wait stays near one step while Kingman's grows as 1 ÷ (1 − ρ)."""
    out = run("goodput", dict(PART3, request_rate_per_s=18))  # Part 3's worked example
    assert out["utilisation"] > 0.8 and out["simulated_wait_s"] < out["kingman_wait_s"] / 5
    plot = out["series"]["queueing_vs_utilisation"]
    assert plot["x"]["values"] == sorted(plot["x"]["values"]) and plot["x"]["values"][0] <= 25.0 + 1e-9


# --- Speed without changing an answer (the perf slice: recompute within the browser's budget) -----------


def test_a_recompute_gives_the_same_answer_warm_or_cold():
    """Workloads, step models, the saturated schedule, the queueing grid and the goodput search are kept
    between recomputes (goodput._kept); what is kept is a pure function of its key, so the order of earlier
    recomputes cannot change a result, bit for bit (the cases change the rate, seed, GPU, lengths and
    objectives, and type the goodput back in as the rate, where the search probed that very rate)."""
    from calculators.calcs import goodput

    best = run("goodput", PART3)["max_rate_meeting_slo_requests_per_s"]
    cases = [
        dict(PART3, request_rate_per_s=best),
        dict(PART3, slo_target_percent=50),
        dict(PART3, tpot_slo_s=0.03),
        dict(PART3, request_rate_per_s=20),
        dict(PART3, seed=1),
        dict(PART3, hardware="h200"),
        {},
        dict(PART3, input_tokens_mean=512),
        dict(PART3, request_rate_per_s=40),
        dict(PART3, ttft_slo_s=0.1),
        dict(PART3, num_requests=600),
        dict(PART3, request_rate_per_s=20),
    ]
    warm = [run("goodput", c) for c in cases]
    cold = []
    for c in cases:
        for store in (goodput._workloads, goodput._step_models, goodput._setups):
            store.clear()
        cold.append(run("goodput", c))
    assert warm == cold
    assert max(len(goodput._workloads), len(goodput._step_models), len(goodput._setups)) <= goodput.KEPT


def test_the_queueing_grid_books_no_gaps_but_the_same_waits():
    """The grid's four extra runs only feed the mean wait; skipping their inter-token gaps changes no wait."""
    v = validate(SCHEMA["inputs"], dict(PART3))
    times = StepTimes(StepModel(deployment(v)))
    pool = budget(footprint(v), usable_bytes_per_gpu(v), 1).tokens
    work = Workload(v).first(400)
    with_gaps = run_server(times, pool, 1024, work, 8.0, (), (50, 350), Gaps())
    assert run_server(times, pool, 1024, work, 8.0, (), (50, 350), None) == with_gaps
