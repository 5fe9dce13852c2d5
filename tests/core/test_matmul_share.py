"""Each chip's measured achievable matmul share (accelerators.toml achievable_matmul_flops_per_s, the MAMF table of
stas00/ml-engineering at 744d01e1, compute/accelerator/README.md lines 346-377): estimates take it ÷ the reference
chip's (the H100's), at most 1; bounds never."""

from __future__ import annotations

import pytest

from calculators import run
from calculators.catalog import accelerator_presets
from calculators.checks import accelerator_from_dict
from calculators.errors import InputError
from calculators.calcs.latency import SCHEMA as LATENCY
from calculators.calcs.steptime import (
    StepModel,
    achievable_share,
    bound_deployment,
    compute_rate,
    deployment,
    matmul_share,
)
from calculators.schema import validate

CHIPS = accelerator_presets()


def test_the_table_figures_as_shares_of_the_catalogue_peaks():
    # MAMF ÷ the datasheet dense peak: 794.5 of 989.4 TFLOP/s BF16 and 1,402.6 of 1,978.9 FP8 on the H100 SXM; the
    # A100 SXM's 271.2 of 312; the MI300X's 668.4 of 1,307.4
    assert achievable_share(CHIPS["h100-sxm"], "bf16") == pytest.approx(794.5 / 989.4)
    assert achievable_share(CHIPS["h100-sxm"], "fp8") == pytest.approx(1402.6 / 1978.9)
    assert achievable_share(CHIPS["a100-80gb"], "bf16") == pytest.approx(271.2 / 312)
    assert achievable_share(CHIPS["mi300x"], "bf16") == pytest.approx(668.4 / 1307.4)


def test_an_unmeasured_format_takes_the_nearest_measured_one_and_an_unmeasured_chip_none():
    assert achievable_share(CHIPS["mi300x"], "fp8") == achievable_share(CHIPS["mi300x"], "bf16")  # FP8 not measured
    assert achievable_share(CHIPS["b200"], "nvfp4") == achievable_share(CHIPS["b200"], "fp8")
    assert achievable_share(CHIPS["h100-sxm"], "fp16") == achievable_share(CHIPS["h100-sxm"], "bf16")
    assert achievable_share(CHIPS["l40s"], "bf16") is None
    assert matmul_share(CHIPS["l40s"], "bf16") == 1.0


def test_the_reference_chip_keeps_the_efficiency_and_no_chip_is_made_faster():
    # the H100 is the reference; the A100 reaches more of its peak (86.9% against 80.3%) and is not made faster
    assert matmul_share(CHIPS["h100-sxm"], "bf16") == matmul_share(CHIPS["h100-sxm"], "fp8") == 1.0
    assert matmul_share(CHIPS["a100-80gb"], "bf16") == 1.0
    for chip in CHIPS.values():
        for fmt in chip.dense_flops_per_s:
            assert 0 < matmul_share(chip, fmt) <= 1.0
    # the MI300X's BF16 matmuls: (668.4 ÷ 1,307.4) ÷ (794.5 ÷ 989.4) = 0.637 of the reader's efficiency; its FP8 was
    # not measured, so it takes its BF16 share ÷ the H100's BF16 share; the B200's FP8 reaches more than the H100's
    assert matmul_share(CHIPS["mi300x"], "bf16") == pytest.approx((668.4 / 1307.4) / (794.5 / 989.4))
    assert matmul_share(CHIPS["mi300x"], "fp8") == matmul_share(CHIPS["mi300x"], "bf16")
    assert matmul_share(CHIPS["b200"], "bf16") == pytest.approx((1745.0 / 2250) / (794.5 / 989.4))
    assert matmul_share(CHIPS["b200"], "fp8") == 1.0


def _dep(**kw):
    inputs = dict(
        model="llama-3.1-70b", hardware="mi300x", num_gpus=8, batch_size=64, input_tokens=2048, output_tokens=128
    )
    return deployment(validate(LATENCY["inputs"], inputs | kw))


def test_an_estimate_runs_at_the_share_and_a_bound_at_the_peak():
    dep = _dep()
    assert dep.matmul_share == pytest.approx((668.4 / 1307.4) / (794.5 / 989.4))
    assert compute_rate(dep) == pytest.approx(1307.4e12 * 0.6 * dep.matmul_share)
    assert bound_deployment(dep).matmul_share == 1.0
    assert compute_rate(bound_deployment(dep)) == 1307.4e12
    # a compute-bound prefill takes 1 ÷ s_chip as long as at the efficiency alone
    slow = StepModel(dep).prefill([8192]).compute_time_s
    as_given = StepModel(_dep(efficiency_of="chip")).prefill([8192]).compute_time_s
    assert slow == pytest.approx(as_given / dep.matmul_share)


def test_the_latency_calculator_says_so_and_the_bound_does_not_move():
    base = dict(model="llama-3.1-70b", hardware="mi300x", num_gpus=8, batch_size=64, input_tokens=2048)
    measured, as_given = run("latency", base), run("latency", base | {"efficiency_of": "chip"})
    assert measured["ttft_s"] > as_given["ttft_s"]
    labels = [s["label"] for s in measured["derivation"]]
    assert "Effective FLOP/s per GPU at the chip's achievable matmul share" in labels
    assert "Effective FLOP/s per GPU at the chip's achievable matmul share" not in [
        s["label"] for s in as_given["derivation"]
    ]
    roof_in = dict(model="llama-3.1-70b", hardware="mi300x", num_gpus=8, batch_size=64, prefill_tokens=2048)
    roof, roof_chip = run("roofline", roof_in), run("roofline", roof_in | {"efficiency_of": "chip"})
    for key in ("prefill_time_s_lower_bound", "decode_step_time_s_lower_bound"):
        assert roof[key] == roof_chip[key]
    assert roof["decode_step_time_s_estimate"] >= roof_chip["decode_step_time_s_estimate"]


def test_the_all_reduce_calculators_lower_bound_takes_the_chips_own_peak_at_its_defaults():
    kw = dict(model="llama-3.1-70b", hardware="mi300x", num_gpus=8, batch_size=4096, context_tokens=128)
    default, reference = run("allreduce", kw), run("allreduce", kw | {"efficiency_of": "reference"})
    assert default["decode_step_time_s_lower_bound"] < reference["decode_step_time_s_lower_bound"]
    bound = run("roofline", dict(model="llama-3.1-70b", hardware="mi300x", num_gpus=8, batch_size=4096,
                                 context_tokens=128))  # fmt: skip
    assert default["decode_step_time_s_lower_bound"] == pytest.approx(bound["decode_step_time_s_lower_bound"])


def test_each_quantization_row_takes_its_own_formats_share():
    # GB200: BF16 matmuls reach 72.9% of the peak against the H100's 80.3% (s_chip 0.908), FP8 72.3% against 70.9%
    # (1): the BF16 row slows, the FP8 row does not, so FP8's prefill speed-up over BF16 grows
    kw = dict(model="llama-3.1-70b", hardware="gb200", num_gpus=4, compute_efficiency=0.6, prompt_tokens=8192)
    got, chip = run("quantization", kw), run("quantization", kw | {"efficiency_of": "chip"})
    assert got["bf16_prefill_time_s"] > 1.05 * chip["bf16_prefill_time_s"]
    assert got["fp8_prefill_speedup"] > 1.05 * chip["fp8_prefill_speedup"]  # the same before each row took its own


def test_a_measured_rate_above_the_peak_or_for_an_unlisted_format_is_refused():
    chip = dict(id="x", memory_bytes=80 * 2**30, memory_bandwidth_bytes_per_s=3e12, dense_flops_per_s={"bf16": 1e15})
    assert accelerator_from_dict(chip | {"achievable_matmul_flops_per_s": {"bf16": 8e14}}).achievable_matmul_flops_per_s
    with pytest.raises(InputError, match="at most the dense peak"):
        accelerator_from_dict(chip | {"achievable_matmul_flops_per_s": {"bf16": 1.1e15}})
    with pytest.raises(InputError, match="no dense peak for fp8"):
        accelerator_from_dict(chip | {"achievable_matmul_flops_per_s": {"fp8": 1e15}})


def test_a_custom_chips_own_fp4_measurement_is_used():
    chip = dict(id="x", memory_bytes=80 * 2**30, memory_bandwidth_bytes_per_s=3e12,
                dense_flops_per_s={"bf16": 1e15, "fp8": 2e15, "fp4": 4e15},
                achievable_matmul_flops_per_s={"fp8": 1.6e15, "fp4": 2.0e15})  # fmt: skip
    acc = accelerator_from_dict(chip)
    assert achievable_share(acc, "nvfp4") == pytest.approx(0.5)
    assert achievable_share(acc, "bf16") is None  # no BF16 measurement, and no narrower format stands in for it
