"""What a simulation returns: per measured request, pooled inter-token gaps, throughput, occupancy."""

from __future__ import annotations

from dataclasses import dataclass

from .core import FINISHED, REJECTED, Engine


@dataclass(frozen=True)
class EngineResult:
    arrival_s: tuple[float, ...]  # measured requests that finished, in index order
    ttft_s: tuple[float, ...]
    tpot_s: tuple[float, ...]  # mean gap after the first token (0 for one-token answers)
    e2e_s: tuple[float, ...]
    queue_s: tuple[float, ...]  # arrival to first scheduled
    preemptions: tuple[int, ...]
    rejected: int  # measured requests rejected (too long, or shed: HTTP 429)
    gap_values_s: tuple[float, ...]  # pooled inter-token gaps of the measured requests ...
    gap_weights: tuple[int, ...]  # ... and how many gaps each value stands for
    output_tokens_per_s: float  # measured output tokens ÷ (last finish − first arrival)
    steps: int
    occupancy: tuple  # (t, running, waiting incl. arrivals not yet planned, KV blocks used) at each scheduling turn
    trace: tuple  # the first trace_steps steps: (start, took, ((request, tokens), ...), waiting incl. unseen)
    prompt_tokens: int = 0  # measured, finished requests' prompts ...
    hit_tokens_gpu: int = 0  # ... of which found in the GPU prefix cache at first admission
    hit_tokens_host: int = 0  # ... and in the host tier
    ids: tuple[int, ...] = ()  # the index of each measured request that finished, in the order above
    stopped: bool = False  # the run ended early: more measured requests missed the stop's targets than allowed
    tenants: tuple[str, ...] = ()  # the tenant of each measured request that finished, in the order above

    def by_tenant(self) -> dict:
        """tenant -> positions of its requests in the per-request tuples above."""
        out: dict = {}
        for k, tenant in enumerate(self.tenants):
            out.setdefault(tenant, []).append(k)
        return out


def summarise(engine: Engine) -> EngineResult:
    e = engine
    done = [i for i in range(e.lo, e.hi) if e.state[i] == FINISHED]
    tpot = [(e.finished[i] - e.first[i]) / (e.out[i] - 1) if e.out[i] > 1 else 0.0 for i in done]
    span = max((e.finished[i] for i in done), default=0.0) - min((e.arrival[i] for i in done), default=0.0)
    tokens = sum(e.out[i] for i in done)
    return EngineResult(
        arrival_s=tuple(e.arrival[i] for i in done),
        ttft_s=tuple(e.first[i] - e.arrival[i] for i in done),
        tpot_s=tuple(tpot),
        e2e_s=tuple(e.finished[i] - e.arrival[i] for i in done),
        queue_s=tuple(e.started[i] - e.arrival[i] for i in done),
        preemptions=tuple(e.preemptions[i] for i in done),
        rejected=sum(1 for i in range(e.lo, e.hi) if e.state[i] == REJECTED),
        gap_values_s=tuple(e.gaps.values),
        gap_weights=tuple(e.gaps.weights),
        output_tokens_per_s=tokens / span if span > 0 else 0.0,
        steps=e.steps,
        occupancy=tuple(e.occupancy),
        trace=tuple(e.trace),
        prompt_tokens=sum(e.prompt[i] for i in done),
        hit_tokens_gpu=sum(e.hit_gpu[i] for i in done),
        hit_tokens_host=sum(e.hit_host[i] for i in done),
        ids=tuple(done),
        tenants=tuple(e.requests[i].tenant for i in done),
        stopped=e.stopped,
    )
