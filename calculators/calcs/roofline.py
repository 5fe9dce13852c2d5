"""Roofline: ridge point, arithmetic intensity, and bounds on decode and prefill time.

  Ridge I* = peak FLOP/s ÷ bandwidth; attainable = min(peak, I × BW)   (Williams et al., CACM 2009)
  Step times come from steptime.py (max of memory time and compute time; scaling book,
  'All About Transformer Inference').
The "(lower bound)" / "(upper bound)" outputs are always taken at efficiencies 1.0 and without the per-step
overhead (steptime.bound_deployment), whatever the inputs; the "estimate" outputs apply the efficiencies and
add the overhead (overhead.py), so an estimate never beats its bound.
Feasibility: the batch series marks the batches whose KV does not fit in memory under memory.py's rule at its
defaults (vLLM: gpu_memory_utilization 0.92, 2 GiB activation reserve), an assumption named in the plot.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..schema import integer, number, output, series, step
from .memory import engine_budget, engine_fields
from .deployment import decode_steps, deployment_fields, efficiency_steps, time_step
from .steptime import (Deployment, StepCost, StepModel, bound_deployment, compute_ceiling_tokens_per_s_per_gpu,
                       compute_rate, decode_step, deployment, experts_touched, prefill_step, ridge_point)

ENGINE_DEFAULTS = {f["key"]: f["default"] for f in engine_fields()}
FIT_RULE = (f"vLLM rule at gpu_memory_utilization {ENGINE_DEFAULTS['gpu_memory_utilization']} and a "
            f"{ENGINE_DEFAULTS['activation_reserve_gib']:g} GiB reserve")


# ---- the calculator ------------------------------------------------------------------

SCHEMA = {
    "name": "roofline",
    "title": "Roofline and step-time bounds",
    "description": ("Ridge point, arithmetic intensity of decode and prefill, and the time a step "
                    "cannot beat: max(bytes ÷ bandwidth, FLOPs ÷ peak). Bounds are always at efficiencies "
                    "1.0 and without per-step overhead; the estimates apply the efficiency inputs and add the "
                    "per-step overhead. Interconnect and scheduling overheads are not counted."),
    "inputs": deployment_fields(1.0, 1.0) + [
        integer("batch_size", "Decode batch", 32, 1, 100_000, "sequences"),
        integer("context_tokens", "Context per sequence", 4096, 1, 10_000_000, "tokens"),
        integer("prefill_tokens", "Prompt length for prefill", 2048, 1, 10_000_000, "tokens"),
        number("accepted_tokens_per_step", "Tokens kept per weight sweep (speculative decoding)", 1.0, 1.0, 64.0,
               "tokens", "Mean tokens each sequence keeps per verification step; 1 = no speculation. The bound "
               "prices only the kept tokens and a free draft, so it is a ceiling (Part 11 models the rest).", 0.1),
    ],
    "outputs": [
        output("ridge_point_flops_per_byte", "Ridge point (dense peak ÷ bandwidth)", "FLOP/B", "number"),
        output("peak_flops_per_s", "Dense peak per GPU", "FLOP/s", "flops"),
        output("decode_arithmetic_intensity_flops_per_byte", "Decode arithmetic intensity", "FLOP/B", "number"),
        output("prefill_arithmetic_intensity_flops_per_byte", "Prefill arithmetic intensity", "FLOP/B", "number"),
        output("decode_attainable_flops_per_s", "Decode attainable FLOP/s per GPU", "FLOP/s", "flops"),
        output("decode_weight_bytes_per_step", "Weight bytes read per decode step", "B", "bytes"),
        output("moe_experts_touched_per_layer", "Distinct experts touched per MoE layer", "experts", "number"),
        output("max_batch_in_memory", f"Sequences that fit in memory at this context ({FIT_RULE})",
               "sequences", "integer"),
        output("decode_step_time_s_lower_bound", "Decode step time (lower bound)", "s", "seconds"),
        output("decode_tokens_per_s_per_user_upper_bound", "Tokens/s per user (upper bound)", "tokens/s", "rate"),
        output("decode_tokens_per_s_per_gpu_upper_bound", "Tokens/s per GPU (upper bound)", "tokens/s", "rate"),
        output("decode_tokens_per_s_per_user_speculative_upper_bound",
               "Tokens/s per user at that many tokens per sweep (upper bound)", "tokens/s", "rate"),
        output("decode_step_time_s_estimate", "Decode step time, estimate (with the efficiencies)", "s", "seconds"),
        output("decode_tokens_per_s_per_user_estimate", "Tokens/s per user, estimate (with the efficiencies)",
               "tokens/s", "rate"),
        output("decode_tokens_per_s_per_gpu_ceiling",
               "Tokens/s per GPU at unlimited batch (compute ceiling, as if KV and memory were free)",
               "tokens/s", "rate"),
        output("prefill_time_s_lower_bound", "Prefill time (lower bound)", "s", "seconds"),
        output("prefill_tokens_per_s_per_gpu_upper_bound", "Prefill tokens/s per GPU (upper bound)",
                 "tokens/s", "rate"),
    ],
}


def _roofline_series(dep: Deployment, points: dict) -> dict:
    bw = dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency
    peak = compute_rate(dep)
    grid = sorted({10 ** (k / 4) for k in range(-4, 21)} | set(points.values()))
    ys = [("attainable FLOP/s", "FLOP/s", [min(peak, i * bw) for i in grid])]
    for name, x in points.items():   # operating points: one value each, null elsewhere
        ys.append((name, "FLOP/s", [min(peak, i * bw) if i == x else None for i in grid]))
    return series("Roofline", "Arithmetic intensity", "FLOP/B", grid, ys, log_axes=True)


def fit_in_memory(v: dict) -> int:
    """Sequences of this context whose KV fits beside the weights, under memory.py's rule at its defaults."""
    return engine_budget({**v, **ENGINE_DEFAULTS}, v["num_gpus"]).sequences


def _batch_series(dep: Deployment, context: int, batch: int, fit: int) -> dict:
    """Bounds per user against per GPU; batches past `fit` go in their own series, marked as not fitting."""
    batches = sorted({2 ** k for k in range(13)} | {batch} | ({fit} if fit >= 1 else set()))
    steps = [decode_step(dep, b, context).time_s for b in batches]
    per_gpu = [b / t / dep.num_gpus for b, t in zip(batches, steps)]
    per_user = [1 / t for t in steps]
    out = series(f"Tokens/s per user vs per GPU (bounds); {fit:,} sequences fit ({FIT_RULE})",
                 "Tokens/s per GPU", "tokens/s", per_gpu,
                 [("fits in memory", "tokens/s per user",
                   [u if b <= fit else None for b, u in zip(batches, per_user)]),
                  ("does not fit", "tokens/s per user",
                   [u if b > fit else None for b, u in zip(batches, per_user)])], kind="scatter")
    out["point_labels"] = [f"batch {b}" + ("" if b <= fit else " (does not fit)") for b in batches]
    return out


def _notes(v: dict, batch: int, fit: int, estimated: bool) -> list[str]:
    notes = []
    if batch > fit:
        notes.append(f"batch {batch:,} does not fit in memory at {v['context_tokens']:,} tokens: "
                     f"{fit:,} sequences fit ({FIT_RULE}); its figures are for a batch that cannot run")
    if estimated:
        notes.append("the bounds are at efficiencies 1.0 without per-step overhead; the estimates apply the "
                     "efficiency inputs and the per-step overhead")
    return notes


@dataclass(frozen=True)
class Bounds:
    """The step costs one roofline reading needs: bounds at efficiencies 1.0, the estimate with them."""
    dep: Deployment           # as the reader set it
    tight: Deployment         # the same at efficiencies 1.0
    batch: int
    context: int
    prompt: int
    tau: float                # tokens kept per sweep (speculative decoding)
    dec: StepCost             # decode step, bound
    pre: StepCost             # prefill of one prompt, bound
    est: StepCost             # decode step, estimate
    spec: StepCost            # decode step of B × τ tokens, bound

    @property
    def estimated(self) -> bool:
        return self.dep != self.tight


def bounds(v: dict) -> Bounds:
    dep = deployment(v)
    tight = bound_deployment(dep)
    batch, context, prompt = v["batch_size"], v["context_tokens"], v["prefill_tokens"]
    tau = v["accepted_tokens_per_step"]
    return Bounds(dep, tight, batch, context, prompt, tau, decode_step(tight, batch, context),
                  prefill_step(tight, [prompt]), decode_step(dep, batch, context),
                  StepModel(tight).decode(batch, context, tau))


def _experts_touched(b: Bounds):
    """Expected distinct experts per MoE layer; a text for a dense model."""
    moe = b.dep.model.moe
    return experts_touched(moe.num_experts, moe.experts_per_token, b.batch) if moe else "none: dense model"


def _derivation(b: Bounds) -> list[dict]:
    dep, moe = b.dep, b.dep.model.moe
    steps = [step("Ridge point", "peak FLOP/s ÷ bandwidth", "{} ÷ {}",
                  [(dep.peak_flops_per_s, "FLOP/s"), (dep.accelerator.memory_bandwidth_bytes_per_s, "B/s")],
                  ridge_point(dep), "FLOP/B")]
    if moe:
        steps.append(step("Experts touched per MoE layer", "E × (1 − (1 − k/E)^B)", "{} × (1 − (1 − {}/{})^{})",
                          [moe.num_experts, moe.experts_per_token, moe.num_experts, b.batch], _experts_touched(b),
                          "experts"))
    steps += decode_steps(b.tight, b.batch, b.context, b.dec)
    if b.tau != 1:
        steps.append(step("Tokens/s per user, speculative", "τ ÷ step with B × τ tokens (KV read once per sequence)",
                          "{} ÷ max({}, {})", [b.tau, (b.spec.memory_time_s, "s"), (b.spec.compute_time_s, "s")],
                          b.tau / b.spec.time_s, "tokens/s"))
    if b.estimated:
        steps += efficiency_steps(dep) + [time_step(b.est, "Decode step time, estimate",
                                                    "max(memory ÷ η_bw, compute ÷ (η_compute × s_chip))")]
    return steps + [step("Prefill time", "max(bytes ÷ BW, (2 × P_active × T + attention) ÷ peak)", "max({}, {})",
                         [(b.pre.memory_time_s, "s"), (b.pre.compute_time_s, "s")], b.pre.time_s, "s")]


def _attainable(b: Bounds) -> float:
    """min(η_compute × s_chip × peak, intensity × η_bw × BW) at the estimate's intensity."""
    dep = b.dep
    return min(compute_rate(dep),
               b.est.intensity * dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency)


def _regime(cost: StepCost) -> str:
    return "compute-bound" if cost.compute_bound else "memory-bound"


def compute(v: dict) -> dict:
    b = bounds(v)
    dep, batch, dec, pre = b.dep, b.batch, b.dec, b.pre
    fit = fit_in_memory(v)
    return {
        "ridge_point_flops_per_byte": ridge_point(dep),
        "peak_flops_per_s": dep.peak_flops_per_s,
        "decode_arithmetic_intensity_flops_per_byte": dec.intensity,
        "prefill_arithmetic_intensity_flops_per_byte": pre.intensity,
        "decode_attainable_flops_per_s": _attainable(b),
        "decode_weight_bytes_per_step": dec.weight_bytes,
        "moe_experts_touched_per_layer": _experts_touched(b),
        "max_batch_in_memory": fit,
        "decode_step_time_s_lower_bound": dec.time_s,
        "decode_tokens_per_s_per_user_upper_bound": 1 / dec.time_s,
        "decode_tokens_per_s_per_gpu_upper_bound": batch / dec.time_s / dep.num_gpus,
        "decode_tokens_per_s_per_user_speculative_upper_bound": b.tau / b.spec.time_s,
        "decode_step_time_s_estimate": b.est.time_s,
        "decode_tokens_per_s_per_user_estimate": 1 / b.est.time_s,
        "decode_tokens_per_s_per_gpu_ceiling": compute_ceiling_tokens_per_s_per_gpu(b.tight),
        "prefill_time_s_lower_bound": pre.time_s,
        "prefill_tokens_per_s_per_gpu_upper_bound": b.prompt / pre.time_s / dep.num_gpus,
        "regime": {"decode": _regime(b.est), "prefill": _regime(pre)},
        "derivation": _derivation(b),
        "series": {"roofline": _roofline_series(dep, {f"decode (batch {batch})": dec.intensity,
                                                       f"prefill ({b.prompt} tokens)": pre.intensity}),
                   "tokens_per_user_vs_gpu": _batch_series(b.tight, b.context, batch, fit)},
        "notes": _notes(v, batch, fit, b.estimated),
    }
