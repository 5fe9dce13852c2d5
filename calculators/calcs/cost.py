"""Serving cost: USD per million tokens, per task, per month, and energy per token.

  USD per M tokens = (USD/GPU-h × N_gpu) ÷ (tokens/s × 3600) × 10^6     (hourly price over tokens per hour)
  Check: DeepSeek Day 6 (open-infra-index), $2/GPU-h × 8 H800 at 14.8k output tok/s per node → $0.30/M.
With a workload shape (workload_shape.py) a task's tokens are the shape's totals: input read over its turns,
the part of it the prefix cache serves (no prefill, so not priced by the input rate), the rest priced as
input, and output + thinking priced as output; demand is then tasks per second.
"""
from __future__ import annotations

import math

from ..errors import InputError
from ..schema import choice, integer, number, output, step
from .workload_shape import shape_fields, shape_of, totals

HOURS_PER_MONTH = 730.0   # 8,760 h per year ÷ 12


def gpu_hour_field(help_text: str = "") -> dict:
    """The price-per-GPU-hour input every costing calculator takes ($2 by default, DeepSeek's Day-6 figure)."""
    return number("usd_per_gpu_hour", "Price per GPU-hour", 2.0, 0.0, 1000.0, "USD", help_text)


def usd_per_million(usd_per_gpu_hour: float, num_gpus: int, tokens_per_s: float) -> float:
    return usd_per_gpu_hour * num_gpus / (tokens_per_s * 3600) * 1e6


def gpus_needed(tokens_per_s_demand: float, tokens_per_s_per_gpu: float, headroom: float, replica: int = 1) -> int:
    """GPUs to carry a demand with a fraction of spare capacity (headroom 0.3 = 30% spare), in whole
    replicas of `replica` GPUs each (a 70B BF16 replica needs at least 2 H100s to hold its weights)."""
    per_replica = tokens_per_s_per_gpu * replica
    return replica * max(1, math.ceil(tokens_per_s_demand * (1 + headroom) / per_replica - 1e-9))


SCENARIOS = {"offline": "Offline: no latency bound, so GPUs needed is a lower bound for interactive demand",
             "latency-bounded": "measured under a latency bound (MLPerf Server or Interactive, or your SLO)"}


MIN_RATE = 0.001  # tokens/s: the output rate's floor, and the input rate's when priced, so costs stay finite

SCHEMA = {
    "name": "cost",
    "title": "Cost per token, per task and per month",
    "description": ("Turns a measured or estimated throughput into dollars and joules. Output and input "
                    "rates are each taken as what the whole deployment sustains doing only that phase "
                    "(as in DeepSeek's disaggregated Day-6 report); leave the input rate at 0 to fold "
                    "prefill cost into the output rate. GPUs come in whole replicas. The rate carries the "
                    "length mix it was measured on; the tokens per task here only count tokens, they do not "
                    "re-measure it. Energy is an estimate: the power you enter × GPUs ÷ rate, accelerators only."),
    "inputs": [
        gpu_hour_field("DeepSeek's Day-6 costing uses $2/GPU-h for H800."),
        integer("num_gpus", "GPUs in the deployment", 8, 1, 100_000, "GPUs"),
        number("output_tokens_per_s", "Output throughput (whole deployment)", 14_800.0, MIN_RATE, 1e9, "tokens/s"),
        number("input_tokens_per_s", "Input (prefill) throughput, optional", 0.0, 0.0, 1e10, "tokens/s",
                 "0 = not priced separately."),
        integer("input_tokens_per_task", "Input tokens per task", 2000, 0, 10_000_000, "tokens"),
        integer("output_tokens_per_task", "Output tokens per task", 500, 0, 10_000_000, "tokens"),
        integer("reasoning_tokens_per_task", "Reasoning tokens per task", 0, 0, 10_000_000, "tokens",
                  "Generated but hidden; billed and timed like output."),
        number("requests_per_s", "Demand", 10.0, 0.0, 1e7, "requests/s"),
        number("headroom_fraction", "Headroom", 0.3, 0.0, 10.0, "", "Spare capacity for peaks.", 0.05),
        integer("gpus_per_replica", "GPUs per replica", 8, 1, 100_000, "GPUs",
                "The smallest unit that serves on its own (its TP × PP group). Capacity is bought in "
                "replicas; the rate per GPU is assumed to hold at this replica size."),
        choice("rate_scenario", "How the rate was measured", "offline", list(SCENARIOS.items()),
               "An Offline rate (MLPerf Offline) has no latency bound: interactive serving gets less from the "
               "same GPUs."),
        number("power_watts_per_gpu", "Power per GPU", 700.0, 1.0, 100_000.0, "W",
                 "Board power (TDP) is the ceiling of draw, not the draw: H100/H200 SXM 700 W (NVIDIA H100 "
                 "datasheet; MLPerf v4.1 'H200 TGP 700W'). Enter measured power where you have it."),
    ] + shape_fields("A named task: its tokens replace the three per-task counts above (input read over its "
                     "turns, less what the prefix cache serves, which skips prefill and is not priced; output "
                     "and thinking as output), and the demand is tasks per second."),
    "outputs": [
        output("usd_per_million_output_tokens", "Cost per million output tokens", "USD", "usd"),
        output("usd_per_million_input_tokens", "Cost per million input tokens", "USD", "usd",
               words={0: "not priced"}),
        output("usd_per_task", "Cost per task", "USD", "usd"),
        output("tokens_read_per_task", "Input tokens read per task", "tokens", "integer"),
        output("tokens_cached_per_task", "… served by the prefix cache (no prefill: not priced)", "tokens", "integer"),
        output("usd_per_hour", "Deployment cost per hour", "USD", "usd"),
        output("output_tokens_per_s_per_gpu", "Output tokens/s per GPU", "tokens/s", "rate"),
        output("gpus_needed", "GPUs needed for the demand (whole replicas; a lower bound if the rate is Offline)",
               "GPUs", "integer"),
        output("usd_per_month", "Cost per month for the demand", "USD", "usd"),
        output("joules_per_output_token", "Energy per output token (estimate at the power entered)", "J", "number"),
        output("kwh_per_million_output_tokens", "Energy per million output tokens (estimate)", "kWh", "number"),
    ],
}


def _check(v: dict) -> None:
    if 0 < v["input_tokens_per_s"] < MIN_RATE:
        raise InputError("input_tokens_per_s", f"must be 0 (not priced separately) or a number from {MIN_RATE} "
                                               "to 10,000,000,000 tokens/s")
    if v["gpus_per_replica"] > v["num_gpus"]:
        raise InputError("gpus_per_replica", f"must be at most the {v['num_gpus']} GPUs the rate was measured on")


def _gpus(v: dict, generated: int) -> tuple[int, int]:
    """(GPUs for the output phase, GPUs for prefill when it is priced separately), in whole replicas."""
    n, rep, headroom, demand = v["num_gpus"], v["gpus_per_replica"], v["headroom_fraction"], v["requests_per_s"]
    in_rate, in_tokens = v["input_tokens_per_s"], v["input_tokens_per_task"]
    out_gpus = gpus_needed(demand * generated, v["output_tokens_per_s"] / n, headroom, rep) if generated else 0
    in_gpus = gpus_needed(demand * in_tokens, in_rate / n, headroom, rep) if in_rate > 0 and in_tokens else 0
    return out_gpus, in_gpus


def _gpus_step(v: dict, generated: int, in_gpus: int, gpus: int) -> dict:
    n, rep = v["num_gpus"], v["gpus_per_replica"]
    template = "{} × ⌈{} × {} × (1 + {}) ÷ ({} × {})⌉" + (" + {} for prefill" if in_gpus else "") + "; rate {}"
    terms = [rep, (v["requests_per_s"], "requests/s"), generated, v["headroom_fraction"],
             (v["output_tokens_per_s"] / n, "tokens/s"), rep] + ([in_gpus] if in_gpus else [])
    # the last term is text: how the rate was measured, which decides whether the count is a lower bound
    return step("GPUs for the demand", "replica × ⌈requests/s × tokens per task × (1 + headroom) ÷ "
                "(tokens/s per GPU × replica)⌉", template, terms + [SCENARIOS[v["rate_scenario"]]], gpus, "GPUs")


def _derivation(v: dict, out: dict, generated: int, in_gpus: int) -> list[dict]:
    price, n, in_rate = (v["usd_per_gpu_hour"], "USD/GPU-h"), v["num_gpus"], v["input_tokens_per_s"]
    per_m_out, per_m_in = out["usd_per_million_output_tokens"], out["usd_per_million_input_tokens"]
    return [
        step("Cost per million output tokens", "(USD/GPU-h × N_gpu) ÷ (tokens/s × 3600) × 10^6",
             "({} × {}) ÷ ({} × 3600) × 10^6", [price, n, (v["output_tokens_per_s"], "tokens/s")], per_m_out, "USD"),
        step("Cost per million input tokens", "(USD/GPU-h × N_gpu) ÷ (input tokens/s × 3600) × 10^6",
             "({} × {}) ÷ ({} × 3600) × 10^6" if in_rate > 0 else "not priced",
             [price, n, (in_rate, "tokens/s")] if in_rate > 0 else [], per_m_in, "USD"),
        step("Cost per task", "(output + reasoning) × $/M_out ÷ 10^6 + input × $/M_in ÷ 10^6",
             "{} × {} ÷ 10^6 + {} × {} ÷ 10^6",
             [generated, (per_m_out, "USD"), v["input_tokens_per_task"], (per_m_in, "USD")], out["usd_per_task"],
             "USD"),
        _gpus_step(v, generated, in_gpus, out["gpus_needed"]),
        step("Cost per month", "GPUs × USD/GPU-h × 730 h", "{} × {} × 730", [out["gpus_needed"], price],
             out["usd_per_month"], "USD"),
        step("Energy per output token", "W per GPU × N_gpu ÷ tokens/s", "{} × {} ÷ {}",
             [(v["power_watts_per_gpu"], "W"), n, (v["output_tokens_per_s"], "tokens/s")],
             out["joules_per_output_token"], "J"),
    ]


def with_shape(v: dict) -> tuple[dict, int, int]:
    """(inputs, input tokens read per task, of them cached): a shape's totals in place of the per-task
    counts (input = the uncached part; output + thinking), or the inputs as they are (nothing cached)."""
    shape = shape_of(v)
    if shape is None:
        return v, v["input_tokens_per_task"], 0
    tot = totals(shape)
    counts = {"input_tokens_per_task": tot.prefilled, "output_tokens_per_task": tot.decoded - tot.thinking,
              "reasoning_tokens_per_task": tot.thinking}
    return dict(v, **counts), tot.prompt, tot.cached


def _shape_step(v: dict, read: int, cached: int) -> list[dict]:
    if shape_of(v) is None:
        return []
    return [step("Input priced per task (shape)", "input read − served by the prefix cache", "{} − {}",
                 [(read, "tokens"), (cached, "tokens")], v["input_tokens_per_task"], "tokens")]


def compute(v: dict) -> dict:
    _check(v)
    v, read, cached = with_shape(v)
    price, n = v["usd_per_gpu_hour"], v["num_gpus"]
    out_rate, in_rate = v["output_tokens_per_s"], v["input_tokens_per_s"]
    per_m_out = usd_per_million(price, n, out_rate)
    per_m_in = usd_per_million(price, n, in_rate) if in_rate > 0 else 0.0
    generated = v["output_tokens_per_task"] + v["reasoning_tokens_per_task"]
    out_gpus, in_gpus = _gpus(v, generated)
    gpus = out_gpus + in_gpus if v["requests_per_s"] > 0 else 0
    joules = v["power_watts_per_gpu"] * n / out_rate
    out = {
        "usd_per_million_output_tokens": per_m_out,
        "usd_per_million_input_tokens": per_m_in,
        "usd_per_task": (generated * per_m_out + v["input_tokens_per_task"] * per_m_in) / 1e6,
        "tokens_read_per_task": read,
        "tokens_cached_per_task": cached,
        "usd_per_hour": price * n,
        "output_tokens_per_s_per_gpu": out_rate / n,
        "gpus_needed": gpus,
        "usd_per_month": gpus * price * HOURS_PER_MONTH,
        "joules_per_output_token": joules,
        "kwh_per_million_output_tokens": joules * 1e6 / 3.6e6,
    }
    return dict(out, derivation=_shape_step(v, read, cached) + _derivation(v, out, generated, in_gpus))
