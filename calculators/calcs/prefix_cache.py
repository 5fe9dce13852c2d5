"""Prefix caching on the engine simulator: the same workload with the cache on and off.

Two workload shapes, both with shared prefixes named as the engine names them (`Request.prefix`):
  'system' : a share of requests open with one of K system prompts of S tokens (picked uniformly),
             then their own message; the rest carry only their own message;
  'chat'   : multi-turn conversations (workload.conversations): turn t re-reads the system prompt,
             every earlier message and answer, then its own message, think time after the last answer.
Each runs twice on one replica (vLLM V1's token budget and sequence cap, chunked prefill, the KV
pool of the memory rule or a smaller one typed in): at the request rate typed, for TTFT, and with
every request (every conversation's first turn) queued at t = 0 and no think time, for the capacity
the cost per request follows from (cost.usd_per_million, requests in place of tokens). A hit skips the
prefill compute of its blocks; a host-tier hit is copied back over the host link, its time added to
the step it is admitted in (the engine's model: the copy is not overlapped).
"""

from __future__ import annotations

import random

from ..catalog import host_links
from ..engine import workload as wl
from ..engine.config import EngineConfig, Request
from ..engine.metrics import percentile_with_ci
from ..engine.run import simulate
from ..engine.steps import StepTimes
from ..errors import InputError
from ..schema import choice, integer, number, output, series, step
from .cost import gpu_hour_field, usd_per_million
from .deployment import deployment_fields
from .engine_defaults import vllm_max_num_batched_tokens, vllm_max_num_seqs
from ..engine.workload import Workload
from .memory import budget, engine_fields, footprint, usable_bytes_per_gpu
from .steptime import deployment
from .sharding import steps_for
from ..units import GIB

HOST_LINKS = host_links()
SHAPES = [("system", "Shared system prompts"), ("chat", "Multi-turn conversations")]
PERCENTILES = (10, 25, 50, 75, 90, 95, 99)

SCHEMA = {
    "name": "prefix_cache",
    "title": "Prefix caching: hit rate, TTFT and cost per request (simulated)",
    "description": (
        "The engine simulator runs one replica on a workload with shared prefixes, once with prefix caching "
        "and once without: vLLM V1's default token budget and sequence cap for the accelerator, chunked "
        "prefill, a paged KV pool in 16-token blocks whose unheld cached blocks are evicted least recently "
        "released first (to a host tier, when one is set). A hit skips the prefill of its blocks; a host hit "
        "is copied back over the host link within the step. Step times come from the roofline model with "
        "the efficiency factors. Cost per request is the price of the GPUs over the requests per second a "
        "saturated replica completes (every request queued at once). Seeded; an estimate, not a measurement."
    ),
    "inputs": deployment_fields(0.8, 0.6)
    + engine_fields()
    + [
        choice("shape", "Workload", "system", SHAPES),
        integer("system_prompt_tokens", "Shared system prompt S", 2000, 0, 100_000, "tokens"),
        number(
            "shared_share",
            "Share of requests that open with a system prompt",
            0.9,
            0.0,
            1.0,
            "",
            "System-prompt workload only; conversations always open with it.",
            0.05,
        ),
        integer(
            "num_prefixes",
            "Distinct system prompts K",
            1,
            1,
            1000,
            "prompts",
            "Each request with a system prompt picks one of K uniformly.",
        ),
        integer(
            "message_tokens_mean",
            "Mean user message",
            200,
            1,
            100_000,
            "tokens",
            "Log-normal, spread (std ÷ mean) 0.5.",
        ),
        integer("output_tokens_mean", "Mean answer", 150, 1, 100_000, "tokens", "Log-normal, spread 0.5."),
        integer("turns", "Turns per conversation", 4, 1, 50, "turns", "Conversations only."),
        number("think_s", "Think time between turns", 5.0, 0.0, 3600.0, "s", "Conversations only."),
        number("request_rate_per_s", "Request rate (new conversations, for chats)", 4.0, 0.001, 10_000.0, "requests/s"),
        integer("num_requests", "Requests simulated", 80, 10, 2000, "requests"),
        integer("seed", "Random seed", 0, 0, 2**31 - 1),
        integer(
            "kv_pool_cap_tokens",
            "KV pool cap (0 = the memory rule's pool)",
            0,
            0,
            100_000_000,
            "tokens",
            "A smaller pool shows eviction.",
        ),
        number("host_cache_gib", "Host-memory tier for evicted blocks (0 = none)", 0.0, 0.0, 4096.0, "GiB"),
        choice(
            "host_link", "Host link (for host-tier hits)", "pcie5-x16", [(k, e["name"]) for k, e in HOST_LINKS.items()]
        ),
        gpu_hour_field("DeepSeek's Day-6 costing uses $2/GPU-h for H800 (the cost calculator's default)."),
    ],
    "outputs": [
        output("hit_rate", "Prompt tokens found in the cache (all tiers)", "", "percent"),
        output("hit_rate_gpu", "… in GPU memory", "", "percent"),
        output("hit_rate_host", "… in the host tier", "", "percent"),
        output("ttft_p50_on_s", "TTFT p50, cache on", "s", "seconds"),
        output("ttft_p50_off_s", "TTFT p50, cache off", "s", "seconds"),
        output("ttft_p99_on_s", "TTFT p99, cache on", "s", "seconds"),
        output("ttft_p99_off_s", "TTFT p99, cache off", "s", "seconds"),
        output("ttft_p50_speedup", "TTFT p50, off ÷ on", "×", "number"),
        output("capacity_on_requests_per_s", "Capacity, cache on (saturated)", "requests/s", "rate"),
        output("capacity_off_requests_per_s", "Capacity, cache off (saturated)", "requests/s", "rate"),
        output("capacity_gain", "Capacity, on ÷ off", "×", "number"),
        output("output_tokens_per_s_on", "Output throughput at the rate typed, cache on", "tokens/s", "rate"),
        output("output_tokens_per_s_off", "Output throughput at the rate typed, cache off", "tokens/s", "rate"),
        output("usd_per_m_requests_on", "Cost per million requests, cache on", "USD", "usd"),
        output("usd_per_m_requests_off", "Cost per million requests, cache off", "USD", "usd"),
        output("mean_prompt_tokens", "Mean prompt (what each request sends)", "tokens", "integer"),
        output("kv_pool_tokens", "KV pool used", "tokens", "integer"),
        output("rejected_requests", "Requests rejected (too long for the pool)", "requests", "integer"),
    ],
}


def _draws(v: dict, n: int) -> list[tuple[float, int, int]]:
    spec = {
        "seed": v["seed"],
        "burstiness": 1.0,
        "input_distribution": "lognormal",
        "input_tokens_mean": v["message_tokens_mean"],
        "input_tokens_cv": 0.5,
        "output_distribution": "lognormal",
        "output_tokens_mean": v["output_tokens_mean"],
        "output_tokens_cv": 0.5,
    }
    return Workload(spec).first(n)


def requests(v: dict, saturated: bool = False) -> list[Request]:
    """The workload: at the rate typed, or (saturated) every request or first turn queued at t = 0."""
    s, n = v["system_prompt_tokens"], v["num_requests"]
    if v["shape"] == "chat":
        draws = _draws(v, max(1, n // v["turns"]))
        rate = 1e12 if saturated else v["request_rate_per_s"]
        return wl.conversations(draws, rate, v["turns"], 0.0 if saturated else v["think_s"], s)
    pick, out, t = random.Random(f"prefixes {v['seed']}"), [], 0.0
    for gap, message, answer in _draws(v, n):
        t += 0.0 if saturated else gap / v["request_rate_per_s"]
        shared = s and pick.random() < v["shared_share"]
        prefix = ((("system", pick.randrange(v["num_prefixes"])), 0, s),) if shared else ()
        out.append(Request(t, message + (s if shared else 0), answer, prefix=prefix))
    return out


class Setup:
    """The deployment's step model, KV pool and host tier, shared by the four runs."""

    def __init__(self, v: dict):
        self.dep = deployment(v)
        self.times = StepTimes(steps_for(v, self.dep))
        b = budget(footprint(v), usable_bytes_per_gpu(v), v["num_gpus"])
        cap = v["kv_pool_cap_tokens"]
        if 0 < cap < 16:
            raise InputError("kv_pool_cap_tokens", "at least one 16-token block (16 tokens), or 0 for the memory rule")
        pool = int(b.tokens) if not cap else min(int(b.tokens), cap)
        if pool < 16:
            raise InputError(
                "num_gpus", "the weights leave no room for one 16-token KV block: more GPUs, smaller model"
            )
        self.block_bytes = 16 * b.per_token
        self.pool_tokens = pool - pool % 16
        self.host_blocks = int(v["host_cache_gib"] * GIB // self.block_bytes)
        self.link = HOST_LINKS[v["host_link"]]["bandwidth_bytes_per_s"]
        acc = self.dep.accelerator
        self.base = dict(
            kv_blocks=self.pool_tokens // 16,
            block_size_tokens=16,
            max_num_seqs=vllm_max_num_seqs(acc),
            max_num_batched_tokens=vllm_max_num_batched_tokens(acc),
        )

    def config(self, on: bool) -> EngineConfig:
        host = (
            {
                "host_cache_blocks": self.host_blocks,
                "host_cache_bytes_per_s": self.link,
                "kv_bytes_per_block": self.block_bytes,
            }
            if on and self.host_blocks
            else {}
        )
        return EngineConfig(**self.base, prefix_caching=on, **host)


def _capacity(result) -> float:
    """Requests per second of a saturated run: finished ÷ (last finish)."""
    ends = [a + e for a, e in zip(result.arrival_s, result.e2e_s)]
    return len(ends) / max(ends) if ends else 0.0


def _pct(values, p: float) -> float:
    return percentile_with_ci(values, p)[0]


def _runs(v: dict, setup: Setup) -> dict:
    """The four runs: (on, off) × (at the rate typed, saturated)."""
    live, full = requests(v), requests(v, saturated=True)
    out = {}
    for on in (True, False):
        cfg = setup.config(on)
        out[on] = simulate(setup.times, live, cfg), simulate(setup.times, full, cfg)
    return out


def _cost_step(v: dict, which: str, capacity: float, usd: float) -> dict:
    return step(
        f"Cost per million requests, cache {which}",
        "USD/GPU-h × N ÷ (capacity × 3600) × 10⁶",
        "{} × {} ÷ ({} × 3600) × 10⁶",
        [(v["usd_per_gpu_hour"], "USD"), v["num_gpus"], (capacity, "requests/s")],
        usd,
        "USD",
    )


def _derivation(v, setup, on, caps, costs) -> list[dict]:
    hits = on.hit_tokens_gpu + on.hit_tokens_host
    pool = ("KV pool", "min(memory rule's KV budget ÷ KV per token, cap), in 16-token blocks", "{} blocks")
    rate = hits / on.prompt_tokens if on.prompt_tokens else 0.0
    return [
        step(*pool, [setup.pool_tokens // 16], setup.pool_tokens, "tokens"),
        step("Hit rate", "prompt tokens found cached ÷ prompt tokens (first admission)", "{} ÷ {}",
             [(hits, "tokens"), (on.prompt_tokens, "tokens")], rate, "share"),
        step("Capacity, cache on", "requests ÷ time to finish them all, queued at t = 0", "saturated run", [],
             caps[0], "requests/s"),
        step("Capacity, cache off", "the same run without the cache", "saturated run", [], caps[1], "requests/s"),
        _cost_step(v, "on", caps[0], costs[0]),
        _cost_step(v, "off", caps[1], costs[1]),
    ]


def _notes(v: dict, on, off, setup: Setup) -> list[str]:
    notes = []
    if on.rejected or off.rejected:
        notes.append(
            f"{max(on.rejected, off.rejected)} requests need more KV than the pool's "
            f"{setup.pool_tokens:,} tokens and are rejected"
        )
    if v["host_cache_gib"] and not setup.host_blocks:
        notes.append("the host tier holds less than one block: no host tier")
    if v["shape"] == "chat" and v["num_requests"] < v["turns"]:
        notes.append("fewer requests than turns: one conversation is simulated")
    return notes


def _series(on, off) -> dict:
    runs = (("cache on", on), ("cache off", off))
    ys = [(name, "ms", [_pct(r.ttft_s, p) * 1e3 for p in PERCENTILES]) for name, r in runs]
    return series("TTFT by percentile, prefix cache on and off", "Percentile", "%", list(PERCENTILES), ys)


def _latency(on, off) -> dict:
    p50_on, p50_off = _pct(on.ttft_s, 50), _pct(off.ttft_s, 50)
    return {
        "ttft_p50_on_s": p50_on,
        "ttft_p50_off_s": p50_off,
        "ttft_p99_on_s": _pct(on.ttft_s, 99),
        "ttft_p99_off_s": _pct(off.ttft_s, 99),
        "ttft_p50_speedup": p50_off / p50_on if p50_on else 0.0,
        "output_tokens_per_s_on": on.output_tokens_per_s,
        "output_tokens_per_s_off": off.output_tokens_per_s,
    }


def compute(v: dict) -> dict:
    setup = Setup(v)
    runs = _runs(v, setup)
    (on, sat_on), (off, sat_off) = runs[True], runs[False]
    caps = _capacity(sat_on), _capacity(sat_off)
    costs = [usd_per_million(v["usd_per_gpu_hour"], v["num_gpus"], c) if c else 0.0 for c in caps]
    prompts = on.prompt_tokens or 1
    return {
        "hit_rate": (on.hit_tokens_gpu + on.hit_tokens_host) / prompts,
        "hit_rate_gpu": on.hit_tokens_gpu / prompts,
        "hit_rate_host": on.hit_tokens_host / prompts,
        **_latency(on, off),
        "capacity_on_requests_per_s": caps[0],
        "capacity_off_requests_per_s": caps[1],
        "capacity_gain": caps[0] / caps[1] if caps[1] else 0.0,
        "usd_per_m_requests_on": costs[0],
        "usd_per_m_requests_off": costs[1],
        "mean_prompt_tokens": round(prompts / max(1, len(on.ttft_s))),
        "kv_pool_tokens": setup.pool_tokens,
        "rejected_requests": on.rejected,
        "notes": _notes(v, on, off, setup),
        "derivation": _derivation(v, setup, on, caps, costs),
        "series": {"ttft_by_percentile": _series(on, off)},
    }
