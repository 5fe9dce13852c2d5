"""Goodput: a seeded discrete-event simulation of continuous batching against TTFT/TPOT SLOs.

Goodput (DistServe, arXiv 2401.09670 §2): the highest request rate at which at least the target
share of requests meets both the TTFT and the TPOT SLO. Step times come from steptime.StepModel.

Steady state at a browser's cost (goodput_sim): utilisation ρ = rate × server time per request when
saturated; ρ ≥ 0.98 counts as overload (no steady state: attainment 0, latencies from one saturated
schedule shared by every overloaded rate); below it, a warm start at the implied batch, a settling
stretch, then num_requests measured. Checked against 5,000-request runs in tests/core/test_goodput_steady.py.
"""
from __future__ import annotations

import math

from ..schema import choice, integer, number, output, series, step
from .goodput_sim import ANALYSIS_REQUESTS, SIZE_CAP, Workload, offered_load, simulate, warm_start
from .memory import budget, engine_fields
from .steptime import StepModel, deployment, deployment_fields, efficiency_steps

DISTRIBUTIONS = [("fixed", "Fixed"), ("uniform", "Uniform"), ("lognormal", "Log-normal")]
RATE_FACTORS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0)   # the sweep, relative to the chosen rate


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
                    "TTFT and its mean TPOT are both within target. Steady state: the offered load is "
                    "checked against the capacity of the same step-time model; below it, the run starts "
                    "with the batch the load implies, and the requests measured arrive after a settling "
                    "stretch; at or within 2% of capacity queues grow without bound, and attainment is "
                    "reported as 0. Goodput follows DistServe (arXiv 2401.09670): requests per second "
                    "meeting both SLOs."),
    "inputs": deployment_fields(0.8, 0.6) + engine_fields() + [
        number("request_rate_per_s", "Request rate", 10.0, 0.001, 1e6, "requests/s"),
        integer("num_requests", "Requests measured", 200, 50, 2000, "requests",
                "Counted after a warm start at the steady-state batch and a settling stretch; later "
                "arrivals keep the server loaded while they finish."),
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
        output("stable", "Server keeps up (1 = yes; 0 = offered load within 2% of capacity or above)", "", "integer"),
        output("utilisation", "Offered load ÷ capacity (ρ)", "", "percent"),
        output("capacity_requests_per_s", "Capacity: requests/s a saturated server completes", "requests/s", "rate"),
        output("steady_state_batch", "Sequences decoding in steady state (estimate)", "sequences", "integer"),
        output("dropped_requests", "Requests whose KV never fits", "requests", "integer"),
        output("kv_capacity_tokens", "KV pool", "tokens", "integer"),
    ],
}


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile; 0.0 for no values."""
    if not sorted_values:
        return 0.0
    return sorted_values[max(0, math.ceil(pct / 100 * len(sorted_values)) - 1)]


def summarise(result, ttft_slo: float, tpot_slo: float) -> dict:
    served = [r for r in result if r is not None]
    ttfts, tpots = sorted(r[0] for r in served), sorted(r[1] for r in served)
    met = sum(1 for r in served if r[0] <= ttft_slo and r[1] <= tpot_slo)
    out = {"attainment": met / len(result), "dropped": len(result) - len(served)}
    for p in (50, 90, 99):
        out[f"ttft_p{p}"], out[f"tpot_p{p}"] = percentile(ttfts, p), percentile(tpots, p)
    return out


SETTLE = 0.25   # arrivals let in after the warm start before measuring, × the steady-state batch
STABLE_BELOW = 0.98   # ρ at or above this counts as overloaded: the estimate is good to a few percent,
                      # and this close to capacity the queue settles far more slowly than a short run shows
UNSTABLE = ("offered load exceeds capacity (or is within 2% of it): queues grow without bound; attainment "
            "falls towards 0 over a long enough run, so it is reported as 0 and goodput as 0; the latencies "
            "shown are those of the simulated stretch, and TTFT grows with its length")


def _measure(v: dict, sim: dict, rate: float) -> dict:
    """One rate: start warm at the steady-state batch, let SETTLE × batch arrivals in, measure the next
    num_requests; later arrivals keep the server loaded until they finish. Overloaded: see _overloaded."""
    load, capacity, workload = sim["load"], sim["capacity"], sim["workload"]
    rho = load.utilisation(rate)
    if rho >= STABLE_BELOW:
        return dict(summarise(_overloaded(v, sim, rate), v["ttft_slo_s"], v["tpot_slo_s"]),
                    attainment=0.0, utilisation=rho, stable=False, batch=min(SIZE_CAP, load.full_batch))
    batch = min(SIZE_CAP, load.batch(rate))
    settle, n = math.ceil(SETTLE * batch), v["num_requests"]
    warm = warm_start(workload.first(ANALYSIS_REQUESTS), batch, v["seed"], capacity)
    result = simulate(sim["steps"], workload.first(settle + n + batch), rate, v["max_batch_size"], capacity,
                      warm, (settle, settle + n), sim["alone"])
    return dict(summarise(result, v["ttft_slo_s"], v["tpot_slo_s"]), utilisation=rho, stable=True, batch=batch)


def _overloaded(v: dict, sim: dict, rate: float) -> list:
    """Past capacity the batch stays full and the queue never empties, so the schedule does not depend
    on the rate: simulate it once with every request queued at t = 0 (warm start at the full batch),
    then TTFT at this rate = first token − arrival, or the prefill alone if it arrived later."""
    if "saturated" not in sim:
        load, n, workload = sim["load"], v["num_requests"], sim["workload"]
        batch = min(SIZE_CAP, load.full_batch)
        queued = [(0.0, a, b) for _, a, b in workload.first(n + batch)]
        warm = warm_start(workload.first(ANALYSIS_REQUESTS), batch, v["seed"], sim["capacity"])
        sim["saturated"] = simulate(sim["steps"], queued, 1.0, v["max_batch_size"], sim["capacity"], warm, (0, n),
                                    sim["alone"])
    out, t = [], 0.0
    for r, (gap, _, _) in zip(sim["saturated"], sim["workload"].first(v["num_requests"])):
        t += gap / rate
        out.append(None if r is None else (max(r[0] - t, r[2]), r[1]))
    return out


def compute(v: dict) -> dict:
    dep, workload = deployment(v), Workload(v)
    steps = StepModel(dep)
    capacity = budget(dict(v, tensor_parallel=v["num_gpus"], context_tokens=1), v["num_gpus"])["tokens"]
    load = offered_load(steps, workload.first(ANALYSIS_REQUESTS), v["max_batch_size"], capacity)
    sim = {"load": load, "capacity": capacity, "workload": workload, "steps": steps, "alone": {}}
    rate, target = v["request_rate_per_s"], v["slo_target_percent"] / 100
    here = _measure(v, sim, rate)
    rates = [rate * f for f in RATE_FACTORS]
    sweep = [here if r == rate else _measure(v, sim, r) for r in rates]
    best = max((r for r, s in zip(rates, sweep) if s["attainment"] >= target), default=0.0)
    notes = [UNSTABLE] if not here["stable"] else []
    if here["dropped"]:
        notes.append(f"{here['dropped']} of {v['num_requests']} measured requests need more KV than the pool holds "
                     f"({capacity:,} tokens) and count as missing both SLOs")
    return {
        "slo_attainment": here["attainment"],
        "goodput_requests_per_s": rate * here["attainment"],
        "max_rate_meeting_slo_requests_per_s": best,
        "max_rate_meeting_slo_requests_per_s_per_gpu": best / v["num_gpus"],
        "stable": int(here["stable"]),
        "utilisation": here["utilisation"],
        "capacity_requests_per_s": load.capacity(),
        "steady_state_batch": here["batch"],
        **{f"{m}_p{p}_s": here[f"{m}_p{p}"] for m in ("ttft", "tpot") for p in (50, 90, 99)},
        "dropped_requests": here["dropped"],
        "kv_capacity_tokens": capacity,
        "notes": notes,
        "derivation": efficiency_steps(dep) + _steps(v, load, capacity, here, rates, best),
        "series": _sweep_series(rates, sweep),
    }


def _steps(v: dict, load, capacity: int, here: dict, rates: list[float], best: float) -> list[dict]:
    rate, service = v["request_rate_per_s"], load.service_s()
    return [
        step("KV pool", "engine budget ÷ KV per token (all layers)", f"{capacity} tokens", capacity, "tokens"),
        step("Batch when saturated", "min(max sequences, KV pool ÷ KV reserved per sequence)",
             f"min({v['max_batch_size']}, pool ÷ mean(prompt + output), weighted by time decoding)",
             load.full_batch, "sequences"),
        step("Server time per request, saturated",
             "prefill (shared with prompts admitted alongside) + (output − 1) × decode step(B) ÷ B",
             f"{load.prefill_s:.4g} + {load.decode_steps:.4g} × step({load.full_batch}, {load.context}) ÷ "
             f"{load.full_batch}", service, "s"),
        step("Capacity", "1 ÷ server time per request", f"1 ÷ {service:.4g}", load.capacity(), "requests/s"),
        step("Utilisation ρ", "rate × share of requests that fit × server time per request (≥ 1: queues grow "
             "without bound)",
             f"{rate} × {load.share:.4g} × {service:.4g}", here["utilisation"], ""),
        step("SLO attainment", "measured requests with TTFT ≤ target and TPOT ≤ target ÷ measured requests",
             f"TTFT ≤ {v['ttft_slo_s']} s, TPOT ≤ {v['tpot_slo_s']} s over {v['num_requests']} requests after a "
             f"warm start at {here['batch']} sequences" + ("" if here["stable"] else f"; 0 as ρ ≥ {STABLE_BELOW}"),
             here["attainment"], ""),
        step("Goodput", "rate × attainment", f"{rate} × {here['attainment']:.4g}",
             rate * here["attainment"], "requests/s"),
        step("Highest rate meeting the target", f"max rate with attainment ≥ {v['slo_target_percent']}%",
             "simulated at " + ", ".join(f"{r:.4g}" for r in rates), best, "requests/s"),
    ]


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
