"""Autoscaling through a traffic ramp: the headroom an autoscaler needs to hold an SLO while new replicas
cold-start. The replica is the goodput calculator's (one tensor-parallel group, prefill-first steps, KV reserved
for each whole request); the replicas over time are engine.autoscale's fluid model (why a fluid model and not
a simulation per replica: see there). The default lag is the cold_start calculator's time to ready at its
defaults. HEADROOMS are the headrooms searched and plotted.
"""

from __future__ import annotations

import math

from ..engine.autoscale import SIGNALS, Ramp, Scaler, busy_share, make_replica, run
from ..schema import choice, integer, mark, number, output, series, step, validate
from . import cold_start
from .goodput import SCHEMA as GOODPUT, _kept, simulation
from .steptime import deployment

HEADROOMS = tuple(round(0.05 * i, 2) for i in range(19))  # 0 … 0.9
DROPPED = ("request_rate_per_s", "num_requests", "itl_p99_slo_s")
NUM_REQUESTS = 1000  # what goodput's setup keys its kept schedules by; the fluid model runs no requests
SIGNAL_CHOICES = [
    ("inflight", "Requests in flight per replica (running + waiting)"),
    ("queue", "Requests waiting per replica (vllm:num_requests_waiting)"),
    ("kv", "KV-cache utilisation (vllm:kv_cache_usage_perc)"),
]
assert tuple(k for k, _ in SIGNAL_CHOICES) == SIGNALS
DEFAULT_LAG_S = round(cold_start.compute(validate(cold_start.SCHEMA["inputs"], {}))["ready_s"])
_replicas: dict = {}


def _fields() -> list[dict]:
    base = [f for f in GOODPUT["inputs"] if f["key"] not in DROPPED]
    return base + [
        number("base_rate_per_s", "Rate before the ramp", 20.0, 0.01, 1e5, "requests/s"),
        number("peak_rate_per_s", "Rate after the ramp", 60.0, 0.01, 1e5, "requests/s"),
        number("ramp_start_s", "Ramp starts at", 60.0, 0.0, 36_000.0, "s"),
        number(
            "ramp_s", "Ramp duration", 120.0, 0.0, 36_000.0, "s", "Linear from the base rate to the peak; 0 is a step."
        ),
        number("duration_s", "Time simulated", 600.0, 10.0, 36_000.0, "s"),
        choice(
            "signal",
            "Scaling signal",
            "inflight",
            SIGNAL_CHOICES,
            "What the autoscaler reads from every replica (vLLM's Prometheus metrics, as a KEDA ScaledObject or "
            "the inference gateway's endpoint picker reads them).",
        ),
        number(
            "headroom",
            "Headroom",
            0.3,
            0.0,
            0.9,
            "",
            "Target = the signal on one replica at utilisation 1 − headroom: 0.3 scales out at 70% of capacity.",
            0.05,
        ),
        number(
            "sync_s",
            "Autoscaler polling interval",
            30.0,
            1.0,
            3600.0,
            "s",
            "KEDA's pollingInterval (default 30 s); the Kubernetes HPA's own sync period is 15 s.",
        ),
        number(
            "lag_s",
            "Cold start (asked for → serving)",
            float(DEFAULT_LAG_S),
            0.0,
            7200.0,
            "s",
            "The default is the cold-start calculator's time to ready at its defaults.",
        ),
        integer("max_replicas", "Most replicas", 32, 1, 10_000, "replicas"),
    ]


SCHEMA = {
    "name": "autoscale_ramp",
    "title": "Autoscaling through a traffic ramp (fluid model)",
    "description": (
        "Replicas of the goodput calculator's server behind a balanced router, an offered rate that ramps "
        "linearly from a base to a peak, and an autoscaler that every polling interval reads a signal from each "
        "ready replica and asks for ceil(total ÷ target) replicas, as the Kubernetes HPA rule does (10% "
        "tolerance; no scale-down during the run), each ready a cold start later. The target is the signal on "
        "one replica at utilisation 1 − headroom. Each replica is a fluid queue: capacity, prefill time and "
        "batch from the same steady-state estimate goodput uses, Kingman's mean wait below saturation and the "
        "backlog's drain time above it. A request meets the SLO when the TTFT and TPOT at its arrival are "
        "within target. The headroom needed is the smallest of 0, 0.05, … 0.9 whose attainment reaches the "
        "target share. Mean latencies, not tails: a fluid model has no p99."
    ),
    "inputs": _fields(),
    "outputs": [
        output("attainment", "SLO attainment through the ramp, at your headroom", "", "percent"),
        output("headroom_needed", "Smallest headroom that holds the SLO target", "", "percent"),
        output("headroom_found", "A headroom of those searched holds the target (1 yes, 0 no)", "", "number"),
        output("capacity_per_replica_requests_per_s", "Capacity of one replica", "requests/s", "rate"),
        output("replicas_start", "Replicas at the start", "replicas", "integer"),
        output("replicas_end", "Replicas serving at the end", "replicas", "integer"),
        output("replicas_needed_peak", "Replicas the peak needs at your headroom", "replicas", "integer"),
        output("worst_ttft_s", "Worst mean TTFT through the ramp", "s", "seconds"),
        output("under_capacity_s", "Time with the offered rate above the capacity serving", "s", "seconds"),
        output("target_signal", "Autoscaler target per replica", "", "number"),
        output("utilisation_start", "Capacity used per replica at the start (ρ)", "", "percent"),
        output("in_flight_start", "Requests in flight per replica at the start", "requests", "number"),
        output("nvml_utilisation_start", "nvidia-smi utilisation per replica at the start (estimate)", "", "percent"),
        output("ramp_slope_per_s2", "Ramp slope", "requests/s²", "number"),
        output("lag_rate_gain_requests_per_s", "Rate gained during one cold start and one poll", "requests/s", "rate"),
    ],
}


def _replica(v: dict):
    dep = deployment(v)
    sim = simulation(dict(v, num_requests=NUM_REQUESTS), dep)
    work = sim.workload.first(300)
    reserved = sum(a + b for _, a, b in work) / len(work)
    key = (
        repr(dep),
        tuple(sorted((k, v[k]) for k in v if k not in ("model", "hardware") and not isinstance(v[k], (dict, list)))),
    )
    return _kept(
        _replicas, key, lambda: make_replica(sim.load, sim.cs2, sim.capacity / reserved, 1.0 / v["burstiness"])
    )


def _scaler(v: dict, headroom: float, lag_s: float | None = None) -> Scaler:
    return Scaler(v["signal"], headroom, v["sync_s"], v["lag_s"] if lag_s is None else lag_s, v["max_replicas"])


def _ramp(v: dict) -> Ramp:
    return Ramp(v["base_rate_per_s"], v["peak_rate_per_s"], v["ramp_start_s"], v["ramp_s"], v["duration_s"])


def attainment(v: dict, headroom: float | None = None, lag_s: float | None = None) -> float:
    """The run's attainment at a headroom and lag (the reader's by default): for tests and the prose."""
    h = v["headroom"] if headroom is None else headroom
    return run(_replica(v), _ramp(v), _scaler(v, h, lag_s), v["ttft_slo_s"], v["tpot_slo_s"]).attainment


def compute(v: dict) -> dict:
    replica, ramp = _replica(v), _ramp(v)
    target_share = v["slo_target_percent"] / 100
    trace = run(replica, ramp, _scaler(v, v["headroom"]), v["ttft_slo_s"], v["tpot_slo_s"])
    sweep = [
        run(replica, ramp, _scaler(v, h), v["ttft_slo_s"], v["tpot_slo_s"], record=False).attainment for h in HEADROOMS
    ]
    holding = [h for h, a in zip(HEADROOMS, sweep) if a >= target_share]
    needed = holding[0] if holding else HEADROOMS[-1]
    mu = replica.capacity
    peak_need = min(v["max_replicas"], math.ceil(ramp.peak / mu / (1 - v["headroom"]) - 1e-9))
    slope = (ramp.peak - ramp.base) / ramp.ramp_s if ramp.ramp_s > 0 else 0.0
    under = sum(1.0 for lam, n in zip(trace.rates, trace.ready) if lam > n * mu)
    target = replica.target(v["signal"], v["headroom"])
    rho0 = ramp.base / (trace.initial * mu)
    inflight0 = replica.signal("inflight", rho0, 0.0)
    time_plot = series(
        "Offered rate and capacity serving",
        "Time",
        "s",
        trace.times,
        [
            ("offered rate", "requests/s", trace.rates),
            ("capacity serving", "requests/s", [n * mu for n in trace.ready]),
        ],
    )
    replicas_plot = series(
        "Replicas asked for and serving",
        "Time",
        "s",
        trace.times,
        [("asked for", "replicas", trace.desired), ("serving", "replicas", trace.ready)],
    )
    ttft_plot = series(
        "Mean TTFT at arrival",
        "Time",
        "s",
        trace.times,
        [("TTFT", "s", trace.ttft), ("TTFT target", "s", [v["ttft_slo_s"]] * len(trace.times))],
    )
    headroom_plot = series(
        "SLO attainment through the ramp vs headroom",
        "Headroom",
        "%",
        [round(100 * h) for h in HEADROOMS],
        [("attainment", "%", [100 * a for a in sweep]), ("target", "%", [v["slo_target_percent"]] * len(HEADROOMS))],
    )
    mine = round(100 * v["headroom"])
    if mine in headroom_plot["x"]["values"]:
        headroom_plot = mark(headroom_plot, "headroom", mine)
    derivation = [
        step(
            "Capacity of one replica",
            "1 ÷ server time per request when saturated",
            "1 ÷ {}",
            [(replica.service_s, "s")],
            mu,
            "requests/s",
        ),
        step(
            "Autoscaler target",
            "signal on one replica at utilisation 1 − headroom",
            "signal(1 − {})",
            [v["headroom"]],
            target,
            "",
        ),
        step(
            "Replicas at the start",
            "ceil(base rate ÷ capacity ÷ (1 − headroom))",
            "ceil({} ÷ {} ÷ (1 − {}))",
            [(ramp.base, "requests/s"), (mu, "requests/s"), v["headroom"]],
            trace.initial,
            "replicas",
        ),
        step(
            "Replicas the peak needs",
            "ceil(peak rate ÷ capacity ÷ (1 − headroom))",
            "ceil({} ÷ {} ÷ (1 − {}))",
            [(ramp.peak, "requests/s"), (mu, "requests/s"), v["headroom"]],
            peak_need,
            "replicas",
        ),
        step(
            "Rate gained during one cold start and one poll",
            "ramp slope × (lag + polling interval)",
            "{} × ({} + {})",
            [(slope, "requests/s²"), (v["lag_s"], "s"), (v["sync_s"], "s")],
            slope * (v["lag_s"] + v["sync_s"]),
            "requests/s",
        ),
        step(
            "SLO attainment",
            "arrivals whose TTFT and TPOT at arrival are within target ÷ all arrivals",
            "TTFT ≤ {}, TPOT ≤ {}",
            [(v["ttft_slo_s"], "s"), (v["tpot_slo_s"], "s")],
            trace.attainment,
            "share",
        ),
        step(
            "nvidia-smi utilisation at the start (estimate)",
            "share of time ≥ 1 request in flight: 1 − e^(−in flight), Poisson arrivals",
            "1 − e^(−{})",
            [inflight0],
            busy_share(inflight0),
            "share",
        ),
        step(
            "Headroom needed",
            "smallest headroom searched with attainment ≥ target",
            "attainment ≥ {}",
            [(v["slo_target_percent"], "%")],
            needed,
            "share",
        ),
    ]
    notes = (
        []
        if holding
        else [
            "No headroom up to 0.9 holds the target: the lag or the ramp is too steep, or "
            "one replica cannot meet the SLO at any load (check TPOT against the target)."
        ]
    )
    return {
        "attainment": trace.attainment,
        "headroom_needed": needed,
        "headroom_found": 1.0 if holding else 0.0,
        "capacity_per_replica_requests_per_s": mu,
        "replicas_start": trace.initial,
        "replicas_end": trace.ready[-1],
        "replicas_needed_peak": peak_need,
        "worst_ttft_s": max(trace.ttft),
        "under_capacity_s": under,
        "target_signal": target,
        "utilisation_start": rho0,
        "in_flight_start": inflight0,
        "nvml_utilisation_start": busy_share(inflight0),
        "ramp_slope_per_s2": slope,
        "lag_rate_gain_requests_per_s": slope * (v["lag_s"] + v["sync_s"]),
        "derivation": derivation,
        "series": {
            "rate_vs_time": time_plot,
            "replicas_vs_time": replicas_plot,
            "ttft_vs_time": ttft_plot,
            "attainment_vs_headroom": headroom_plot,
        },
        "notes": notes,
    }
