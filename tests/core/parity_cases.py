"""Inputs that CPython and Pyodide must answer byte-identically (tests/core/test_pyodide_parity.py).

The browser's two entries, as the worker calls them: `present_json` for every registered calculator at
its defaults and for each (calculator name, inputs) in SPECIFIC, `describe_json` for each (kind, value)
in DESCRIBE. A value is sent as JSON; a Raw text is sent as it is (to check malformed JSON).
"""

from __future__ import annotations

import json
from pathlib import Path

from calculators import calculator_names

HF = Path(__file__).parent / "fixtures" / "hf"
NEEDS_THE_SITE = {"regex_mask"}
CUSTOM_CHIP = {
    "id": "my-chip",
    "name": "My chip",
    "vendor": "Me",
    "memory_bytes": 96 * 10**9,
    "memory_bandwidth_bytes_per_s": 4.1e12,
    "dense_flops_per_s": {"bf16": 1.1e15, "fp8": 2.2e15},
    "power_watts": 800,
}


class Raw(str):
    """JSON text sent as it is, not encoded."""


def _hf(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


SPECIFIC = [
    ("kv_cache", {"model": "gpt-oss-120b", "context_tokens": 131072}),
    ("kv_cache", {"model": "gemma-3-27b", "context_tokens": 100000, "batch_size": 7, "block_size_tokens": 32}),
    ("kv_cache", {"model": "deepseek-v3", "context_tokens": 4989, "kv_dtype": "fp8"}),
    ("kv_cache", {"model": "llama-4-scout", "context_tokens": "32768", "kv_dtype": "nvfp4"}),
    ("kv_cache", {"model": _hf("llama-3.1-8b"), "context_tokens": 8192}),
    ("kv_cache", {"model": _hf("gpt-oss-120b"), "context_tokens": 5000}),
    ("kv_cache", {"model": _hf("deepseek-v3"), "context_tokens": 70000, "batch_size": 3}),
    ("memory", {"model": "deepseek-v3", "hardware": "h100-sxm", "tensor_parallel": 1}),
    (
        "memory",
        {
            "model": "llama-3.1-70b",
            "hardware": "h200",
            "weight_dtype": "fp8",
            "kv_dtype": "fp8",
            "tensor_parallel": 2,
            "engine_rule": "sglang",
            "mem_fraction_static": 0.85,
        },
    ),
    ("memory", {"model": _hf("qwen3-30b-a3b"), "hardware": CUSTOM_CHIP, "tensor_parallel": 8}),
    (
        "roofline",
        {
            "model": "mixtral-8x7b",
            "hardware": "h200",
            "num_gpus": 8,
            "weight_dtype": "fp8",
            "compute_dtype": "fp8",
            "batch_size": 256,
            "context_tokens": 3000,
        },
    ),
    (
        "roofline",
        {
            "model": "deepseek-r1",
            "hardware": "b200",
            "num_gpus": 8,
            "weight_dtype": "nvfp4",
            "compute_dtype": "nvfp4",
            "kv_dtype": "fp8",
            "batch_size": 1024,
        },
    ),
    ("roofline", {"model": "llama-3.1-8b", "hardware": "tpu-v5e", "bandwidth_efficiency": 0.7}),
    ("roofline", {"model": _hf("gemma-3-27b"), "hardware": CUSTOM_CHIP, "compute_dtype": "fp8"}),
    ("roofline", {"model": "gemma-2-9b", "batch_size": 4096, "compute_efficiency": 0.6}),  # tied; past the fit
    ("decode_limits", {"model": "llama-3.1-70b", "num_gpus": 16}),  # KV replicated
    (
        "decode_limits",
        {
            "model": "deepseek-v3",
            "hardware": "h200",
            "num_gpus": 8,
            "weight_dtype": "fp8",
            "compute_dtype": "fp8",
            "context_tokens": 128,
            "bandwidth_efficiency": 0.8,
        },
    ),
    ("decode_limits", {"model": "llama-3.1-70b", "num_gpus": 1}),  # nothing fits
    (
        "latency",
        {
            "model": "llama-3.1-70b",
            "hardware": "h200",
            "num_gpus": 4,
            "weight_dtype": "fp8",
            "compute_dtype": "fp8",
            "batch_size": 64,
            "input_tokens": 2000,
            "output_tokens": 500,
            "queueing_s": 0.05,
        },
    ),
    ("latency", {"model": "qwen3-235b-a22b", "hardware": "mi300x", "num_gpus": 8, "output_tokens": 1}),
    ("goodput", {"seed": 3, "request_rate_per_s": 25, "num_requests": 400}),
    (
        "goodput",
        {
            "model": "qwen3-30b-a3b",
            "hardware": "h100-sxm",
            "input_distribution": "uniform",
            "output_distribution": "fixed",
            "ttft_slo_s": 0.2,
            "tpot_slo_s": 0.05,
            "seed": 11,
        },
    ),
    ("goodput", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 1, "request_rate_per_s": 1}),
    (
        "goodput",
        {
            "model": "llama-3.1-8b",
            "hardware": "h100-sxm",
            "request_rate_per_s": 20,
            "input_tokens_mean": 1024,
            "output_tokens_mean": 256,
            "ttft_slo_s": 0.5,
            "tpot_slo_s": 0.05,
        },
    ),  # overloaded past 1.5x
    (
        "goodput",
        {
            "model": "gpt-oss-120b",
            "weight_dtype": "bf16",
            "expert_weight_dtype": "mxfp4",
            "request_rate_per_s": 40,
            "output_distribution": "uniform",
            "seed": 9,
        },
    ),
    (
        "allreduce",
        {
            "model": "llama-3.1-405b",
            "hardware": "b200",
            "num_gpus": 16,
            "batch_size": 64,
            "link": "ib-ndr-400",
            "gpus_per_node": 1,
        },
    ),
    ("allreduce", {"model": "llama-3.1-70b", "batch_size": 2048, "phase": "prefill", "algorithm": "nvls"}),
    ("sram", {"model": "llama-3.1-70b", "sram_part": "cerebras-wse3", "sequences": 64}),
    (
        "cost",
        {
            "usd_per_gpu_hour": 2,
            "num_gpus": 8,
            "output_tokens_per_s": 14800,
            "input_tokens_per_s": 73700,
            "reasoning_tokens_per_task": 3000,
            "requests_per_s": 120,
        },
    ),
    # errors: each must come back as {"error": {...}} with the same text
    ("kv_cache", {"context_tokens": "1e400"}),
    ("kv_cache", {"context_tokens": "abc"}),
    ("kv_cache", {"context_tokens": None}),
    ("kv_cache", {"context_tokens": 0}),
    ("kv_cache", {"block_size_tokens": 2.5}),
    ("kv_cache", {"kv_dtype": "fp7"}),
    ("kv_cache", {"model": "no-such-model"}),
    ("kv_cache", {"model": {"num_layers": -1}}),
    ("kv_cache", {"unknown_key": 1}),
    ("roofline", {"hardware": dict(CUSTOM_CHIP, memory_bandwidth_bytes_per_s=-1)}),
    ("roofline", {"hardware": "h100-sxm", "compute_dtype": "nvfp4"}),
    ("memory", {"engine_rule": "tensorrt"}),
    ("no_such_calculator", {}),
    # replicas as engines behind the router (engine/fleet.py): a one-minute ramp, and one too long to simulate
    (
        "autoscale_ramp",
        {"duration_s": 60, "ramp_start_s": 5, "ramp_s": 30, "lag_s": 20, "replica_model": "simulated"},
    ),
    ("autoscale_ramp", {"replica_model": "simulated"}),
    ("kv_cache", Raw("{not json")),
    ("kv_cache", Raw("[1, 2, 3]")),
    # modes besides the default whose predictions the wheel carries (calibration.SHIPPED_MODES), against CPython's
    ("calibration", {"step_overhead": "graphs", "metric": "ttft_s"}),
    ("calibration", {"communication": "none", "metric": "output_tokens_per_s", "row_set": "held_out"}),
    ("calibration", {"step_overhead": "eager", "communication": "none", "vendor": "amd"}),
]


DESCRIBE = [
    ("model", "llama-3.1-8b"),
    ("model", _hf("gpt-oss-120b")),
    ("model", _hf("qwen3-next-80b-a3b")),
    ("accelerator", CUSTOM_CHIP),
    ("accelerator", "h100-sxm"),
    # errors
    ("model", {"num_layers": 2}),
    ("accelerator", dict(CUSTOM_CHIP, memory_bandwidth_bytes_per_s=-1)),
    ("gpu", {}),
    ("model", Raw("{not json")),
]


def _text(value) -> str:
    return value if isinstance(value, Raw) else json.dumps(value, sort_keys=True)


def cases() -> list[tuple[str, str, str]]:
    """(entry, name or kind, JSON text) for every case; entry is "present" or "describe"."""
    # regex_mask reads the site's GPT-2 vocabulary, which Pyodide fetches from the site in the browser and Node
    # has no site to fetch from: its byte-for-byte parity is checked in the real browser instead
    # (tests/site/test_calculators.py::test_browser_equals_cpython_exactly, which runs every calculator).
    defaults = [(name, {}) for name in calculator_names() if name not in NEEDS_THE_SITE]
    return [("present", name, _text(inputs)) for name, inputs in defaults + SPECIFIC] + [
        ("describe", kind, _text(value)) for kind, value in DESCRIBE
    ]
