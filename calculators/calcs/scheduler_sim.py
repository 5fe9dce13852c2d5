"""What the scheduling and shedding calculators share: one seeded workload on the engine simulator.

One replica (calculators.engine) with its step times from steptime.StepModel, as the roofline and
latency calculators price a step, and its KV pool from the memory calculator's budget. The workload is
engine.workload.Workload's (the same requests for the same seed); a seeded share of them is the high
priority class, and a length predictor of stated spread (workload.with_predictions) guesses every
output length. Every policy sees these same requests (common random numbers), so the differences
between policies are the scheduler's, not the draw's.

Capacity is measured, not estimated: every request queued at t = 0 under FCFS, the completions up to
the last admission (the batch stays full until then) divided by that time. Load ÷ capacity (ρ) is the
offered rate over it. The measurement needs the batch full for a while: with fewer than max_num_seqs
completions before the last admission (too few requests for the cap) it is not the replica's capacity,
and Setup.saturated is False (unsaturated_note says so). A run is finite (num_requests from an empty
server), so past ρ = 1 its latencies grow with the length of the run: they are what those requests saw,
not a steady state.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from ..engine import workload as engine_workload
from ..engine.config import EngineConfig, Request
from ..engine.run import simulate
from ..engine.steps import StepTimes
from ..engine.workload import Workload
from ..schema import integer, number
from .deployment import deployment_fields
from .lengths import length_fields
from .memory import engine_fields, kv_pool_tokens
from .overhead import EXTRA_OVERHEAD_HELP
from .steptime import deployment
from .sharding import steps_for

BLOCK = 16  # vLLM's default block size on CUDA (tokens)
POLICY_NAMES = {
    "fcfs": "FCFS",
    "priority": "Priority classes",
    "sjf": "SJF (predicted)",
    "sjf_ageing": "SJF + ageing",
}


def fields(rate: float, requests: int) -> list[dict]:
    """The deployment, the workload, the engine and the objectives both calculators take."""
    rate_field = number(
        "request_rate_per_s",
        "Request rate",
        rate,
        0.001,
        1e6,
        "requests/s",
        "Poisson arrivals at this rate (burstiness 1), or gamma gaps with the burstiness below.",
    )
    count = integer(
        "num_requests",
        "Requests simulated",
        requests,
        20,
        2000,
        "requests",
        "From an empty server; every policy and every rate sees the same requests.",
    )
    return deployment_fields(0.8, 0.6) + engine_fields() + [rate_field, BURSTINESS, count] + WORKLOAD + POLICY


BURSTINESS = number(
    "burstiness",
    "Arrival burstiness (gamma shape)",
    0.5,
    0.05,
    100.0,
    "",
    "As vLLM's vllm bench serve --burstiness: 1 is Poisson, below 1 burstier.",
    0.05,
)
WORKLOAD = [
    integer("seed", "Random seed", 0, 0, 2**31 - 1),
    *length_fields(1024, 256, 1.0, 1.5),
    integer(
        "max_num_seqs",
        "Running-sequence cap (max_num_seqs)",
        8,
        1,
        4096,
        "sequences",
        "vLLM's --max-num-seqs. Kept small here so that a few dozen requests fill it and the queue "
        "forms in a run short enough to recompute live; vLLM V1's default on an H100 is 1,024.",
    ),
    integer(
        "max_num_batched_tokens",
        "Token budget per step (max_num_batched_tokens)",
        8192,
        16,
        1_000_000,
        "tokens",
        "vLLM V1 with chunked prefill: 8,192 for online serving on an H100 (v0.33.0).",
    ),
    number(
        "step_overhead_ms",
        "Extra overhead per step",
        0.0,
        0.0,
        100.0,
        "ms",
        EXTRA_OVERHEAD_HELP,
        0.1,
    ),
]
POLICY = [
    number(
        "high_priority_percent",
        "Share of requests in the high-priority class",
        20.0,
        0.0,
        100.0,
        "%",
        "Drawn at random (seeded) whatever their length; used by the priority policy.",
    ),
    number(
        "predictor_error_cv",
        "Length predictor error (spread of predicted ÷ true)",
        0.5,
        0.0,
        4.0,
        "",
        "Predicted = true output × a log-normal factor of median 1 and this coefficient of variation; 0 is an oracle.",
        0.05,
    ),
    number(
        "ageing_s",
        "Ageing: seconds of waiting worth one predicted token",
        0.0005,
        0.0,
        10.0,
        "s",
        "The starvation guard of SJF + ageing: a request that has waited w seconds ranks as if its "
        "predicted output were w ÷ this shorter.",
        0.0001,
    ),
    number("ttft_slo_s", "TTFT target", 1.0, 0.001, 3600.0, "s"),
    number("tpot_slo_s", "TPOT target (per-request mean)", 0.1, 0.0001, 60.0, "s"),
]


CAPACITY_KEYS = (
    "seed",
    "burstiness",
    "input_distribution",
    "input_tokens_mean",
    "input_tokens_cv",
    "output_distribution",
    "output_tokens_mean",
    "output_tokens_cv",
    "num_requests",
    "max_num_seqs",
    "max_num_batched_tokens",
    "step_overhead_ms",
)
KEPT = 4
_capacities: dict = {}


@dataclass(frozen=True)
class Setup:
    times: StepTimes
    requests: tuple  # at rate 1 (arrival = cumulative gap); priority and predictions filled in
    kv_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    capacity: float  # requests/s, measured (see module docstring)
    kv_tokens: int
    saturated: bool = True  # the capacity run kept the batch full long enough to measure it


def setup(v: dict) -> Setup:
    dep = deployment(v)
    times = StepTimes(steps_for(v, dep), v["step_overhead_ms"] / 1000)
    kv_tokens = kv_pool_tokens(v)
    kv_blocks = max(1, kv_tokens // BLOCK)
    draws = Workload(v).first(v["num_requests"])
    base = engine_workload.open_loop(draws, 1.0)
    rng, share = random.Random(f"priority {v['seed']}"), v["high_priority_percent"] / 100
    classed = [r._replace(priority=0 if rng.random() < share else 1) for r in base]
    requests = tuple(engine_workload.with_predictions(classed, v["predictor_error_cv"], v["seed"]))
    s = Setup(times, requests, kv_blocks, v["max_num_seqs"], v["max_num_batched_tokens"], 0.0, kv_tokens)
    # The capacity depends on neither the rate, the policy, the classes, the predictor nor the objectives:
    # kept between recomputes (a pure function of its key, so warm and cold give the same result).
    key = (repr(dep), tuple(v[k] for k in CAPACITY_KEYS), kv_blocks)
    if key not in _capacities:
        if len(_capacities) >= KEPT:
            del _capacities[next(iter(_capacities))]
        _capacities[key] = measured_capacity(s)
    capacity, saturated = _capacities[key]
    return replace(s, capacity=capacity, saturated=saturated)


def config(
    s: Setup, policy: str, ageing_s: float = 0.0, max_waiting: int = 0, max_predicted_ttft_s: float = 0.0
) -> EngineConfig:
    engine_policy = "sjf" if policy == "sjf_ageing" else policy
    return EngineConfig(
        kv_blocks=s.kv_blocks,
        block_size_tokens=BLOCK,
        max_num_seqs=s.max_num_seqs,
        max_num_batched_tokens=s.max_num_batched_tokens,
        policy=engine_policy,
        ageing_s=ageing_s if policy == "sjf_ageing" else 0.0,
        max_waiting=max_waiting,
        max_predicted_ttft_s=max_predicted_ttft_s,
    )


def at_rate(requests, rate: float) -> list[Request]:
    return [r._replace(arrival_s=r.arrival_s / rate) for r in requests]


def measured_capacity(s: Setup) -> tuple[float, bool]:
    """Requests/s a saturated server completes: all queued at t = 0 (FCFS); completions up to the last
    admission ÷ its time (the batch is full until then); with no queue at all, requests ÷ makespan. The
    flag says whether the batch stayed full long enough to measure it: at least max_num_seqs completions
    before the last admission (with fewer requests than the cap, or barely more, the figure is the
    ramp-up or the makespan of the longest request, not a capacity)."""
    queued = [r._replace(arrival_s=0.0) for r in s.requests]
    r = simulate(s.times, queued, config(s, "fcfs"))
    if not r.e2e_s:
        return 0.0, False
    last_start = max(r.queue_s)
    done = sum(1 for e in r.e2e_s if e <= last_start)
    if last_start > 0 and done:
        return done / last_start, done >= s.max_num_seqs
    return len(r.e2e_s) / max(r.e2e_s), False


def unsaturated_note(v: dict, s: Setup) -> list[str]:
    """The warning when the capacity run could not fill the batch (Setup.saturated is False)."""
    if s.saturated:
        return []
    return [
        f"{v['num_requests']:,} requests queued at once are too few to keep {s.max_num_seqs:,} running sequences "
        f"busy, so the capacity shown ({s.capacity:.2f} requests/s), and every load measured against it, is not "
        "the replica's: simulate several times more requests than the running-sequence cap, or lower the cap"
    ]


def mean(values) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def nearest_rank(values, pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[max(0, -(-len(ordered) * pct // 100) - 1)]


def run(
    v: dict, s: Setup, policy: str, rate: float, max_waiting: int = 0, requests=None, max_predicted_ttft_s: float = 0.0
) -> dict:
    """One policy at one rate: latencies of the served, SLO attainment over every arrival (a rejected
    request misses), per-run goodput = rate × attainment (Part 3), and the high class's attainment."""
    reqs = at_rate(requests or s.requests, rate)
    r = simulate(s.times, reqs, config(s, policy, v["ageing_s"], max_waiting, max_predicted_ttft_s))
    ttft_slo, tpot_slo = v["ttft_slo_s"], v["tpot_slo_s"]
    by_arrival = {a: i for i, a in enumerate(x.arrival_s for x in reqs)}
    met = [a <= ttft_slo and b <= tpot_slo for a, b in zip(r.ttft_s, r.tpot_s)]
    high = [reqs[by_arrival[a]].priority == 0 for a in r.arrival_s]
    n, n_high = len(reqs), sum(1 for x in reqs if x.priority == 0)
    attainment = sum(met) / n
    return {
        "attainment": attainment,
        "goodput": rate * attainment,
        "high_attainment": sum(m for m, h in zip(met, high) if h) / n_high if n_high else 0.0,
        "queue_mean": mean(r.queue_s),
        "queue_p99": nearest_rank(r.queue_s, 99),
        "queue_max": max(r.queue_s, default=0.0),
        "ttft_mean": mean(r.ttft_s),
        "ttft_p50": nearest_rank(r.ttft_s, 50),
        "ttft_p99": nearest_rank(r.ttft_s, 99),
        "e2e_mean": mean(r.e2e_s),
        "high_ttft_p99": nearest_rank([t for t, h in zip(r.ttft_s, high) if h], 99),
        "rejected": r.rejected,
        "rejected_share": r.rejected / n,
        "served": len(r.ttft_s),
        "preemptions": sum(r.preemptions),
    }
