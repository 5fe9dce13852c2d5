"""Replicas over time: a traffic ramp, an autoscaler that reads a signal, scales up after a cold-start lag,
and the SLO attainment of the requests that arrive meanwhile.

Each replica is a fluid queue, not an engine run, and that is a choice: a ramp of ten minutes at tens of
requests per second is tens of thousands of requests per run, and the headroom search runs it a score of
times, far past a recompute's 50 ms. fleet.py runs the same ramp and autoscaler (Ramp, Fleet and the rule
below are shared) with every replica a real engine, once, for a check; tests/core/test_autoscale_sim.py pins
the two against each other and says where they part: near saturation this model is pessimistic (Kingman's
single-server wait is many times a continuous-batching engine's, and the steady-state batch runs below the
engine's in-flight count, so the engine's autoscaler can fire a poll sooner).

The replica is the engine's server as the goodput calculator sets it up (calcs.goodput.simulation): its
capacity μ (requests/s a saturated replica completes), its prefill time, the spread of its server time and
the batch a rate implies all come from calcs.offered_load, the steady-state estimate goodput checks against
full simulations (tests/core/test_goodput_steady.py). Over one time step dt:

  backlog   Q ← max(0, Q + (λ − N·μ)·dt)                                 (λ the offered rate, N replicas ready)
  TTFT      prefill + Q ÷ (N·μ) + W_q(min(ρ, ρ_max))                     (ρ = λ ÷ (N·μ); W_q Kingman's mean wait)
  TPOT      decode step at the batch the per-replica rate implies (the full batch once saturated)

Requests arriving in a step meet the SLO when that step's TTFT and TPOT are both within target; attainment is
the share of all arrivals that do. Load is split evenly over the ready replicas (a balanced router).

The autoscaler is Kubernetes' HPA rule, as KEDA drives it: every sync period it reads the signal's total over
the ready replicas and asks for ceil(total ÷ target) replicas (HPA: desired = ceil(current × average ÷
target)), skipping changes within the HPA's 10% tolerance, never fewer than it has asked for (the model
studies the way up: no scale-down during a run), at most max_replicas. A replica asked
for becomes ready lag_s later (its cold start). Signals, per replica: requests in flight (running + waiting),
requests waiting, or KV-cache utilisation (sequences running × KV each ÷ pool). The target is the signal's
value on one replica at utilisation 1 − headroom, so a larger headroom asks for replicas sooner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

SIGNALS = ("inflight", "queue", "kv")
RHO_MAX = 0.98  # Kingman's wait is taken at most at this utilisation; the backlog term takes over past it
TOLERANCE = 0.1  # HPA: no change while current ÷ target is within 1 ± 0.1
RHO_GRID = 200  # batch(ρ) is tabulated at this many utilisations and interpolated


@dataclass(frozen=True)
class Replica:
    """One replica's steady-state figures (from calcs.offered_load.Load)."""

    capacity: float  # μ, requests/s when saturated
    prefill_s: float  # prefill time per request when saturated
    service_s: float  # server time per request when saturated (1 ÷ μ)
    cs2: float  # squared coefficient of variation of the server time
    batches: tuple  # sequences decoding at ρ = i ÷ RHO_GRID, i = 0 … RHO_GRID
    full_batch: int
    kv_sequences: float  # sequences whose reserved KV fills the pool
    tpot_at: tuple  # decode step time at batches[i]
    ca2: float = 1.0  # squared coefficient of variation of the arrival gaps (1: Poisson)

    def batch(self, rho: float) -> float:
        if rho >= 1:
            return float(self.full_batch)
        x = rho * RHO_GRID
        i = int(x)
        return self.batches[i] + (self.batches[i + 1] - self.batches[i]) * (x - i)

    def tpot(self, rho: float) -> float:
        i = min(RHO_GRID, max(0, math.ceil(rho * RHO_GRID)))
        return self.tpot_at[i]

    def wait(self, rho: float) -> float:
        """Kingman's G/G/1 mean wait at min(ρ, RHO_MAX)."""
        r = min(rho, RHO_MAX)
        return r / (1 - r) * (self.ca2 + self.cs2) / 2 * self.service_s

    def signal(self, kind: str, rho: float, backlog: float) -> float:
        """The signal on one replica at utilisation ρ with `backlog` requests queued past capacity."""
        if kind == "inflight":
            return self.batch(rho) + rho * self.capacity * self.wait(rho) + backlog
        if kind == "queue":
            return rho * self.capacity * self.wait(rho) + backlog
        return min(1.0, self.batch(rho) / self.kv_sequences)

    def target(self, kind: str, headroom: float) -> float:
        """The autoscaler's target: the signal on one replica at utilisation 1 − headroom, no backlog."""
        return self.signal(kind, 1.0 - headroom, 0.0)


@dataclass(frozen=True)
class Ramp:
    """Offered rate over time: base until start_s, linear to peak over ramp_s, then peak until duration_s."""

    base: float
    peak: float
    start_s: float
    ramp_s: float
    duration_s: float

    def rate(self, t: float) -> float:
        if t <= self.start_s:
            return self.base
        if self.ramp_s <= 0 or t >= self.start_s + self.ramp_s:
            return self.peak
        return self.base + (self.peak - self.base) * (t - self.start_s) / self.ramp_s

    def arrivals(self, t: float) -> float:
        """Λ(t): the requests expected by t, the rate's integral from 0."""
        ramp_end = self.start_s + max(0.0, self.ramp_s)
        before = self.base * min(t, self.start_s)
        during = min(max(0.0, t - self.start_s), ramp_end - self.start_s)
        ramped = (self.base + self.rate(self.start_s + during)) / 2 * during if during else 0.0
        return before + ramped + self.peak * max(0.0, t - ramp_end)

    def time_of(self, count: float) -> float:
        """Λ⁻¹: the time by which `count` requests are expected (the rate is positive, so Λ is increasing)."""
        start, ramp_end = self.start_s, self.start_s + max(0.0, self.ramp_s)
        if count <= self.base * start:
            return count / self.base
        left = count - self.base * start
        ramped = (self.base + self.peak) / 2 * (ramp_end - start)
        if left >= ramped:
            return ramp_end + (left - ramped) / self.peak
        slope = (self.peak - self.base) / self.ramp_s  # left = base·x + slope·x²/2, solved for x ≥ 0
        if abs(slope) < 1e-12:
            return start + left / self.base
        return start + 2 * left / (self.base + math.sqrt(self.base * self.base + 2 * slope * left))


@dataclass(frozen=True)
class Scaler:
    signal: str
    headroom: float  # 0 … 0.95: the target is the signal at utilisation 1 − headroom
    sync_s: float  # how often the signal is read (the HPA's sync period, also under KEDA for 1 → N)
    lag_s: float  # from asking for a replica to its serving (the cold start)
    max_replicas: int
    min_replicas: int = 1


@dataclass(frozen=True)
class Trace:
    times: tuple
    rates: tuple
    ready: tuple  # replicas serving
    desired: tuple  # replicas asked for
    ttft: tuple
    tpot: tuple
    attainment: float
    initial: int  # replicas at t = 0: the fewest that keep each at utilisation ≤ 1 − headroom at the base rate


def _desired(scaler: Scaler, total: float, target: float, current: int, ready: int) -> int:
    want = math.ceil(total / target - 1e-9) if target > 0 else scaler.max_replicas
    if ready and abs(total / (ready * target) - 1) <= TOLERANCE:
        want = current
    return max(current, min(scaler.max_replicas, max(scaler.min_replicas, want)))


def initial_replicas(replica: Replica, ramp: Ramp, scaler: Scaler) -> int:
    """Sized for the base rate: the fewest replicas that keep each at utilisation ≤ 1 − headroom."""
    n = math.ceil(ramp.base / replica.capacity / (1 - scaler.headroom) - 1e-9)
    return min(scaler.max_replicas, max(scaler.min_replicas, n))


@lru_cache(maxsize=8)
def _rates(ramp: Ramp, dt: float) -> tuple:
    """The offered rate at the middle of each step (shared by every run through the same ramp)."""
    return tuple(ramp.rate((k + 0.5) * dt) for k in range(max(1, round(ramp.duration_s / dt))))


class Fleet:
    """The replicas asked for and serving, and the autoscaler's polls (the HPA rule above), whatever the replicas
    are: this module's fluid queues or fleet.py's simulated engines, which hand poll() the signal's total."""

    def __init__(self, scaler: Scaler, target: float, initial: int):
        self.scaler, self.target = scaler, target
        self.ready = self.desired = initial
        self.pending: list[tuple[float, int]] = []  # (ready at, how many)
        self.next_poll = scaler.sync_s

    def arrive(self, t: float) -> int:
        """Replicas whose cold start has ended by t join; the count serving."""
        while self.pending and self.pending[0][0] <= t + 1e-9:
            self.ready += self.pending.pop(0)[1]
        return self.ready

    def poll(self, t: float, total: float) -> None:
        """A poll due by t reads `total`, the signal summed over the replicas serving, and asks for more if the
        rule says so; the next poll is one sync period on."""
        self.next_poll += self.scaler.sync_s
        want = _desired(self.scaler, total, self.target, self.desired, self.ready)
        if want > self.desired:
            self.pending.append((t + self.scaler.lag_s, want - self.desired))
            self.desired = want


def run(
    replica: Replica, ramp: Ramp, scaler: Scaler, ttft_slo: float, tpot_slo: float, dt: float = 1.0, record: bool = True
) -> Trace:
    """One run through the ramp; record False keeps only the attainment (the headroom search)."""
    if scaler.signal not in SIGNALS:
        raise ValueError(f"signal must be one of {SIGNALS}")
    mu, n0 = replica.capacity, initial_replicas(replica, ramp, scaler)
    fleet = Fleet(scaler, replica.target(scaler.signal, scaler.headroom), n0)
    backlog, met, arrived, rows = 0.0, 0.0, 0.0, []
    c = (replica.ca2 + replica.cs2) / 2 * replica.service_s  # Kingman: W_q = ρ ÷ (1 − ρ) × c
    tpot_at, grid, prefill = replica.tpot_at, RHO_GRID, replica.prefill_s
    for k, lam in enumerate(_rates(ramp, dt)):
        t = k * dt
        if fleet.pending and fleet.pending[0][0] <= t + 1e-9:
            fleet.arrive(t)
        ready = fleet.ready
        cap = ready * mu
        rho = lam / cap
        r = rho if rho < RHO_MAX else RHO_MAX
        ttft = prefill + backlog / cap + r / (1 - r) * c
        tpot = tpot_at[min(grid, math.ceil(rho * grid))]
        arrived += lam * dt
        if ttft <= ttft_slo and tpot <= tpot_slo:
            met += lam * dt
        backlog = max(0.0, backlog + (lam - cap) * dt)
        if t + dt >= fleet.next_poll - 1e-9:
            fleet.poll(t + dt, ready * replica.signal(scaler.signal, min(rho, 1.0), backlog / ready))
        if record:
            rows.append((t, lam, ready, fleet.desired, ttft, tpot))
    columns = tuple(zip(*rows)) if rows else ((),) * 6
    return Trace(*columns, met / arrived if arrived else 1.0, n0)


def make_replica(load, cs2: float, kv_sequences: float, ca2: float = 1.0) -> Replica:
    """A Replica from calcs.offered_load.Load (the steady-state estimate goodput uses)."""
    mu = load.capacity()
    batches, tpots = [], []
    for i in range(RHO_GRID + 1):
        rho = i / RHO_GRID
        b = load.full_batch if i == RHO_GRID else max(1, load.batch(rho * mu)) if i else 1
        batches.append(float(b if i else 0.0))
        tpots.append(load.steps.decode_time(max(1, b), load.context))
    return Replica(
        mu, load.prefill_s, load.service_s(), cs2, tuple(batches), load.full_batch, kv_sequences, tuple(tpots), ca2
    )


def nvml_utilisation(kernel_intervals, period_s: float) -> float:
    """What nvidia-smi's utilization.gpu reports: the share of the sample period during which one or more
    kernels was executing (NVML nvmlUtilization_t.gpu), whatever those kernels did: the union of the
    intervals [start, end) within [0, period_s), over period_s."""
    busy, reach = 0.0, 0.0
    for start, end in sorted((max(0.0, a), min(period_s, b)) for a, b in kernel_intervals):
        if end <= reach:
            continue
        busy += end - max(start, reach)
        reach = end
    return busy / period_s


def busy_share(in_flight: float) -> float:
    """The share of time at least one request is in flight, for Poisson arrivals with `in_flight` requests in
    the system on average (the M/G/∞ occupancy, 1 − e^−L): an estimate of the time a replica's GPU has a
    kernel running, hence of what nvidia-smi reads."""
    return 1.0 - math.exp(-in_flight)
