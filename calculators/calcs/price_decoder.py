"""Price-sheet decoder: an API's prices per million input, cached-input and output tokens, read backwards into
the operating point they imply on given hardware at a given GPU-hour price.

  revenue per task   = (uncached × $in + cached × $cached + output × $out) ÷ 10^6
  break-even rate    = (USD/GPU-h ÷ 3600) ÷ revenue per task                 (tasks/s each GPU must serve)
  tasks/s at batch B = 1 ÷ (prefill + (output − 1) × step(B) ÷ B) ÷ GPUs per replica

(the replica of the capacity plan: prefill first, KV reserved for the whole request). The break-even batch is
the smallest B whose tasks/s per GPU reaches the break-even rate; at the reader's batch, cost per task =
(USD/GPU-h ÷ 3600) ÷ tasks/s per GPU, margin = 1 − cost ÷ revenue, and DeepSeek's "cost profit margin" =
revenue ÷ cost − 1.
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..schema import integer, mark, number, output, series, step
from .capacity_plan import tpot_at
from .deployment import deployment_fields, efficiency_steps
from .engine_defaults import vllm_max_num_seqs
from .memory import engine_fields, kv_pool_tokens, sequence_pool_tokens
from .steptime import StepModel, deployment
from .sharding import steps_for

SCHEMA = {
    "name": "price_decoder",
    "title": "Price-sheet decoder: what an API price implies",
    "description": (
        "Reads an API price sheet backwards. The revenue one task brings (its uncached and cached prompt tokens "
        "and its output, each at its own price) against the price of a GPU-hour gives the tasks per second each "
        "GPU must serve to break even; the step-time model of one replica (prefill first, KV reserved for the "
        "whole request, as the capacity plan) gives the batch that serves them and the TPOT a user then sees; "
        "at the batch you enter it gives the cost per task and the margin. Kernel and launch time only: no "
        "idle hours, no network, tokenisation or scheduler overhead, no staff or datacentre cost, so the margin "
        "is an upper bound at that batch."
    ),
    "inputs": deployment_fields(0.8, 0.6)
    + [
        number(
            "usd_per_million_input",
            "Price per million input tokens (cache miss)",
            0.55,
            0.0,
            10_000.0,
            "USD",
            "DeepSeek-R1's price as quoted in DeepSeek's Day-6 report (2025-02-28): $0.55.",
        ),
        number(
            "usd_per_million_cached_input",
            "Price per million cached input tokens (cache hit)",
            0.14,
            0.0,
            10_000.0,
            "USD",
            "DeepSeek-R1, same report: $0.14.",
        ),
        number(
            "usd_per_million_output",
            "Price per million output tokens",
            2.19,
            0.0,
            10_000.0,
            "USD",
            "DeepSeek-R1, same report: $2.19.",
        ),
        integer("input_tokens", "Prompt tokens per task", 2000, 1, 1_000_000, "tokens"),
        number("cached_share", "Share of prompt tokens cached", 0.5, 0.0, 0.99, "", "", 0.01),
        integer("output_tokens", "Output tokens per task", 400, 2, 1_000_000, "tokens"),
        number(
            "usd_per_gpu_hour",
            "Price per GPU-hour",
            2.0,
            0.01,
            1000.0,
            "USD",
            "DeepSeek's Day-6 costing assumes $2 per H800-hour.",
        ),
        integer("batch_size", "Your estimate of the batch the provider runs", 64, 1, 100_000, "sequences"),
    ]
    + engine_fields(),
    "outputs": [
        output("revenue_per_task", "Revenue per task", "USD", "usd"),
        output("break_even_tasks_per_s_per_gpu", "Tasks/s each GPU must serve to break even", "requests/s", "rate"),
        output("break_even_output_tokens_per_s_per_gpu", "Output tokens/s per GPU to break even", "tokens/s", "rate"),
        output(
            "break_even_batch", "Smallest batch that breaks even", "sequences", "integer", words={0: "none that fits"}
        ),
        output("break_even_tpot_s", "TPOT at the break-even batch", "s", "seconds", words={0: "n/a"}),
        output("tasks_per_s_per_gpu", "At your batch: tasks/s per GPU", "requests/s", "rate"),
        output("output_tokens_per_s_per_gpu", "At your batch: output tokens/s per GPU", "tokens/s", "rate"),
        output("tpot_s", "At your batch: TPOT, prefill stalls included", "s", "seconds"),
        output("cost_per_task", "At your batch: cost per task", "USD", "usd"),
        output("margin", "At your batch: margin (1 − cost ÷ revenue)", "", "percent"),
        output(
            "cost_profit_margin",
            "At your batch: cost profit margin (revenue ÷ cost − 1), as DeepSeek states it",
            "",
            "percent",
        ),
        output("max_batch", "Largest batch whose KV fits (and vLLM's max_num_seqs allows)", "sequences", "integer"),
    ],
}


def revenue(uncached: float, cached: float, out: float, sheet: tuple[float, float, float]) -> float:
    """USD for these tokens at a sheet of (USD per M input, per M cached input, per M output)."""
    return (uncached * sheet[0] + cached * sheet[1] + out * sheet[2]) / 1e6


class Replica:
    """Tasks/s per GPU and TPOT of one replica at a batch (the capacity plan's saturated server)."""

    def __init__(self, v: dict, steps: StepModel, uncached: int):
        self.steps, self.out, self.gpus = steps, v["output_tokens"], v["num_gpus"]
        self.context = v["input_tokens"] + self.out / 2
        self.prefill_s = steps.prefill_time([uncached])

    def tpot(self, b: int) -> float:
        return tpot_at(self.steps, b, self.context, self.prefill_s, self.out)

    def tasks_per_s_per_gpu(self, b: int) -> float:
        return b / (self.tpot(b) * (self.out - 1)) / self.gpus


def break_even_batch(rep: Replica, need: float, most: int) -> int:
    """The smallest batch up to `most` whose tasks/s per GPU reach `need` (0: none does). Throughput rises
    with the batch (step(B) ÷ B falls) towards the prefill-bound limit 1 ÷ prefill: bisect on it."""
    if most < 1 or rep.tasks_per_s_per_gpu(most) < need:
        return 0
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if rep.tasks_per_s_per_gpu(mid) >= need else (mid + 1, hi)
    return lo


def _most(v: dict) -> int:
    """The largest batch whose KV fits one replica and vLLM's max_num_seqs allows; the batch entered checked."""
    held = sequence_pool_tokens(v, v["input_tokens"] + v["output_tokens"])
    most = min(int(kv_pool_tokens(v) // held), vllm_max_num_seqs(v["hardware"]))
    if most < 1:
        raise InputError("input_tokens", "prompt + output must fit the KV pool of one replica: none does")
    if v["batch_size"] > most:
        raise InputError(
            "batch_size",
            f"must be from 1 to {most:,} sequences: the most whose KV fits one replica and vLLM's max_num_seqs allows",
        )
    return most


def _outputs(v: dict, rep: Replica, earn: float, most: int) -> dict:
    per_gpu_s = v["usd_per_gpu_hour"] / 3600
    need = per_gpu_s / earn
    be = break_even_batch(rep, need, most)
    rate = rep.tasks_per_s_per_gpu(v["batch_size"])
    cost = per_gpu_s / rate
    return {
        "revenue_per_task": earn,
        "break_even_tasks_per_s_per_gpu": need,
        "break_even_output_tokens_per_s_per_gpu": need * v["output_tokens"],
        "break_even_batch": be,
        "break_even_tpot_s": rep.tpot(be) if be else 0.0,
        "tasks_per_s_per_gpu": rate,
        "output_tokens_per_s_per_gpu": rate * v["output_tokens"],
        "tpot_s": rep.tpot(v["batch_size"]),
        "cost_per_task": cost,
        "margin": 1 - cost / earn,
        "cost_profit_margin": earn / cost - 1,
        "max_batch": most,
    }


def compute(v: dict) -> dict:
    dep = deployment(v)
    cached = round(v["input_tokens"] * v["cached_share"])
    uncached = max(1, v["input_tokens"] - cached)
    most = _most(v)
    sheet = (v["usd_per_million_input"], v["usd_per_million_cached_input"], v["usd_per_million_output"])
    earn = revenue(uncached, cached, v["output_tokens"], sheet)
    if earn <= 0:
        raise InputError("usd_per_million_output", "some price must be above 0: a free sheet has no break-even")
    rep = Replica(v, steps_for(v, dep), uncached)
    out = _outputs(v, rep, earn, most)
    notes = (
        [] if out["break_even_batch"] else [f"no batch up to {most:,} breaks even at this price sheet on this hardware"]
    )
    return dict(
        out,
        notes=notes,
        derivation=efficiency_steps(dep) + _sheet_steps(v, out, uncached, cached, sheet) + _batch_steps(v, rep, out),
        series={"margin_vs_batch": _sweep(rep, earn, v["usd_per_gpu_hour"] / 3600, most, v["batch_size"])},
    )


def _sweep(rep: Replica, earn: float, per_gpu_s: float, most: int, b: int) -> dict:
    batches = sorted({2**k for k in range(int(math.log2(most)) + 1)} | {most, b})
    margins = [100 * (1 - per_gpu_s / rep.tasks_per_s_per_gpu(x) / earn) for x in batches]
    plot = series(
        "Margin vs batch at this price sheet",
        "Batch",
        "sequences",
        batches,
        [("margin", "%", margins), ("TPOT", "s", [rep.tpot(x) for x in batches])],
    )
    return mark(plot, "batch_size", b, name=f"yours (batch {b:,})")


def _sheet_steps(v: dict, out: dict, uncached: int, cached: int, sheet: tuple) -> list[dict]:
    return [
        step(
            "Revenue per task",
            "(uncached × $in + cached × $cached + output × $out) ÷ 10^6",
            "({} × {} + {} × {} + {} × {}) ÷ 10^6",
            [uncached, (sheet[0], "USD"), cached, (sheet[1], "USD"), v["output_tokens"], (sheet[2], "USD")],
            out["revenue_per_task"],
            "USD",
        ),
        step(
            "Break-even tasks/s per GPU",
            "(USD/GPU-h ÷ 3600) ÷ revenue per task",
            "({} ÷ 3600) ÷ {}",
            [(v["usd_per_gpu_hour"], "USD/GPU-h"), (out["revenue_per_task"], "USD")],
            out["break_even_tasks_per_s_per_gpu"],
            "requests/s",
        ),
    ]


def _batch_steps(v: dict, rep: Replica, out: dict) -> list[dict]:
    b = v["batch_size"]
    return [
        step(
            "Break-even batch",
            "smallest B with B ÷ (TPOT(B) × (output − 1)) ÷ GPUs ≥ break-even rate",
            "B ≤ {}",
            [out["max_batch"]],
            out["break_even_batch"],
            "sequences",
        ),
        step(
            "Tasks/s per GPU at your batch",
            "B ÷ ((step(B) + B × prefill ÷ (output − 1)) × (output − 1)) ÷ GPUs",
            "{} ÷ (({} + {} × {} ÷ {}) × {}) ÷ {}",
            [
                b,
                (rep.steps.decode_time(b, rep.context), "s"),
                b,
                (rep.prefill_s, "s"),
                v["output_tokens"] - 1,
                v["output_tokens"] - 1,
                v["num_gpus"],
            ],
            out["tasks_per_s_per_gpu"],
            "requests/s",
        ),
        step(
            "Margin at your batch",
            "1 − (USD/GPU-h ÷ 3600 ÷ tasks/s per GPU) ÷ revenue",
            "1 − {} ÷ {}",
            [(out["cost_per_task"], "USD"), (out["revenue_per_task"], "USD")],
            out["margin"],
            "share",
        ),
    ]
