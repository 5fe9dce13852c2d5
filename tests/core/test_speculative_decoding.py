"""The speculative_decoding calculator and the speculation inputs latency borrows: published figures with their
sources and tolerances, then properties that could fail, then bad inputs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calculators import run
from calculators.calcs import speculative as spec
from calculators.calcs.sharding import sharded_steps
from calculators.calcs.speculative_decoding import SCHEMA as SPEC, eagle_cost_ratio
from calculators.calcs.steptime import deployment
from calculators.schema import validate
from calculators.errors import InputError
from calculators.parallel import Parallelism, allowed
from calculators.params import active_params, lm_head_params
from calculators.presets import model_presets

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BOUND = dict(bandwidth_efficiency=1.0, compute_efficiency=1.0)


def calc(**inputs) -> dict:
    return run("speculative_decoding", inputs)


# ---- published figures ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha, k, speed", [(0.6, 2, 1.96), (0.7, 3, 2.53), (0.8, 5, 3.69), (0.9, 10, 6.86)])
def test_ngram_at_batch_one_is_leviathan_table_1(alpha, k, speed):
    # Leviathan, Kalman and Matias, arXiv 2211.17192 Table 1 (c = 0), printed to two decimals: a free drafter at
    # batch 1 on a dense memory-bound deployment verifies k + 1 tokens for the price of one step (plus k embedding
    # rows), so the calculator's speedup must match the printed speed within 0.005 + 0.1%.
    # One GPU: on four, the all-reduces of a (k + 1)-token verification outweigh a plain step's a little.
    r = calc(drafter="ngram", acceptance_rate=alpha, draft_tokens=k, batch_size=1, model="llama-3.1-8b", num_gpus=1)
    assert r["verify_compute_bound"] == 0
    assert r["speedup"] == pytest.approx(speed, abs=0.005 + 0.001 * speed)
    assert r["leviathan_speedup"] == pytest.approx(speed, abs=0.005)


MTP_INPUTS = dict(
    model="deepseek-v3",
    hardware="h200",
    num_gpus=8,
    weight_dtype="fp8",
    compute_dtype="fp8",
    drafter="heads",
    draft_cost_ratio=round(1 / 61, 3),
    draft_tokens=1,
    batch_size=128,
    context_tokens=4096,
    **BOUND,
)


@pytest.mark.parametrize("alpha", [0.85, 0.90])
def test_deepseek_v3_mtp_on_eight_h200(alpha):
    # DeepSeek-V3 technical report (arXiv 2412.19437 §5.4.3): MTP predicts one extra token whose acceptance rate is
    # "between 85% and 90%", giving "1.8 times TPS". No batch or hardware is given; on 8 H200s in FP8 at batch 128
    # and 4,096 tokens (nearly every expert touched), with the MTP module priced as one layer of 61 (c = 1/61).
    # DeepSeek serves with two micro-batches overlapping communication under compute (§3.4): with the step's
    # all-reduces hidden so, the speedup must lie between 1.75 (1.8 to one decimal) and 1 + α (E, which a step can
    # never beat). The calculator exposes TP 8's all-reduces, which grow with the verified tokens: lower, above 1.6.
    v = validate(SPEC["inputs"], dict(MTP_INPUTS, acceptance_rate=alpha))
    hidden = sharded_steps(v, deployment(v), overlap="full")
    overlapped = spec.speculative_step(hidden, spec.draft_heads(round(1 / 61, 3)), 128, 4096, alpha, 1)
    assert 1.75 <= overlapped.speedup <= 1 + alpha
    r = calc(**MTP_INPUTS, acceptance_rate=alpha)
    assert 1.6 <= r["speedup"] < overlapped.speedup
    assert r["tokens_per_step"] == pytest.approx(1 + alpha, rel=1e-9)


def test_eagle_head_pricing_brackets_eagle_3_table_1():
    # EAGLE-3 (arXiv 2503.01840) Table 1, LLaMA-Instruct 3.1 8B, MT-bench, T = 0: 4.40x at τ = 6.13 with a tree of
    # 60 tokens at depth 8 (Appendix A). The calculator prices an EAGLE draft step as one decoder layer plus a full
    # LM head; vLLM v0.33.0 (model_executor/models/llama_eagle3.py) sizes the head by the config's draft_vocab_size,
    # which may be smaller, so ours is an upper bound on the draft's cost: at batch 1 its speedup must sit below the
    # published 4.40, and the same tree with the head's cost left out (one layer only) above it.
    inputs = dict(
        model="llama-3.1-8b",
        num_gpus=1,
        acceptance_input="length",
        accepted_tokens_per_step=6.13,
        draft_tokens=8,
        tree_tokens=60,
        batch_size=1,
        context_tokens=1024,
        **BOUND,
    )
    eagle = calc(drafter="eagle", **inputs)
    m = model_presets()["llama-3.1-8b"]
    layer = (active_params(m, include_embedding=False) - lm_head_params(m)) / m.num_layers
    layer_only = calc(
        drafter="heads", draft_cost_ratio=round(layer / active_params(m, include_embedding=False), 3), **inputs
    )
    assert eagle["tokens_per_step"] == pytest.approx(6.13, rel=1e-9)
    assert eagle["speedup"] < 4.40 < layer_only["speedup"]


# ---- properties -----------------------------------------------------------------------------------------------


def test_worked_example_defaults():
    r = calc()
    assert r["speedup"] > 1 and r["verify_compute_bound"] == 0
    # a step of B × E tokens every (draft + verify) seconds
    assert r["speculative_tokens_per_s_per_gpu"] == pytest.approx(
        16 * r["tokens_per_step"] / (r["speculative_tpot_s"] * r["tokens_per_step"]) / 4, rel=1e-9
    )


def test_break_even_is_where_the_speedup_crosses_one():
    r = calc()
    b = r["break_even_batch"]
    assert b > 1
    assert calc(batch_size=b)["speedup"] <= 1 < calc(batch_size=b - 1)["speedup"]


def test_cost_goes_through_the_cost_calculator():
    r = calc(usd_per_gpu_hour=3.0)
    c = run(
        "cost",
        dict(
            usd_per_gpu_hour=3.0,
            num_gpus=4,
            gpus_per_replica=4,
            output_tokens_per_s=r["speculative_tokens_per_s_per_gpu"] * 4,
        ),
    )
    assert r["speculative_usd_per_million_output_tokens"] == pytest.approx(c["usd_per_million_output_tokens"], rel=1e-9)
    assert r["speculative_usd_per_million_output_tokens"] * r["speedup"] == pytest.approx(
        r["plain_usd_per_million_output_tokens"], rel=1e-9
    )


def test_a_draft_model_takes_memory_heads_do_not():
    with_draft = calc(drafter="draft_model", draft_model="llama-3.1-8b")
    mem = run("memory", dict(model="llama-3.1-8b", tensor_parallel=4, context_tokens=2048))
    assert with_draft["draft_weight_bytes_per_gpu"] == pytest.approx(mem["weight_bytes_per_gpu"], rel=1e-9)
    assert with_draft["max_sequences_with_draft"] < with_draft["max_sequences_plain"]
    heads = calc(drafter="eagle")
    assert heads["max_sequences_with_draft"] == heads["max_sequences_plain"] == with_draft["max_sequences_plain"]


def test_best_k_shrinks_under_load():
    assert calc(batch_size=256)["best_draft_tokens"] < calc(batch_size=1)["best_draft_tokens"]


@FAST
@given(
    st.sampled_from(sorted(model_presets())),
    st.sampled_from(["eagle", "ngram", "heads"]),
    st.floats(0.0, 1.0),
    st.integers(1, 8),
    st.integers(1, 2048),
    st.integers(1, 32768),
)
def test_speedup_never_beats_the_tokens_per_step(model, drafter, alpha, k, batch, context):
    # the widest TP the model's heads allow (Qwen2.5-7B's 28 heads: TP 4; Falcon 7B's 71: TP 1)
    tp = next(t for t in (8, 4, 2, 1) if allowed(model_presets()[model], Parallelism(t)))
    r = calc(
        model=model,
        num_gpus=tp,
        drafter=drafter,
        acceptance_rate=alpha,
        draft_tokens=k,
        batch_size=batch,
        context_tokens=context,
        hardware="h200",
    )
    assert r["speedup"] <= r["tokens_per_step"] * (1 + 1e-12)
    assert r["verify_to_plain_ratio"] >= 1 - 1e-12


def test_eagle_cost_ratio_is_a_layer_and_the_head():
    m = model_presets()["llama-3.1-70b"]
    assert 1 / m.num_layers < eagle_cost_ratio(m) < 0.05


def test_latency_off_by_default_and_speculative_when_on():
    base = dict(model="llama-3.1-8b", num_gpus=1, batch_size=1)  # one GPU: no all-reduce grows with k
    off, explicit = run("latency", base), run("latency", dict(base, spec_method="off"))
    assert off == explicit
    on = run("latency", dict(base, spec_method="ngram", spec_acceptance_rate=0.8, spec_draft_tokens=4))
    # batch 1, memory-bound: TPOT falls by E = (1 − 0.8^5) ÷ 0.2 to within 0.1%
    assert off["tpot_s"] / on["tpot_s"] == pytest.approx(spec.expected_tokens_per_step(0.8, 4), rel=1e-3)
    assert on["ttft_s"] == off["ttft_s"]
    assert on["e2e_latency_s"] == pytest.approx(on["ttft_s"] + on["tpot_s"] * 255, rel=1e-9)
    same = calc(
        drafter="ngram",
        acceptance_rate=0.8,
        draft_tokens=4,
        batch_size=1,
        context_tokens=1024 + 128,
        model="llama-3.1-8b",
        num_gpus=1,
    )
    assert on["tpot_s"] == pytest.approx(same["speculative_tpot_s"], rel=1e-9)


# ---- bad inputs -----------------------------------------------------------------------------------------------


def test_measured_length_above_k_plus_one_names_the_field():
    with pytest.raises(InputError) as e:
        calc(acceptance_input="length", accepted_tokens_per_step=5.0, draft_tokens=3)
    assert e.value.field == "accepted_tokens_per_step" and "between 1 and 4" in e.value.message


def test_acceptance_rate_out_of_range():
    with pytest.raises(InputError) as e:
        calc(acceptance_rate=1.5)
    assert e.value.field == "acceptance_rate"


# ---- the simulated comparison (speculative_sim) ----------------------------------------------------------------


def sim(**inputs) -> dict:
    return run("speculative_sim", inputs)


def test_light_load_tpot_gain_matches_the_step_calculator():
    # At 4 requests/s the replica runs about 22 sequences off and fewer on, all memory-bound: every decode step
    # keeps E tokens for the price of a plain one, so the simulated TPOT p50 must fall by the step calculator's
    # speedup at batch 16 to within 5% (the rest is prefill chunks sharing steps and the smaller batch).
    r, step = sim(), calc()
    assert r["tokens_per_step"] == pytest.approx(step["tokens_per_step"], rel=1e-12)
    assert r["tpot_p50_ratio"] == pytest.approx(step["speedup"], rel=0.05)


def test_the_gain_shrinks_under_load():
    light, heavy = sim(), sim(request_rate_per_s=40.0)
    # 40 requests/s fills the replica (about 51 sequences running against 22 at 4 requests/s, with TP 4's
    # all-reduces in every step)
    assert heavy["mean_running_off"] > 2 * light["mean_running_off"]
    assert 1.0 < heavy["tpot_p50_ratio"] < light["tpot_p50_ratio"]
    # near capacity the replica serves more tokens per second with speculation on (still below break-even)
    assert heavy["throughput_on_tokens_per_s"] > heavy["throughput_off_tokens_per_s"]


def test_a_draft_model_shrinks_the_simulated_pool():
    assert sim(drafter="draft_model")["kv_pool_tokens"] < sim()["kv_pool_tokens"]


def test_speculation_that_never_accepts_is_slower():
    # α = 0: every step keeps one token and pays for drafting and a four-token verification
    r = sim(acceptance_rate=0.0)
    assert r["tokens_per_step"] == 1.0 and r["tpot_p50_on_s"] >= r["tpot_p50_off_s"]


@pytest.mark.parametrize("drafter, batch", [("ngram", 1), ("eagle", 16), ("draft_model", 64), ("eagle", 512)])
def test_roofline_speculative_bound_is_a_ceiling_on_the_priced_step(drafter, batch):
    # roofline's accepted_tokens_per_step prices only the kept tokens (B × τ) and a free draft: fed this
    # calculator's E, its tokens/s per user must bound this calculator's, which verifies k + 1 and pays the draft.
    r = calc(drafter=drafter, batch_size=batch, **BOUND)
    roof = run(
        "roofline",
        dict(
            model="llama-3.1-70b",
            num_gpus=4,
            batch_size=batch,
            context_tokens=2048,
            accepted_tokens_per_step=r["tokens_per_step"],
        ),
    )
    per_user = r["tokens_per_step"] / (r["speculative_tpot_s"] * r["tokens_per_step"])
    assert per_user <= roof["decode_tokens_per_s_per_user_speculative_upper_bound"] * (1 + 1e-9)


def test_memory_calculator_charges_a_draft_model():
    # the memory calculator's optional draft model: off changes nothing; on, the draft's weights per GPU are its
    # own memory-calculator weights, and the sequences that fit are the step calculator's
    base = dict(model="llama-3.1-70b", tensor_parallel=4, context_tokens=2048)
    off = run("memory", base)
    assert off["max_concurrent_sequences_with_draft"] == off["max_concurrent_sequences"]
    on = run("memory", dict(base, speculative_draft="draft_model", draft_model="llama-3.1-8b"))
    alone = run("memory", dict(base, model="llama-3.1-8b"))
    assert on["draft_weight_bytes_per_gpu"] == alone["weight_bytes_per_gpu"]
    assert on["max_concurrent_sequences_with_draft"] == calc(drafter="draft_model")["max_sequences_with_draft"]
    assert on["max_concurrent_sequences"] == off["max_concurrent_sequences"]


def test_a_tree_smaller_than_its_depth_is_refused():
    # A tree of depth k has at least one token per level; 0 < tree_tokens < k used to be read silently as a chain.
    with pytest.raises(InputError) as e:
        calc(draft_tokens=3, tree_tokens=2)
    assert e.value.field == "tree_tokens"
    assert calc(draft_tokens=3, tree_tokens=3)["speedup"] == pytest.approx(calc(draft_tokens=3)["speedup"])
