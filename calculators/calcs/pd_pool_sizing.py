"""Sizing the prefill and decode pools in closed form, the way NVIDIA Dynamo's SLA planner does.

Dynamo (ai-dynamo/dynamo, components/planner/src/dynamo/planner/utils/planner_core.py,
Planner._compute_replica_requirements, read at commit 07619258a49d18dfad139cb67f67f34c6993e1b8):
  prefill replicas = ⌈ rate × ISL ÷ (prefill tokens/s per GPU at ISL) ÷ GPUs per prefill engine ⌉
  decode replicas  = ⌈ rate × OSL ÷ (best decode tokens/s per GPU whose ITL meets the target at a
                      context of ISL + OSL/2) ÷ GPUs per decode engine ⌉
Dynamo reads both throughputs from a profile of the engine; here they come from the step model: a
prefill of one prompt alone (the uncached part, after the prefix-cache hits), and the largest decode
batch whose step meets the ITL target and whose KV fits the replica's pool, at that mean context.
A prefix-cache hit share h cuts the prefill pool's work to ISL × (1 − h) (Dynamo folds hits into a
correction factor measured online). The TTFT target is checked, not sized for: the prefill of one
prompt alone must fit in it, and the prefill pool's utilisation is reported (queueing grows as it
nears 1; the disagg_goodput calculator simulates it).
"""

from __future__ import annotations

import math

from ..engine.steps import StepTimes
from ..errors import InputError
from ..schema import choice, integer, mark, number, output, series, step
from .deployment import deployment_fields
from .memory import engine_fields, kv_pool_tokens, sequence_pool_tokens
from .sharding import steps_for
from .steptime import StepModel, deployment

SOURCES = [("model", "The step model"), ("measured", "Measured figures (below)")]
RATE_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)  # × the reader's rate, for the plot
MAX_BATCH = 4096


def replica_times(v: dict, gpus: int) -> tuple[dict, StepTimes, float]:
    """(inputs with num_gpus = gpus, the engine's step times, the replica's KV pool in tokens). Measured figures
    need no step model's communication: a pool of DeepSeek's 144 GPUs is no tensor-parallel group."""
    w = dict(v, num_gpus=gpus)
    steps = steps_for(w) if v["throughput_source"] == "model" else StepModel(deployment(w))
    return w, StepTimes(steps), kv_pool_tokens(w)


def prefill_tokens_per_s_per_gpu(times: StepTimes, isl: int, hit: float, gpus: int) -> tuple[float, float]:
    """(uncached tokens/s per GPU of one prompt alone, its prefill time); hit = prefix-cache share."""
    cached = min(isl - 1, int(isl * hit))
    busy = times.mixed(0, 0.0, [(cached, isl - cached)])
    return (isl - cached) / busy / gpus, busy


def decode_batch_meeting(times: StepTimes, context: int, itl_s: float, cap: int) -> int:
    """The largest batch ≤ cap whose decode step at this context takes at most itl_s (0: none)."""
    if cap < 1 or times.decode(1, context) > itl_s:
        return 0
    lo, hi = 1, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if times.decode(mid, mid * context) <= itl_s:
            lo = mid
        else:
            hi = mid - 1
    return lo


def pool_sizes(rate: float, isl: float, osl: float, hit: float, prefill_tps_gpu: float, decode_tps_gpu: float,
               prefill_gpus: int, decode_gpus: int) -> tuple[float, float]:
    """(prefill replicas, decode replicas) before rounding up: Dynamo's two formulas."""
    p = rate * isl * (1 - hit) / prefill_tps_gpu / prefill_gpus
    d = rate * osl / decode_tps_gpu / decode_gpus if decode_tps_gpu > 0 else math.inf
    return p, d


SCHEMA = {
    "name": "pd_pool_sizing",
    "title": "Prefill and decode pools: how many of each (closed form)",
    "description": ("How many prefill and how many decode replicas a request rate needs, by NVIDIA Dynamo's SLA "
                    "planner formulas: prefill replicas = rate × prompt tokens ÷ prefill tokens/s per replica; "
                    "decode replicas = rate × output tokens ÷ the decode tokens/s per replica that still meets "
                    "the inter-token target at a context of prompt + half the output. The throughputs come from "
                    "the roofline step model (efficiency factors and the per-step overhead applied): prefill of "
                    "one prompt alone; decode at the largest batch whose step meets the target and whose KV fits "
                    "the replica. A prefix-cache hit share removes that part of the prefill work. Means only: no "
                    "queueing, no burstiness, no transfer time (see the KV transfer and goodput calculators)."),
    "inputs": deployment_fields(0.8, 0.6, {"num_gpus": {"label": "GPUs per prefill replica (tensor parallel)"}})
    + engine_fields()
    + [
        integer("decode_gpus", "GPUs per decode replica (tensor parallel)", 1, 1, 1024, "GPUs"),
        number("request_rate_per_s", "Request rate", 20.0, 0.001, 1e7, "requests/s"),
        integer("input_tokens", "Mean prompt length (ISL)", 2048, 1, 1_000_000, "tokens"),
        integer("output_tokens", "Mean output length (OSL)", 256, 1, 100_000, "tokens"),
        number("prefix_hit_percent", "Prompt tokens found in the prefix cache", 0.0, 0.0, 99.0, "%"),
        number("itl_slo_ms", "Inter-token latency target", 30.0, 0.1, 10_000.0, "ms"),
        number("ttft_slo_s", "TTFT target", 1.0, 0.001, 3600.0, "s"),
        integer("max_num_seqs", "Cap on running sequences per decode replica", 1024, 1, MAX_BATCH, "sequences"),
        choice("throughput_source", "Throughputs from", "model", SOURCES,
               "Dynamo reads them from a profile of your engine; measured figures you type replace the step model's."),
        number("prefill_tps_measured", "Measured prefill tokens/s per GPU (when chosen)", 9212.5, 1.0, 1e9,
               "tokens/s", "Default: DeepSeek's day-6 figure, ~73.7k input tokens/s per 8-GPU H800 node ÷ 8."),
        number("decode_tps_measured", "Measured decode tokens/s per GPU (when chosen)", 1850.0, 1.0, 1e9,
               "tokens/s", "Default: DeepSeek's day-6 figure, ~14.8k output tokens/s per node ÷ 8."),
        integer("gpus_per_node", "GPUs per server", 8, 1, 72, "GPUs", "For the count of servers only."),
    ],
    "outputs": [
        output("prefill_replicas", "Prefill replicas", "replicas", "integer"),
        output("decode_replicas", "Decode replicas", "replicas", "integer"),
        output("prefill_replicas_exact", "Prefill replicas, before rounding up", "replicas", "number"),
        output("decode_replicas_exact", "Decode replicas, before rounding up", "replicas", "number"),
        output("total_gpus", "GPUs in all", "GPUs", "integer"),
        output("total_gpus_exact", "GPUs in all, before rounding up", "GPUs", "number"),
        output("total_nodes_exact", "Servers in all, before rounding up", "servers", "number"),
        output("prefill_gpu_share", "Share of the GPUs that prefill", "", "percent"),
        output("prefill_to_decode_gpus", "Prefill GPUs per decode GPU", "", "number"),
        output("prefill_tokens_per_s_per_gpu", "Prefill: uncached prompt tokens/s per GPU", "tokens/s", "rate"),
        output("decode_tokens_per_s_per_gpu", "Decode: output tokens/s per GPU meeting the ITL target",
               "tokens/s", "rate"),
        output("decode_batch", "Decode batch per replica at that throughput", "sequences", "integer"),
        output("decode_step_s", "Its decode step", "s", "seconds"),
        output("decode_batch_kv_limit", "Sequences the decode replica's KV holds at that context", "sequences",
               "integer"),
        output("prefill_s", "Prefill of one prompt alone", "s", "seconds"),
        output("prefill_utilisation", "Prefill pool utilisation after rounding up", "", "percent"),
        output("meets_ttft", "One prompt alone meets the TTFT target", "", "integer", words={1: "yes", 0: "no"}),
    ],
}


def size(v: dict) -> dict:
    """Every quantity of the sizing, for compute and for the plot."""
    pg, dg = v["num_gpus"], v["decode_gpus"]
    isl, osl, hit = v["input_tokens"], v["output_tokens"], v["prefix_hit_percent"] / 100
    _, ptimes, _ = replica_times(v, pg)
    dv, dtimes, dpool = replica_times(v, dg)
    ptps, busy = prefill_tokens_per_s_per_gpu(ptimes, isl, hit, pg)
    context = round(isl + osl / 2)
    kv_limit = int(dpool // sequence_pool_tokens(dv, isl + osl)) if dpool else 0
    batch = decode_batch_meeting(dtimes, context, v["itl_slo_ms"] / 1000, min(v["max_num_seqs"], kv_limit))
    dstep = dtimes.decode(batch, batch * context) if batch else dtimes.decode(1, context)
    dtps = batch / dstep / dg if batch else 0.0
    return {"ptps": ptps, "busy": busy, "context": context, "kv_limit": kv_limit, "batch": batch,
            "dstep": dstep, "dtps": dtps}


def compute(v: dict) -> dict:
    s = size(v)
    if v["throughput_source"] == "measured":  # the step model's batch and times do not apply
        s.update(ptps=v["prefill_tps_measured"], dtps=v["decode_tps_measured"], batch=0, dstep=0.0, busy=0.0)
    elif not s["batch"]:
        raise InputError("itl_slo_ms", f"no decode batch meets it: one sequence's step at a context of "
                         f"{s['context']:,} takes {s['dstep'] * 1000:.3g} ms on {v['decode_gpus']} GPU(s), or its "
                         f"KV does not fit")
    pg, dg, rate = v["num_gpus"], v["decode_gpus"], v["request_rate_per_s"]
    isl, osl, hit = v["input_tokens"], v["output_tokens"], v["prefix_hit_percent"] / 100
    p, d = pool_sizes(rate, isl, osl, hit, s["ptps"], s["dtps"], pg, dg)
    np_, nd = max(1, math.ceil(p - 1e-9)), max(1, math.ceil(d - 1e-9))
    total = np_ * pg + nd * dg
    out = {
        "prefill_replicas": np_, "decode_replicas": nd, "prefill_replicas_exact": p, "decode_replicas_exact": d,
        "total_gpus": total, "total_gpus_exact": p * pg + d * dg,
        "total_nodes_exact": (p * pg + d * dg) / v["gpus_per_node"],
        "prefill_gpu_share": np_ * pg / total, "prefill_to_decode_gpus": np_ * pg / (nd * dg),
        "prefill_tokens_per_s_per_gpu": s["ptps"], "decode_tokens_per_s_per_gpu": s["dtps"],
        "decode_batch": s["batch"], "decode_step_s": s["dstep"], "decode_batch_kv_limit": s["kv_limit"],
        "prefill_s": s["busy"], "prefill_utilisation": p / np_, "meets_ttft": int(s["busy"] <= v["ttft_slo_s"]),
    }
    out["notes"] = []
    if v["throughput_source"] == "measured":
        out["notes"].append("measured throughputs: the step model's decode batch, step and prefill times are not "
                            "computed (shown as 0)")
    elif not out["meets_ttft"]:
        out["notes"].append("one prompt's prefill alone exceeds the TTFT target: more GPUs per prefill replica "
                            "(tensor parallel) or a shorter prompt, not more replicas")
    if out["prefill_utilisation"] > 0.8:
        out["notes"].append("the prefill pool runs above 80% busy: queueing will add to TTFT (simulate it)")
    out["derivation"] = _derivation(v, s, p, d)
    rates = [rate * k for k in RATE_GRID]
    pairs = [pool_sizes(r, isl, osl, hit, s["ptps"], s["dtps"], pg, dg) for r in rates]
    plot = series("Replicas against request rate", "Request rate", "requests/s", rates,
                  [("Prefill replicas", "replicas", [max(1, math.ceil(a - 1e-9)) for a, _ in pairs]),
                   ("Decode replicas", "replicas", [max(1, math.ceil(b - 1e-9)) for _, b in pairs])], log_axes=True)
    out["series"] = {"replicas_vs_rate": mark(plot, "request_rate_per_s", rate)}
    return out


def _derivation(v: dict, s: dict, p: float, d: float) -> list[dict]:
    pg, dg, rate = v["num_gpus"], v["decode_gpus"], v["request_rate_per_s"]
    isl, osl, hit = v["input_tokens"], v["output_tokens"], v["prefix_hit_percent"] / 100
    sized = [
        step("Prefill replicas (Dynamo)", "rate × ISL × (1 − h) ÷ thpt ÷ GPUs", "{} × {} × (1 − {}) ÷ {} ÷ {}",
             [(rate, "requests/s"), (isl, "tokens"), hit, (s["ptps"], "tokens/s"), pg], p, "replicas"),
        step("Decode replicas (Dynamo)", "rate × OSL ÷ thpt ÷ GPUs", "{} × {} ÷ {} ÷ {}",
             [(rate, "requests/s"), (osl, "tokens"), (s["dtps"], "tokens/s"), dg], d, "replicas"),
    ]
    if v["throughput_source"] == "measured":
        return sized
    return [
        step("Prefill throughput per GPU", "ISL × (1 − h) ÷ prefill time ÷ GPUs", "{} × (1 − {}) ÷ {} ÷ {}",
             [(isl, "tokens"), hit, (s["busy"], "s"), pg], s["ptps"], "tokens/s"),
        step("Decode batch meeting the ITL target", "largest B: step(B, ISL + OSL/2) ≤ ITL, KV fits",
             "B at context {}", [(s["context"], "tokens")], s["batch"], "sequences"),
        step("Decode throughput per GPU", "B ÷ step ÷ GPUs", "{} ÷ {} ÷ {}",
             [s["batch"], (s["dstep"], "s"), dg], s["dtps"], "tokens/s"),
        *sized,
    ]
