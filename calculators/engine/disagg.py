"""Prefill/decode disaggregation: two pools of replicas and a KV transfer between them, built on the
simulator (run.simulate) without changing it.

A request arrives at a prefill replica (round robin), which computes its prompt's KV and nothing else
(the engine with one output token: its TTFT there is queue + prefill). The KV then crosses the link:
prompt KV bytes ÷ the link's bandwidth, one transfer at a time per prefill replica (a FIFO on its
NICs). With layer-wise overlap the prefill streams each layer's KV as soon as that layer is done, so
a transfer may start when the first of the L layers is (after 1/L of the prefill) and ends no sooner
than the prefill's end plus one layer's share (T ÷ L): only the last layer's share is exposed when
the link keeps up, the excess T − prefill × (L − 1)/L when it does not. The request then joins a
decode replica (round robin, in the order transfers end) whose KV is already there: the decode
engine's step that "prefills" it costs one decode token at that context (KvArrivedTimes), and that
step emits the first token the client sees (the decode replica serves the request's stream; a system
that streams the prefill's own first token saves that one step). So TTFT = prefill queue + prefill +
transfer + decode queue + the first decode step; TPOT is the decode pool's alone. vLLM v0.33.0's
NixlConnector (an alias of NixlPullConnector, kv_connector/v1/nixl/connector.py) has the decode side
read the KV once the prefill is done and "does not do layerwise saving" (wait_for_layer_load): overlap off.

The co-located baseline is the same engine serving both phases on every replica (chunked prefill,
the decodes first in each step): `simulate_colocated`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import EngineConfig, Request
from .run import simulate
from .steps import StepTimes


class KvArrivedTimes(StepTimes):
    """Step times of a decode replica: a request's prompt KV arrived over the link, so the step that
    admits it computes one token at that context, as a decode does, instead of a prefill chunk."""

    def mixed(self, decodes: int, context_sum: float, chunks, speculative: bool = True) -> float:
        contexts = sum(start + length for start, length in chunks)
        return self.decode(decodes + len(chunks), context_sum + contexts, speculative)


@dataclass(frozen=True)
class Pool:
    """`replicas` copies of one engine (times, config), each on `gpus` GPUs."""

    times: StepTimes
    config: EngineConfig
    replicas: int
    gpus: int

    @property
    def total_gpus(self) -> int:
        return self.replicas * self.gpus


@dataclass(frozen=True)
class Link:
    """The path KV takes from one prefill replica to the decode pool: bytes/s (all NICs it uses together),
    the model's layers (the unit of layer-wise streaming), and whether transfers overlap the prefill."""

    bytes_per_s: float
    layers: int
    overlap: bool = False


def transfer_s(kv_bytes: float, bytes_per_s: float) -> float:
    """Time to move one prompt's KV: bytes ÷ bandwidth (0 for an infinitely fast link)."""
    return kv_bytes / bytes_per_s if bytes_per_s != float("inf") else 0.0


def exposed_transfer_s(total_s: float, prefill_s: float, layers: int, overlap: bool) -> float:
    """The part of a transfer that comes after the prefill ends: all of it without overlap; with
    layer-wise overlap, one layer's share, or what the prefill's last L − 1 layers cannot hide."""
    if not overlap:
        return total_s
    return max(total_s / layers, total_s - prefill_s * (layers - 1) / layers)


@dataclass(frozen=True)
class Served:
    """One request through either system: measured from its arrival."""

    index: int
    ttft_s: float
    tpot_s: float
    prefill_s: float = 0.0  # first scheduled to KV done, on the prefill replica (disaggregated)
    transfer_s: float = 0.0  # prefill done to KV on the decode side (queue on the link included)


@dataclass(frozen=True)
class Outcome:
    served: tuple  # Served per finished request, by index
    rejected: int  # requests some replica could never hold
    gpus: int

    def attainment(self, ttft_slo: float, tpot_slo: float, offered: int) -> float:
        met = sum(1 for s in self.served if s.ttft_s <= ttft_slo and s.tpot_s <= tpot_slo)
        return met / offered if offered else 0.0


def _round_robin(requests: list[Request], replicas: int) -> list[list[tuple[int, Request]]]:
    shares: list[list[tuple[int, Request]]] = [[] for _ in range(replicas)]
    for k, (i, r) in enumerate(sorted(enumerate(requests), key=lambda p: p[1].arrival_s)):
        shares[k % replicas].append((i, r))
    return shares


def _run(pool: Pool, share: list[tuple[int, Request]]):
    """simulate one replica over its share; (original index, ttft, tpot, queue) per finished request."""
    if not share:
        return [], 0
    run = simulate(pool.times, [r for _, r in share], pool.config)
    return [
        (share[j][0], ttft, tpot, queue) for j, ttft, tpot, queue in zip(run.ids, run.ttft_s, run.tpot_s, run.queue_s)
    ], run.rejected


def simulate_colocated(requests: list[Request], pool: Pool) -> Outcome:
    """Every replica prefills and decodes (requests dealt round robin in arrival order)."""
    served, rejected = [], 0
    for share in _round_robin(requests, pool.replicas):
        done, lost = _run(pool, share)
        rejected += lost
        served += [Served(i, ttft, tpot) for i, ttft, tpot, _ in done]
    return Outcome(tuple(sorted(served, key=lambda s: s.index)), rejected, pool.total_gpus)


def simulate_disaggregated(requests: list[Request], prefill: Pool, decode: Pool, link: Link, kv_bytes) -> Outcome:
    """Prefill pool → link → decode pool; kv_bytes(prompt tokens) gives the bytes one prompt's KV takes."""
    rejected, landed = 0, []  # (time KV is on the decode side, index, prefill_s, transfer_s)
    for share in _round_robin(requests, prefill.replicas):
        done, lost = _run(prefill, [(i, r._replace(output_tokens=1)) for i, r in share])
        rejected += lost
        link_free = 0.0
        for i, ttft, _, queue in sorted(done, key=lambda d: requests[d[0]].arrival_s + d[1]):
            r = requests[i]
            finish, busy = r.arrival_s + ttft, ttft - queue
            whole = transfer_s(kv_bytes(r.prompt_tokens), link.bytes_per_s)
            if link.overlap:
                start = max(link_free, finish - busy * (link.layers - 1) / link.layers)
                end = max(start + whole, finish + whole / link.layers)
            else:
                end = max(link_free, finish) + whole
            link_free = end
            landed.append((end, i, busy, end - finish))
    arrivals = [requests[i]._replace(arrival_s=t) for t, i, _, _ in landed]
    served = []
    for share in _round_robin(arrivals, decode.replicas):
        done, lost = _run(decode, share)
        rejected += lost
        for j, ttft, tpot, _ in done:
            t, i, busy, moved = landed[j]
            served.append(Served(i, t + ttft - requests[i].arrival_s, tpot, busy, moved))
    return Outcome(tuple(sorted(served, key=lambda s: s.index)), rejected, prefill.total_gpus + decode.total_gpus)
