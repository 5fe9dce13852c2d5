"""The goodput simulator: seeded workload, offered load against capacity, continuous batching.

Steady state, cheaply: the run starts warm (the batch already holds the number of sequences the
load implies, drawn length-biased with uniform progress, as a random look at a running server
would find them), a short stretch of arrivals settles the queue, and only the requests after it
are measured; later arrivals keep the batch loaded while the measured ones finish.
"""
from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass

from .steptime import StepModel

ANALYSIS_REQUESTS = 300    # sample that the offered-load estimate averages over
SIZE_CAP = 2000            # most sequences a warm start, settling stretch or tail may hold


def length_sampler(kind: str, mean: float, cv: float):
    """rng -> one length with the given mean and coefficient of variation (spread ÷ mean); the
    distribution's constants are worked out once, not per draw."""
    if kind == "fixed" or cv == 0:
        fixed = max(1, round(mean))
        return lambda rng: fixed
    if kind == "uniform":   # a uniform of half-width a has cv = a ÷ (mean × √3)
        half = min(cv * math.sqrt(3), 1.0) * mean
        lo, hi = mean - half, mean + half
        return lambda rng: max(1, round(rng.uniform(lo, hi)))
    sigma2 = math.log1p(cv * cv)
    mu, sigma = math.log(mean) - sigma2 / 2, math.sqrt(sigma2)
    return lambda rng: max(1, round(rng.lognormvariate(mu, sigma)))


class Workload:
    """(arrival gap at rate 1, input tokens, output tokens) per request, drawn on demand: every
    prefix is the same whatever length is asked for later."""

    def __init__(self, v: dict):
        self.rng, self.items = random.Random(v["seed"]), []
        self.prompt = length_sampler(v["input_distribution"], v["input_tokens_mean"], v["input_tokens_cv"])
        self.output = length_sampler(v["output_distribution"], v["output_tokens_mean"], v["output_tokens_cv"])

    def first(self, n: int) -> list[tuple[float, int, int]]:
        rng = self.rng
        while len(self.items) < n:
            gap = rng.expovariate(1.0)
            self.items.append((gap, self.prompt(rng), self.output(rng)))
        return self.items[:n]


@dataclass(frozen=True)
class Load:
    """Per-request work from a sample, and the batch a saturated server runs."""
    prefill_s: float      # mean prefill time per request when saturated (see _prefill_s)
    decode_steps: float   # mean decode steps per request (output − 1)
    context: int          # mean context during decode, weighted by time in the batch
    full_batch: int       # max concurrent sequences, or fewer where the KV pool binds
    steps: StepModel
    share: float = 1.0    # of requests whose KV fits at all (the rest are dropped on arrival)

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
            b = min(self.full_batch, max(1, round(rate * self.share * self.decode_steps
                                                  * self.steps.decode_time(b, self.context) / idle)))
        return b


def offered_load(steps: StepModel, work, max_batch: int, kv_capacity: float) -> Load:
    fits = [(a, b) for _, a, b in work if a + b <= kv_capacity]
    share = len(fits) / len(work)
    fits = fits or [(1, 1)]
    n, s = len(fits), [b - 1 for _, b in fits]
    weight = sum(s) or 1
    context = round(sum(k * (a + 1 + (k - 1) / 2) for (a, _), k in zip(fits, s)) / weight)
    kv_batch = kv_capacity * weight / sum(k * (a + b) for (a, b), k in zip(fits, s)) if any(s) else max_batch
    full = max(1, min(max_batch, math.floor(kv_batch)))
    return Load(_prefill_s(steps, fits, full * n / weight), sum(s) / n, max(1, context), full, steps, share)


def _prefill_s(steps: StepModel, fits, finishing: float) -> float:
    """Prefill time per request when saturated. Slots free when sequences finish, and all that finish
    on one step are prefilled together: about m + 1/(1 + m) prompts for m finishing per step (the mean
    of a Poisson count given at least one, m/(1 − e^−m), within 4%), sharing one read of the weights."""
    together = finishing + 1 / (1 + finishing)
    one = steps.prefill([round(sum(a for a, _ in fits) / len(fits))])
    memory = one.memory_time_s * (one.weight_bytes / together + one.bytes_read - one.weight_bytes) / one.bytes_read
    return max(memory, steps.prefill([a for a, _ in fits]).compute_time_s / len(fits))


def warm_start(work, count: int, seed: int, kv_capacity: float) -> list[tuple[int, int, int]]:
    """(prompt, output, decode steps left) of `count` sequences caught mid-decode: each picked with
    weight (output − 1), the time it spends decoding, and a uniform share of its steps still to go."""
    pool = [(a, b) for _, a, b in work if b > 1 and a + b <= kv_capacity]
    if not pool or count <= 0:
        return []
    rng, out, used = random.Random(f"warm start {seed}"), [], 0
    for a, b in rng.choices(pool, weights=[b - 1 for _, b in pool], k=count):
        if used + a + b > kv_capacity:
            break
        used += a + b
        out.append((a, b, 1 + math.floor(rng.random() * (b - 1))))
    return out


def _preload(warm, running: list, ctx: list) -> tuple[list, list, float]:
    """Put the warm-start sequences in the batch: (inputs, outputs, KV used); they are never measured."""
    inp, out, kv_used = [], [], 0.0
    for i, (a, b, left) in enumerate(warm):
        inp.append(a)
        out.append(b)
        kv_used += a + b
        running.append((left, i))              # finishes after `left` more decode steps
        ctx[0] += a + 1 + (b - 1 - left)       # context now = prompt + first token + steps done
    heapq.heapify(running)
    return inp, out, kv_used


def simulate(steps: StepModel, work, rate: float, max_batch: int, kv_capacity: float, warm=(), measured=(0, None),
             alone: dict | None = None):
    """Prefill-first continuous batching, FCFS, KV (in tokens) reserved for prompt + output on admission.

    `warm` sequences are decoding at t = 0; requests work[lo:hi] are measured, and the run stops
    once they are done; `alone` memoises one prompt's prefill time by length. Decode steps between
    events are taken in chunks (each step's time at the chunk's mean context, rounded to a token),
    so the loop runs per event, not per token.
    Returns (ttft_s, tpot_s, prefill_s) per measured request, None for one whose KV can never fit.
    """
    running, ctx = [], [0]
    inp, out, kv_used = _preload(warm, running, ctx)
    p = len(inp)
    inp += [w[1] for w in work]
    out += [w[2] for w in work]
    arrivals, t = [0.0] * p, 0.0
    for w in work:
        t += w[0] / rate
        arrivals.append(t)
    lo, hi = p + measured[0], p + (len(work) if measured[1] is None else measured[1])
    return _run(steps, arrivals, inp, out, running, ctx[0], kv_used, max_batch, kv_capacity, p, lo, hi,
                {} if alone is None else alone)


def _admit(waiting: deque, need: list, kv_used: float, kv_capacity: float, room: int, lo: int, hi: int):
    """FCFS admission: (admitted, KV used, measured requests dropped because their KV can never fit)."""
    admitted, dropped = [], 0
    while room and waiting:
        i = waiting[0]
        if need[i] > kv_capacity:   # can never fit: dropped, counts as missing both SLOs
            waiting.popleft()
            dropped += lo <= i < hi
        elif kv_used + need[i] > kv_capacity:
            break
        else:
            kv_used += need[i]
            admitted.append(waiting.popleft())
            room -= 1
    return admitted, kv_used, dropped


def _chunk(decode_time, batch: int, context: float, to_finish: int, to_arrival_s: float | None):
    """(k, seconds): decode steps up to the next finish, or to the step boundary that passes the next
    arrival when one is due; each step timed at the chunk's middle context, rounded to a token."""
    k, step_s, start = to_finish, 0.0, round(context)
    if to_arrival_s is not None:
        step_s = decode_time(batch, start)
        k = min(k, max(1, math.ceil(to_arrival_s / step_s)))
    middle = round(context + (k - 1) / 2)
    return k, k * (step_s if middle == start and step_s else decode_time(batch, middle))


def _prefill_time(prefill_time, alone: dict, prompts: list) -> float:
    """StepModel.prefill_time, memoised by length for one prompt alone (the common case)."""
    if len(prompts) > 1:
        return prefill_time(prompts)
    t = prompts[0]
    return alone[t] if t in alone else alone.setdefault(t, prefill_time(prompts))


def _run(steps, arrivals, inp, out, running, ctx_offset, kv_used, max_batch, kv_capacity, nxt, lo, hi, alone):
    n, decode_time, prefill_time = len(inp), steps.decode_time, steps.prefill_time
    push, pop = heapq.heappush, heapq.heappop
    result, first_token, prefill_s, waiting = [None] * n, [0.0] * n, [0.0] * n, deque()
    need, now, g, left = [a + b for a, b in zip(inp, out)], 0.0, 0, hi - lo
    while left:
        while nxt < n and arrivals[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        if not waiting and not running:
            if nxt == n:
                break
            now = arrivals[nxt]
            continue
        if waiting and len(running) < max_batch:
            room = max_batch - len(running)
            admitted, kv_used, dropped = _admit(waiting, need, kv_used, kv_capacity, room, lo, hi)
            left -= dropped
            if admitted:   # one prefill for all of them
                took = _prefill_time(prefill_time, alone, [inp[i] for i in admitted])
                now += took
                for i in admitted:
                    first_token[i], prefill_s[i] = now, took
                    if out[i] == 1:
                        result[i], kv_used = (now - arrivals[i], 0.0, took), kv_used - need[i]
                        left -= lo <= i < hi
                    else:   # it finishes after out − 1 more decode steps
                        push(running, (g + out[i] - 1, i))
                        ctx_offset += inp[i] + 1 - g
                continue
        if not running:     # head of the queue waits for memory nobody will free: impossible here
            break
        batch = len(running)
        k, took = _chunk(decode_time, batch, (ctx_offset + batch * g) / batch, running[0][0] - g,
                         None if waiting or nxt == n else arrivals[nxt] - now)
        now, g = now + took, g + k
        while running and running[0][0] <= g:
            finish_step, i = pop(running)
            result[i] = (first_token[i] - arrivals[i], (now - first_token[i]) / (out[i] - 1), prefill_s[i])
            ctx_offset -= inp[i] + 1 - (finish_step - out[i] + 1)
            kv_used -= need[i]
            left -= lo <= i < hi
    return result[lo:hi]
