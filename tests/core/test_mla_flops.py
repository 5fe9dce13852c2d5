"""MLA attention FLOPs: prefill in the expanded form, decode in the absorbed form.

vLLM's MLA backend (v1/attention/backends/mla/common.py) prefills "compute friendly" (MHA with
query-key heads of qk_nope + qk_rope and value heads of v_head_dim) and decodes "data-movement
friendly" (MQA over the cached latent: query-key kv_lora_rank + qk_rope, value kv_lora_rank).
"""

import pytest

from calculators import run
from calculators.calcs.roofline import SCHEMA
from calculators.calcs.latency import SCHEMA as LATENCY, batch_latency
from calculators.calcs.steptime import StepModel, attention_terms, deployment
from calculators.params import _attention_params
from calculators.catalog import model_presets
from calculators.schema import validate

MODELS = model_presets()

T = 8192
CAUSAL_KEYS = T * (T + 1) // 2  # 33,558,528 query-key pairs under a causal mask
L, H = 61, 128  # DeepSeek-V3 config_671B.json: n_layers, n_heads
EXPANDED = 2 * H * ((128 + 64) + 128) * L * CAUSAL_KEYS  # QKᵀ over 192, AV over 128
ABSORBED = 2 * H * ((512 + 64) + 512) * L * CAUSAL_KEYS  # QKᵀ over 576, AV over 512


def _steps(model="deepseek-v3", **extra):
    return StepModel(deployment(validate(SCHEMA["inputs"], {"model": model, "hardware": "h100-sxm", **extra})))


def test_hand_values_for_deepseek_v3_prefill_at_8k():
    assert EXPANDED == 167_695_991_439_360
    assert ABSORBED == 570_166_370_893_824
    assert ABSORBED / EXPANDED == pytest.approx(1088 / 320)


def test_prefill_is_priced_in_the_expanded_form():
    sm = _steps()
    assert sm.per_prompt(T)[0] == 2 * sm.active * T + EXPANDED
    assert sm.per_prompt(T)[0] == 767_769_880_559_616
    assert sm.prefill([T]).flops == 2 * sm.active * T + EXPANDED


def test_decode_is_priced_in_the_absorbed_form_and_reads_the_latent():
    sm = _steps()
    flops, kv = sm.per_sequence(T)
    assert flops == 2 * sm.active + 2 * H * (576 + 512) * L * T
    assert kv == L * (512 + 64) * 2 * T  # BF16 latent + RoPE key, per layer per token
    step = sm.decode(4, T)
    assert (step.flops, step.kv_bytes) == (4 * flops, 4 * kv)


def test_kv_up_projection_is_a_weight_so_it_is_not_added_again():
    """kv_b_proj (r_kv × H × (qk_nope + v)) sits in the parameter count, so 2 × active params already
    prices expanding each prefill token (2 × 512 × 128 × 256 FLOPs per layer) and, in decode, the same
    matrices folded into the query and output; only the context-dependent terms change form."""
    a = MODELS["deepseek-v3"].attention
    q = 7168 * 1536 + 1536 + 1536 * H * 192
    kv_down = 7168 * (512 + 64) + 512
    kv_up = 512 * H * (128 + 128)
    assert _attention_params(MODELS["deepseek-v3"]) == q + kv_down + kv_up + H * 128 * 7168
    assert 2 * a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim) == 2 * kv_up == 33_554_432


def test_kimi_k2_uses_its_own_head_count():
    m = MODELS["kimi-k2"]
    assert attention_terms(m, prefill=True) == [(61 * 2 * 64 * 320, None)]
    assert attention_terms(m) == [(61 * 2 * 64 * 1088, None)]


def test_other_attention_kinds_price_prefill_and_decode_alike():
    for model_id, m in MODELS.items():
        if m.attention.kind != "mla":
            assert attention_terms(m, prefill=True) == attention_terms(m), model_id


def test_non_mla_outputs_unchanged():
    """Values from before the MLA change (commit 5c03300), compared exactly; the intensity and decode
    figures then moved once more when the input embedding became a row lookup (review parts-1-3 row 2). The
    estimates are taken without the per-step overhead (added later, overhead.py), which these values predate."""
    assert _steps("llama-3.1-70b").per_prompt(T) == (1226709365948416.0, 2684354560.0)
    roof = run("roofline", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 4})
    assert roof["prefill_time_s_lower_bound"] == 0.073323394752
    assert roof["prefill_arithmetic_intensity_flops_per_byte"] == 2077.03953096
    assert roof["decode_step_time_s_lower_bound"] == 0.0135788256669
    # latency now adds TP 4's all-reduces (sharding.steps_for); its kernel-time model, StepModel, is what these pin
    v = validate(
        LATENCY["inputs"], {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 4, "step_overhead": "none"}
    )
    lat = batch_latency(StepModel(deployment(v)), 16, 1024, 256, 0.0)
    assert (round(lat["ttft_s"], 12), round(lat["tpot_s"], 13)) == (0.968384502395, 0.0135304222567)
    pre = run("preemption", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 4, "context_tokens": T})
    assert pre["recompute_time_s"] == 0.619925897488
    oss = run("latency", {"model": "gpt-oss-120b", "hardware": "h100-sxm", "step_overhead": "none"})
    assert (oss["ttft_s"], oss["tpot_s"]) == (0.288473781513, 0.0355301646254)
