"""Decode limits: where batching stops paying, for one model on one tensor-parallel group.

Batching shares one read of the weights among B sequences, but each sequence still reads its own KV:
  intensity(B)    = B × F_seq ÷ (W + B × KV_seq)          → F_seq ÷ KV_seq as B → ∞
  KV = weights at   B_kv = W ÷ KV_seq
  compute-bound at  the smallest B with intensity(B) > effective ridge = (η_F × peak) ÷ (η_W × BW)
                    (Williams et al., CACM 2009; the same test roofline's regime uses), which never
                    comes when F_seq ÷ KV_seq ≤ that ridge
  capacity:         B_max = ⌊KV budget ÷ KV_seq⌋ under the engine's memory rule (memory.py)
F_seq = 2 × active params + attention FLOPs per token; W counts every expert (a large batch touches all)
and one input-embedding row. KV_seq is what one GPU reads: KV(T) × kv_fraction_per_gpu (replicated for
TP > H_kv and for MLA), W is read ÷ N; both sides of each ratio are per GPU.
The "(lower bound)" and "(upper bound)" outputs are steptime.py bounds at efficiencies 1.0 whatever the
inputs; the "estimate" outputs apply the efficiency inputs. Communication is not counted.
"""
from __future__ import annotations

from ..schema import integer, output, series, step
from .memory import budget, engine_fields
from .deployment import deployment_fields
from .steptime import StepModel, bound_deployment, deployment, effective_ridge, ridge_point, weight_bytes_touched

SEARCH_MAX = 10_000_000


def batch_at_ridge(sm: StepModel, context: int) -> int:
    """Smallest batch whose decode step is compute-bound (efficiencies included); 0 if none up to SEARCH_MAX
    (the calculator shows that as "never")."""
    if not sm.decode(SEARCH_MAX, context).compute_bound:
        return 0
    lo, hi = 1, SEARCH_MAX
    while lo < hi:
        mid = (lo + hi) // 2
        if sm.decode(mid, context).compute_bound:
            hi = mid
        else:
            lo = mid + 1
    return lo


SCHEMA = {
    "name": "decode_limits",
    "title": "Where batching stops: KV traffic, the ridge point and memory capacity",
    "description": ("How far batching can raise decode throughput for one model on one tensor-parallel "
                    "group: the batch at which KV reads equal weight reads, the batch at which decode "
                    "would turn compute-bound (if ever), and the batch that fits in memory. Step times "
                    "are roofline bounds; communication and scheduling are not counted."),
    "inputs": deployment_fields(1.0, 1.0) + [
        integer("context_tokens", "Context per sequence", 4096, 1, 10_000_000, "tokens"),
    ] + engine_fields(),
    "outputs": [
        output("weight_bytes_all_experts", "Weight bytes read per step (all experts)", "B", "bytes"),
        output("kv_bytes_per_sequence", "KV bytes per sequence at this context", "B", "bytes"),
        output("batch_kv_equals_weights", "Batch at which KV reads equal weight reads", "sequences", "number"),
        output("intensity_limit_flops_per_byte", "Decode intensity as the batch grows without limit",
               "FLOP/B", "number"),
        output("ridge_point_flops_per_byte", "Ridge point (dense peak ÷ bandwidth)", "FLOP/B", "number"),
        output("effective_ridge_point_flops_per_byte", "Effective ridge (with the efficiency factors)",
               "FLOP/B", "number"),
        output("batch_at_ridge", "Batch at which decode turns compute-bound", "sequences", "integer"),
        output("max_batch_in_memory", "Sequences that fit in memory", "sequences", "integer"),
        output("step_time_s_at_max_batch", "Decode step at that batch (lower bound)", "s", "seconds"),
        output("tokens_per_s_per_user_at_max_batch", "Tokens/s per user at that batch (upper bound)",
               "tokens/s", "rate"),
        output("tokens_per_s_per_gpu_at_max_batch", "Tokens/s per GPU at that batch (upper bound)",
               "tokens/s", "rate"),
        output("step_time_s_at_max_batch_estimate", "Decode step at that batch, estimate (with the efficiencies)",
               "s", "seconds"),
        output("tokens_per_s_per_gpu_at_max_batch_estimate",
               "Tokens/s per GPU at that batch, estimate (with the efficiencies)", "tokens/s", "rate"),
        output("kv_share_of_step_bytes_at_max_batch", "KV share of bytes one GPU reads at that batch", "",
               "percent"),
    ],
}


def _series(sm: StepModel, context: int, max_batch: int, gpus: int) -> dict:
    """Bounds up to the batch that fits; when nothing fits, batch 1 alone, named as not fitting."""
    top = max(1, max_batch)
    batches = sorted({2 ** k for k in range(20) if 2 ** k <= top} | {top})
    steps = [sm.decode(b, context) for b in batches]
    tag = "" if max_batch >= 1 else " (does not fit in memory)"
    title = ("Decode throughput bounds up to the batch that fits" if max_batch >= 1
             else "Decode throughput bound at batch 1, which does not fit in memory")
    return series(title, "Batch", "sequences", batches,
                  [(f"tokens/s per GPU{tag}", "tokens/s", [b / s.time_s / gpus for b, s in zip(batches, steps)]),
                   (f"tokens/s per user{tag}", "tokens/s", [1 / s.time_s for s in steps])], log_axes=True)


def _binding(max_batch: int, at_ridge: int) -> str:
    """Which limit stops batching first: memory capacity, compute, or not fitting at all."""
    if max_batch < 1:
        return "does not fit"
    if at_ridge and at_ridge <= max_batch:
        return "compute (ridge point reached before memory is full)"
    return "memory capacity (the batch that fits is still memory-bound)"


def _derivation(dep, context, sm, weights, kv_seq, flops_seq, eff_ridge, at_ridge, max_batch, at_max):
    limit, ridge = flops_seq / kv_seq, ridge_point(dep)
    return [
        step("KV bytes per sequence per GPU", "KV(T) × share of KV on one GPU", f"KV({context}) × {sm.kv_share:.4g}",
             kv_seq, "B"),
        step("Batch where KV reads equal weight reads", "(W ÷ N) ÷ KV_seq",
             f"({weights:.6g} ÷ {dep.num_gpus}) ÷ {kv_seq:.6g}", weights / dep.num_gpus / kv_seq, "sequences"),
        step("Intensity limit", "(F_seq ÷ N) ÷ KV_seq", f"({flops_seq:.6g} ÷ {dep.num_gpus}) ÷ {kv_seq:.6g}",
             limit, "FLOP/B"),
        step("Ridge point", "peak FLOP/s ÷ bandwidth",
             f"{dep.peak_flops_per_s:.6g} ÷ {dep.accelerator.memory_bandwidth_bytes_per_s:.6g}", ridge, "FLOP/B"),
        step("Effective ridge", "(η_compute × peak) ÷ (η_bw × bandwidth)",
             f"({dep.compute_efficiency} × {dep.peak_flops_per_s:.6g}) ÷ ({dep.bandwidth_efficiency} × "
             f"{dep.accelerator.memory_bandwidth_bytes_per_s:.6g})", eff_ridge, "FLOP/B"),
        step("Batch at the ridge", "smallest B with B × F_seq ÷ (W + N × B × KV_seq) > effective ridge",
             "never" if not at_ridge else f"B = {at_ridge}",
             at_ridge or f"never (none up to {SEARCH_MAX:,})", "sequences" if at_ridge else ""),
        step("Sequences that fit", "⌊KV budget ÷ KV per sequence per GPU⌋", "memory calculator's rule",
             max_batch, "sequences"),
        step("Decode step at that batch (bound)", "max(bytes per GPU ÷ BW, FLOPs per GPU ÷ peak)",
             f"max({at_max.memory_time_s:.6g}, {at_max.compute_time_s:.6g})", at_max.time_s, "s"),
    ]


def compute(v: dict) -> dict:
    dep, context, gpus = deployment(v), v["context_tokens"], v["num_gpus"]
    sm, bound = StepModel(dep), StepModel(bound_deployment(dep))
    flops_seq, kv_logical = sm.per_sequence(context)
    kv_seq = kv_logical * sm.kv_share   # what one GPU holds and reads
    weights = weight_bytes_touched(dep, 1, all_experts=True)
    ridge = ridge_point(dep)
    limit = flops_seq / gpus / kv_seq
    eff_ridge = effective_ridge(dep)
    at_ridge = batch_at_ridge(sm, context)
    max_batch = budget(v, gpus)["sequences"]
    b = max(1, max_batch)
    at_max, estimate = bound.decode(b, context), sm.decode(b, context)
    notes = [] if max_batch >= 1 else ["nothing fits in memory: the figures at batch 1 are for a batch that cannot run"]
    return {
        "weight_bytes_all_experts": weights,
        "kv_bytes_per_sequence": kv_seq,
        "batch_kv_equals_weights": weights / gpus / kv_seq,
        "intensity_limit_flops_per_byte": limit,
        "ridge_point_flops_per_byte": ridge,
        "effective_ridge_point_flops_per_byte": eff_ridge,
        "batch_at_ridge": at_ridge or f"never (none up to {SEARCH_MAX:,})",
        "max_batch_in_memory": max_batch,
        "step_time_s_at_max_batch": at_max.time_s,
        "memory_time_s_at_max_batch": at_max.memory_time_s,     # for prose; not shown as outputs
        "compute_time_s_at_max_batch": at_max.compute_time_s,
        "tokens_per_s_per_user_at_max_batch": 1 / at_max.time_s,
        "tokens_per_s_per_gpu_at_max_batch": b / at_max.time_s / gpus,
        "step_time_s_at_max_batch_estimate": estimate.time_s,
        "tokens_per_s_per_gpu_at_max_batch_estimate": b / estimate.time_s / gpus,
        "kv_share_of_step_bytes_at_max_batch": at_max.kv_share_of_bytes,
        "binding_limit": _binding(max_batch, at_ridge),
        "notes": notes,
        "derivation": _derivation(dep, context, sm, weights, kv_seq, flops_seq, eff_ridge, at_ridge,
                                  max_batch, at_max),
        "series": {"throughput_vs_batch": _series(bound, context, max_batch, gpus)},
    }
