"""Replicas over time, simulated: autoscale.py's traffic ramp and autoscaler over replicas that are each a real
engine (core.Engine: requests, prefill, decode, KV), behind a router.

Arrivals: the seeded draws every engine calculator uses (workload.Workload: gaps at rate 1, prompt and output
lengths), put on the ramp's clock by its cumulative rate, t_i = Λ⁻¹(g_1 + … + g_i). At a constant rate that is
exactly workload.open_loop; on a ramp it is the time-changed process whose expected count by t is Λ(t), the
fluid model's arrivals. Every headroom and lag sees the same requests (common random numbers).

Router: least outstanding requests, as an inference gateway's endpoint picker sees them. It refreshes each
replica's count (running + waiting) every ROUTER_REFRESH_S, the Gateway API inference extension's default
metrics refresh (50 ms, --refreshMetricsInterval, pkg/epp/server/runserver.go at commit 60c5ab8), and between
refreshes adds the requests it has sent there itself; each arrival goes to the ready replica with the lowest
count (the first, on a tie). Finishes between refreshes go unseen, so a replica that has just freed slots
looks busier than it is for up to 50 ms: the cost of routing on the gateway's own view rather than on each
engine's state at the arrival's instant. Measured on the pin's ramp (tests/core/test_autoscale_sim.py), a
refresh every 10 ms or every 1 s moves attainment by 0.01 points and mean TTFT by under 1%. A new replica
starts empty and takes the arrivals until its count reaches the others'; no request already queued moves.

Stepping: the router's refreshes, the autoscaler's polls and the replicas' readiness are the instants where
the engines meet. Each is run to the next (Engine.run(until)), handed the requests routed to it up to the one
after (Engine.extend), and read. A decode stretch is cut at each meeting as at an arrival, so the engines run
the steps a single run would, priced at the middle context of shorter stretches.

Autoscaler: autoscale.Fleet, the same HPA rule, sync period, tolerance and cold-start lag as the fluid model,
and the same target (the fluid replica's signal at utilisation 1 − headroom), reading its signal's total from
the engines serving: requests in flight (running + waiting), requests waiting, or KV blocks in use ÷ the pool.
A request meets the SLO when its own TTFT and mean TPOT are within target; attainment counts every arrival in
the run (a request too long for the KV pool misses), and the engines run on past the end until all finish.
Replicas start empty at t = 0 (the fluid model starts in steady state): at a base utilisation well under 1 the
difference is the first second or two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .autoscale import Fleet, Ramp, Replica, Scaler, initial_replicas
from .config import EngineConfig, Request
from .core import Engine
from .result import summarise
from .steps import StepTimes

ROUTER_REFRESH_S = 0.05


class ReplicaEngine(Engine):
    """core.Engine for one replica of a fleet: it starts with no requests, the router hands it some between
    run(until) calls (extend), and every request handed over is measured."""

    def __init__(self, times: StepTimes, cfg: EngineConfig):
        super().__init__(times, [], cfg, (0, 0))

    def extend(self, requests: list[Request]) -> None:
        self.hi = self.n + len(requests)
        super().extend(requests)

    def outstanding(self) -> int:
        return len(self.running) + len(self.waiting.heap)

    def signal(self, kind: str) -> float:
        """The autoscaler's signal on this replica now (autoscale.SIGNALS)."""
        if kind == "inflight":
            return float(self.outstanding())
        if kind == "queue":
            return float(len(self.waiting.heap))
        return (self.pool.total - self.pool.free) / self.pool.total


@dataclass(frozen=True)
class FleetTrace:
    times: tuple  # 0, dt, 2·dt … (as autoscale.Trace)
    ready: tuple  # replicas serving at each time
    desired: tuple  # replicas asked for by the end of each step
    ttft: tuple  # mean TTFT of the requests arriving in each step (0 where none arrived)
    attainment: float
    mean_ttft: float  # over the requests that finished
    initial: int
    requests: int


def ramp_requests(workload, ramp: Ramp) -> list[Request]:
    """Requests from a workload.Workload's draws (gap at rate 1, prompt, output) on the ramp's clock, up to its
    duration; drawn in rounds until one passes the end (a Workload's prefix does not depend on how far it is drawn)."""
    n = math.ceil(1.1 * ramp.arrivals(ramp.duration_s)) + 100
    while True:
        out, x = [], 0.0
        for gap, prompt, output in workload.first(n):
            x += gap
            t = ramp.time_of(x)
            if t >= ramp.duration_s:
                return out
            out.append(Request(t, prompt, output))
        n *= 2


class _Router:
    """Least outstanding requests over the ready replicas, on counts refreshed every ROUTER_REFRESH_S."""

    def __init__(self, times: StepTimes, cfg: EngineConfig):
        self.times, self.cfg, self.engines = times, cfg, []

    def grow(self, ready: int) -> None:
        while len(self.engines) < ready:
            self.engines.append(ReplicaEngine(self.times, self.cfg))

    def route(self, requests: list[Request]) -> None:
        """Hand each request to the replica with the fewest outstanding, as seen now plus those sent since."""
        counts = [e.outstanding() for e in self.engines]
        handed: list[list[Request]] = [[] for _ in self.engines]
        for r in requests:
            j = counts.index(min(counts))
            counts[j] += 1
            handed[j].append(r)
        for e, batch in zip(self.engines, handed):
            if batch:
                e.extend(batch)

    def run(self, until: float) -> None:
        for e in self.engines:
            e.run(until)


def run(
    times: StepTimes,
    cfg: EngineConfig,
    requests: list[Request],
    replica: Replica,
    ramp: Ramp,
    scaler: Scaler,
    slo: tuple[float, float],
    dt: float = 1.0,
) -> FleetTrace:
    """One simulated run through the ramp: `requests` (ramp_requests), each replica an engine of `cfg` on `times`,
    the autoscaler's target and initial replicas from the fluid `replica`; slo = (TTFT, mean TPOT) targets."""
    n0 = initial_replicas(replica, ramp, scaler)
    fleet, router = Fleet(scaler, replica.target(scaler.signal, scaler.headroom), n0), _Router(times, cfg)
    router.grow(n0)
    events, now, k = [(0.0, n0, n0)], 0.0, 0  # (time, ready, desired) after each change
    while now < ramp.duration_s:
        if now >= fleet.next_poll - 1e-9:
            fleet.poll(now, sum(e.signal(scaler.signal) for e in router.engines))
        router.grow(fleet.arrive(now))
        if (fleet.ready, fleet.desired) != events[-1][1:]:
            events.append((now, fleet.ready, fleet.desired))
        nxt = min(now + ROUTER_REFRESH_S, fleet.next_poll, ramp.duration_s, *(at for at, _ in fleet.pending))
        lo = k
        while k < len(requests) and requests[k].arrival_s < nxt:
            k += 1
        router.route(requests[lo:k])
        router.run(nxt)
        now = nxt
    router.run(math.inf)
    return _trace(router.engines, events, requests, ramp, slo, dt, n0)


def _trace(engines, events, requests, ramp: Ramp, slo, dt: float, n0: int) -> FleetTrace:
    steps = max(1, round(ramp.duration_s / dt))
    met, ttft_sum, done = 0, 0.0, 0
    bins, counts = [0.0] * steps, [0] * steps
    for e in engines:
        res = summarise(e)
        for arrival, ttft, tpot in zip(res.arrival_s, res.ttft_s, res.tpot_s):
            met += ttft <= slo[0] and tpot <= slo[1]
            ttft_sum += ttft
            b = min(steps - 1, int(arrival / dt))
            bins[b] += ttft
            counts[b] += 1
        done += len(res.ttft_s)
    times = tuple(i * dt for i in range(steps))
    ready = tuple(_at(events, t, 1) for t in times)
    desired = tuple(_at(events, t + dt - 1e-9, 2) for t in times)
    ttft = tuple(s / c if c else 0.0 for s, c in zip(bins, counts))
    n = len(requests)
    return FleetTrace(times, ready, desired, ttft, met / n if n else 1.0, ttft_sum / done if done else 0.0, n0, n)


def _at(events, t: float, column: int) -> int:
    """The value of events' column as of time t (the last change at or before it)."""
    value = events[0][column]
    for e in events:
        if e[0] > t + 1e-9:
            break
        value = e[column]
    return value
