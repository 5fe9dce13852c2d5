"""Autoscaling through a traffic ramp: the headroom an autoscaler needs to hold an SLO while new replicas
cold-start. The replica is the goodput calculator's (one tensor-parallel group, prefill-first steps, KV reserved
for each whole request); the replicas over time are engine.autoscale's fluid model (why a fluid model and not
a simulation per replica: see there). The default lag is the cold_start calculator's time to ready at its
defaults. HEADROOMS are the headrooms searched (every 0.05); PLOTTED those run for the chart (every 0.1, and the
reader's). Attainment never falls as headroom grows (tests/core/test_autoscale.py), so the smallest headroom that
holds is found from the chart's runs and one more: the 0.05 step below the first 0.1 step that holds.

Replica model "simulated" also runs the reader's headroom through engine.fleet: every replica a real engine of
the same server, behind a least-outstanding router, under the same autoscaler (tests/core/test_autoscale_sim.py
pins the two against each other). The headroom search stays fluid; the simulated run is limited to
MAX_SIMULATED requests, about SIMULATED_S seconds of CPython at that size (measured: see the field's help).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError
from ..engine import fleet
from ..engine.autoscale import SIGNALS, Ramp, Scaler, Trace, busy_share, make_replica, run
from ..schema import choice, integer, mark, number, output, series, step, validate
from . import cold_start
from .goodput import SCHEMA as GOODPUT, _kept, server, simulation
from .steptime import deployment

HEADROOMS = tuple(round(0.05 * i, 2) for i in range(19))  # 0 … 0.9
PLOTTED = HEADROOMS[::2]  # 0, 0.1 … 0.9
DROPPED = ("request_rate_per_s", "num_requests", "itl_p99_slo_s", "workload_shape", "shape_turns")  # no shapes here
NUM_REQUESTS = 1000  # what goodput's setup keys its kept schedules by; the fluid model runs no requests
SIGNAL_CHOICES = [
    ("inflight", "Requests in flight per replica (running + waiting)"),
    ("queue", "Requests waiting per replica (vllm:num_requests_waiting)"),
    ("kv", "KV-cache utilisation (vllm:kv_cache_usage_perc)"),
]
assert tuple(k for k, _ in SIGNAL_CHOICES) == SIGNALS
DEFAULT_LAG_S = round(cold_start.compute(validate(cold_start.SCHEMA["inputs"], {}))["ready_s"])
DURATION_MIN = 10.0  # s, the shortest run
MAX_SIMULATED = 20_000  # requests through a simulated run
SIMULATED_S = 1.5  # CPython seconds for a run of MAX_SIMULATED requests at the defaults' server (measured)
NOT_SIMULATED = -1  # the simulated outputs' value when the replica model is fluid
NO_SCALE_UP = -2  # first_scale_up_s when no poll asks for more
NONE, UNSIM = {NO_SCALE_UP: "none"}, {NOT_SIMULATED: "not simulated"}  # the outputs' sentinels in words
UNSIM_NONE = {**UNSIM, **NONE}
REPLICA_MODELS = [
    ("fluid", "Fluid queues (fast)"),
    ("simulated", "Fluid, and your headroom simulated (slower, shorter ramps)"),
]
_replicas: dict = {}


OWN_FIELDS = [
    number("base_rate_per_s", "Rate before the ramp", 20.0, 0.01, 1e5, "requests/s"),
    number("peak_rate_per_s", "Rate after the ramp", 60.0, 0.01, 1e5, "requests/s"),
    number("ramp_start_s", "Ramp starts at", 60.0, 0.0, 36_000.0, "s"),
    number("ramp_s", "Ramp duration", 120.0, 0.0, 36_000.0, "s", "Linear from the base rate to the peak; 0 is a step."),
    number("duration_s", "Time simulated", 600.0, DURATION_MIN, 36_000.0, "s"),
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
        15.0,
        1.0,
        3600.0,
        "s",
        "How often the HPA reads the signal: its sync period, 15 s by default, also when KEDA feeds it (KEDA's "
        "30 s pollingInterval governs 0 ↔ 1, and 1 → N only with useCachedMetrics). Add the metric's own age "
        "(the Prometheus scrape interval): the model reads the signal fresh.",
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
    choice(
        "replica_model",
        "Replica model",
        "fluid",
        REPLICA_MODELS,
        f"Simulated: your headroom also runs with every replica a real engine (requests, prefill, decode, KV) "
        f"behind a least-outstanding router, at most {MAX_SIMULATED:,} requests (about {SIMULATED_S:g} s in "
        "CPython at that size, longer in the browser); the headroom search stays fluid.",
    ),
]
FIELDS = [f for f in GOODPUT["inputs"] if f["key"] not in DROPPED] + OWN_FIELDS


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
    "inputs": FIELDS,
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
        output("mean_ttft_s", "Mean TTFT through the ramp", "s", "seconds"),
        output("first_scale_up_s", "First poll that asks for more replicas", "s", "seconds", words=NONE),
        output("simulated_attainment", "Simulated: SLO attainment at your headroom", "", "percent", words=UNSIM),
        output("simulated_mean_ttft_s", "Simulated: mean TTFT", "s", "seconds", words=UNSIM),
        output("simulated_first_scale_up_s", "Simulated: first poll asking for more", "s", "seconds", words=UNSIM_NONE),
        output("simulated_replicas_end", "Simulated: replicas serving at the end", "replicas", "integer", words=UNSIM),
        output("simulated_requests", "Simulated: requests through the run", "requests", "integer", words=UNSIM),
        output("ramp_slope_per_s2", "Ramp slope", "requests/s²", "number"),
        output("lag_rate_gain_requests_per_s", "Rate gained during one cold start and one poll", "requests/s", "rate"),
    ],
}


NOT_REPLICA = ("ttft_slo_s", "tpot_slo_s", "slo_target_percent")  # with the ramp's and autoscaler's own fields


def _replica(v: dict):
    """The replica's steady-state figures, kept between recomputes that change only the ramp, the autoscaler
    or the objectives."""
    dep = deployment(v)
    sim = simulation(dict(v, num_requests=NUM_REQUESTS), dep)
    if sim.load.capacity() <= 0 or sim.capacity <= 0:
        raise InputError("num_gpus", "enough GPUs per replica for the weights and one request's KV cache")
    work = sim.workload.first(300)
    reserved = sum(a + b for _, a, b in work) / len(work)
    skip = set(NOT_REPLICA) | {f["key"] for f in OWN_FIELDS} | {"model", "hardware"}
    key = (repr(dep), tuple(sorted((k, v[k]) for k in v if k not in skip and not isinstance(v[k], (dict, list)))))
    return _kept(
        _replicas, key, lambda: make_replica(sim.load, sim.cs2, sim.capacity / reserved, 1.0 / v["burstiness"])
    )


def _scaler(v: dict, headroom: float, lag_s: float | None = None) -> Scaler:
    return Scaler(v["signal"], headroom, v["sync_s"], v["lag_s"] if lag_s is None else lag_s, v["max_replicas"])


MIN_RAMP_S = 1e-3  # a shorter ramp is a step to a scaler that syncs in seconds (and its slope could overflow)


def ramp_slope(ramp: Ramp) -> float:
    """Requests/s gained per second on the ramp; 0 for a step, as a ramp under a millisecond is."""
    return (ramp.peak - ramp.base) / ramp.ramp_s if ramp.ramp_s >= MIN_RAMP_S else 0.0


def _ramp(v: dict) -> Ramp:
    return Ramp(v["base_rate_per_s"], v["peak_rate_per_s"], v["ramp_start_s"], v["ramp_s"], v["duration_s"])


def attainment(v: dict, headroom: float | None = None, lag_s: float | None = None) -> float:
    """The run's attainment at a headroom and lag (the reader's by default): for tests and the prose."""
    h = v["headroom"] if headroom is None else headroom
    return run(_replica(v), _ramp(v), _scaler(v, h, lag_s), v["ttft_slo_s"], v["tpot_slo_s"]).attainment


def simulated(v: dict, headroom: float | None = None, lag_s: float | None = None) -> fleet.FleetTrace:
    """The run at a headroom and lag (the reader's by default) with every replica an engine (engine.fleet): the
    same server, workload draws, ramp and autoscaler as the fluid run."""
    ramp = _ramp(v)
    expected = ramp.arrivals(ramp.duration_s)
    if expected > MAX_SIMULATED:
        longest = ramp.time_of(MAX_SIMULATED)
        allowed = f"at most {longest:,.0f} s at these rates" if longest >= DURATION_MIN else "lower rates"
        raise InputError(
            "duration_s",
            f"{allowed} when simulated (about {MAX_SIMULATED:,} requests; {expected:,.0f} expected in "
            f"{ramp.duration_s:,.0f} s), or the fluid replica model",
        )
    dep = deployment(v)
    sim = simulation(dict(v, num_requests=NUM_REQUESTS), dep)
    requests = fleet.ramp_requests(sim.workload, ramp)
    h = v["headroom"] if headroom is None else headroom
    slo = (v["ttft_slo_s"], v["tpot_slo_s"])
    cfg = server(sim.capacity, sim.max_seqs)
    return fleet.run(sim.times, cfg, requests, _replica(v), ramp, _scaler(v, h, lag_s), slo)


def first_scale_up(desired: tuple, initial: int, dt: float = 1.0) -> float:
    """The time of the first poll that asked for more replicas than at the start (desired[k] is as of the end of
    step k), or NO_SCALE_UP."""
    k = next((k for k, n in enumerate(desired) if n > initial), None)
    return NO_SCALE_UP if k is None else (k + 1) * dt


@dataclass(frozen=True)
class Facts:
    """What one recompute found: the reader's run, the headroom sweep and the figures derived from them."""

    trace: Trace
    sweep: list  # (headroom, attainment) plotted
    needed: float
    holding: bool
    mu: float
    service_s: float
    peak_need: int
    slope: float
    under_s: float
    target: float
    rho0: float
    inflight0: float


def _facts(v: dict) -> Facts:
    replica, ramp = _replica(v), _ramp(v)
    trace = run(replica, ramp, _scaler(v, v["headroom"]), v["ttft_slo_s"], v["tpot_slo_s"])
    goal = v["slo_target_percent"] / 100
    runs = {v["headroom"]: trace.attainment}

    def at(h: float) -> float:
        if h not in runs:
            runs[h] = run(replica, ramp, _scaler(v, h), v["ttft_slo_s"], v["tpot_slo_s"], record=False).attainment
        return runs[h]

    holding = [h for h in PLOTTED if at(h) >= goal]
    if holding and holding[0] > 0 and at(round(holding[0] - 0.05, 2)) >= goal:
        holding.insert(0, round(holding[0] - 0.05, 2))
    sweep = sorted(set(PLOTTED) | {v["headroom"]})
    mu = replica.capacity
    rho0 = ramp.base / (trace.initial * mu)
    return Facts(
        trace,
        [(h, at(h)) for h in sweep],
        holding[0] if holding else HEADROOMS[-1],
        bool(holding),
        mu,
        replica.service_s,
        min(v["max_replicas"], math.ceil(ramp.peak / mu / (1 - v["headroom"]) - 1e-9)),
        ramp_slope(ramp),
        sum(1.0 for lam, n in zip(trace.rates, trace.ready) if lam > n * mu),
        replica.target(v["signal"], v["headroom"]),
        rho0,
        replica.signal("inflight", rho0, 0.0),
    )


TIME_POINTS = 150  # the time charts show about this many points (every k-th second): a smaller page and result


def _time_plots(v: dict, f: Facts, sim: fleet.FleetTrace | None) -> dict:
    """The time charts, every k-th second; a simulated run adds its replicas serving and its TTFT."""
    k = max(1, len(f.trace.times) // TIME_POINTS)
    x = f.trace
    t = Trace(x.times[::k], x.rates[::k], x.ready[::k], x.desired[::k], x.ttft[::k], x.tpot[::k], x.attainment, 0)
    replicas = [("asked for", "replicas", t.desired), ("serving", "replicas", t.ready)]
    ttft = [("TTFT", "s", t.ttft), ("TTFT target", "s", [v["ttft_slo_s"]] * len(t.times))]
    if sim is not None:
        replicas.append(("serving, simulated", "replicas", sim.ready[::k]))
        ttft.insert(1, ("TTFT, simulated (mean of each second's arrivals)", "s", sim.ttft[::k]))
    return {
        "rate_vs_time": series(
            "Offered rate and capacity serving",
            "Time",
            "s",
            t.times,
            [("offered rate", "requests/s", t.rates), ("capacity serving", "requests/s", [n * f.mu for n in t.ready])],
        ),
        "replicas_vs_time": series("Replicas asked for and serving", "Time", "s", t.times, replicas),
        "ttft_vs_time": series("Mean TTFT at arrival", "Time", "s", t.times, ttft),
    }


def _headroom_plot(v: dict, f: Facts) -> dict:
    xs = [h for h, _ in f.sweep]
    plot = series(
        "SLO attainment through the ramp vs headroom",
        "Headroom",
        "",
        xs,
        [("attainment", "%", [100 * a for _, a in f.sweep]), ("target", "%", [v["slo_target_percent"]] * len(xs))],
    )
    return mark(plot, "headroom", v["headroom"])


def _replica_steps(v: dict, f: Facts) -> list[dict]:
    ramp = _ramp(v)
    per = [(f.mu, "requests/s"), v["headroom"]]
    return [
        step("Capacity of one replica", "1 ÷ server time per request when saturated", "1 ÷ {}",
             [(f.service_s, "s")], f.mu, "requests/s"),
        step("Autoscaler target", "signal on one replica at utilisation 1 − headroom", "signal(1 − {})",
             [v["headroom"]], f.target, ""),
        step("Replicas at the start", "ceil(base rate ÷ capacity ÷ (1 − headroom))", "ceil({} ÷ {} ÷ (1 − {}))",
             [(ramp.base, "requests/s"), *per], f.trace.initial, "replicas"),
        step("Replicas the peak needs", "ceil(peak rate ÷ capacity ÷ (1 − headroom))", "ceil({} ÷ {} ÷ (1 − {}))",
             [(ramp.peak, "requests/s"), *per], f.peak_need, "replicas"),
    ]  # fmt: skip


def _ramp_steps(v: dict, f: Facts) -> list[dict]:
    gain = f.slope * (v["lag_s"] + v["sync_s"])
    return [
        step("Rate gained during one cold start and one poll", "ramp slope × (lag + polling interval)",
             "{} × ({} + {})", [(f.slope, "requests/s²"), (v["lag_s"], "s"), (v["sync_s"], "s")], gain, "requests/s"),
        step("SLO attainment", "arrivals whose TTFT and TPOT at arrival are within target ÷ all arrivals",
             "TTFT ≤ {}, TPOT ≤ {}", [(v["ttft_slo_s"], "s"), (v["tpot_slo_s"], "s")], f.trace.attainment, "share"),
        step("nvidia-smi utilisation at the start (estimate)",
             "share of time ≥ 1 request in flight: 1 − e^(−in flight), Poisson arrivals", "1 − e^(−{})",
             [f.inflight0], busy_share(f.inflight0), "share"),
        step("Headroom needed", "smallest headroom searched with attainment ≥ target", "attainment ≥ {}",
             [(v["slo_target_percent"], "%")], f.needed, "share"),
    ]  # fmt: skip


NO_HEADROOM = (
    "No headroom up to 0.9 holds the target: the lag or the ramp is too steep, or one replica cannot meet the SLO "
    "at any load (check TPOT against the target)."
)


def _simulated_outputs(sim: fleet.FleetTrace | None) -> dict:
    if sim is None:
        keys = ("attainment", "mean_ttft_s", "first_scale_up_s", "replicas_end", "requests")
        return {f"simulated_{key}": NOT_SIMULATED for key in keys}
    return {
        "simulated_attainment": sim.attainment,
        "simulated_mean_ttft_s": sim.mean_ttft,
        "simulated_first_scale_up_s": first_scale_up(sim.desired, sim.initial),
        "simulated_replicas_end": sim.ready[-1],
        "simulated_requests": sim.requests,
    }


def _simulated_steps(v: dict, sim: fleet.FleetTrace | None) -> list[dict]:
    if sim is None:
        return []
    return [
        step("SLO attainment, simulated", "requests with their own TTFT and mean TPOT within target ÷ all arrivals",
             "{} requests through engines behind a least-outstanding router, TTFT ≤ {}, TPOT ≤ {}",
             [sim.requests, (v["ttft_slo_s"], "s"), (v["tpot_slo_s"], "s")], sim.attainment, "share"),
    ]  # fmt: skip


def mean_ttft(trace: Trace) -> float:
    """The fluid run's mean TTFT over its arrivals (each step's TTFT weighted by its rate)."""
    arrivals = math.fsum(trace.rates)
    return math.fsum(a * b for a, b in zip(trace.ttft, trace.rates)) / arrivals if arrivals else 0.0


def compute(v: dict) -> dict:
    sim = simulated(v) if v["replica_model"] == "simulated" else None
    f = _facts(v)
    t = f.trace
    return {
        "mean_ttft_s": mean_ttft(t),
        "first_scale_up_s": first_scale_up(t.desired, t.initial),
        **_simulated_outputs(sim),
        "attainment": t.attainment,
        "headroom_needed": f.needed,
        "headroom_found": 1.0 if f.holding else 0.0,
        "capacity_per_replica_requests_per_s": f.mu,
        "replicas_start": t.initial,
        "replicas_end": t.ready[-1],
        "replicas_needed_peak": f.peak_need,
        "worst_ttft_s": max(t.ttft),
        "under_capacity_s": f.under_s,
        "target_signal": f.target,
        "utilisation_start": f.rho0,
        "in_flight_start": f.inflight0,
        "nvml_utilisation_start": busy_share(f.inflight0),
        "ramp_slope_per_s2": f.slope,
        "lag_rate_gain_requests_per_s": f.slope * (v["lag_s"] + v["sync_s"]),
        "derivation": _replica_steps(v, f) + _ramp_steps(v, f) + _simulated_steps(v, sim),
        "series": dict(_time_plots(v, f, sim), attainment_vs_headroom=_headroom_plot(v, f)),
        "notes": [] if f.holding else [NO_HEADROOM],
    }
