"""Roofline: ridge point, arithmetic intensity, and bounds on decode and prefill time.

  Ridge I* = peak FLOP/s ÷ bandwidth; attainable = min(peak, I × BW)   (Williams et al., CACM 2009)
  Step times come from steptime.py (max of memory time and compute time; scaling book, 'All About Transformer Inference').
With efficiencies at 1.0 the times are lower bounds and the token rates upper bounds.
"""
from __future__ import annotations

from ..schema import integer, output, series, step
from .steptime import (Deployment, compute_ceiling_tokens_per_s_per_gpu, decode_step, decode_steps,
                       deployment, deployment_fields, efficiency_steps, experts_touched, prefill_step,
                       ridge_point)


# ---- the calculator ------------------------------------------------------------------

SCHEMA = {
    "name": "roofline",
    "title": "Roofline and step-time bounds",
    "description": ("Ridge point, arithmetic intensity of decode and prefill, and the time a step "
                    "cannot beat: max(bytes ÷ bandwidth, FLOPs ÷ peak). With efficiencies at 1.0, "
                    "times are lower bounds and token rates upper bounds. Interconnect, kernel launch "
                    "and scheduling overheads are not counted."),
    "inputs": deployment_fields(1.0, 1.0) + [
        integer("batch_size", "Decode batch", 32, 1, 100_000, "sequences"),
        integer("context_tokens", "Context per sequence", 4096, 1, 10_000_000, "tokens"),
        integer("prefill_tokens", "Prompt length for prefill", 2048, 1, 10_000_000, "tokens"),
    ],
    "outputs": [
        output("ridge_point_flops_per_byte", "Ridge point (dense peak ÷ bandwidth)", "FLOP/B", "number"),
        output("peak_flops_per_s", "Dense peak per GPU", "FLOP/s", "flops"),
        output("decode_arithmetic_intensity_flops_per_byte", "Decode arithmetic intensity", "FLOP/B", "number"),
        output("prefill_arithmetic_intensity_flops_per_byte", "Prefill arithmetic intensity", "FLOP/B", "number"),
        output("decode_attainable_flops_per_s", "Decode attainable FLOP/s per GPU", "FLOP/s", "flops"),
        output("decode_weight_bytes_per_step", "Weight bytes read per decode step", "B", "bytes"),
        output("moe_experts_touched_per_layer", "Distinct experts touched per MoE layer", "experts", "number"),
        output("decode_step_time_s_lower_bound", "Decode step time (lower bound)", "s", "seconds"),
        output("decode_tokens_per_s_per_user_upper_bound", "Tokens/s per user (upper bound)", "tokens/s", "rate"),
        output("decode_tokens_per_s_per_gpu_upper_bound", "Tokens/s per GPU (upper bound)", "tokens/s", "rate"),
        output("decode_tokens_per_s_per_gpu_ceiling", "Tokens/s per GPU, any batch (compute ceiling)",
                 "tokens/s", "rate"),
        output("prefill_time_s_lower_bound", "Prefill time (lower bound)", "s", "seconds"),
        output("prefill_tokens_per_s_per_gpu_upper_bound", "Prefill tokens/s per GPU (upper bound)",
                 "tokens/s", "rate"),
    ],
}


def _roofline_series(dep: Deployment, points: dict) -> dict:
    bw = dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency
    peak = dep.peak_flops_per_s * dep.compute_efficiency
    grid = sorted({10 ** (k / 4) for k in range(-4, 21)} | set(points.values()))
    ys = [("attainable FLOP/s", "FLOP/s", [min(peak, i * bw) for i in grid])]
    for name, x in points.items():   # operating points: one value each, null elsewhere
        ys.append((name, "FLOP/s", [min(peak, i * bw) if i == x else None for i in grid]))
    return series("Roofline", "Arithmetic intensity", "FLOP/B", grid, ys, log_axes=True)


def _batch_series(dep: Deployment, context: int, batch: int) -> dict:
    batches = sorted({2 ** k for k in range(13)} | {batch})
    steps = [decode_step(dep, b, context).time_s for b in batches]
    per_gpu = [b / t / dep.num_gpus for b, t in zip(batches, steps)]
    out = series("Tokens/s per user vs per GPU, across batch sizes", "Tokens/s per GPU", "tokens/s",
                   per_gpu, [("tokens/s per user", "tokens/s", [1 / t for t in steps])], kind="scatter")
    out["point_labels"] = [f"batch {b}" for b in batches]
    return out


def compute(v: dict) -> dict:
    dep = deployment(v)
    batch, context, prompt = v["batch_size"], v["context_tokens"], v["prefill_tokens"]
    bw = dep.accelerator.memory_bandwidth_bytes_per_s
    ridge = ridge_point(dep)
    dec, pre = decode_step(dep, batch, context), prefill_step(dep, [prompt])
    moe = dep.model.moe
    touched = experts_touched(moe.num_experts, moe.experts_per_token, batch) if moe else 0.0
    attainable = min(dep.peak_flops_per_s * dep.compute_efficiency, dec.intensity * bw * dep.bandwidth_efficiency)
    steps = [step("Ridge point", "peak FLOP/s ÷ bandwidth", f"{dep.peak_flops_per_s:.6g} ÷ {bw:.6g}", ridge,
                    "FLOP/B")] + efficiency_steps(dep) + decode_steps(dep, batch, context, dec)
    if moe:
        steps.insert(3, step("Experts touched per MoE layer", "E × (1 − (1 − k/E)^B)",
                               f"{moe.num_experts} × (1 − (1 − {moe.experts_per_token}/{moe.num_experts})^{batch})",
                               touched, "experts"))
    steps.append(step("Prefill time", "max(bytes ÷ BW, (2 × P_active × T + attention) ÷ peak)",
                        f"max({pre.memory_time_s:.6g}, {pre.compute_time_s:.6g})", pre.time_s, "s"))
    return {
        "ridge_point_flops_per_byte": ridge,
        "peak_flops_per_s": dep.peak_flops_per_s,
        "decode_arithmetic_intensity_flops_per_byte": dec.intensity,
        "prefill_arithmetic_intensity_flops_per_byte": pre.intensity,
        "decode_attainable_flops_per_s": attainable,
        "decode_weight_bytes_per_step": dec.weight_bytes,
        "moe_experts_touched_per_layer": touched,
        "decode_step_time_s_lower_bound": dec.time_s,
        "decode_tokens_per_s_per_user_upper_bound": 1 / dec.time_s,
        "decode_tokens_per_s_per_gpu_upper_bound": batch / dec.time_s / dep.num_gpus,
        "decode_tokens_per_s_per_gpu_ceiling": compute_ceiling_tokens_per_s_per_gpu(dep),
        "prefill_time_s_lower_bound": pre.time_s,
        "prefill_tokens_per_s_per_gpu_upper_bound": prompt / pre.time_s / dep.num_gpus,
        "regime": {"decode": "compute-bound" if dec.compute_bound else "memory-bound",
                   "prefill": "compute-bound" if pre.compute_bound else "memory-bound"},
        "derivation": steps,
        "series": {"roofline": _roofline_series(dep, {f"decode (batch {batch})": dec.intensity,
                                                       f"prefill ({prompt} tokens)": pre.intensity}),
                   "tokens_per_user_vs_gpu": _batch_series(dep, context, batch)},
    }
