"""quantization: effective bits, storage vs compute format, attention's rate, formats a chip cannot run."""

import pytest

from calculators import run
from calculators.catalog import accelerator_presets
from calculators.errors import InputError
from calculators.formats import get_format
from calculators.schema import validate
from calculators.calcs.quantization import ROWS, SCHEMA
from calculators.calcs.steptime import StepModel, attention_peak_flops, deployment

ACC = accelerator_presets()


@pytest.mark.parametrize(
    "fmt, bits",
    [
        ("bf16", 16.0),
        ("fp8", 8.0),
        ("int8", 8.0),
        # GPTQ arXiv 2210.17323 / AWQ arXiv 2306.00978: groups of 128 with an FP16 scale: 4 + 16/128
        ("int4", 4.125),
        # AWQ adds a 4-bit zero point per group (vLLM v0.33.0 auto_awq.py packs qzeros 32 // 4 to an int32)
        ("int4-awq", 4.15625),
        # OCP MX v1.0 (NVIDIA Transformer Engine 2.18 docs, MXFP8): 32 elements share one E8M0 scale
        ("mxfp4", 4.25),
        ("mxfp8", 8.25),
        # NVFP4 (cuDNN docs, NVFP4 block-scale conversion): one E4M3 scale per 16 E2M1 values, FP32 per tensor
        ("nvfp4", 4.5),
    ],
)
def test_effective_bits_count_the_block_scales(fmt, bits):
    assert get_format(fmt).effective_bits == bits


def test_gpt_oss_publishes_4_25_bits_for_mxfp4():
    # openai/gpt-oss model card (arXiv 2508.10925) §2: MXFP4 weights at 4.25 bits per parameter
    assert run("quantization", {})["rows"]["mxfp4"]["effective_bits"] == pytest.approx(4.25)


def test_nvfp4_memory_ratios_match_nvidias_figures():
    # NVIDIA, "Introducing NVFP4" (2025-06-24): about 3.5x smaller than FP16 and 1.8x smaller than FP8
    nv = get_format("nvfp4").effective_bits
    assert 16 / nv == pytest.approx(3.5, abs=0.1)
    assert 8 / nv == pytest.approx(1.8, abs=0.05)


def _speedup(batch, hardware="a100-80gb", context=1, model="llama-3.1-8b", step_overhead="none"):
    # Marlin's speedups are the matmul kernel's: compare rooflines without the per-step overhead by default
    r = run(
        "quantization",
        dict(model=model, hardware=hardware, batch_size=batch, context_tokens=context, step_overhead=step_overhead),
    )
    return r["rows"]["int4_gptq"]["decode_speedup"]


def test_w4a16_decode_speedup_follows_marlin_near_4x_then_falls():
    # Marlin (Frantar et al., arXiv 2408.11743, abstract): close to the maximum 4x INT4xFP16 speedup up to
    # batch 16-32, gradually decreasing but still significant up to 64-128. The roofline gives the same shape:
    # the byte ratio (16 / 4.125 = 3.88) while memory-bound, then down towards 1 once the BF16 matmul binds.
    small = [_speedup(b) for b in (1, 8, 16)]
    assert all(3.5 < s <= 16 / 4.125 for s in small)
    falling = [_speedup(b) for b in (16, 32, 64, 128, 256, 1024)]
    assert falling == sorted(falling, reverse=True)
    assert 1.0 < _speedup(128) < _speedup(32)
    assert _speedup(1024) == pytest.approx(1.0, abs=0.01)


def test_weight_only_does_not_speed_a_compute_bound_prefill_but_w8a8_does():
    r = run("quantization", dict(prompt_tokens=8192))["rows"]
    assert r["bf16"]["prefill_compute_bound"]
    for rid in ("fp8_w8a16", "int4_gptq", "int4_awq", "mxfp4_w4a16"):
        assert r[rid]["prefill_speedup"] == pytest.approx(1.0, rel=1e-9)
    # FP8 matmuls run at twice the BF16 rate on H100, but attention stays at BF16 (BF16 KV): between 1 and 2
    assert 1.5 < r["fp8"]["prefill_speedup"] < 2.0


def test_a_format_the_chip_lacks_is_marked_and_an_explicit_choice_is_an_error():
    h100 = run("quantization", {"hardware": "h100-sxm"})
    assert not h100["rows"]["nvfp4"]["runs"] and not h100["rows"]["mxfp4"]["runs"]
    assert h100["rows"]["mxfp4_w4a16"]["runs"]  # the same storage, dequantized to BF16: runs
    assert h100["rows_unable_to_run"] == 3 and h100["nvfp4_prefill_speedup"] == 0.0  # NVFP4, MXFP4 W4A4, MXFP8 W8A8
    assert not run("quantization", {"hardware": "a100-80gb"})["rows"]["fp8"]["runs"]
    b200 = run("quantization", {"hardware": "b200"})["rows"]
    assert b200["nvfp4"]["runs"] and b200["nvfp4"]["prefill_speedup"] > b200["fp8"]["prefill_speedup"]
    with pytest.raises(InputError, match="compute_dtype"):
        run("roofline", {"hardware": "h100-sxm", "compute_dtype": "nvfp4", "weight_dtype": "nvfp4"})
    with pytest.raises(InputError, match="compute_dtype"):
        run("latency", {"hardware": "a100-80gb", "compute_dtype": "fp8"})


def test_int8_w8a8_has_a_rate_where_the_datasheet_gives_one():
    # H100 SXM datasheet: INT8 3,958 TOPS with sparsity = FP8's; A100: 624 TOPS dense
    assert ACC["h100-sxm"].dense_flops_per_s["int8"] == ACC["h100-sxm"].dense_flops_per_s["fp8"]
    assert ACC["a100-80gb"].dense_flops_per_s["int8"] == 2 * ACC["a100-80gb"].dense_flops_per_s["bf16"]
    # HGX B200: INT8 9 POPS sparse = FP8's 9 PF (Blackwell datasheet as tabulated at glennklockwood.com), so
    # INT8 W8A8 runs on a B200 at FP8's rate
    assert ACC["b200"].dense_flops_per_s["int8"] == ACC["b200"].dense_flops_per_s["fp8"]
    b200 = run("quantization", {"hardware": "b200"})["rows"]
    assert b200["int8"]["runs"] and b200["int8"]["prefill_speedup"] == b200["fp8"]["prefill_speedup"]


def test_attention_runs_at_bf16_or_fp8_with_fp8_kv():
    h100 = ACC["h100-sxm"]
    bf16, fp8 = h100.dense_flops_per_s["bf16"], h100.dense_flops_per_s["fp8"]
    assert attention_peak_flops(h100, "bf16", "fp8") == bf16
    assert attention_peak_flops(h100, "bf16", "nvfp4") == bf16
    assert attention_peak_flops(h100, "fp8", "bf16") == fp8
    assert attention_peak_flops(ACC["a100-80gb"], "fp8", "bf16") == ACC["a100-80gb"].dense_flops_per_s["bf16"]


def _deploy(**kw):
    from calculators.calcs.roofline import SCHEMA as ROOF

    return deployment(validate(ROOF["inputs"], dict(model="llama-3.1-8b", hardware="h100-sxm", **kw)))


def test_prefill_compute_time_prices_matmuls_and_attention_at_their_own_rates():
    """Hand check: compute time = 2·P·T ÷ FP8 peak + attention FLOPs ÷ BF16 peak; FLOPs stay the true count."""
    t = 16384
    fp8 = StepModel(_deploy(weight_dtype="fp8", compute_dtype="fp8"))
    ref = StepModel(_deploy())
    p_bf16 = ref.prefill([t])
    attention = p_bf16.flops - 2 * ref.active * t
    want = 2 * ref.active * t / 1978.9e12 + attention / 989.4e12
    got = fp8.prefill([t])
    assert got.compute_time_s == pytest.approx(want, rel=1e-12)
    assert got.flops == pytest.approx(p_bf16.flops, rel=1e-12)
    assert fp8.prefill_time([t]) == got.time_s  # the simulator's closure agrees bit for bit
    assert fp8.decode_time(8, 4096) == fp8.decode(8, 4096).time_s


def test_w4a16_decode_reads_stored_bytes_and_computes_at_bf16():
    w4 = StepModel(_deploy(weight_dtype="int4"))
    ref = StepModel(_deploy())
    a, b = w4.decode(1, 1), ref.decode(1, 1)
    assert a.compute_time_s == b.compute_time_s
    assert a.weight_bytes / b.weight_bytes == pytest.approx(4.125 / 16, rel=1e-12)


def test_fp8_kv_halves_kv_bytes_and_doubles_what_fits():
    kv = run("quantization", {})["kv_rows"]
    assert kv["fp8"]["kv_bytes_per_token"] * 2 == kv["bf16"]["kv_bytes_per_token"]
    assert kv["fp8"]["sequences_that_fit"] in (
        2 * kv["bf16"]["sequences_that_fit"],
        2 * kv["bf16"]["sequences_that_fit"] + 1,
    )
    assert kv["fp8"]["decode_tokens_per_s_per_gpu"] > kv["bf16"]["decode_tokens_per_s_per_gpu"]
    for calc, key in (("memory", "max_concurrent_sequences"), ("roofline", "decode_step_time_s_lower_bound")):
        lo, hi = (run(calc, {"kv_dtype": d})[key] for d in ("fp8", "bf16"))
        assert (lo > hi) if calc == "memory" else (lo < hi)


def test_every_row_is_a_valid_storage_and_compute_pair():
    inputs = {f["key"] for f in SCHEMA["inputs"]}
    assert not inputs & {"weight_dtype", "compute_dtype", "expert_weight_dtype"}
    for _, _, weight, compute in ROWS:
        assert get_format(weight).bits_per_element <= get_format(compute).bits_per_element


@pytest.mark.parametrize("calc", ["memory", "roofline", "latency", "decode_limits"])
def test_the_new_storage_formats_work_in_every_deployment_calculator(calc):
    base = run(calc, {"weight_dtype": "bf16"})
    for fmt in ("int4-awq", "mxfp8"):
        assert run(calc, {"weight_dtype": fmt, "kv_dtype": fmt}) != base
    with pytest.raises(InputError, match="compute_dtype"):
        run(calc, {"compute_dtype": "int4-awq"}) if calc != "memory" else run("roofline", {"compute_dtype": "mxfp8"})


def test_mxfp8_w8a8_needs_block_scaled_tensor_cores():
    # Transformer Engine 2.18 "MXFP8": hardware-accelerated on Blackwell (SM 10.0+); vLLM v0.33.0
    # kernels/linear/mxfp8/deep_gemm.py: "DeepGEMM MXFP8 BMM requires Blackwell" (Hopper runs MXFP8 weight-only)
    h100 = run("quantization", {"hardware": "h100-sxm"})
    assert not h100["rows"]["mxfp8"]["runs"] and h100["rows"]["fp8"]["runs"]
    assert any("MXFP8" in n for n in h100["notes"])
    b200 = run("quantization", {"hardware": "b200"})["rows"]
    assert b200["mxfp8"]["runs"] and b200["mxfp8"]["prefill_speedup"] == b200["fp8"]["prefill_speedup"]
