"""Capacity plan: peak traffic → one replica's capacity at the TPOT target → replicas with headroom → GPUs →
USD per month, and what a task costs, its input and its output priced apart.

One replica (its GPUs a tensor-parallel group) runs the goodput calculator's server: prefill first, KV for the
whole request reserved on admission. Saturated with B sequences each generating `out` tokens, on average
B ÷ (out − 1) new requests join per decode step, and each stalls the batch for its prefill, so

  TPOT(B)     = decode step(B, mean context) + B × prefill ÷ (out − 1)
  server time = prefill + (out − 1) × step(B) ÷ B = TPOT(B) × (out − 1) ÷ B    (per request, saturated)
  capacity    = 1 ÷ server time                                                  (requests/s per replica)

B is the largest batch with TPOT(B) within the target that also fits the KV pool and vLLM's max_num_seqs.
Cached prompt tokens skip prefill (their KV is read, not recomputed: a prefix-cache hit) but still occupy
KV and are still read by every decode step. Cost per task = the monthly bill ÷ tasks served in the month at
the average rate; it splits between input and output by the server time each takes.
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..schema import integer, mark, number, output, series, step
from .cost import HOURS_PER_MONTH, gpu_hour_field
from .deployment import deployment_fields, efficiency_steps
from .engine_defaults import vllm_max_num_seqs
from .memory import engine_fields, kv_pool_tokens, sequence_pool_tokens
from .steptime import StepModel, deployment
from .sharding import steps_for

SWEEP = (0.25, 0.5, 1.0, 2.0, 4.0)  # peak rates plotted, × the reader's

SCHEMA = {
    "name": "capacity_plan",
    "title": "Capacity plan: requests/s to GPUs to dollars",
    "description": (
        "From peak traffic to a monthly bill. One replica (its GPUs one tensor-parallel group) serves at the "
        "largest batch whose TPOT, decode step plus the prefill stalls of the requests joining, stays within the "
        "target and whose KV fits; its capacity is 1 ÷ the server time per request at that batch. Replicas = "
        "peak × (1 + headroom) ÷ capacity, rounded up. Cached prompt tokens skip prefill but keep their KV. "
        "Cost per task = the month's bill ÷ the tasks served at the average rate, split between input and output "
        "by the server time each takes. No queueing model (a rate below capacity is taken to meet TTFT), no "
        "network, tokenisation or scheduler overhead, no preemption: a plan to check with the goodput simulator."
    ),
    "inputs": deployment_fields(0.8, 0.6)
    + [
        number("peak_requests_per_s", "Peak traffic", 20.0, 0.001, 1e7, "requests/s"),
        number(
            "average_to_peak",
            "Average traffic ÷ peak",
            0.5,
            0.01,
            1.0,
            "",
            "The month's mean rate over the peak you provision for. DeepSeek's Day-6 report: 226.75 nodes "
            "on average against a peak of 278 (0.82).",
            0.01,
        ),
        integer("input_tokens", "Prompt tokens per task", 2000, 1, 1_000_000, "tokens"),
        number(
            "cached_share",
            "Share of prompt tokens cached",
            0.5,
            0.0,
            0.99,
            "",
            "Prompt tokens found in the prefix cache (DeepSeek Day 6: 56.3% hit the on-disk cache).",
            0.01,
        ),
        integer("output_tokens", "Output tokens per task", 400, 2, 1_000_000, "tokens"),
        number("tpot_slo_s", "TPOT target", 0.05, 0.0001, 60.0, "s", "0.05 s is 20 tokens/s per user."),
        number("headroom", "Headroom", 0.3, 0.0, 10.0, "", "Spare capacity above the peak, as a share of it.", 0.05),
        gpu_hour_field(),
    ]
    + engine_fields(),
    "outputs": [
        output("batch", "Batch one replica runs at the target", "sequences", "integer", words={0: "none"}),
        output("tpot_s", "TPOT at that batch, prefill stalls included", "s", "seconds"),
        output("capacity_requests_per_s", "Capacity of one replica within the TPOT target", "requests/s", "rate"),
        output("replicas", "Replicas for peak × (1 + headroom)", "replicas", "integer", words={0: "none"}),
        output("gpus", "GPUs", "GPUs", "integer", words={0: "none"}),
        output("usd_per_month", "Cost per month", "USD", "usd"),
        output("average_utilisation", "Average load ÷ capacity bought", "", "percent"),
        output("usd_per_task", "Cost per task (bill ÷ tasks served)", "USD", "usd"),
        output("input_share_of_cost", "Share of a task's cost that is prefill", "", "percent"),
        output("usd_per_million_input_tokens", "Cost per million uncached prompt tokens", "USD", "usd"),
        output("usd_per_million_output_tokens", "Cost per million output tokens", "USD", "usd"),
        output(
            "usd_per_task_uncached",
            "Cost per task with no prompt cached (same replicas)",
            "USD",
            "usd",
            words={0: "no batch meets the target"},
        ),
        output("kv_pool_tokens", "KV pool of one replica", "tokens", "integer"),
    ],
}


def tpot_at(steps: StepModel, batch: int, context: float, prefill_s: float, out: int) -> float:
    """TPOT of a saturated prefill-first replica: the decode step plus the prefills that join per step."""
    return steps.decode_time(batch, context) + batch * prefill_s / (out - 1)


def slo_batch(steps: StepModel, most: int, context: float, prefill_s: float, out: int, slo: float) -> int:
    """The largest batch up to `most` whose TPOT (tpot_at) is within `slo`; 0 when not even one is."""
    if most < 1 or tpot_at(steps, 1, context, prefill_s, out) > slo:
        return 0
    lo, hi = 1, most  # TPOT grows with the batch: bisect
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if tpot_at(steps, mid, context, prefill_s, out) <= slo else (lo, mid - 1)
    return lo


def replica(v: dict, steps: StepModel, uncached: int) -> dict:
    """One replica at the TPOT target: batch, TPOT, prefill time, server time per request, capacity."""
    out, total = v["output_tokens"], v["input_tokens"] + v["output_tokens"]
    pool = kv_pool_tokens(v)
    fits = int(pool // sequence_pool_tokens(v, total))  # windowed layers hold only their window, plus any state
    most = min(fits, vllm_max_num_seqs(v["hardware"]))
    context = v["input_tokens"] + out / 2  # mean context over the generation, as latency.py
    prefill_s = steps.prefill_time([uncached])
    b = slo_batch(steps, most, context, prefill_s, out, v["tpot_slo_s"])
    tpot = tpot_at(steps, max(b, 1), context, prefill_s, out)
    service = tpot * (out - 1) / b if b else math.inf
    return {
        "batch": b,
        "tpot": tpot,
        "prefill_s": prefill_s,
        "service_s": service,
        "fits": fits,
        "pool": pool,
        "capacity": 1 / service if b else 0.0,
        "context": context,
    }


def replicas_for(rate: float, headroom: float, capacity: float) -> int:
    return math.ceil(rate * (1 + headroom) / capacity - 1e-9) if capacity else 0


def _uncached(v: dict) -> int:
    return max(1, round(v["input_tokens"] * (1 - v["cached_share"])))


def _check(v: dict, rep: dict) -> None:
    if rep["fits"] < 1:
        raise InputError(
            "num_gpus",
            f"one request of {v['input_tokens'] + v['output_tokens']:,} tokens must fit the "
            f"KV pool of one replica ({rep['pool']:,.0f} tokens): add GPUs",
        )
    if not rep["batch"]:
        raise InputError(
            "tpot_slo_s",
            f"no batch meets it on one replica of {v['num_gpus']} GPUs: one sequence's TPOT "
            f"({rep['tpot']:.3g} s) already exceeds the target",
        )


def _plan(v: dict, rep: dict, whole: dict, uncached: int) -> dict:
    """The outputs: replicas, GPUs, the bill, and the cost per task split by server time."""
    n = replicas_for(v["peak_requests_per_s"], v["headroom"], rep["capacity"])
    month = n * v["num_gpus"] * v["usd_per_gpu_hour"] * HOURS_PER_MONTH
    average = v["peak_requests_per_s"] * v["average_to_peak"]
    task = month / (average * HOURS_PER_MONTH * 3600)
    share = rep["prefill_s"] / rep["service_s"]
    return {
        "batch": rep["batch"],
        "tpot_s": rep["tpot"],
        "capacity_requests_per_s": rep["capacity"],
        "replicas": n,
        "gpus": n * v["num_gpus"],
        "usd_per_month": month,
        "average_utilisation": average / (n * rep["capacity"]),
        "usd_per_task": task,
        "input_share_of_cost": share,
        "usd_per_million_input_tokens": task * share / uncached * 1e6,
        "usd_per_million_output_tokens": task * (1 - share) / v["output_tokens"] * 1e6,
        "usd_per_task_uncached": task * whole["service_s"] / rep["service_s"] if whole["batch"] else 0.0,
        "kv_pool_tokens": rep["pool"],
    }


def compute(v: dict) -> dict:
    dep = deployment(v)
    steps = steps_for(v, dep)
    uncached = _uncached(v)
    rep = replica(v, steps, uncached)
    _check(v, rep)
    # the same replicas with nothing cached: each request's prefill covers its whole prompt
    whole = replica(v, steps, v["input_tokens"])
    out = _plan(v, rep, whole, uncached)
    average = v["peak_requests_per_s"] * v["average_to_peak"]
    carried = whole["batch"] and average * whole["service_s"] < out["replicas"]
    notes = (
        []
        if carried
        else [
            "with nothing cached the same replicas could not carry the average load: "
            "the uncached cost per task assumes they could"
        ]
    )
    return dict(
        out,
        notes=notes,
        derivation=efficiency_steps(dep)
        + _prefill_steps(v, rep, uncached)
        + _replica_steps(v, rep)
        + _cost_steps(v, rep, out, average),
        series={"cost_vs_peak": _sweep(v, rep)},
    )


def _sweep(v: dict, rep: dict) -> dict:
    peak = v["peak_requests_per_s"]
    rates = [peak * k for k in SWEEP]
    gpus = [replicas_for(r, v["headroom"], rep["capacity"]) * v["num_gpus"] for r in rates]
    plot = series(
        "GPUs and monthly cost vs peak traffic",
        "Peak traffic",
        "requests/s",
        rates,
        [
            ("GPUs", "GPUs", gpus),
            ("cost per month", "USD", [g * v["usd_per_gpu_hour"] * HOURS_PER_MONTH for g in gpus]),
        ],
    )
    return mark(plot, "peak_requests_per_s", peak, name=f"yours ({peak:,g} requests/s)")


def _prefill_steps(v: dict, rep: dict, uncached: int) -> list[dict]:
    return [
        step(
            "Prompt tokens to prefill",
            "prompt × (1 − cached share)",
            "{} × (1 − {})",
            [v["input_tokens"], v["cached_share"]],
            uncached,
            "tokens",
        ),
        step(
            "Prefill of one request",
            "prefill step of the uncached tokens",
            "prefill({})",
            [uncached],
            rep["prefill_s"],
            "s",
        ),
    ]


def _replica_steps(v: dict, rep: dict) -> list[dict]:
    o, b = v["output_tokens"], rep["batch"]
    return [
        step(
            "Batch within the TPOT target",
            "largest B ≤ min(KV pool ÷ (prompt + output, windowed layers' share capped at the window, plus a "
            "hybrid's state), max_num_seqs) with "
            "step(B) + B × prefill ÷ (output − 1) ≤ target",
            "B ≤ {}, target {}",
            [min(rep["fits"], vllm_max_num_seqs(v["hardware"])), (v["tpot_slo_s"], "s")],
            b,
            "sequences",
        ),
        step(
            "TPOT at that batch",
            "step(B, context) + B × prefill ÷ (output − 1)",
            "step({}, {}) + {} × {} ÷ {}",
            [b, rep["context"], b, (rep["prefill_s"], "s"), o - 1],
            rep["tpot"],
            "s",
        ),
        step(
            "Capacity of one replica",
            "B ÷ (TPOT × (output − 1))",
            "{} ÷ ({} × {})",
            [b, (rep["tpot"], "s"), o - 1],
            rep["capacity"],
            "requests/s",
        ),
    ]


def _cost_steps(v: dict, rep: dict, out: dict, average: float) -> list[dict]:
    price = (v["usd_per_gpu_hour"], "USD/GPU-h")
    return [
        step(
            "Replicas",
            "⌈peak × (1 + headroom) ÷ capacity⌉",
            "⌈{} × (1 + {}) ÷ {}⌉",
            [(v["peak_requests_per_s"], "requests/s"), v["headroom"], (rep["capacity"], "requests/s")],
            out["replicas"],
            "replicas",
        ),
        step(
            "Cost per month",
            "replicas × GPUs per replica × USD/GPU-h × 730 h",
            "{} × {} × {} × 730",
            [out["replicas"], v["num_gpus"], price],
            out["usd_per_month"],
            "USD",
        ),
        step(
            "Cost per task",
            "cost per month ÷ (average rate × 730 h × 3600 s)",
            "{} ÷ ({} × 730 × 3600)",
            [(out["usd_per_month"], "USD"), (average, "requests/s")],
            out["usd_per_task"],
            "USD",
        ),
        step(
            "Prefill's share of a task",
            "prefill ÷ server time per request",
            "{} ÷ {}",
            [(rep["prefill_s"], "s"), (rep["service_s"], "s")],
            out["input_share_of_cost"],
            "share",
        ),
    ]
