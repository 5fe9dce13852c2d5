"""Quantization: memory and decode/prefill speed of one model on one chip, format by format.

  Effective bits = bits per element + scale bits ÷ block size            (formats.toml; OCP MX v1.0 for MXFP4/MXFP8:
         32 elements, E8M0 scale; NVIDIA's NVFP4: 16 elements, E4M3 scale, a per-tensor FP32 scale not counted;
         GPTQ/AWQ group 128 with an FP16 scale, AWQ a 4-bit zero point too)
  Weight memory per GPU = total params × effective bits ÷ 8 ÷ N, as the engine holds it (memory.py's budget: MXFP4
                          experts padded as vLLM's Marlin kernel pads them on an NVIDIA chip without FP4)
  Decode and prefill times = steptime.StepModel, the model roofline, latency and the simulator use: a decode step
         reads the weights in their STORED format (bytes) and runs its matmuls at the COMPUTE format's rate; attention
         runs at BF16, or FP8 with an FP8 KV cache (steptime.attention_peak_flops).
Each row is a storage format and a matmul format: weight-only rows (W8A16, W4A16) dequantize to BF16 inside the
matmul, so they change the bytes and not the FLOP rate; weight-and-activation rows (W8A8, W4A4) change both and
need the chip's tensor cores for that format: a row whose matmul format the chip lists no dense rate for (FP8 on
A100, FP4 before Blackwell), or MXFP8 W8A8 on a chip without block-scaled (MX) tensor cores (before Blackwell), is
marked as unable to run, and has no times. Speedups are against the BF16 row.
The times are the roofline at the efficiency inputs (1.0 by default) plus the per-step overhead (the
step_overhead input, by default CUDA graphs plus a fitted GPU floor per kernel, as in every engine calculator; "none"
gives the bare roofline bound).
Dequantization and kernel quality are not counted, so a W4A16 kernel's real decode gain at batch 1 is below its byte
ratio.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InputError
from ..formats import bytes_per_element, get_format
from ..schema import integer, output, series, step
from .deployment import deployment_fields
from .kv_cache import kv_bytes_per_token_all_layers, kv_fraction_per_gpu
from .memory import engine_budget, engine_fields
from .steptime import attention_fields, attention_peak_flops, chip_share, deployment, peak_flops
from .sharding import steps_for
from ..units import GIB

ENGINE_DEFAULTS = {f["key"]: f["default"] for f in engine_fields()}

# (row id, label, stored weight format, matmul format); the id is what inline expressions name (rows.<id>.…)
ROWS = (
    ("bf16", "BF16", "bf16", "bf16"),
    ("fp8", "FP8 W8A8", "fp8", "fp8"),
    ("int8", "INT8 W8A8", "int8", "int8"),
    ("mxfp8", "MXFP8 W8A8", "mxfp8", "fp8"),
    ("fp8_w8a16", "FP8 W8A16 (weight-only)", "fp8", "bf16"),
    ("int4_gptq", "INT4 W4A16 (GPTQ, g128)", "int4", "bf16"),
    ("int4_awq", "INT4 W4A16 (AWQ, g128, zero point)", "int4-awq", "bf16"),
    ("mxfp4_w4a16", "MXFP4 W4A16 (weight-only)", "mxfp4", "bf16"),
    ("mxfp4", "MXFP4 W4A4", "mxfp4", "mxfp4"),
    ("nvfp4", "NVFP4 W4A4", "nvfp4", "nvfp4"),
)
KV_ROWS = (("bf16", "BF16 KV"), ("fp8", "FP8 KV"), ("nvfp4", "NVFP4 KV"))
# the plots' x axis: row numbers, with this short key (w = weight-only, W8A16 or W4A16)
SHORT = ("BF16", "FP8", "INT8", "MXFP8", "FP8w", "GPTQ", "AWQ", "MXFP4w", "MXFP4", "NVFP4")
ROW_KEY = " · ".join(f"{i} {label}" for i, label in enumerate(SHORT, 1))
KV_KEY = "KV formats: " + " · ".join(f"{i} {label}" for i, (_, label) in enumerate(KV_ROWS, 1))

_DROPPED = {"weight_dtype", "expert_weight_dtype", "compute_dtype"}  # the rows set these
# MXFP8 W8A8 multiplies block-scaled operands, which needs MX (block-scaled) tensor cores: Blackwell (SM 10.0+,
# Transformer Engine 2.18 "MXFP8") and AMD CDNA4, in this table exactly the chips that list an FP4 rate. On Hopper
# vLLM v0.33.0 has no MXFP8 W8A8 kernel (kernels/linear/mxfp8/deep_gemm.py: "DeepGEMM MXFP8 BMM requires
# Blackwell") and runs MXFP8 checkpoints weight-only through Marlin (mxfp8/marlin.py; modelopt.py: SM80+).
NEEDS_BLOCK_SCALED_MMA = {"mxfp8"}


def _fields() -> list[dict]:
    base = [
        f
        for f in deployment_fields(
            1.0,
            1.0,
            {
                "kv_dtype": {
                    "help": "The KV-cache format of every row of the format table (the KV plot compares KV formats)."
                }
            },
        )
        if f["key"] not in _DROPPED
    ]
    return base + [
        integer("batch_size", "Decode batch", 16, 1, 100_000, "sequences"),
        integer("context_tokens", "Context per sequence", 4096, 1, 10_000_000, "tokens"),
        integer("prompt_tokens", "Prompt length for prefill", 4096, 1, 10_000_000, "tokens"),
    ]


SCHEMA = {
    "name": "quantization",
    "title": "Quantization: memory and speed by number format",
    "description": (
        "For one model on one chip, each weight format (stored) with its matmul format: effective bits "
        "with the block scales, weight memory per GPU, decode step time and tokens/s per GPU at the "
        "batch, and prefill time, all from the step-time model every calculator uses. Weight-only "
        "rows (W4A16) shrink the bytes a decode step reads; weight-and-activation rows (W8A8, W4A4) "
        "also raise the FLOP rate, if the chip has tensor cores for the format (rows it lacks are "
        "marked). The KV plot compares KV-cache formats. The roofline at the efficiency inputs plus the "
        "per-step overhead; dequantization is not counted."
    ),
    "inputs": _fields(),
    "outputs": [
        output("bf16_weight_bytes_per_gpu", "BF16 weights per GPU", "B", "bytes"),
        output("bf16_decode_step_time_s", "BF16 decode step time at the batch", "s", "seconds"),
        output("bf16_prefill_time_s", "BF16 prefill time of one prompt", "s", "seconds"),
        output("fp8_decode_speedup", "FP8 W8A8 decode speedup over BF16", "×", "number"),
        output("fp8_prefill_speedup", "FP8 W8A8 prefill speedup over BF16", "×", "number"),
        output("int4_gptq_decode_speedup", "INT4 W4A16 (GPTQ) decode speedup over BF16", "×", "number"),
        output("int4_gptq_prefill_speedup", "INT4 W4A16 (GPTQ) prefill speedup over BF16", "×", "number"),
        output(
            "nvfp4_decode_speedup",
            "NVFP4 W4A4 decode speedup over BF16 (0: the chip cannot run it)",
            "×",
            "number",
            words={0: "cannot run"},
        ),
        output(
            "nvfp4_prefill_speedup",
            "NVFP4 W4A4 prefill speedup over BF16 (0: the chip cannot run it)",
            "×",
            "number",
            words={0: "cannot run"},
        ),
        output(
            "rows_unable_to_run",
            "Rows this chip cannot run (no dense FLOP/s listed for the matmul format; MXFP8 W8A8 before Blackwell)",
            "rows",
            "integer",
        ),
        output("kv_bytes_per_gpu", "KV of the batch per GPU, in the KV format chosen", "B", "bytes"),
        output("attention_flops_per_s", "Dense FLOP/s attention runs at", "FLOP/s", "flops"),
    ],
}


def _format_deployment(v: dict, base, weight: str, compute: str, peak: float):
    """The BF16 deployment with every weight in this format and its matmuls at this format's peak and chip share."""
    return replace(
        base,
        weight_elem_bytes=bytes_per_element(weight),
        expert_elem_bytes=None,
        peak_flops_per_s=peak,
        matmul_share=chip_share(v, compute),
        **attention_fields(v["model"], v["hardware"], v["kv_dtype"], compute),
    )


def _row(v: dict, base, weight: str, compute: str) -> dict:
    """One format row: memory always; times only when the chip has a rate for the matmul format."""
    fmt = get_format(weight, "weight_dtype")
    n = v["num_gpus"]
    weights = _budget(v, weight, v["kv_dtype"]).weights
    out = {
        "effective_bits": fmt.effective_bits,
        "weight_gib_per_gpu": weights / GIB,
        "weight_bytes_per_gpu": weights,
        "weight_dtype": weight,
        "compute_dtype": compute,
        "runs": True,
    }
    try:
        peak = peak_flops(v["hardware"], compute)
    except InputError:
        return {**out, "runs": False}
    if weight in NEEDS_BLOCK_SCALED_MMA and compute != "bf16" and not v["hardware"].dense_flops_per_s.get("fp4"):
        return {**out, "runs": False}
    sm = steps_for(v, _format_deployment(v, base, weight, compute, peak))
    decode = sm.decode(v["batch_size"], v["context_tokens"])
    prefill = sm.prefill([v["prompt_tokens"]])
    return {
        **out,
        "decode": decode,
        "prefill": prefill,
        "decode_step_time_s": decode.time_s,
        "decode_tokens_per_s_per_gpu": v["batch_size"] / decode.time_s / n,
        "decode_compute_bound": decode.compute_bound,
        "prefill_time_s": prefill.time_s,
        "prefill_tokens_per_s_per_gpu": v["prompt_tokens"] / prefill.time_s / n,
        "prefill_compute_bound": prefill.compute_bound,
    }


def _budget(v: dict, weight: str, kv: str):
    """memory.py's budget per GPU with every weight in this format, at its vLLM defaults: the weights as the engine
    holds them (memory.expert_layout) and the sequences of this context that fit beside them."""
    return engine_budget(
        {**v, **ENGINE_DEFAULTS, "weight_dtype": weight, "kv_dtype": kv, "expert_weight_dtype": "same"}, v["num_gpus"]
    )


def _fits(v: dict, weight: str, kv: str) -> int:
    return _budget(v, weight, kv).sequences


def _kv_rows(v: dict, base) -> dict:
    """KV formats with BF16 weights and matmuls: bytes per token, sequences that fit, decode speed."""
    out = {}
    for kv, label in KV_ROWS:
        dep = replace(
            base,
            weight_elem_bytes=2.0,
            expert_elem_bytes=None,
            peak_flops_per_s=peak_flops(v["hardware"], "bf16"),
            kv_elem_bytes=bytes_per_element(kv, "kv_dtype"),
            **attention_fields(v["model"], v["hardware"], kv, "bf16"),
        )
        sm, fit = steps_for(v, dep), _fits(v, "bf16", kv)
        t = sm.decode(v["batch_size"], v["context_tokens"]).time_s
        full = sm.decode(fit, v["context_tokens"]).time_s if fit >= 1 else None
        out[kv] = {
            "label": label,
            "kv_bytes_per_token": kv_bytes_per_token_all_layers(v["model"], dep.kv_elem_bytes),
            "sequences_that_fit": fit,
            "decode_tokens_per_s_per_gpu": v["batch_size"] / t / v["num_gpus"],
            "decode_tokens_per_s_per_gpu_at_fit": fit / full / v["num_gpus"] if full else None,
        }
    return out


def _speedups(rows: dict) -> None:
    ref = rows["bf16"]
    for r in rows.values():
        if r["runs"] and ref["runs"]:
            r["decode_speedup"] = ref["decode_step_time_s"] / r["decode_step_time_s"]
            r["prefill_speedup"] = ref["prefill_time_s"] / r["prefill_time_s"]
            r["weight_memory_ratio"] = ref["weight_bytes_per_gpu"] / r["weight_bytes_per_gpu"]
        else:
            r["decode_speedup"] = r["prefill_speedup"] = 0.0


# plot id -> (title, [(series name, unit, row key)]); rows the chip cannot run are gaps (None)
FORMAT_PLOTS = {
    "speed_by_format": (
        "Decode and prefill speedup over BF16 by format (w: weight-only; a gap: no dense rate listed for the chip)",
        [("decode speedup", "×", "decode_speedup"), ("prefill speedup", "×", "prefill_speedup")],
    ),
    "memory_by_format": (
        "Weight memory per GPU and effective bits by format (w: weight-only)",
        [("weights per GPU", "GiB", "weight_gib_per_gpu"), ("effective bits", "bits", "effective_bits")],
    ),
    "tokens_by_format": (
        "Decode and prefill tokens/s per GPU by format (w: weight-only)",
        [
            ("decode tokens/s per GPU", "tokens/s", "decode_tokens_per_s_per_gpu"),
            ("prefill tokens/s per GPU", "tokens/s", "prefill_tokens_per_s_per_gpu"),
        ],
    ),
}
KV_PLOT = [
    ("sequences that fit", "sequences", "sequences_that_fit"),
    ("tokens/s per GPU at the batch", "tokens/s", "decode_tokens_per_s_per_gpu"),
    ("tokens/s per GPU at the batch that fits", "tokens/s", "decode_tokens_per_s_per_gpu_at_fit"),
]


def _plots(rows: dict, kv_rows: dict) -> dict:
    ordered = [rows[rid] for rid, *_ in ROWS]
    xs = list(range(1, len(ROWS) + 1))

    def col(key):
        return [r.get(key) if r["runs"] or key in ("weight_gib_per_gpu", "effective_bits") else None for r in ordered]

    out = {
        pid: series(title, ROW_KEY, "", xs, [(name, unit, col(key)) for name, unit, key in ys], kind="bar")
        for pid, (title, ys) in FORMAT_PLOTS.items()
    }
    kvs = [kv_rows[k] for k, _ in KV_ROWS]
    out["kv_formats"] = series(
        "KV-cache format (BF16 weights): sequences that fit and decode tokens/s per GPU",
        KV_KEY,
        "",
        list(range(1, len(KV_ROWS) + 1)),
        [(name, unit, [k[key] for k in kvs]) for name, unit, key in KV_PLOT],
        kind="bar",
    )
    return out


def _time_step(label: str, formula: str, cost) -> dict:
    return step(
        label,
        formula + " + overhead",
        "max({}, {}) + {}",
        [(cost.memory_time_s, "s"), (cost.compute_time_s, "s"), (cost.overhead_s, "s")],
        cost.time_s,
        "s",
    )


def _derivation(v: dict, rows: dict) -> list[dict]:
    ref, w4 = rows["bf16"], rows["int4_gptq"]
    steps = [
        step(
            "INT4 (GPTQ) effective bits", "bits + scale bits ÷ group", "4 + 16 ÷ 128", [], w4["effective_bits"], "bits"
        ),
        step(
            "BF16 weights per GPU", "total params × 2 B ÷ N", "÷ {}", [v["num_gpus"]], ref["weight_bytes_per_gpu"], "B"
        ),
    ]
    if not ref["runs"]:
        return steps
    return steps + [
        _time_step("BF16 decode step", "max(bytes ÷ BW, FLOPs ÷ peak)", ref["decode"]),
        _time_step("W4A16 decode step", "max(bytes at 4.125 bits ÷ BW, FLOPs ÷ BF16 peak)", w4["decode"]),
        _time_step("BF16 prefill", "max(bytes ÷ BW, FLOPs ÷ peak)", ref["prefill"]),
        _time_step("W4A16 prefill", "the same FLOPs at the same BF16 peak", w4["prefill"]),
    ]


def _plain(rows: dict) -> dict:
    """The rows without their StepCost objects (inline expressions read plain numbers)."""
    return {rid: {k: val for k, val in r.items() if k not in ("decode", "prefill")} for rid, r in rows.items()}


def _notes(v: dict, rows: dict) -> list[str]:
    cannot = [r["label"] for r in rows.values() if not r["runs"]]
    if not cannot:
        return []
    return [
        f"{v['hardware'].name} cannot run: "
        + ", ".join(cannot)
        + " (accelerators.toml lists no dense FLOP/s for the matmul format or, for MXFP8 W8A8, the chip has no"
        " block-scaled tensor cores; weight-only rows of the same storage format still run)"
    ]


def _kv_bytes_per_gpu(v: dict) -> float:
    per_token = kv_bytes_per_token_all_layers(v["model"], bytes_per_element(v["kv_dtype"], "kv_dtype"))
    return v["batch_size"] * v["context_tokens"] * per_token * kv_fraction_per_gpu(v["model"], v["num_gpus"])


def compute(v: dict) -> dict:
    base = deployment({**v, "weight_dtype": "bf16", "expert_weight_dtype": "same", "compute_dtype": "bf16"})
    rows = {rid: dict(_row(v, base, w, c), label=label) for rid, label, w, c in ROWS}
    _speedups(rows)
    kv_rows = _kv_rows(v, base)
    ref = rows["bf16"]
    headline = {
        f"{rid}_{what}_speedup": rows[rid][f"{what}_speedup"]
        for rid in ("fp8", "int4_gptq", "nvfp4")
        for what in ("decode", "prefill")
    }
    return {
        "bf16_weight_bytes_per_gpu": ref["weight_bytes_per_gpu"],
        "bf16_decode_step_time_s": ref.get("decode_step_time_s", 0.0),
        "bf16_prefill_time_s": ref.get("prefill_time_s", 0.0),
        **headline,
        "rows_unable_to_run": sum(not r["runs"] for r in rows.values()),
        "kv_bytes_per_gpu": _kv_bytes_per_gpu(v),
        "attention_flops_per_s": attention_peak_flops(v["hardware"], v["kv_dtype"], "bf16", v["model"]),
        "rows": _plain(rows),
        "kv_rows": kv_rows,
        "derivation": _derivation(v, rows),
        "series": _plots(rows, kv_rows),
        "notes": _notes(v, rows),
    }
