"""MLPerf Inference measured rates never beat the calculators' throughput upper bound.

Rows: MLPerf Inference closed division, from each submission's
mlperf_log_summary.txt: mlcommons/inference_results_v4.1; v5.0 and v5.1 via the mirrors
ntuhpc/mlperf_inference_results_v5.0 and ntuhpc/inference_results_v5.1. Token rates count
generated tokens for the whole system. Precision: FP8 on Hopper and AMD, FP4 on Blackwell,
per vendor blogs (not verified in the logs).

The bound: with every GPU computing at dense peak, a generated token costs at least
2 × active parameters FLOPs (Kaplan et al., arXiv 2001.08361), so tokens/s per GPU ≤ peak ÷ (2 P).
"""

from __future__ import annotations

import pytest

from calculators import run
from calculators.catalog import model_presets
from calculators.resolve import model_to_json

# Llama 2 70B (Touvron et al., arXiv 2307.09288): Llama 3.1 70B's shape with a 32,000-token vocabulary.
LLAMA2_70B = dict(
    model_to_json(model_presets()["llama-3.1-70b"]),
    id="llama-2-70b",
    name="Llama 2 70B",
    vocab_size=32000,
    max_context_tokens=4096,
)
MODELS = {
    "llama2-70b": LLAMA2_70B,
    "llama3.1-405b": "llama-3.1-405b",
    "llama3.1-8b": "llama-3.1-8b",
    "deepseek-r1": "deepseek-r1",
}

# (round, system, GPUs, accelerator preset, precision, benchmark, scenario, system tokens/s)
ROWS = [
    ("v4.1", "DGX-H100 8x H100-SXM-80GB", 8, "h100-sxm", "fp8", "llama2-70b", "Offline", 24_524.9),
    ("v4.1", "DGX-H100 8x H100-SXM-80GB", 8, "h100-sxm", "fp8", "llama2-70b", "Server", 21_605.79),
    ("v4.1", "8x H200-SXM-141GB", 8, "h200", "fp8", "llama2-70b", "Offline", 31_302.7),
    ("v4.1", "8x H200-SXM-141GB", 8, "h200", "fp8", "llama2-70b", "Server", 29_228.22),
    ("v4.1", "1x B200-SXM-180GB", 1, "b200", "nvfp4", "llama2-70b", "Server", 10_755.6),
    ("v4.1", "1x B200-SXM-180GB", 1, "b200", "nvfp4", "llama2-70b", "Offline", 11_264.4),
    ("v4.1", "8x MI300X", 8, "mi300x", "fp8", "llama2-70b", "Offline", 23_514.8),
    ("v4.1", "8x MI300X", 8, "mi300x", "fp8", "llama2-70b", "Server", 21_028.23),
    ("v5.0", "8x B200", 8, "b200", "nvfp4", "llama2-70b", "Offline", 98_858),
    ("v5.0", "8x B200", 8, "b200", "nvfp4", "llama2-70b", "Server", 98_443.30),
    ("v5.0", "8x B200", 8, "b200", "nvfp4", "llama2-70b", "Interactive", 59_409.25),
    ("v5.0", "8x B200", 8, "b200", "nvfp4", "llama3.1-405b", "Offline", 1_526.29),
    ("v5.0", "GB200-NVL72", 72, "gb200", "nvfp4", "llama3.1-405b", "Offline", 13_886.4),
    ("v5.0", "GB200-NVL72", 72, "gb200", "nvfp4", "llama3.1-405b", "Server", 8_850.10),
    ("v5.0", "DGX-H100 8x", 8, "h100-sxm", "fp8", "llama2-70b", "Offline", 31_306.8),
    ("v5.0", "8x MI325X", 8, "mi325x", "fp8", "llama2-70b", "Offline", 33_928.1),
    ("v5.0", "8x MI325X", 8, "mi325x", "fp8", "llama2-70b", "Server", 30_724.51),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "deepseek-r1", "Server", 18_592.2),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "deepseek-r1", "Offline", 33_379),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "llama2-70b", "Server", 99_123),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "llama2-70b", "Interactive", 59_545.4),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "llama2-70b", "Offline", 101_527),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "llama3.1-405b", "Server", 1_240.42),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "llama3.1-405b", "Interactive", 751.37),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "llama3.1-405b", "Offline", 1_624.11),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "llama3.1-8b", "Server", 128_541),
    ("v5.1", "8x B200", 8, "b200", "nvfp4", "llama3.1-8b", "Offline", 136_752),
    ("v5.1", "GB300-NVL72", 72, "gb300", "nvfp4", "deepseek-r1", "Server", 209_328),
    ("v5.1", "GB300-NVL72", 72, "gb300", "nvfp4", "deepseek-r1", "Offline", 420_659),
    ("v5.1", "GB300-NVL72", 72, "gb300", "nvfp4", "llama3.1-405b", "Server", 12_248.4),
    ("v5.1", "GB300-NVL72", 72, "gb300", "nvfp4", "llama3.1-405b", "Offline", 16_104.1),
]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r[0]}-{r[1]}-{r[5]}-{r[6]}" for r in ROWS])
def test_measured_rate_within_upper_bound(row):
    _, _, gpus, hardware, precision, benchmark, _, tokens_per_s = row
    r = run(
        "roofline",
        {
            "model": MODELS[benchmark],
            "hardware": hardware,
            "num_gpus": gpus,
            "weight_dtype": precision,
            "kv_dtype": "fp8",
            "compute_dtype": precision,
        },
    )
    assert r["decode_tokens_per_s_per_gpu_ceiling"] >= tokens_per_s / gpus


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r[3] in ("h100-sxm", "h200")], ids=lambda r: f"{r[0]}-{r[1]}-{r[6]}"
)
def test_hopper_rates_within_bound_even_at_bf16_compute(row):
    """A tighter check on Hopper: even at BF16 dense peak the ceiling stays above the FP8 measurements."""
    _, _, gpus, hardware, _, benchmark, _, tokens_per_s = row
    r = run("roofline", {"model": MODELS[benchmark], "hardware": hardware, "num_gpus": gpus})
    assert r["decode_tokens_per_s_per_gpu_ceiling"] >= tokens_per_s / gpus
