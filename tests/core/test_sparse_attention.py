"""The sparse_attention calculator: KV kept and attention work of StreamingLLM, H2O/SnapKV budgets and DeepSeek
sparse attention against full attention."""

import pytest

from calculators import run


def test_deepseek_v32_by_hand():
    """DeepSeek-V3.2 (61 MLA layers, latent 512 + rope 64, BF16: 1,152 B; indexer key 128 FP8 + one FP32 scale: 132 B).
    Decode reads every indexer key and the 2,048 selected latents."""
    t = 131_072
    r = run("sparse_attention", dict(context_tokens=t))
    assert r["kv_bytes_full"] == 61 * 1152 * t
    assert r["kv_bytes_dsa"] == 61 * (1152 + 132) * t  # DSA keeps everything, plus its indexer keys
    assert r["decode_bytes_dsa"] == 61 * (132 * t + 1152 * 2048)
    assert r["kv_bytes_budget"] == r["decode_bytes_budget"] == 61 * 1152 * 2048
    assert r["kv_bytes_streaming"] == 61 * 1152 * 4096
    # decode FLOPs: absorbed MLA, 2 × 128 × (576 + 512) per key; the indexer 2 × 64 × 128 per key
    assert r["decode_flops_full"] == pytest.approx(61 * 2 * 128 * 1088 * t)
    assert r["decode_flops_dsa"] == pytest.approx(61 * (2 * 128 * 1088 * 2048 + 2 * 64 * 128 * t))


def test_eviction_does_not_save_prefill_but_streaming_does():
    r = run("sparse_attention", {})
    assert r["prefill_flops_budget"] == r["prefill_flops_full"]
    assert r["prefill_flops_streaming"] < r["prefill_flops_full"] / 10
    assert r["prefill_flops_dsa"] < r["prefill_flops_full"]


def test_short_context_saves_nothing():
    r = run("sparse_attention", dict(context_tokens=1024))
    assert r["kv_bytes_budget"] == r["kv_bytes_streaming"] == r["kv_bytes_full"]
    assert r["decode_bytes_saving_budget"] == 1.0
    assert r["decode_bytes_saving_dsa"] < 1.0  # below k DSA reads everything plus its indexer keys


def test_savings_grow_with_context():
    a, b = (run("sparse_attention", dict(context_tokens=t)) for t in (32_768, 131_072))
    assert b["decode_bytes_saving_dsa"] > a["decode_bytes_saving_dsa"]
    assert b["prefill_flops_saving_dsa"] > a["prefill_flops_saving_dsa"]


def test_deepseek_v32_exp_cost_curves():
    """DeepSeek-V3.2-Exp report (github.com/deepseek-ai/DeepSeek-V3.2-Exp, DeepSeek_V3_2.pdf, Figure 3, H800 at
    $2/GPU-h), read off the chart at token position 128K: decoding about $2.15 vs $0.25 per million tokens
    (V3.1-Terminus vs V3.2-Exp, 8.6×), prefilling about $0.66 vs $0.19 (3.5×). Decode at scale is bound by the
    KV it reads, prefill by attention FLOPs: the modelled ratios (7.7× and 3.3×) are within 25% of the chart's.
    Reading the chart is good to about ±$0.02."""
    r = run("sparse_attention", dict(context_tokens=131_072))
    assert r["decode_bytes_saving_dsa"] == pytest.approx(2.15 / 0.25, rel=0.25)
    assert r["prefill_flops_saving_dsa"] == pytest.approx(0.66 / 0.19, rel=0.25)


def test_sliding_window_model_windows_kept_by_every_method():
    """gemma-3-27b: the sliding layers keep their 1,024-token window under every method; only the global layers
    change."""
    r = run("sparse_attention", dict(model="gemma-3-27b", context_tokens=131_072))
    assert r["kv_bytes_full"] > r["kv_bytes_budget"] > 0
    s = run("sparse_attention", dict(model="gemma-3-27b", context_tokens=1024))
    assert s["kv_bytes_full"] == s["kv_bytes_budget"]
