"""Speculative decoding (calculators/calcs/speculative.py): published figures first, each cited beside its assert
with its tolerance, then the model's own properties on real deployments, then bad inputs."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calculators import run, schema
from calculators.calcs import speculative as spec
from calculators.calcs.steptime import StepModel, deployment
from calculators.errors import InputError
from calculators.params import embedding_params, lm_head_params, total_params
from calculators.presets import accelerator_presets, model_presets
from calculators.schema import validate

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEEPSEEK_H200 = dict(model="deepseek-v3", hardware="h200", num_gpus=8, weight_dtype="fp8", compute_dtype="fp8")


def steps(**inputs) -> StepModel:
    """A StepModel at efficiencies 1.0 from roofline's inputs (its defaults for the rest), at kernel time only
    (no per-step overhead, as speculative.py's hand-computed limits assume) unless step_overhead is given."""
    return StepModel(deployment(validate(schema("roofline")["inputs"], {"step_overhead": "none", **inputs})))


# ---- Leviathan, Kalman and Matias, arXiv 2211.17192v2 (read in a stored copy of the paper's text) ---------------

# Table 1: (α, γ, operations, speed) "for various values of γ and α, assuming c = ĉ = 0", printed to two decimals
TABLE_1 = [
    (0.6, 2, 1.53, 1.96),
    (0.7, 3, 1.58, 2.53),
    (0.8, 2, 1.23, 2.44),
    (0.8, 5, 1.63, 3.69),
    (0.9, 2, 1.11, 2.71),
    (0.9, 10, 1.60, 6.86),
]


@pytest.mark.parametrize("alpha, k, operations, speed", TABLE_1)
def test_leviathan_table_1(alpha, k, operations, speed):
    # Speed is Theorem 3.8 at c = 0 and Operations Theorem 3.11 at ĉ = 0; Table 1 prints both to two decimals,
    # so each must agree within half a unit of the last printed digit (0.005).
    assert spec.improvement_factor(alpha, k, 0.0) == pytest.approx(speed, abs=0.005)
    assert spec.expected_tokens_per_step(alpha, k) == pytest.approx(speed, abs=0.005)  # c = 0: speed = E[tokens]
    assert spec.operations_factor(alpha, k, 0.0) == pytest.approx(operations, abs=0.005)


# Table 4 (Appendix A.3): (γ, α, c, Exp), T5-XXL with T5-small / base / large drafts, EnDe then CNNDM, T=0 then T=1
TABLE_4 = [
    (7, 0.75, 0.02, 3.2),
    (7, 0.8, 0.04, 3.3),
    (7, 0.82, 0.11, 2.5),
    (7, 0.62, 0.02, 2.3),
    (5, 0.68, 0.04, 2.4),
    (3, 0.71, 0.11, 2.0),
    (5, 0.65, 0.02, 2.4),
    (5, 0.73, 0.04, 2.6),
    (3, 0.74, 0.11, 2.0),
    (5, 0.53, 0.02, 1.9),
    (3, 0.55, 0.04, 1.8),
    (3, 0.56, 0.11, 1.6),
]


@pytest.mark.parametrize("k, alpha, c, expected", TABLE_4)
def test_leviathan_table_4_expected_improvement(k, alpha, c, expected):
    # "Expected improvement factor (Exp)" from Theorem 3.8 with c "estimated ... based on profiler traces". The
    # table prints α and c to two decimals and Exp to one, so Exp must lie within the factor's range over
    # α ± 0.005 and c ± 0.005 (it rises with α and falls with c), widened by 0.05 for Exp's own rounding. At the
    # printed α and c alone nine rows agree within that 0.05 and all twelve within 0.07; (5, 0.68, 0.04),
    # (3, 0.71, 0.11) and (3, 0.56, 0.11) need the rounding of α and c.
    low = spec.improvement_factor(alpha - 0.005, k, c + 0.005)
    high = spec.improvement_factor(alpha + 0.005, k, c - 0.005)
    assert low - 0.05 <= expected <= high + 0.05
    assert spec.improvement_factor(alpha, k, c) == pytest.approx(expected, abs=0.07)


def test_leviathan_bigram_draft():
    # §3.6: T5-XXL EnDe with "a trivial bigram model, we get α ≈ 0.2 which leads to an inference speed improvement
    # factor of 1.25X with γ = 3" (c = 0, an n-gram lookup); 1.248 rounds to the printed 1.25 (±0.005).
    assert spec.improvement_factor(0.2, 3, 0.0) == pytest.approx(1.25, abs=0.005)
    assert spec.expected_tokens_per_step(0.2, 3) == pytest.approx(1 + 0.2 + 0.04 + 0.008, rel=1e-15)


@pytest.mark.parametrize("alpha, c", [(0.2, 0.1), (0.5, 0.05), (0.75, 0.02), (0.9, 0.3), (0.3, 0.29)])
def test_leviathan_corollary_3_9(alpha, c):
    # Corollary 3.9: if α > c some γ improves, and the improvement is at least (1 + α) ÷ (1 + c) (γ = 1); exact
    # arithmetic, so the tolerance is rounding only.
    assert spec.improvement_factor(alpha, 1, c) == pytest.approx((1 + alpha) / (1 + c), rel=1e-12)
    best = spec.optimal_draft_tokens(alpha, c)
    assert spec.improvement_factor(alpha, best, c) >= (1 + alpha) / (1 + c) > 1


def test_optimal_draft_tokens_is_the_best_integer():
    # §3.5: "the optimal γ is the one maximizing the walltime improvement equation ... Since γ is an integer, it
    # can be easily found numerically". The search must beat or tie every k it could have picked.
    for alpha, c in [(0.6, 0.02), (0.8, 0.05), (0.9, 0.01), (0.5, 0.2)]:
        best = spec.optimal_draft_tokens(alpha, c)
        assert all(
            spec.improvement_factor(alpha, best, c) >= spec.improvement_factor(alpha, k, c)
            for k in range(1, spec.MAX_DRAFT_TOKENS + 1)
        )
    assert spec.optimal_draft_tokens(0.8, 0.0, 10) == 10  # a free draft: every extra token helps
    assert spec.optimal_draft_tokens(0.0, 0.1) == 1  # nothing accepted: the cheapest draft


# ---- DeepSeek-V3's MTP, arXiv 2412.19437v2 §5.4.3 (read in stored verbatim quotations of the section) ---------


@pytest.mark.parametrize("alpha", [0.85, 0.90])
def test_deepseek_v3_mtp_acceptance_and_back(alpha):
    # §5.4.3: DeepSeek-V3 "predicts the next 2 tokens" (one drafted token, k = 1) and "the acceptance rate of the
    # second token prediction ranges between 85% and 90%". With k = 1, E[tokens] = 1 + α exactly, and the inverse
    # must return α to rounding.
    tokens = spec.expected_tokens_per_step(alpha, 1)
    assert tokens == pytest.approx(1 + alpha, rel=1e-15)
    assert spec.acceptance_rate(tokens, 1) == pytest.approx(alpha, abs=1e-15)


def test_deepseek_v3_mtp_speedup_on_eight_h200():
    # §5.4.3: the acceptance rate "enables DeepSeek-V3 to achieve a significantly improved decoding speed,
    # delivering 1.8 times TPS". The report gives no batch, hardware or context for it. The model's figure at a
    # batch whose tokens touch nearly every expert (128 sequences of 4,096 tokens, which fit on 8 H200s) must lie
    # between 1.75 (1.8 printed to one decimal) and 1 + α (a bound omits overheads, so it may sit above 1.8 but
    # never above the tokens per step). The MTP drafter is priced as one extra layer of the 61 (our assumption,
    # c = 1/61); at 1/30 the figures move by about 1.5%.
    assert run("decode_limits", dict(DEEPSEEK_H200, context_tokens=4096))["max_batch_in_memory"] >= 128
    target, mtp = steps(**DEEPSEEK_H200), spec.draft_heads(1 / 61)
    for alpha in (0.85, 0.90):
        step = spec.speculative_step(target, mtp, 128, 4096, alpha, 1)
        assert not step.verify.compute_bound
        assert 1.75 <= step.speedup <= 1 + alpha
    # 1.8× at E = 1.85-1.90 tokens per step means a speculative step costs 1.028-1.056 plain steps
    assert [round(1 + a, 2) / 1.8 for a in (0.85, 0.90)] == pytest.approx([1.028, 1.056], abs=0.001)


def test_moe_speculation_pays_little_at_batch_one():
    # The model's own property, not a published figure: at batch 1 the two tokens of an MTP step route to about
    # twice the experts (E × (1 − (1 − 8/256)²) = 15.75 of 256 per layer, against 8), so verification reads far more
    # weights than a plain step and the speedup is well below the 1.8 of a saturated batch.
    step = spec.speculative_step(steps(**DEEPSEEK_H200), spec.draft_heads(1 / 61), 1, 4096, 0.85, 1)
    assert step.verify.weight_bytes > 1.4 * step.plain.weight_bytes
    assert step.speedup < 1.3


# ---- EAGLE-3, arXiv 2503.01840v3 (read in a stored copy of the paper's text) -------------------------------------


def test_eagle_3_acceptance_length_as_alpha_and_back():
    # Table 1, LLaMA-Instruct 3.1 8B, MT-bench, temperature 0: speedup 4.40x at τ = 6.13, drafted as a dynamic tree
    # of depth 8 (Appendix A: "increase the draft tree depth from 6 to 8"). A chain of 8 drafts would need an i.i.d.
    # α of 0.900 (to 0.0005) to keep 6.13 tokens per step; the inverse must give τ back to rounding, and a chain of 5
    # cannot keep 6.13 at all.
    alpha = spec.acceptance_rate(6.13, 8)
    assert alpha == pytest.approx(0.900, abs=0.0005)
    assert spec.expected_tokens_per_step(alpha, 8) == pytest.approx(6.13, rel=1e-12)
    with pytest.raises(InputError):
        spec.acceptance_rate(6.13, 5)


@pytest.mark.parametrize("hardware", ["h100-sxm", "a100-80gb", "l40s"])
def test_eagle_3_tree_verification_is_nearly_free_at_batch_one(hardware):
    # Table 1's 4.40x at τ = 6.13 is at batch 1 (§1: "a 1.4x latency speedup over EAGLE-2 at batch size 1"); the
    # GPU is not named, so three are tried, at 1,024 tokens of context (not given; at batch 1 the KV hardly matters).
    # Appendix A: 60 draft tokens in the 8B's tree. The core must price the 61-token tree verification at batch 1
    # as a plain step (memory-bound, within 0.1%); the published speedup then leaves τ ÷ 4.40 − 1 = 0.393 of a plain
    # step for 8 draft levels, c ≈ 0.049 a level, which must lie between one decoder layer's share of the 8B's
    # weights and that plus the LM head's (§3.2: "The core of the draft model in EAGLE-3 is a Transformer decoder
    # layer"; §3.1: its output goes "into the LM head").
    target = steps(model="llama-3.1-8b", hardware=hardware)
    free = spec.tree_step(target, spec.NGRAM, 1, 1024, 6.13, 8, 60)
    assert not free.verify.compute_bound
    assert free.verify.time_s == pytest.approx(free.plain.time_s, rel=1e-3)
    c = (6.13 / 4.40 - free.verify.time_s / free.plain.time_s) / 8
    m = target.dep.model
    weights = total_params(m) - embedding_params(m)  # what a batch-1 step reads, less one embedding row
    layer = (weights - lm_head_params(m)) / m.num_layers
    assert layer / weights < c < (layer + lm_head_params(m)) / weights
    assert spec.tree_step(target, spec.draft_heads(c), 1, 1024, 6.13, 8, 60).speedup == pytest.approx(4.40, rel=1e-3)


def test_tree_step_verifies_every_drafted_token():
    target = steps(model="llama-3.1-8b", hardware="h100-sxm")
    tree = spec.tree_step(target, spec.draft_heads(0.05), 32, 1024, 4.0, 6, 48)
    assert tree.verify == target.decode(32, 1024, 49)
    assert tree.draft_time_s == 6 * 0.05 * target.decode(32, 1024).time_s
    assert tree.tokens_per_step == 4.0 and tree.draft_steps == 6


# ---- the model on deployments ----------------------------------------------------------------------------------


def test_batch_one_dense_matches_theorem_3_8():
    # Memory-bound and dense, a k + 1-token verification costs a plain step (plus k embedding rows), which is
    # Theorem 3.8's assumption, so the deployment's speedup must equal the closed form to 0.1%.
    target = steps(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=4)
    step = spec.speculative_step(target, spec.draft_heads(0.05), 1, 2048, 0.8, 4)
    assert not step.verify.compute_bound
    assert step.speedup == pytest.approx(spec.improvement_factor(0.8, 4, 0.05), rel=1e-3)
    assert step.tokens_per_s_per_gpu == pytest.approx(step.tokens_per_s_per_sequence / 4, rel=1e-15)


def test_draft_model_is_priced_on_its_own_steps():
    target = steps(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=4)
    draft = steps(model="llama-3.1-8b", hardware="h100-sxm", num_gpus=4)
    step = spec.speculative_step(target, spec.draft_model(draft), 16, 2048, 0.8, 4)
    assert step.draft_time_s == 4 * draft.decode(16, 2048).time_s
    assert step.time_s == step.draft_time_s + target.decode(16, 2048, 5).time_s
    assert spec.speculative_step(target, spec.NGRAM, 16, 2048, 0.8, 4).draft_time_s == 0.0


@pytest.mark.parametrize("alpha, k, c", [(0.8, 4, 0.05), (0.6, 2, 0.0), (1.0, 3, 0.0), (1.0, 1, 0.0)])
def test_compute_bound_limit(alpha, k, c):
    # With plain and verification steps both compute-bound, verification costs k + 1 plain steps and drafting k·c,
    # so the speedup is E ÷ (k·c + k + 1) ≤ 1: at best (α = 1, c = 0) speculation breaks even, never better.
    target = steps(model="llama-3.1-8b", hardware="h100-sxm")
    step = spec.speculative_step(target, spec.draft_heads(c), 50_000, 128, alpha, k)
    assert step.plain.compute_bound and step.verify.compute_bound
    limit = spec.expected_tokens_per_step(alpha, k) / (k * c + k + 1)
    assert step.speedup == pytest.approx(limit, rel=1e-9)
    assert step.speedup <= 1 + 1e-12
    assert (step.speedup == pytest.approx(1.0, rel=1e-12)) == (alpha == 1.0 and c == 0.0)


def test_speedup_falls_to_one_as_batch_grows():
    # A dense model at a short context turns compute-bound as the batch grows: the speedup must never rise with
    # the batch, and it must end at or below 1.
    target = steps(model="llama-3.1-8b", hardware="h100-sxm")
    curve = [
        spec.speculative_step(target, spec.draft_heads(0.05), b, 256, 0.8, 4).speedup
        for b in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384, 65536]
    ]
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in pairwise(curve))
    assert curve[0] > 2 and curve[-1] < 1


SCANNED = [  # (target, drafter, context, α, k): dense with a draft model and with heads, MoE with heads and n-gram
    (
        dict(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=4),
        dict(model="llama-3.1-8b", hardware="h100-sxm", num_gpus=4),
        2048,
        0.8,
        4,
    ),
    (dict(model="llama-3.1-8b", hardware="h100-sxm"), 0.05, 128, 0.8, 4),
    (dict(model="qwen3-30b-a3b", hardware="h100-sxm"), 0.0, 256, 0.6, 3),
    (dict(model="mixtral-8x7b", hardware="h100-sxm", num_gpus=2), 0.03, 256, 0.7, 3),
    (dict(model="gpt-oss-120b", hardware="h100-sxm"), 0.03, 1024, 0.7, 3),
]


@pytest.mark.parametrize("target, draft, context, alpha, k", SCANNED)
def test_paying_range_matches_a_scan_of_every_batch(target, draft, context, alpha, k):
    # paying_range bisects on a doubling grid, assuming the paying batches form one range; a scan of every batch
    # up to 6,000 must find the same range, and break_even_batch must be the first batch above it (None where it
    # still pays at 6,000, as gpt-oss-120b at 1,024 tokens of context does).
    target = steps(**target)
    drafter = spec.draft_model(steps(**draft)) if isinstance(draft, dict) else spec.draft_heads(draft)
    paying = [b for b in range(1, 6001) if spec.speculative_step(target, drafter, b, context, alpha, k).pays]
    assert paying == list(range(paying[0], paying[-1] + 1))
    assert spec.paying_range(target, drafter, context, alpha, k, 6000) == (paying[0], paying[-1])
    above = None if paying[-1] == 6000 else paying[-1] + 1
    assert spec.break_even_batch(target, drafter, context, alpha, k, 6000) == above


def test_break_even_batch_edges():
    target = steps(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=4)
    draft = spec.draft_model(steps(model="llama-3.1-8b", hardware="h100-sxm", num_gpus=4))
    assert spec.break_even_batch(target, draft, 2048, 0.8, 4) == 323  # pays at 322, not at 323
    assert spec.break_even_batch(target, draft, 2048, 0.8, 4, max_batch=200) is None  # still pays at 200
    assert spec.break_even_batch(target, draft, 2048, 0.0, 4) == 1  # nothing accepted: never pays
    assert spec.paying_range(target, draft, 2048, 0.0, 4) is None
    # MoE: four tokens per sequence touch up to four times the experts, so speculation starts paying above batch 1
    moe = steps(model="qwen3-30b-a3b", hardware="h100-sxm")
    first, _ = spec.paying_range(moe, spec.NGRAM, 256, 0.6, 3)
    assert first > 1 and not spec.speculative_step(moe, spec.NGRAM, 1, 256, 0.6, 3).pays


def test_best_draft_tokens_shrinks_under_load():
    # Memory-bound at batch 1 the deployment's best k is Theorem 3.8's; under load verification costs more and
    # the best k can only be smaller.
    target = steps(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=4)
    heads = spec.draft_heads(0.05)
    assert spec.best_draft_tokens(target, heads, 1, 2048, 0.8) == spec.optimal_draft_tokens(0.8, 0.05)
    assert spec.best_draft_tokens(target, heads, 256, 2048, 0.8) < spec.best_draft_tokens(target, heads, 1, 2048, 0.8)


MODELS, ACCELERATORS = sorted(model_presets()), sorted(accelerator_presets())


@FAST
@given(
    st.sampled_from(MODELS),
    st.sampled_from(ACCELERATORS),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(1, 2048),
    st.integers(1, 100_000),
    st.integers(1, 16),
    st.integers(1, 16),
)
def test_more_tokens_per_step_never_lower_the_rate_while_memory_bound(model, hardware, tp, batch, context, t1, t2):
    # While a step of τ tokens per sequence is memory-bound, τ ÷ step time never falls as τ grows: KV is read
    # once, the weights once, and the experts and embedding rows touched grow less than in proportion.
    low, high = sorted((t1, t2))
    target = steps(model=model, hardware=hardware, num_gpus=tp)
    wide = target.decode(batch, context, high)
    if wide.compute_bound:
        return
    assert high / wide.time_s >= low / target.decode(batch, context, low).time_s * (1 - 1e-12)


@FAST
@given(st.sampled_from(MODELS), st.integers(1, 512), st.integers(1, 100_000), st.integers(1, 15))
def test_a_longer_fully_accepted_free_draft_never_slows_a_memory_bound_sequence(model, batch, context, k):
    target = steps(model=model, hardware="h200")
    short, long = (spec.speculative_step(target, spec.NGRAM, batch, context, 1.0, n) for n in (k, k + 1))
    if long.verify.compute_bound:
        return
    assert long.tokens_per_s_per_sequence >= short.tokens_per_s_per_sequence * (1 - 1e-12)


@FAST
@given(st.floats(0.0, 1.0), st.integers(1, spec.MAX_DRAFT_TOKENS))
def test_acceptance_rate_inverts_expected_tokens(alpha, k):
    tokens = spec.expected_tokens_per_step(alpha, k)
    assert 1.0 <= tokens <= k + 1
    assert spec.expected_tokens_per_step(spec.acceptance_rate(tokens, k), k) == pytest.approx(tokens, rel=1e-12)


def test_acceptance_limits():
    assert spec.expected_tokens_per_step(1.0, 7) == 8.0 and spec.expected_tokens_per_step(0.0, 7) == 1.0
    assert spec.acceptance_rate(8.0, 7) == 1.0 and spec.acceptance_rate(1.0, 7) == 0.0
    assert spec.expected_tokens_per_step(1 - 1e-12, 7) == pytest.approx(8.0, rel=1e-10)  # no cancellation near 1


# ---- bad inputs name the field and the allowed range -----------------------------------------------------------


@pytest.mark.parametrize(
    "call, field, allowed",
    [
        (lambda: spec.expected_tokens_per_step(-0.1, 3), "acceptance_rate", "between 0 and 1"),
        (lambda: spec.expected_tokens_per_step(1.1, 3), "acceptance_rate", "between 0 and 1"),
        (lambda: spec.expected_tokens_per_step("often", 3), "acceptance_rate", "between 0 and 1"),
        (lambda: spec.expected_tokens_per_step(0.5, 0), "draft_tokens", "between 1 and 63"),
        (lambda: spec.expected_tokens_per_step(0.5, 2.5), "draft_tokens", "an integer between 1 and 63"),
        (lambda: spec.improvement_factor(0.5, 64, 0.0), "draft_tokens", "between 1 and 63"),
        (lambda: spec.improvement_factor(0.5, 3, -0.01), "draft_cost_ratio", "between 0 and 1"),
        (lambda: spec.draft_heads(1.5), "draft_cost_ratio", "between 0 and 1"),
        (lambda: spec.acceptance_rate(0.9, 3), "accepted_tokens_per_step", "between 1 and 4"),
        (lambda: spec.acceptance_rate(4.5, 3), "accepted_tokens_per_step", "between 1 and 4"),
        (lambda: spec.speculative_step(steps(), spec.NGRAM, 0, 1024, 0.8, 3), "batch_size", "between 1 and 100,000"),
        (
            lambda: spec.tree_step(steps(), spec.NGRAM, 1, 1024, 9.5, 8, 60),
            "accepted_tokens_per_step",
            "between 1 and 9",
        ),
        (lambda: spec.tree_step(steps(), spec.NGRAM, 1, 1024, 3.0, 8, 7), "tree_tokens", "between 8 and 1,023"),
        (lambda: spec.tree_step(steps(), spec.NGRAM, 1, 1024, 1.0, 0, 7), "draft_depth", "between 1 and 63"),
    ],
)
def test_bad_inputs_raise_input_error(call, field, allowed):
    with pytest.raises(InputError) as error:
        call()
    assert error.value.field == field and allowed in error.value.message
