"""Noisy neighbour: one aggressive tenant against the others, under FCFS, VTC fair queueing and
per-tenant rate limits, on the engine simulator (engine.tenants).

The quiet tenants each send Poisson arrivals at the quiet rate; the aggressive one at its own rate, for
the same duration; every request draws its prompt and output lengths from the same distributions
(seeded per tenant, so every policy sees the same requests). Three runs of one replica:

  FCFS        the engine's default: one queue in arrival order;
  VTC         fair queueing by the Virtual Token Counter (arXiv 2401.00588 §4): the backlogged tenant
              that has received the least service (w_p = 1 per prompt token, w_q = 2 per output token)
              is admitted next;
  rate limit  FCFS behind a token bucket per tenant (the same rate and burst for every tenant): an
              arrival that finds the bucket empty is answered 429 and never queues.

Latencies are the p95 over each group's finished requests (nearest rank). The run is finite: past the
replica's capacity the aggressive tenant's queue grows for as long as it sends, so its latencies are
what those requests saw, not a steady state.
"""

from __future__ import annotations

import random

from ..engine.config import EngineConfig, Request
from ..engine.metrics import percentile
from ..engine.steps import StepTimes
from ..engine.tenants import TokenBucket, simulate_tenants
from ..engine.workload import length_sampler
from ..errors import InputError
from ..schema import integer, number, output, step
from .deployment import deployment_fields
from .lengths import length_fields
from .memory import engine_fields, kv_pool_tokens
from .scheduler_sim import BLOCK
from .sharding import steps_for

POLICIES = (("fcfs", "FCFS"), ("vtc", "VTC"), ("limit", "Rate limit"))
MAX_OFFERED = 2000  # requests a run may expect (rates × duration): three simulations stay quick in a browser
AGGRESSIVE = "aggressive"


TENANT_FIELDS = [
    integer("quiet_tenants", "Quiet tenants", 3, 1, 50, "tenants"),
    number("quiet_rate_per_s", "Each quiet tenant's rate", 0.5, 0.001, 1000.0, "requests/s", "Poisson arrivals."),
    number(
        "aggressive_rate_per_s",
        "The aggressive tenant’s rate",
        10.0,
        0.001,
        10_000.0,
        "requests/s",
        "Poisson arrivals, for the same duration.",
    ),
    number(
        "duration_s",
        "Duration of the traffic",
        15.0,
        1.0,
        600.0,
        "s",
        "Every tenant sends for this long; the run lasts until the last request ends. At most 2,000 requests "
        "in all (the rates × the duration) are simulated.",
    ),
    integer("seed", "Random seed", 0, 0, 2**31 - 1),
    *length_fields(1024, 256),
    integer(
        "max_num_seqs",
        "Running-sequence cap (max_num_seqs)",
        16,
        1,
        4096,
        "sequences",
        "vLLM's --max-num-seqs. Kept small so that the queue forms in a run short enough to recompute "
        "live; vLLM V1's default on an H100 is 1,024.",
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
        "limit_rate_per_s",
        "Rate limit per tenant",
        3.0,
        0.001,
        10_000.0,
        "requests/s",
        "The token bucket's refill rate: the sustained rate a tenant may send.",
    ),
    number(
        "limit_burst",
        "Burst per tenant",
        6.0,
        1.0,
        100_000.0,
        "requests",
        "The bucket's size: how many requests a tenant may send at once after a quiet spell.",
    ),
]


def _policy_outputs() -> list[dict]:
    out = []
    for key, name in POLICIES:
        out += [
            output(f"{key}_quiet_ttft_p95_s", f"{name}: quiet tenants' TTFT p95", "s", "seconds"),
            output(f"{key}_quiet_e2e_p95_s", f"{name}: quiet tenants' latency p95", "s", "seconds"),
            output(f"{key}_aggressive_ttft_p95_s", f"{name}: aggressive tenant's TTFT p95", "s", "seconds"),
            output(f"{key}_aggressive_served", f"{name}: aggressive requests served", "requests", "integer"),
            output(f"{key}_rejected", f"{name}: requests rejected (429)", "requests", "integer"),
            output(f"{key}_output_tokens_per_s", f"{name}: output throughput", "tokens/s", "number"),
        ]
    return out


SCHEMA = {
    "name": "noisy_neighbour",
    "title": "Noisy neighbour: FCFS, fair queueing and rate limits",
    "description": (
        "One aggressive tenant and several quiet ones share one replica (the engine simulator). The same "
        "requests run three ways: FCFS, the engine's default; VTC fair queueing (the backlogged tenant "
        "with the least service so far is admitted next, arXiv 2401.00588); and FCFS behind a token "
        "bucket per tenant that answers 429 when it is empty. Latencies are p95 over each group's "
        "finished requests. A finite run from an empty server: past capacity its latencies grow with "
        "its length."
    ),
    "inputs": deployment_fields(0.8, 0.6) + engine_fields() + TENANT_FIELDS,
    "outputs": [
        output("offered_requests", "Requests offered (all tenants)", "requests", "integer"),
        output("aggressive_share", "The aggressive tenant's share of them", "", "percent"),
        output("fcfs_requests_per_s", "FCFS: requests completed per second", "requests/s", "number"),
        *_policy_outputs(),
    ],
}


def requests_for(v: dict) -> list[Request]:
    """Every tenant's Poisson arrivals over the duration, lengths drawn per tenant (seeded)."""
    prompt = length_sampler(v["input_distribution"], v["input_tokens_mean"], v["input_tokens_cv"])
    output_len = length_sampler(v["output_distribution"], v["output_tokens_mean"], v["output_tokens_cv"])
    tenants = [(AGGRESSIVE, v["aggressive_rate_per_s"])]
    tenants += [(f"quiet-{k + 1}", v["quiet_rate_per_s"]) for k in range(v["quiet_tenants"])]
    out = []
    for name, rate in tenants:
        rng = random.Random(f"{v['seed']} {name}")
        t = rng.expovariate(rate)
        while t < v["duration_s"]:
            out.append(Request(t, prompt(rng), output_len(rng), tenant=name))
            t += rng.expovariate(rate)
    out.sort(key=lambda r: (r.arrival_s, r.tenant))
    return out


def _group(result, quiet: bool) -> tuple[list, list]:
    ttft, e2e = [], []
    for k, tenant in enumerate(result.tenants):
        if (tenant != AGGRESSIVE) == quiet:
            ttft.append(result.ttft_s[k])
            e2e.append(result.e2e_s[k])
    return sorted(ttft), sorted(e2e)


def _policy(key: str, result, limited: dict) -> dict:
    """One policy's outputs (and, for the rate limit, its note)."""
    q_ttft, q_e2e = _group(result, True)
    a_ttft, _ = _group(result, False)
    out = {
        f"{key}_quiet_ttft_p95_s": percentile(q_ttft, 95),
        f"{key}_quiet_e2e_p95_s": percentile(q_e2e, 95),
        f"{key}_aggressive_ttft_p95_s": percentile(a_ttft, 95),
        f"{key}_aggressive_served": len(a_ttft),
        f"{key}_rejected": result.rejected,
        f"{key}_output_tokens_per_s": result.output_tokens_per_s,
    }
    if key == "fcfs":
        ends = [a + e for a, e in zip(result.arrival_s, result.e2e_s)]
        span = max(ends, default=0.0) - min(result.arrival_s, default=0.0)
        out["fcfs_requests_per_s"] = len(ends) / span if span > 0 else 0.0
    if key == "limit":
        out["notes"] = [
            f"the bucket answered 429 to {limited.get(AGGRESSIVE, 0)} aggressive and "
            f"{sum(n for t, n in limited.items() if t != AGGRESSIVE)} quiet requests"
        ]
    return out


def compute(v: dict) -> dict:
    expected = (v["quiet_tenants"] * v["quiet_rate_per_s"] + v["aggressive_rate_per_s"]) * v["duration_s"]
    if expected > MAX_OFFERED:
        raise InputError(
            "duration_s",
            f"the tenants' rates × the duration offer about {expected:,.0f} requests; at most {MAX_OFFERED:,} "
            "are simulated (shorten the duration or lower a rate)",
        )
    times = StepTimes(steps_for(v))
    kv_blocks = max(1, int(kv_pool_tokens(v)) // BLOCK)
    cfg = EngineConfig(kv_blocks, BLOCK, v["max_num_seqs"], v["max_num_batched_tokens"])
    reqs = requests_for(v)
    out: dict = {
        "offered_requests": len(reqs),
        "aggressive_share": sum(r.tenant == AGGRESSIVE for r in reqs) / len(reqs) if reqs else 0.0,
    }
    derivation = []
    for key, name in POLICIES:
        bucket = TokenBucket(v["limit_rate_per_s"], v["limit_burst"]) if key == "limit" else None
        result, limited = simulate_tenants(times, reqs, cfg, fair=key == "vtc", bucket=bucket)
        out.update(_policy(key, result, limited))
        quiet = sum(t != AGGRESSIVE for t in result.tenants)
        derivation.append(
            step(
                f"{name}: quiet TTFT p95",
                "nearest-rank p95 of the quiet tenants' TTFTs",
                "{} requests",
                [quiet],
                out[f"{key}_quiet_ttft_p95_s"],
                "s",
            )
        )
    out["derivation"] = derivation
    return out
