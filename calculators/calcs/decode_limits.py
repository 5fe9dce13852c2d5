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

from dataclasses import dataclass

from ..schema import integer, output, series, step
from .deployment import deployment_fields
from .memory import engine_budget, engine_fields
from .steptime import (Deployment, StepCost, StepModel, bound_deployment, compute_share, deployment, effective_ridge,
                       ridge_point, weight_bytes_touched)

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


@dataclass(frozen=True)
class Limits:
    """One model on one TP group at one context: the figures the outputs and the derivation share."""
    dep: Deployment
    context: int
    sm: StepModel          # with the efficiencies
    bound: StepModel       # at efficiencies 1.0
    weights: float         # bytes read per step, every expert
    flops_seq: float       # FLOPs per generated token per sequence
    kv_seq: float          # KV bytes one GPU holds and reads per sequence
    at_ridge: int          # smallest compute-bound batch; 0 = none up to SEARCH_MAX
    max_batch: int         # sequences that fit in memory

    @property
    def kv_equals_weights(self) -> float:
        return self.weights / self.dep.num_gpus / self.kv_seq

    @property
    def intensity_limit(self) -> float:
        return self.flops_seq / self.dep.num_gpus / self.kv_seq

    @property
    def batch_at_ridge(self):
        """The batch, or a text where decode never turns compute-bound within the search."""
        return self.at_ridge or f"never (none up to {SEARCH_MAX:,})"


def limits(v: dict) -> Limits:
    dep, context = deployment(v), v["context_tokens"]
    sm = StepModel(dep)
    flops_seq, kv_logical = sm.per_sequence(context)
    return Limits(dep, context, sm, StepModel(bound_deployment(dep)), weight_bytes_touched(dep, 1, all_experts=True),
                  flops_seq, kv_logical * sm.kv_share, batch_at_ridge(sm, context),
                  engine_budget(v, dep.num_gpus).sequences)


def _ridge_steps(dep: Deployment) -> list[dict]:
    peak, bw = (dep.peak_flops_per_s, "FLOP/s"), (dep.accelerator.memory_bandwidth_bytes_per_s, "B/s")
    return [
        step("Ridge point", "peak FLOP/s ÷ bandwidth", "{} ÷ {}", [peak, bw], ridge_point(dep), "FLOP/B"),
        step("Effective ridge", "(η_compute × s_chip × peak) ÷ (η_bw × bandwidth)", "({} × {}) ÷ ({} × {})",
             [compute_share(dep), peak, dep.bandwidth_efficiency, bw], effective_ridge(dep), "FLOP/B"),
    ]


def _derivation(lim: Limits, at_max: StepCost) -> list[dict]:
    n, kv_seq = lim.dep.num_gpus, (lim.kv_seq, "B")
    return [
        step("KV bytes per sequence per GPU", "KV(T) × share of KV on one GPU", "KV({}) × {}",
             [(lim.context, "tokens"), lim.sm.kv_share], lim.kv_seq, "B"),
        step("Batch where KV reads equal weight reads", "(W ÷ N) ÷ KV_seq", "({} ÷ {}) ÷ {}",
             [(lim.weights, "B"), n, kv_seq], lim.kv_equals_weights, "sequences"),
        step("Intensity limit", "(F_seq ÷ N) ÷ KV_seq", "({} ÷ {}) ÷ {}", [(lim.flops_seq, "FLOP"), n, kv_seq],
             lim.intensity_limit, "FLOP/B"),
    ] + _ridge_steps(lim.dep) + [
        # "never" is text: no batch up to the search's end turns compute-bound
        step("Batch at the ridge", "smallest B with B × F_seq ÷ (W + N × B × KV_seq) > effective ridge",
             "B = {}" if lim.at_ridge else "never", [lim.at_ridge] if lim.at_ridge else [], lim.batch_at_ridge,
             "sequences" if lim.at_ridge else ""),
        step("Sequences that fit", "⌊KV budget ÷ KV per sequence per GPU⌋", "memory calculator's rule", [],
             lim.max_batch, "sequences"),
        step("Decode step at that batch (bound)", "max(bytes per GPU ÷ BW, FLOPs per GPU ÷ peak)", "max({}, {})",
             [(at_max.memory_time_s, "s"), (at_max.compute_time_s, "s")], at_max.time_s, "s"),
    ]


def compute(v: dict) -> dict:
    lim = limits(v)
    dep, gpus, max_batch = lim.dep, lim.dep.num_gpus, lim.max_batch
    b = max(1, max_batch)
    at_max, estimate = lim.bound.decode(b, lim.context), lim.sm.decode(b, lim.context)
    notes = [] if max_batch >= 1 else ["nothing fits in memory: the figures at batch 1 are for a batch that cannot run"]
    return {
        "weight_bytes_all_experts": lim.weights,
        "kv_bytes_per_sequence": lim.kv_seq,
        "batch_kv_equals_weights": lim.kv_equals_weights,
        "intensity_limit_flops_per_byte": lim.intensity_limit,
        "ridge_point_flops_per_byte": ridge_point(dep),
        "effective_ridge_point_flops_per_byte": effective_ridge(dep),
        "batch_at_ridge": lim.batch_at_ridge,
        "max_batch_in_memory": max_batch,
        "step_time_s_at_max_batch": at_max.time_s,
        "memory_time_s_at_max_batch": at_max.memory_time_s,     # for prose; not shown as outputs
        "compute_time_s_at_max_batch": at_max.compute_time_s,
        "tokens_per_s_per_user_at_max_batch": 1 / at_max.time_s,
        "tokens_per_s_per_gpu_at_max_batch": b / at_max.time_s / gpus,
        "step_time_s_at_max_batch_estimate": estimate.time_s,
        "tokens_per_s_per_gpu_at_max_batch_estimate": b / estimate.time_s / gpus,
        "kv_share_of_step_bytes_at_max_batch": at_max.kv_share_of_bytes,
        "binding_limit": _binding(max_batch, lim.at_ridge),
        "notes": notes,
        "derivation": _derivation(lim, at_max),
        "series": {"throughput_vs_batch": _series(lim.bound, lim.context, max_batch, gpus)},
    }
