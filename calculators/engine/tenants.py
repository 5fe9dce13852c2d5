"""Tenants on one replica: fair queueing by the Virtual Token Counter, and per-tenant token buckets.

Each request carries a tenant (Request.tenant). Two things may stand between a tenant and the engine:

Token bucket (a gateway's per-tenant rate limit): a bucket of `burst` units refilled at `rate` units per
second; an arrival that finds fewer units than it costs (1 per request, or its prompt + output tokens)
is rejected on the spot, an HTTP 429, and never queues. Otherwise it pays and joins the queue.

Virtual Token Counter (Sheng et al., "Fairness in Serving Large Language Models", OSDI'24, arXiv
2401.00588 §4, Algorithm 2): a counter per tenant of the service it has received, w_p per prompt token
when a request is admitted and w_q per output token as each is generated (w_p = 1, w_q = 2 in the
authors' artifact, Ying1123/VTC-artifact slora/server/router/vtc_req_queue.py). Admission takes the
earliest waiting request of the backlogged tenant whose counter is lowest; a tenant that becomes
backlogged (its first waiting request arrives) has its counter lifted to the lowest counter among the
other backlogged tenants, so a tenant cannot bank idle time and then starve the others. The counters
are the service each tenant actually received, so the scheduler is work-conserving: it never idles
while anyone waits.

The engine is core.Engine with a different waiting queue (FairQueue, the same interface as
queue.WaitingQueue) and two small overrides (_shed for the bucket, _start and _end to charge the
counters); core.py is unchanged, and with neither feature on `simulate_tenants` is `simulate`.
One approximation: the engine runs a stretch of decode-only steps as one (core.Engine._stretch) up to
the next finish or arrival, on the ground that a waiting request waits for blocks or budget; under VTC
the lowest counter may pass to another tenant inside such a stretch, and its request is then admitted
at the stretch's end rather than mid-way (tracing steps, trace_steps > 0, runs them one by one).
"""

from __future__ import annotations

from collections import deque

from .config import EngineConfig, Request
from .core import FINISHED, Engine
from .result import EngineResult, summarise
from .steps import StepTimes

W_PROMPT, W_OUTPUT = 1.0, 2.0  # the VTC artifact's input_price and output_price


class TokenBucket:
    """Per-tenant buckets of `burst` units refilled at `rate_per_s`; take() answers admit or 429."""

    def __init__(self, rate_per_s: float, burst: float):
        if rate_per_s <= 0 or burst <= 0:
            raise ValueError("a token bucket needs a rate and a burst > 0")
        self.rate, self.burst = rate_per_s, burst
        self.level: dict = {}
        self.at: dict = {}

    def take(self, tenant: str, now: float, cost: float) -> bool:
        level = self.level.get(tenant, self.burst)
        level = min(self.burst, level + (now - self.at.get(tenant, now)) * self.rate)
        self.at[tenant] = now
        if level >= cost:
            self.level[tenant] = level - cost
            return True
        self.level[tenant] = level
        return False


class FairQueue:
    """Waiting requests by tenant, served by the lowest virtual counter (VTC); the same interface as
    queue.WaitingQueue. `heap` lists (0, 0, index) for every waiting request, as the engine reads it
    (its length, and who waits); its order means nothing here."""

    __slots__ = ("engine", "by_tenant", "heap", "pick", "policy", "rank")

    def __init__(self, engine: TenantEngine):
        self.engine, self.by_tenant, self.heap, self.pick = engine, {}, [], None
        self.policy, self.rank = "fcfs", None

    def push(self, i: int) -> None:
        e = self.engine
        tenant = e.tenant[i]
        line = self.by_tenant.setdefault(tenant, deque())
        if not line:  # newly backlogged: lifted to the lowest counter among the other backlogged tenants
            others = [e.counter(t) for t, q in self.by_tenant.items() if q and t != tenant]
            if others:
                e.lift(tenant, min(others))
        line.append(i)
        self.heap.append((0, 0, i))
        self.pick = None

    def push_preempted(self, i: int) -> None:
        """Back to the front of its tenant's line (it was being served: no lift)."""
        self.by_tenant.setdefault(self.engine.tenant[i], deque()).appendleft(i)
        self.heap.append((0, 0, i))
        self.pick = None

    def peek(self) -> int:
        e = self.engine
        best = None
        for tenant, line in self.by_tenant.items():
            if line:
                key = (e.counter(tenant), line[0])
                if best is None or key < best[0]:
                    best = (key, tenant)
        self.pick = best[1]
        return self.by_tenant[best[1]][0]

    def pop(self) -> int:
        if self.pick is None:
            self.peek()
        i = self.by_tenant[self.pick].popleft()
        self.heap.remove((0, 0, i))
        self.pick = None
        return i

    def __len__(self) -> int:
        return len(self.heap)


class TenantEngine(Engine):
    """core.Engine with per-tenant token buckets and, when fair, the VTC queue."""

    def __init__(self, times, requests, cfg, measured, fair: bool, bucket: TokenBucket | None, cost: str):
        super().__init__(times, requests, cfg, measured)
        self.tenant = [r.tenant for r in requests]
        self.bucket, self.cost = bucket, cost
        self.limited: dict = {}  # tenant -> arrivals the bucket rejected (429)
        self.base: dict = {}  # tenant -> lifts + prompt charges + output of finished requests
        self.active: dict = {}  # tenant -> requests admitted and not finished
        self.fair = fair
        if fair:
            self.waiting = FairQueue(self)

    # ---- the counters ------------------------------------------------------------------------------
    def counter(self, tenant: str) -> float:
        """The tenant's virtual counter now: its base, plus w_q per token its unfinished requests have
        generated (read through the decoding set, which keeps members' counts lazily)."""
        dec, gen, out = self.decoding, self.gen, self.out
        g, joined = dec.g, dec.joined
        tokens = 0
        for i in self.active.get(tenant, ()):
            tokens += gen[i] + min(g - joined[i], out[i] - gen[i]) if i in joined else gen[i]
        return self.base.get(tenant, 0.0) + W_OUTPUT * tokens

    def lift(self, tenant: str, to: float) -> None:
        now = self.counter(tenant)
        if to > now:
            self.base[tenant] = self.base.get(tenant, 0.0) + to - now

    def _start(self, i: int, tokens: int) -> None:
        if self.started[i] < 0:  # first admission: the prompt is charged (recomputation is not)
            t = self.tenant[i]
            self.base[t] = self.base.get(t, 0.0) + W_PROMPT * self.prompt[i]
            self.active.setdefault(t, set()).add(i)
        super()._start(i, tokens)

    def _end(self, i: int, state: str) -> None:
        if state == FINISHED:
            t = self.tenant[i]
            self.active[t].discard(i)
            self.base[t] = self.base.get(t, 0.0) + W_OUTPUT * self.out[i]
        super()._end(i, state)

    # ---- the rate limit ----------------------------------------------------------------------------
    def _shed(self, i: int) -> bool:
        if self.bucket is not None:
            cost = 1.0 if self.cost == "requests" else float(self.prompt[i] + self.out[i])
            if not self.bucket.take(self.tenant[i], self.arrival[i], cost):
                self.limited[self.tenant[i]] = self.limited.get(self.tenant[i], 0) + 1
                return True
        return super()._shed(i)


def simulate_tenants(
    times: StepTimes,
    requests: list[Request],
    config: EngineConfig,
    fair: bool = False,
    bucket: TokenBucket | None = None,
    bucket_cost: str = "requests",
    measured: tuple[int, int] | None = None,
) -> tuple[EngineResult, dict]:
    """simulate() with tenants: VTC fair queueing when `fair` (config.policy must be fcfs), a token
    bucket per tenant when `bucket` is given (cost 1 per request, or its tokens: bucket_cost "tokens").
    Returns the result and {tenant: requests rejected by the bucket}. Open-loop arrivals only."""
    if fair and config.policy != "fcfs":
        raise ValueError("VTC replaces the waiting order: use it with policy fcfs")
    if bucket_cost not in ("requests", "tokens"):
        raise ValueError("bucket_cost is 'requests' or 'tokens'")
    if any(r.after >= 0 or r.generated for r in requests):
        raise ValueError("tenant simulations take open-loop arrivals only")
    engine = TenantEngine(times, requests, config, measured or (0, len(requests)), fair, bucket, bucket_cost)
    engine.run()
    return summarise(engine), dict(engine.limited)
