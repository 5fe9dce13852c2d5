"""Open versus closed loop: the same server benchmarked by N closed-loop users and by open-loop Poisson arrivals
at the rate those users achieved.

A closed-loop user sends, waits for the answer, thinks, sends again: when the server slows, the users send
less, so the queue a real (open) population would build never forms and the latency percentiles the
benchmark reports leave it out (Gil Tene's "coordinated omission"). The open-loop run at the same mean rate
shows what that rate costs when arrivals do not wait for the server. Both runs are the engine simulator with
vLLM V1's scheduler settings (chunked prefill, token budget and max_num_seqs for the accelerator, paged KV
with recompute preemption), on the same drawn requests.

The closed loop's rate is its throughput while every user is active, by the interactive response-time law
(N users, think time Z, mean response R: X = N ÷ (R + Z)).
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..schema import integer, number, output, series, step
from ..engine.config import EngineConfig
from ..engine.loops import closed_and_open
from ..engine.metrics import percentile
from ..engine.steps import StepTimes
from ..engine.workload import Workload
from .deployment import deployment_fields, efficiency_steps
from .engine_defaults import vllm_max_num_batched_tokens, vllm_max_num_seqs
from .lengths import length_fields
from .memory import engine_fields, kv_pool_tokens, sequence_pool_tokens
from .steptime import deployment
from .sharding import steps_for

PERCENTILES = (50, 75, 90, 95, 99)  # plotted
BLOCK = 16  # tokens per KV block, vLLM's default

SCHEMA = {
    "name": "benchmark_loops",
    "title": "Open versus closed loop: what a benchmark's client hides",
    "description": (
        "Two simulated benchmarks of one replica on the same requests. Closed loop: N users, each sending its "
        "next request a think time after its last answer ends (vllm bench serve --max-concurrency N "
        "--request-rate inf is N users with no think time). Open loop: Poisson arrivals at the rate the closed "
        "loop achieved, which do not wait for the server. Both measured after each user's first request. "
        "Engine: vLLM V1's scheduler settings (chunked prefill, the API server's token budget and max_num_seqs "
        "for the accelerator (8,192 and 1,024 on an H100), paged KV in 16-token blocks, recompute preemption); "
        "step times from the roofline model scaled by the efficiencies plus per-step overhead; no network or "
        "tokenisation time."
    ),
    "inputs": deployment_fields(0.8, 0.6)
    + [
        integer("users", "Closed-loop users (concurrency)", 16, 1, 256, "users", "vllm bench serve --max-concurrency."),
        number(
            "think_s",
            "Think time between a user's answer and its next request",
            0.0,
            0.0,
            600.0,
            "s",
            "0 is vllm bench serve's closed loop: the next request goes as soon as a slot frees.",
        ),
        integer(
            "requests_per_user",
            "Requests per user",
            4,
            2,
            20,
            "requests",
            "The first of each user's is warm-up and not measured.",
        ),
        integer("seed", "Random seed", 0, 0, 2**31 - 1),
        *length_fields(512, 128, output_max=100_000),
    ]
    + engine_fields(),
    "outputs": [
        output("closed_rate_requests_per_s", "Closed loop: rate achieved", "requests/s", "rate"),
        output("closed_ttft_p50_s", "Closed loop: TTFT p50", "s", "seconds"),
        output("closed_ttft_p99_s", "Closed loop: TTFT p99", "s", "seconds"),
        output("closed_e2e_p99_s", "Closed loop: end-to-end p99", "s", "seconds"),
        output("open_ttft_p50_s", "Open loop at the same rate: TTFT p50", "s", "seconds"),
        output("open_ttft_p99_s", "Open loop at the same rate: TTFT p99", "s", "seconds"),
        output("open_e2e_p99_s", "Open loop at the same rate: end-to-end p99", "s", "seconds"),
        output("ttft_p99_ratio", "TTFT p99, open ÷ closed", "", "number"),
        output("closed_mean_e2e_s", "Closed loop: mean end-to-end, measured", "s", "seconds"),
    ],
}


def _config(v: dict) -> EngineConfig:
    """vLLM V1's defaults on this replica: the KV pool in 16-token blocks, the API server's max_num_seqs and
    token budget for the accelerator (v0.33.0 vllm/engine/arg_utils.py: 8,192 on H100/H200, 16,384 on B200,
    2,048 on A100)."""
    return EngineConfig(
        kv_blocks=max(1, int(kv_pool_tokens(v) // BLOCK)),
        block_size_tokens=BLOCK,
        max_num_seqs=vllm_max_num_seqs(v["hardware"]),
        max_num_batched_tokens=vllm_max_num_batched_tokens(v["hardware"]),
    )


def _pcts(result, field: str, ps=(50, 99)) -> list[float]:
    values = sorted(getattr(result, field))
    return [percentile(values, p) for p in ps]


def _pair(v: dict, times: StepTimes, config: EngineConfig, users: int) -> dict:
    draws = Workload(v).first(users * v["requests_per_user"])
    closed, rate, opened = closed_and_open(times, config, draws, users, v["think_s"])
    out = {"rate": rate, "closed": closed, "open": opened}
    for name, run in (("closed", closed), ("open", opened)):
        out[f"{name}_ttft"] = _pcts(run, "ttft_s")
        out[f"{name}_e2e"] = _pcts(run, "e2e_s")
    return out


def compute(v: dict) -> dict:
    dep = deployment(v)
    times, config = StepTimes(steps_for(v, dep)), _config(v)
    if config.kv_blocks * BLOCK < sequence_pool_tokens(v, v["input_tokens_mean"] + v["output_tokens_mean"]):
        raise InputError(
            "num_gpus",
            f"the KV pool of one replica ({max(0, int(kv_pool_tokens(v))):,} tokens) must hold "
            "one mean request: add GPUs or shorten the requests",
        )
    here = _pair(v, times, config, v["users"])
    if not here["closed"].e2e_s or not here["open"].e2e_s:
        raise InputError("num_gpus", "no measured request fits the KV pool of one replica: add GPUs")
    closed = here["closed"]
    mean_e2e = math.fsum(closed.e2e_s) / len(closed.e2e_s)  # as loops.measured_rate: the same bits in Pyodide
    out = {
        "closed_rate_requests_per_s": here["rate"],
        "closed_ttft_p50_s": here["closed_ttft"][0],
        "closed_ttft_p99_s": here["closed_ttft"][1],
        "closed_e2e_p99_s": here["closed_e2e"][1],
        "open_ttft_p50_s": here["open_ttft"][0],
        "open_ttft_p99_s": here["open_ttft"][1],
        "open_e2e_p99_s": here["open_e2e"][1],
        "ttft_p99_ratio": here["open_ttft"][1] / here["closed_ttft"][1] if here["closed_ttft"][1] else 0.0,
        "closed_mean_e2e_s": mean_e2e,
    }
    return dict(
        out, derivation=efficiency_steps(dep) + _steps(v, out, config), series={"ttft_by_percentile": _plot(here)}
    )


def _plot(here: dict) -> dict:
    return series(
        "TTFT by percentile: closed loop vs open loop at the rate it achieved",
        "Percentile",
        "",
        list(PERCENTILES),
        [
            ("closed loop", "s", _pcts(here["closed"], "ttft_s", PERCENTILES)),
            ("open loop, same rate", "s", _pcts(here["open"], "ttft_s", PERCENTILES)),
        ],
    )


def _steps(v: dict, out: dict, config: EngineConfig) -> list[dict]:
    n, rate = v["users"], (out["closed_rate_requests_per_s"], "requests/s")
    return [
        step(
            "KV pool",
            "engine budget ÷ KV per token, in 16-token blocks",
            "{} blocks × {}",
            [config.kv_blocks, BLOCK],
            config.kv_blocks * BLOCK,
            "tokens",
        ),
        step(
            "Closed-loop rate (interactive response-time law)",
            "X = N ÷ (mean end-to-end + think time)",
            "{} ÷ ({} + {})",
            [n, (out["closed_mean_e2e_s"], "s"), (v["think_s"], "s")],
            out["closed_rate_requests_per_s"],
            "requests/s",
        ),
        step(
            "Open loop",
            "Poisson arrivals at the closed loop's rate, same requests",
            "rate {}",
            [rate],
            out["open_ttft_p99_s"],
            "s",
        ),
        step(
            "What the closed loop hid",
            "TTFT p99 open ÷ TTFT p99 closed",
            "{} ÷ {}",
            [(out["open_ttft_p99_s"], "s"), (out["closed_ttft_p99_s"], "s")],
            out["ttft_p99_ratio"],
            "",
        ),
    ]
