"""Speculative decoding under load, simulated: the same seeded requests on one replica with speculation off and on.

The engine simulator (calculators/engine) runs twice over one seeded open-loop workload (Poisson arrivals by
default, log-normal lengths): once with plain decode steps, once with StepTimes(..., speculation=Speculation(...))
(engine/speculation.py: each decode step drafts k tokens per sequence and verifies k + 1, priced as
calcs/speculative.py prices it, and every decoding sequence keeps E = (1 − α^(k+1)) ÷ (1 − α) tokens a step on
average). The drafter is speculative_decoding's (an EAGLE-style head, a draft model, heads at c, or n-gram); a
draft model's weights and KV per token come out of the KV pool. Chains only: the engine verifies k + 1 tokens.
The replica: vLLM V1's max_num_seqs for the accelerator, its token budget, chunked prefill, FCFS, the KV pool of
the memory calculator's rule; efficiencies and per-step overhead as set; no scheduling or sampling
overhead.
"""

from __future__ import annotations

from ..engine import workload as engine_workload
from ..engine.config import EngineConfig
from ..engine.metrics import percentile
from ..engine.run import simulate
from ..engine.speculation import Speculation
from ..engine.steps import StepTimes
from ..engine.workload import Workload
from ..schema import integer, number, output, step
from . import speculative as spec
from .engine_defaults import vllm_max_num_batched_tokens, vllm_max_num_seqs
from .lengths import length_fields
from .memory import budget, draft_budget, footprint, usable_bytes_per_gpu
from .speculative_decoding import SCHEMA as STEP_SCHEMA
from .speculative_decoding import _alpha, _drafter
from .steptime import deployment
from .sharding import steps_for

SHARED = ("tree_tokens", "batch_size", "context_tokens", "usd_per_gpu_hour")  # the step calculator's, not used here

SCHEMA = {
    "name": "speculative_sim",
    "title": "Speculative decoding under load (simulated, off against on)",
    "description": (
        "One replica runs the same seeded requests twice, speculation off and on. Each speculative decode step "
        "drafts k tokens per sequence, verifies k + 1 and keeps E = (1 − α^(k+1)) ÷ (1 − α) tokens per sequence "
        "on average (the mean, not a random draw, so the spread random acceptance adds to gaps is not modelled). "
        "Assumptions: Poisson (or gamma) arrivals; FCFS with chunked prefill and vLLM V1's default caps for the "
        "accelerator; KV reserved as tokens are written, from the memory calculator's pool (less a draft "
        "model's weights and KV); step times from the roofline model with the efficiencies plus the per-step "
        "per-step overhead as set; no scheduling or sampling overhead; no KV reserved for the k lookahead "
        "tokens; chains only (no trees)."
    ),
    "inputs": [f for f in STEP_SCHEMA["inputs"] if f["key"] not in SHARED]
    + [
        number("request_rate_per_s", "Request rate", 4.0, 0.001, 1e6, "requests/s"),
        number("burstiness", "Arrival burstiness (gamma shape)", 1.0, 0.05, 100.0, "", "1 is Poisson.", 0.05),
        integer("num_requests", "Requests simulated", 100, 20, 2000, "requests"),
        integer("seed", "Random seed", 0, 0, 2**31 - 1),
        *length_fields(1024, 256),
    ],
    "outputs": [
        output("tpot_p50_off_s", "TPOT p50, speculation off", "s", "seconds"),
        output("tpot_p50_on_s", "TPOT p50, speculation on", "s", "seconds"),
        output("tpot_p99_off_s", "TPOT p99, speculation off", "s", "seconds"),
        output("tpot_p99_on_s", "TPOT p99, speculation on", "s", "seconds"),
        output("ttft_p50_off_s", "TTFT p50, speculation off", "s", "seconds"),
        output("ttft_p50_on_s", "TTFT p50, speculation on", "s", "seconds"),
        output("throughput_off_tokens_per_s", "Output tokens/s, speculation off", "tokens/s", "rate"),
        output("throughput_on_tokens_per_s", "Output tokens/s, speculation on", "tokens/s", "rate"),
        output("tpot_p50_ratio", "TPOT p50 off ÷ on", "", "number"),
        output("mean_running_off", "Mean running sequences, speculation off", "sequences", "number"),
        output("mean_running_on", "Mean running sequences, speculation on", "sequences", "number"),
        output("kv_pool_tokens", "KV pool (less a draft model's share)", "tokens", "integer"),
        output("tokens_per_step", "Tokens kept per sequence per speculative step E", "tokens", "number"),
    ],
}


def _pool_tokens(v: dict) -> int:
    """The replica's KV pool in tokens; with a draft model, its weights out and its KV per token in
    (memory.draft_budget)."""
    if v["drafter"] != "draft_model":
        return budget(footprint(v), usable_bytes_per_gpu(v), v["num_gpus"]).tokens
    return draft_budget(v, v["num_gpus"])[1].tokens


def _summary(r) -> dict:
    tpot, ttft = sorted(r.tpot_s), sorted(r.ttft_s)
    running = [o[1] for o in r.occupancy]
    return {
        "tpot_p50": percentile(tpot, 50),
        "tpot_p99": percentile(tpot, 99),
        "ttft_p50": percentile(ttft, 50),
        "throughput": r.output_tokens_per_s,
        "running": sum(running) / len(running) if running else 0.0,
    }


def _derivation(v: dict, alpha: float, off: dict, on: dict, pool: int) -> list[dict]:
    k = v["draft_tokens"]
    return [
        step(
            "KV pool",
            "(usable − weights) ÷ KV per token (a draft model's included)",
            "{}",
            [(pool, "tokens")],
            pool,
            "tokens",
        ),
        step(
            "Tokens kept per speculative step",
            "E = (1 − α^(k+1)) ÷ (1 − α)",
            "(1 − {}^({} + 1)) ÷ (1 − {})",
            [alpha, k, alpha],
            spec.expected_tokens_per_step(alpha, k),
            "tokens",
        ),
        step(
            "TPOT p50 gain",
            "TPOT p50 off ÷ TPOT p50 on",
            "{} ÷ {}",
            [(off["tpot_p50"], "s"), (on["tpot_p50"], "s")],
            off["tpot_p50"] / on["tpot_p50"] if on["tpot_p50"] else 0.0,
            "×",
        ),
        step(
            "Throughput gain",
            "output tokens/s on ÷ off",
            "{} ÷ {}",
            [(on["throughput"], "tokens/s"), (off["throughput"], "tokens/s")],
            on["throughput"] / off["throughput"] if off["throughput"] else 0.0,
            "×",
        ),
    ]


def compute(v: dict) -> dict:
    dep = deployment(v)
    target = steps_for(v, dep)
    alpha = _alpha(v)
    speculation = Speculation(_drafter(v, target), alpha, v["draft_tokens"])
    requests = engine_workload.open_loop(Workload(v).first(v["num_requests"]), v["request_rate_per_s"])
    pool = _pool_tokens(v)
    config = EngineConfig(
        kv_blocks=max(1, pool),
        block_size_tokens=1,
        max_num_seqs=vllm_max_num_seqs(dep.accelerator),
        max_num_batched_tokens=vllm_max_num_batched_tokens(dep.accelerator),
    )
    off = _summary(simulate(StepTimes(target), requests, config))
    on = _summary(simulate(StepTimes(target, speculation=speculation), requests, config))
    return {
        "tpot_p50_off_s": off["tpot_p50"],
        "tpot_p50_on_s": on["tpot_p50"],
        "tpot_p99_off_s": off["tpot_p99"],
        "tpot_p99_on_s": on["tpot_p99"],
        "ttft_p50_off_s": off["ttft_p50"],
        "ttft_p50_on_s": on["ttft_p50"],
        "throughput_off_tokens_per_s": off["throughput"],
        "throughput_on_tokens_per_s": on["throughput"],
        "tpot_p50_ratio": off["tpot_p50"] / on["tpot_p50"] if on["tpot_p50"] else 0.0,
        "mean_running_off": off["running"],
        "mean_running_on": on["running"],
        "kv_pool_tokens": pool,
        "tokens_per_step": spec.expected_tokens_per_step(alpha, v["draft_tokens"]),
        "derivation": _derivation(v, alpha, off, on, pool),
        "notes": [],
    }
