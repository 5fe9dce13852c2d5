"""Published figures the calculators must reproduce; the citation sits beside each assert."""

from __future__ import annotations

import pytest

from calculators import run

GIB, GB = 2**30, 1e9


def kv(model, context, **extra):
    return run("kv_cache", {"model": model, "context_tokens": context, **extra})


def test_opt_13b_800_kib_per_token():
    r = kv("opt-13b", 2048, kv_dtype="fp16")
    # Kwon et al. 2023, PagedAttention (arXiv 2309.06180 §3): "800 KB" per token = 2 × 5120 × 40 × 2 B (KiB)
    assert r["kv_bytes_per_token"] == 819_200
    # same section: "up to 1.6 GB" for a 2048-token request = 1.5625 GiB
    assert r["kv_bytes_per_sequence"] == 819_200 * 2048 == 1.5625 * GIB


def test_llama_2_7b_2_gib_for_4096_tokens():
    # NVIDIA, "Mastering LLM Techniques: Inference Optimization": Llama 2 7B, batch 1, 4096 tokens, FP16 → "~2 GB"
    assert kv("llama-2-7b", 4096, kv_dtype="fp16")["kv_bytes_per_sequence"] == 2 * GIB


def test_llama_3_1_70b_bytes_per_token():
    r = kv("llama-3.1-70b", 131_072)
    # meta-llama/llama-models config: 2 × 80 × 8 × 128 × 2 = 327,680 B/token BF16
    assert r["kv_bytes_per_token"] == 327_680
    # at 128K tokens this is 42.95 GB = 40.0 GiB
    assert r["kv_bytes_per_sequence"] == 40 * GIB


def test_deepseek_v3_mla_bytes_per_token():
    r = kv("deepseek-v3", 4989)
    # DeepSeek-V3 inference/model.py kv_cache[512] + pe_cache[64] per layer: 61 × 576 × 2 = 70,272 B
    assert r["kv_bytes_per_token"] == 70_272
    # open-infra-index Day 6: mean KV length 4,989 tokens → 350.6 MB per sequence
    assert r["kv_bytes_per_sequence"] / 1e6 == pytest.approx(350.6, abs=0.05)


def test_gpt_oss_120b_sliding_window():
    # gpt-oss model.py: sliding_window 128 on even layers → 18 full + 18 SW layers, 36,864 B each
    r = kv("gpt-oss-120b", 131_072)
    assert r["kv_bytes_per_token"] == 36_864
    assert r["kv_bytes_per_sequence"] == 36_864 * 131_072 + 36_864 * 128
    assert r["kv_bytes_per_sequence"] / GB == pytest.approx(4.84, abs=0.005)  # 4.84 GB
    assert kv("gpt-oss-120b", 100)["kv_bytes_per_sequence"] == 2 * 36_864 * 100  # inside the window: all layers


def test_gemma_3_27b_sliding_window():
    # Gemma 3 report (arXiv 2503.19786) 5 local (window 1024) : 1 global → 10 global + 52 local
    r = kv("gemma-3-27b", 131_072)
    assert r["kv_bytes_per_token"] == 81_920
    assert r["kv_bytes_per_sequence"] == 81_920 * 131_072 + 425_984 * 1024
    assert r["kv_bytes_per_sequence"] / GB == pytest.approx(11.17, abs=0.005)  # 11.17 GB


def test_llama_4_chunked_attention():
    # Llama 4 iRoPE: 12 global + 36 chunked-8192 layers → 49,152 + 147,456 × min(T, 8192)
    r = kv("llama-4-scout", 32_768)
    assert r["kv_bytes_per_sequence"] == 49_152 * 32_768 + 147_456 * 8192
    assert r["kv_bytes_per_sequence"] / GB == pytest.approx(2.82, abs=0.005)  # 2.82 GB at 32K


def test_ridge_points():
    # NVIDIA H100 datasheet: SXM BF16 989.4 TF ÷ 3.35 TB/s ≈ 295 FLOP/B
    h100 = run("roofline", {"hardware": "h100-sxm", "compute_dtype": "bf16"})
    assert h100["ridge_point_flops_per_byte"] == pytest.approx(295.3, abs=0.1)
    # scaling book inference.md: TPU v5e B_crit = 1.97e14 / 8.2e11 = 240 (819 GB/s gives 240.5)
    v5e = run("roofline", {"hardware": "tpu-v5e", "compute_dtype": "bf16"})
    assert v5e["ridge_point_flops_per_byte"] == pytest.approx(240, abs=1)


def test_llama_3_1_8b_decode_roofline_on_h100():
    # 16.06 GB of weights less the 1.05 GB input-embedding table (a lookup reads one 8 KB row; review
    # parts-1-3 row 2): 15.01 GB ÷ 3.35 TB/s = 4.48 ms per step at batch 1, 223 tokens/s
    r = run("roofline", {"model": "llama-3.1-8b", "hardware": "h100-sxm", "batch_size": 1, "context_tokens": 1})
    assert r["decode_step_time_s_lower_bound"] == pytest.approx(4.48e-3, abs=0.005e-3)
    assert r["decode_tokens_per_s_per_user_upper_bound"] == pytest.approx(223, abs=0.5)


def test_deepseek_day6_cost_per_million_output_tokens():
    # deepseek-ai/open-infra-index Day 6: $2/GPU-h, 8 H800 per node, ~14.8k output tok/s per node → $0.30/M
    r = run("cost", {"usd_per_gpu_hour": 2, "num_gpus": 8, "output_tokens_per_s": 14_800})
    assert r["usd_per_million_output_tokens"] == pytest.approx(0.30, abs=0.005)
    # same report: ~73.7k input tok/s per node during prefill → $0.060 per M input tokens
    r = run("cost", {"usd_per_gpu_hour": 2, "num_gpus": 8, "output_tokens_per_s": 14_800, "input_tokens_per_s": 73_700})
    assert r["usd_per_million_input_tokens"] == pytest.approx(0.060, abs=0.0005)


def test_sglang_large_scale_ep_cost():
    # lmsys blog 2025-05-05 large-scale EP: 22.3k output tok/s per node, "$0.20 / 1M output tokens" (at $2/GPU-h 🧮)
    r = run("cost", {"usd_per_gpu_hour": 2, "num_gpus": 8, "output_tokens_per_s": 22_300})
    assert r["usd_per_million_output_tokens"] == pytest.approx(0.1993, abs=0.0001)


def test_mlperf_h100_cost_check():
    # MLPerf Inference v4.1 closed: 8×H100 at $2/GPU-h, llama2-70b Offline 24,525 tok/s → $0.181 per M output tokens
    r = run("cost", {"usd_per_gpu_hour": 2, "num_gpus": 8, "output_tokens_per_s": 24_524.9})
    assert r["usd_per_million_output_tokens"] == pytest.approx(0.181, abs=0.0005)


def test_paged_attention_fragmentation_under_one_block():
    # PagedAttention (arXiv 2309.06180 §4.2): waste is confined to the last block of each sequence
    r = kv("llama-3.1-8b", 1000, block_size_tokens=16)
    assert r["blocks_per_sequence"] == 63
    assert r["fragmentation_bytes_per_sequence"] == 8 * 131_072
