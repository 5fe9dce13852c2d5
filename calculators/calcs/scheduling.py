"""Scheduling policies: queueing delay and SLO attainment against load, on the engine simulator.

The same seeded requests (scheduler_sim) run under four waiting-queue orders, as the engine implements
them (engine/queue.py): first come first served; two priority classes (a seeded share is class 0,
served first, as vLLM's priority policy: lower value first); shortest predicted output first, with a
length predictor of stated error (workload.with_predictions); and the same with the ageing guard (a
request that has waited w seconds ranks as if its prediction were w ÷ ageing_s tokens shorter). The
running batch is scheduled first every step (vLLM V1), so the order only matters while the queue is
non-empty: while the running-sequence cap, the KV pool or the token budget binds.

Each policy runs at the reader's rate and at RHO_GRID × the measured capacity; the plots are against
load ÷ capacity. A request meets the SLO when its TTFT and its mean TPOT are within target; attainment
counts every arrival.
"""

from __future__ import annotations

from ..schema import mark, output, series, step
from .deployment import efficiency_steps
from .scheduler_sim import POLICY_NAMES, fields, run, setup, unsaturated_note
from .steptime import deployment

RHO_GRID = (0.6, 1.4)  # loads plotted beside the reader's rate, × measured capacity
POLICIES = tuple(POLICY_NAMES)

SCHEMA = {
    "name": "scheduling",
    "title": "Scheduling policies: queueing delay and SLO attainment against load (simulated)",
    "description": (
        "One replica on the engine simulator (continuous batching, chunked prefill, token budget, "
        "running-sequence cap, paged KV pool with recompute preemption), step times from the roofline "
        "model with the efficiency factors. The same seeded requests (gamma arrival gaps, log-normal "
        "lengths) run under four orders of the waiting queue: first come first served; two priority "
        "classes; shortest predicted output first (a length predictor with a log-normal error of the "
        "stated spread); the same with ageing. Capacity is measured with every request queued at once; "
        "load ÷ capacity is the offered rate over it. Each run is finite and starts empty, so past a load "
        "of 1 the latencies are those of an overload of that length, not a steady state. A request meets "
        "the SLO when its TTFT and mean TPOT are both within target; attainment counts every arrival."
    ),
    "inputs": fields(5.5, 40),
    "outputs": [
        output("capacity_requests_per_s", "Capacity (measured, all queued at once)", "requests/s", "rate"),
        output("utilisation", "Load ÷ capacity at your rate (ρ)", "", "percent"),
        *[output(f"attainment_{p}", f"SLO attainment, {n}", "", "percent") for p, n in POLICY_NAMES.items()],
        *[output(f"queue_mean_{p}_s", f"Mean queueing delay, {n}", "s", "seconds") for p, n in POLICY_NAMES.items()],
        *[output(f"ttft_p99_{p}_s", f"TTFT p99, {n}", "s", "seconds") for p, n in POLICY_NAMES.items()],
        *[output(f"queue_max_{p}_s", f"Longest wait, {n}", "s", "seconds") for p, n in POLICY_NAMES.items()],
        output("high_attainment_fcfs", "High-priority class: SLO attainment under FCFS", "", "percent"),
        output("high_attainment_priority", "High-priority class: SLO attainment under priority", "", "percent"),
        output("ttft_p50_fcfs_s", "TTFT p50, FCFS", "s", "seconds"),
        output("ttft_p50_sjf_s", "TTFT p50, SJF (predicted)", "s", "seconds"),
        output("kv_capacity_tokens", "KV pool", "tokens", "integer"),
    ],
}


def compute(v: dict) -> dict:
    dep = deployment(v)
    s = setup(v)
    rate = v["request_rate_per_s"]
    here = {p: run(v, s, p, rate) for p in POLICIES}
    rates = sorted({rate, *(rho * s.capacity for rho in RHO_GRID)}) if s.capacity else [rate]
    grid = {r: here if r == rate else {p: run(v, s, p, r) for p in POLICIES} for r in rates}
    out = {
        "capacity_requests_per_s": s.capacity,
        "utilisation": rate / s.capacity if s.capacity else 0.0,
        **{f"attainment_{p}": here[p]["attainment"] for p in POLICIES},
        **{f"queue_mean_{p}_s": here[p]["queue_mean"] for p in POLICIES},
        **{f"ttft_p99_{p}_s": here[p]["ttft_p99"] for p in POLICIES},
        **{f"queue_max_{p}_s": here[p]["queue_max"] for p in POLICIES},
        "high_attainment_fcfs": here["fcfs"]["high_attainment"],
        "high_attainment_priority": here["priority"]["high_attainment"],
        "ttft_p50_fcfs_s": here["fcfs"]["ttft_p50"],
        "ttft_p50_sjf_s": here["sjf"]["ttft_p50"],
        "kv_capacity_tokens": s.kv_tokens,
        "notes": _notes(v, s, here),
        "derivation": efficiency_steps(dep) + _steps(v, s, here),
        "series": _series(s, rates, grid),
    }
    if s.capacity:  # the reader's rate is one of the sweep's: its load marked on each plot
        load = 100 * rate / s.capacity
        for plot in out["series"].values():
            mark(plot, None, load, name=f"yours ({load:.3g}% of capacity)")
    return out


def _notes(v: dict, s, here: dict) -> list[str]:
    notes = unsaturated_note(v, s)
    if s.saturated and s.capacity and v["request_rate_per_s"] >= s.capacity:
        notes.append(
            "the offered load is at or above the measured capacity: the queue grows for as long as the run "
            "lasts, so the delays shown grow with the number of requests simulated"
        )
    rejected = max(m["rejected"] for m in here.values())
    if rejected:
        notes.append(f"{rejected} requests need more KV than the pool holds and are rejected (they miss the SLO)")
    return notes


def _steps(v: dict, s, here: dict) -> list[dict]:
    return _load_steps(v, s) + _policy_steps(v, here)


def _load_steps(v: dict, s) -> list[dict]:
    return [
        step(
            "Capacity (measured)",
            "completions before the last admission ÷ its time, all queued at t = 0",
            "{} requests, {} running at most",
            [v["num_requests"], s.max_num_seqs],
            s.capacity,
            "requests/s",
        ),
        step(
            "Load ÷ capacity",
            "rate ÷ capacity",
            "{} ÷ {}",
            [(v["request_rate_per_s"], "requests/s"), (s.capacity, "requests/s")],
            v["request_rate_per_s"] / s.capacity if s.capacity else 0.0,
            "share",
        ),
    ]


def _policy_steps(v: dict, here: dict) -> list[dict]:
    fcfs, sjf = here["fcfs"], here["sjf"]
    return [
        step(
            "SLO attainment, FCFS",
            "requests with TTFT ≤ target and TPOT ≤ target ÷ arrivals",
            "TTFT ≤ {}, TPOT ≤ {}",
            [(v["ttft_slo_s"], "s"), (v["tpot_slo_s"], "s")],
            fcfs["attainment"],
            "share",
        ),
        step(
            "SLO attainment, SJF (predicted)",
            "the same, shortest predicted output first",
            "predictor spread {}",
            [v["predictor_error_cv"]],
            sjf["attainment"],
            "share",
        ),
        step(
            "Longest wait, SJF (predicted)",
            "max over requests of (first scheduled − arrival)",
            "FCFS: {}",
            [(fcfs["queue_max"], "s")],
            sjf["queue_max"],
            "s",
        ),
    ]


def _series(s, rates: list[float], grid: dict) -> dict:
    x = [100 * r / s.capacity if s.capacity else 0.0 for r in rates]

    def by(key, unit, scale=1.0):
        return [(POLICY_NAMES[p], unit, [scale * grid[r][p][key] for r in rates]) for p in POLICIES]

    return {
        "queue_vs_load": series(
            "Mean queueing delay vs load ÷ capacity", "Load ÷ capacity", "%", x, by("queue_mean", "s")
        ),
        "attainment_vs_load": series(
            "SLO attainment vs load ÷ capacity", "Load ÷ capacity", "%", x, by("attainment", "%", 100.0)
        ),
        "ttft_p99_vs_load": series("TTFT p99 vs load ÷ capacity", "Load ÷ capacity", "%", x, by("ttft_p99", "s")),
    }
