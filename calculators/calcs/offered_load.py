"""The offered load against the capacity of a prefill-first server with KV reserved for each whole
request (the server the goodput calculator models), worked out from a sample of the workload without
simulating it: the server time per request when saturated, the capacity it implies, the batch a rate
implies, and the warm start that puts a run in steady state at once (a random look at a running server).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .kv_cache import pool_tokens_held
from .steptime import StepModel

ANALYSIS_REQUESTS = 300  # sample that the offered-load estimate averages over
SIZE_CAP = 2000  # most sequences a warm start, settling stretch or tail may hold


@dataclass(frozen=True)
class Load:
    """Per-request work from a sample, and the batch a saturated server runs."""

    prefill_s: float  # mean prefill time per request when saturated (see _prefill_s)
    decode_steps: float  # mean decode steps per request (output − 1)
    context: int  # mean context during decode, weighted by time in the batch
    full_batch: int  # max concurrent sequences, or fewer where the KV pool binds
    steps: StepModel
    share: float = 1.0  # of requests whose KV fits at all (the rest are dropped on arrival)

    def service_s(self) -> float:
        """Server time per request when saturated: prefill + its share of full-batch decode steps."""
        step_s = self.steps.decode_time(self.full_batch, self.context)
        return self.prefill_s + self.decode_steps * step_s / self.full_batch

    def capacity(self) -> float:
        """Requests per second a saturated server completes; 0 when no request fits."""
        return 1 / self.service_s() if self.share else 0.0

    def utilisation(self, rate: float) -> float:
        return rate * self.share * self.service_s()

    def batch(self, rate: float) -> int:
        """Sequences decoding in steady state: B = λ × steps × step time(B) ÷ (1 − λ × prefill)."""
        idle = 1.0 - rate * self.share * self.prefill_s
        if idle <= 0 or self.utilisation(rate) >= 1:
            return self.full_batch
        b = 1
        for _ in range(12):
            b = min(
                self.full_batch,
                max(1, round(rate * self.share * self.decode_steps * self.steps.decode_time(b, self.context) / idle)),
            )
        return b


def offered_load(steps: StepModel, work, max_batch: int, kv_capacity: float, held=None) -> Load:
    """The Load of `work` on a pool of kv_capacity tokens: `held` maps a sequence's tokens to the pool tokens it
    holds (None: kv_cache.pool_tokens_held for the steps' model, whose windowed layers keep only their window)."""
    held = held or _held(steps)
    fits = [(a, b) for _, a, b in work if held(a + b) <= kv_capacity]
    share = len(fits) / len(work)
    fits = fits or [(1, 1)]
    n, s = len(fits), [b - 1 for _, b in fits]
    weight = sum(s) or 1
    context = round(sum(k * (a + 1 + (k - 1) / 2) for (a, _), k in zip(fits, s)) / weight)
    # fsum: a windowed model's pool tokens are fractions, and CPython 3.11 and Pyodide's 3.14 sum() round differently
    kv_batch = kv_capacity * weight / math.fsum(k * held(a + b) for (a, b), k in zip(fits, s)) if any(s) else max_batch
    full = max(1, min(max_batch, math.floor(kv_batch)))
    return Load(_prefill_s(steps, fits, full * n / weight), sum(s) / n, max(1, context), full, steps, share)


def _held(steps: StepModel):
    """Pool tokens a sequence of t tokens holds, for the deployment the steps price (its window and any state)."""
    model, state = steps.dep.model, steps.state_pool_tokens
    return lambda tokens: pool_tokens_held(model, tokens, state)


def _prefill_s(steps: StepModel, fits, finishing: float) -> float:
    """Prefill time per request when saturated. Slots free when sequences finish, and all that finish
    on one step are prefilled together: about m + 1/(1 + m) prompts for m finishing per step (the mean
    of a Poisson count given at least one, m/(1 − e^−m), within 4%), sharing one read of the weights."""
    together = finishing + 1 / (1 + finishing)
    one = steps.prefill([round(sum(a for a, _ in fits) / len(fits))])
    memory = one.memory_time_s * (one.weight_bytes / together + one.bytes_read - one.weight_bytes) / one.bytes_read
    return max(memory, steps.prefill([a for a, _ in fits]).compute_time_s / len(fits))


def warm_start(work, count: int, seed: int, kv_capacity: float, steps: StepModel) -> list[tuple[int, int, int]]:
    """(prompt, output, decode steps left) of `count` sequences caught mid-decode: each picked with
    weight (output − 1), the time it spends decoding, and a uniform share of its steps still to go; they fill at
    most the pool (each holding what pool_tokens_held says for the steps' model)."""
    held = _held(steps)
    pool = [(a, b) for _, a, b in work if b > 1 and held(a + b) <= kv_capacity]
    if not pool or count <= 0:
        return []
    rng, out, used = random.Random(f"warm start {seed}"), [], 0
    for a, b in rng.choices(pool, weights=[b - 1 for _, b in pool], k=count):
        used += held(a + b)
        if used > kv_capacity:
            break
        out.append((a, b, 1 + math.floor(rng.random() * (b - 1))))
    return out
