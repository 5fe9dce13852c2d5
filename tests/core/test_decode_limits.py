"""decode_limits: where batching stops (KV traffic, ridge point, memory capacity)."""

import pytest

from calculators import run


def _run(**kw):
    return run("decode_limits", kw)


def test_ridge_points_match_reference_table():
    # From datasheet figures: H100 SXM BF16 989.4 TF ÷ 3.35 TB/s = 295, H200 ÷ 4.8 TB/s = 206 FLOP/B.
    assert _run(model="llama-3.1-8b", hardware="h100-sxm")["ridge_point_flops_per_byte"] == pytest.approx(295, abs=0.5)
    assert _run(model="llama-3.1-8b", hardware="h200")["ridge_point_flops_per_byte"] == pytest.approx(206, abs=0.5)


def test_kv_equals_weights_batch_llama_8b():
    # Llama 3.1 8B: 131,072 B/token BF16 KV (2 × 32 layers × 8 heads × 128 × 2 B) × 4096 tokens; weights
    # 8.03e9 × 2 B less the input-embedding table (128,256 × 4,096 × 2 B = 1.05 GB), of which a step reads
    # one row per token (review parts-1-3 row 2: the read is (15.0 + 0.54) GB, not 16.06 + 0.54).
    r = _run(model="llama-3.1-8b", hardware="h100-sxm", context_tokens=4096)
    assert r["kv_bytes_per_sequence"] == 131_072 * 4096
    assert r["batch_kv_equals_weights"] == pytest.approx(r["weight_bytes_all_experts"] / (131_072 * 4096))
    assert r["weight_bytes_all_experts"] == pytest.approx(16.06e9 - 128_256 * 4096 * 2, rel=0.002)


def test_long_context_gqa_decode_never_reaches_ridge():
    r = _run(model="llama-3.1-8b", hardware="h100-sxm", context_tokens=4096)
    assert r["intensity_limit_flops_per_byte"] < r["ridge_point_flops_per_byte"]
    assert r["batch_at_ridge"].startswith("never")  # review (c): text, not the sentinel 0


def test_batch_at_ridge_is_the_first_compute_bound_batch():
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", context_tokens=16)
    r = _run(**kw)
    b = r["batch_at_ridge"]
    assert b > 1
    rb = run("roofline", dict(kw, batch_size=b))
    rb1 = run("roofline", dict(kw, batch_size=b - 1))
    assert rb["decode_arithmetic_intensity_flops_per_byte"] >= r["ridge_point_flops_per_byte"]
    assert rb1["decode_arithmetic_intensity_flops_per_byte"] < r["ridge_point_flops_per_byte"]


def test_capacity_agrees_with_memory_calculator_and_roofline():
    kw = dict(model="llama-3.1-70b", hardware="h200", weight_dtype="fp8", context_tokens=4096)
    r = _run(compute_dtype="fp8", **kw)
    mem = run("memory", dict(kw, tensor_parallel=1))
    assert r["max_batch_in_memory"] == mem["max_concurrent_sequences"]
    roof = run("roofline", dict(kw, compute_dtype="fp8", batch_size=r["max_batch_in_memory"]))
    assert r["tokens_per_s_per_gpu_at_max_batch"] == pytest.approx(roof["decode_tokens_per_s_per_gpu_upper_bound"])
    assert r["tokens_per_s_per_user_at_max_batch"] == pytest.approx(roof["decode_tokens_per_s_per_user_upper_bound"])


def test_weights_that_do_not_fit_give_zero_batch_not_an_error():
    r = _run(model="llama-3.1-70b", hardware="h100-sxm", num_gpus=1)
    assert r["max_batch_in_memory"] == 0
    assert r["binding_limit"] == "does not fit"


def test_series_is_monotone_in_batch():
    s = _run(model="llama-3.1-8b", hardware="h100-sxm")["series"]["throughput_vs_batch"]
    per_gpu, per_user = s["y"][0]["values"], s["y"][1]["values"]
    assert all(a <= b for a, b in zip(per_gpu, per_gpu[1:]))
    assert all(a >= b for a, b in zip(per_user, per_user[1:]))


@pytest.mark.parametrize(
    "eff",
    [
        dict(bandwidth_efficiency=0.5),
        dict(compute_efficiency=0.6),
        dict(bandwidth_efficiency=0.8, compute_efficiency=0.6),
    ],
)
def test_ridge_batch_agrees_with_roofline_under_efficiencies(eff):
    # Before: the ridge ignored the efficiencies, so at η_bw = 0.5 decode_limits said batch 469 turns
    # compute-bound while roofline, at that batch and efficiency, called the step memory-bound.
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", context_tokens=128, **eff)
    r = _run(**kw)
    b = r["batch_at_ridge"]
    assert b > 1
    peak, bw = 989.4e12 * eff.get("compute_efficiency", 1.0), 3.35e12 * eff.get("bandwidth_efficiency", 1.0)
    assert r["effective_ridge_point_flops_per_byte"] == pytest.approx(peak / bw)
    assert run("roofline", dict(kw, batch_size=b))["regime"]["decode"] == "compute-bound"
    assert run("roofline", dict(kw, batch_size=b - 1))["regime"]["decode"] == "memory-bound"


def test_efficiencies_move_the_ridge_batch_the_right_way():
    # Less bandwidth raises the effective ridge (later); less compute lowers it (sooner).
    kw = dict(model="llama-3.1-8b", hardware="h100-sxm", context_tokens=128)
    base = _run(**kw)["batch_at_ridge"]
    assert (
        _run(bandwidth_efficiency=0.5, **kw)["batch_at_ridge"]
        > base
        > _run(compute_efficiency=0.5, **kw)["batch_at_ridge"]
    )


def test_the_intensity_limit_step_shows_the_output_it_derives_at_any_tp():
    """The derivation's "Intensity limit" line divides by N as its formula and the output do (it showed
    F_seq ÷ KV_seq, N times the output, for N > 1)."""
    out = run("decode_limits", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 4})
    shown = next(s for s in out["derivation"] if s["label"] == "Intensity limit")
    assert shown["value"] == pytest.approx(out["intensity_limit_flops_per_byte"], rel=1e-12)
