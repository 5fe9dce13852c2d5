"""Goodput: a seeded discrete-event simulation of continuous batching against TTFT/TPOT SLOs.

Goodput (DistServe, arXiv 2401.09670 §2): the highest request rate at which at least the target
share of requests meets both the TTFT and the TPOT SLO. Step times come from steptime.StepModel.
"""
from __future__ import annotations

import heapq
import math
import random
from collections import deque

from ..schema import choice, integer, number, output, series, step
from .memory import budget, engine_fields
from .steptime import StepModel, deployment, deployment_fields, efficiency_steps

DISTRIBUTIONS = [("fixed", "Fixed"), ("uniform", "Uniform"), ("lognormal", "Log-normal")]
RATE_FACTORS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)   # the sweep, relative to the chosen rate


def sample_length(rng: random.Random, kind: str, mean: float, cv: float) -> int:
    """One length with the given mean and coefficient of variation (spread ÷ mean)."""
    if kind == "fixed" or cv == 0:
        x = mean
    elif kind == "uniform":   # a uniform of half-width a has cv = a ÷ (mean × √3)
        half = min(cv * math.sqrt(3), 1.0) * mean
        x = rng.uniform(mean - half, mean + half)
    else:
        sigma2 = math.log1p(cv * cv)
        x = rng.lognormvariate(math.log(mean) - sigma2 / 2, math.sqrt(sigma2))
    return max(1, round(x))


def workload(v: dict) -> list[tuple[float, int, int]]:
    """(arrival gap at rate 1, input tokens, output tokens) per request; scaled by rate later."""
    rng = random.Random(v["seed"])
    return [(rng.expovariate(1.0),
             sample_length(rng, v["input_distribution"], v["input_tokens_mean"], v["input_tokens_cv"]),
             sample_length(rng, v["output_distribution"], v["output_tokens_mean"], v["output_tokens_cv"]))
            for _ in range(v["num_requests"])]


def arrival_times(work, rate: float) -> list[float]:
    arrivals, t = [], 0.0
    for gap, _, _ in work:
        t += gap / rate
        arrivals.append(t)
    return arrivals


def simulate(steps: StepModel, work, rate: float, max_batch: int, kv_capacity: float, kv_per_token: float):
    """Prefill-first continuous batching, FCFS, KV reserved for prompt + output on admission.

    Decode steps between events are taken in chunks (each step's time at the chunk's mean
    context, rounded to a token), so the loop runs per event, not per token.

    Returns per-request (ttft_s, tpot_s), None for a request whose KV can never fit.
    """
    arrivals, n = arrival_times(work, rate), len(work)
    inp, out = [w[1] for w in work], [w[2] for w in work]
    need = [(a + b) * kv_per_token for a, b in zip(inp, out)]
    decode_time, prefill_time, push, pop = steps.decode_time, steps.prefill_time, heapq.heappush, heapq.heappop
    result, first_token, waiting, running = [None] * n, [0.0] * n, deque(), []
    now, g, ctx_offset, kv_used, nxt, done = 0.0, 0, 0, 0.0, 0, 0
    while done < n:
        while nxt < n and arrivals[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        if not waiting and not running:
            now = arrivals[nxt]
            continue
        admitted, room = [], max_batch - len(running)
        while waiting and len(admitted) < room:
            i = waiting[0]
            if need[i] > kv_capacity:      # can never fit: drop it and count it as missing both SLOs
                waiting.popleft()
                done += 1
                continue
            if kv_used + need[i] > kv_capacity:
                break
            kv_used += need[i]
            admitted.append(waiting.popleft())
        if admitted:
            now += prefill_time([inp[i] for i in admitted])
            for i in admitted:
                first_token[i] = now
                if out[i] == 1:
                    result[i], done = (now - arrivals[i], 0.0), done + 1
                    kv_used -= need[i]
                else:   # it finishes after out − 1 more decode steps
                    push(running, (g + out[i] - 1, i))
                    ctx_offset += inp[i] + 1 - g
            continue
        if not running:     # head of the queue waits for memory nobody will free: impossible here
            break
        # Fast-forward k decode steps at once: up to the next finish, or the step boundary that
        # passes the next arrival when it could be admitted; time at the chunk's middle context.
        batch = len(running)
        context = (ctx_offset + batch * g) / batch
        k, step_s = running[0][0] - g, 0.0
        if not waiting and nxt < n:
            step_s = decode_time(batch, round(context))
            k = min(k, max(1, math.ceil((arrivals[nxt] - now) / step_s)))
        now += k * (step_s if k == 1 and step_s else decode_time(batch, round(context + (k - 1) / 2)))
        g += k
        while running and running[0][0] <= g:
            finish_step, i = pop(running)
            result[i] = (first_token[i] - arrivals[i], (now - first_token[i]) / (out[i] - 1))
            ctx_offset -= inp[i] + 1 - (finish_step - out[i] + 1)
            kv_used -= need[i]
            done += 1
    return result


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile; 0.0 for no values."""
    if not sorted_values:
        return 0.0
    return sorted_values[max(0, math.ceil(pct / 100 * len(sorted_values)) - 1)]


def summarise(result, ttft_slo: float, tpot_slo: float) -> dict:
    served = [r for r in result if r is not None]
    ttfts, tpots = sorted(r[0] for r in served), sorted(r[1] for r in served)
    met = sum(1 for a, b in served if a <= ttft_slo and b <= tpot_slo)
    out = {"attainment": met / len(result), "dropped": len(result) - len(served)}
    for p in (50, 90, 99):
        out[f"ttft_p{p}"], out[f"tpot_p{p}"] = percentile(ttfts, p), percentile(tpots, p)
    return out


SCHEMA = {
    "name": "goodput",
    "title": "Goodput and SLO attainment (simulated)",
    "description": ("A seeded discrete-event simulation of one serving replica (the GPUs form one "
                    "tensor-parallel group). Assumptions: Poisson arrivals; prompt and output lengths "
                    "drawn independently (fixed, uniform, or log-normal with the given mean and "
                    "coefficient of variation); first-come first-served; continuous batching that runs "
                    "a prefill of all newly admitted requests before the next decode step (decodes stall "
                    "meanwhile, no chunked prefill); KV for prompt plus output reserved on admission, "
                    "no preemption; step times from the roofline model scaled by the efficiency factors; "
                    "no network, tokenisation or scheduler overhead. A request meets the SLO when its "
                    "TTFT and its mean TPOT are both within target. Goodput follows DistServe "
                    "(arXiv 2401.09670): requests per second meeting both SLOs."),
    "inputs": deployment_fields(0.8, 0.6) + engine_fields() + [
        number("request_rate_per_s", "Request rate", 10.0, 0.001, 1e6, "requests/s"),
        integer("num_requests", "Requests simulated", 200, 50, 2000, "requests"),
        integer("seed", "Random seed", 0, 0, 2 ** 31 - 1),
        choice("input_distribution", "Prompt length distribution", "lognormal", DISTRIBUTIONS),
        integer("input_tokens_mean", "Mean prompt length", 512, 1, 1_000_000, "tokens"),
        number("input_tokens_cv", "Prompt length spread (std ÷ mean)", 0.5, 0.0, 4.0, "", step=0.05),
        choice("output_distribution", "Output length distribution", "lognormal", DISTRIBUTIONS),
        integer("output_tokens_mean", "Mean output length", 128, 1, 100_000, "tokens"),
        number("output_tokens_cv", "Output length spread (std ÷ mean)", 0.5, 0.0, 4.0, "", step=0.05),
        integer("max_batch_size", "Max concurrent sequences", 256, 1, 100_000, "sequences"),
        number("ttft_slo_s", "TTFT target", 0.5, 0.001, 3600.0, "s",
               "DistServe's chatbot SLO for OPT-13B is 0.2 s TTFT, 0.1 s TPOT (Table 1)."),
        number("tpot_slo_s", "TPOT target", 0.1, 0.0001, 60.0, "s"),
        number("slo_target_percent", "Share of requests that must meet both", 90.0, 1.0, 100.0, "%"),
    ],
    "outputs": [
        output("slo_attainment", "Requests meeting both SLOs", "", "percent"),
        output("goodput_requests_per_s", "Goodput at this rate", "requests/s", "rate"),
        output("max_rate_meeting_slo_requests_per_s", "Highest simulated rate meeting the target",
               "requests/s", "rate"),
        output("max_rate_meeting_slo_requests_per_s_per_gpu", "Highest rate meeting the target, per GPU",
               "requests/s", "rate"),
        output("ttft_p50_s", "TTFT p50", "s", "seconds"), output("ttft_p90_s", "TTFT p90", "s", "seconds"),
        output("ttft_p99_s", "TTFT p99", "s", "seconds"), output("tpot_p50_s", "TPOT p50", "s", "seconds"),
        output("tpot_p90_s", "TPOT p90", "s", "seconds"), output("tpot_p99_s", "TPOT p99", "s", "seconds"),
        output("dropped_requests", "Requests whose KV never fits", "requests", "integer"),
        output("kv_capacity_tokens", "KV pool", "tokens", "integer"),
    ],
}


def compute(v: dict) -> dict:
    dep, work = deployment(v), workload(v)
    steps = StepModel(dep)
    capacity = budget(dict(v, tensor_parallel=v["num_gpus"], context_tokens=1), v["num_gpus"])["tokens"]
    run_at = lambda rate: summarise(simulate(steps, work, rate, v["max_batch_size"], capacity, 1.0),  # noqa: E731
                                    v["ttft_slo_s"], v["tpot_slo_s"])
    rate, target = v["request_rate_per_s"], v["slo_target_percent"] / 100
    here = run_at(rate)
    rates = [rate * f for f in RATE_FACTORS]
    sweep = [here if r == rate else run_at(r) for r in rates]
    best = max((r for r, s in zip(rates, sweep) if s["attainment"] >= target), default=0.0)
    return {
        "slo_attainment": here["attainment"],
        "goodput_requests_per_s": rate * here["attainment"],
        "max_rate_meeting_slo_requests_per_s": best,
        "max_rate_meeting_slo_requests_per_s_per_gpu": best / v["num_gpus"],
        **{f"{m}_p{p}_s": here[f"{m}_p{p}"] for m in ("ttft", "tpot") for p in (50, 90, 99)},
        "dropped_requests": here["dropped"],
        "kv_capacity_tokens": capacity,
        "notes": ([f"{here['dropped']} of {v['num_requests']} requests need more KV than the pool holds "
                   f"({capacity:,} tokens) and count as missing both SLOs"] if here["dropped"] else []),
        "derivation": efficiency_steps(dep) + [
            step("KV pool", "engine budget ÷ KV per token (all layers)", f"{capacity} tokens", capacity, "tokens"),
            step("SLO attainment", "requests with TTFT ≤ target and TPOT ≤ target ÷ requests",
                 f"TTFT ≤ {v['ttft_slo_s']} s, TPOT ≤ {v['tpot_slo_s']} s over {v['num_requests']} requests",
                 here["attainment"], ""),
            step("Goodput", "rate × attainment", f"{rate} × {here['attainment']:.4g}",
                 rate * here["attainment"], "requests/s"),
            step("Highest rate meeting the target", f"max rate with attainment ≥ {v['slo_target_percent']}%",
                 "simulated at " + ", ".join(f"{r:.4g}" for r in rates), best, "requests/s"),
        ],
        "series": _sweep_series(rates, sweep),
    }


def _sweep_series(rates: list[float], sweep: list[dict]) -> dict:
    """One plot per unit: attainment (%), goodput (requests/s), p90 latencies (s)."""
    return {
        "goodput_vs_rate": series("SLO attainment vs request rate", "Request rate", "requests/s", rates,
                                  [("SLO attainment", "%", [100 * s["attainment"] for s in sweep])]),
        "goodput_requests_vs_rate": series(
            "Goodput vs request rate", "Request rate", "requests/s", rates,
            [("goodput", "requests/s", [r * s["attainment"] for r, s in zip(rates, sweep)]),
             ("offered rate", "requests/s", list(rates))]),
        "latency_vs_rate": series("p90 TTFT and TPOT vs request rate", "Request rate", "requests/s", rates,
                                  [("TTFT p90", "s", [s["ttft_p90"] for s in sweep]),
                                   ("TPOT p90", "s", [s["tpot_p90"] for s in sweep])]),
    }
