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
    prefix is the same whatever length is asked for later. Gaps are gamma with shape k = burstiness
    and mean 1, as vLLM's `vllm bench serve --burstiness` draws them (k = 1: exponential, Poisson
    arrivals; k < 1 burstier, k > 1 more even; squared coefficient of variation 1 ÷ k). One draw per
    request at rate 1, scaled by 1 ÷ rate, so every rate sees the same requests (common random numbers);
    gaps come from a stream of their own, so the lengths do not depend on the burstiness."""

    def __init__(self, v: dict):
        self.rng, self.items = random.Random(v["seed"]), []
        self.gap_rng, self.shape = random.Random(f"arrivals {v['seed']}"), v.get("burstiness", 1.0)
        self.prompt = length_sampler(v["input_distribution"], v["input_tokens_mean"], v["input_tokens_cv"])
        self.output = length_sampler(v["output_distribution"], v["output_tokens_mean"], v["output_tokens_cv"])

    def first(self, n: int) -> list[tuple[float, int, int]]:
        rng, gap_rng = self.rng, self.gap_rng
        while len(self.items) < n:
            gap = gap_rng.gammavariate(self.shape, 1.0 / self.shape)   # shape 1: the same draw as expovariate(1)
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


class NoGaps:
    """Stands in for Gaps where the inter-token gaps are not wanted (it records nothing)."""

    def joined(self, now: float, count: int):
        pass

    def steps(self, start: float, k: int, took: float):
        pass

    def left(self, count: int):
        pass


class Gaps:
    """Inter-token gaps of the measured requests, pooled, as (seconds, how many) pairs: every sequence
    in the batch shares each decode step, so a run of k identical steps over m measured sequences is
    one pair (step, (k − 1) × m), and the first step after a prefill is the stall plus the step for
    the sequences that were waiting on it. `cohorts` holds (time of last token, measured sequences)."""

    def __init__(self):
        self.pairs, self.cohorts, self.running = [], [], 0

    def joined(self, now: float, count: int):
        if count:
            self.cohorts.append((now, count))
            self.running += count

    def steps(self, start: float, k: int, took: float):
        step_s = took / k
        for t, count in self.cohorts:
            self.pairs.append((start + step_s - t, count))
        if k > 1 and self.running:
            self.pairs.append((step_s, (k - 1) * self.running))
        self.cohorts = [(start + took, self.running)] if self.running else []

    def left(self, count: int):
        self.running -= count
        if self.cohorts:
            self.cohorts[0] = (self.cohorts[0][0], self.running)


def weighted_percentile(pairs: list, pct: float) -> float:
    """Nearest-rank percentile of (value, weight) pairs; 0.0 for none."""
    total = sum(w for _, w in pairs)
    if not total:
        return 0.0
    rank, seen = max(1, math.ceil(pct / 100 * total)), 0
    for value, w in sorted(pairs):
        seen += w
        if seen >= rank:
            return value
    return max(pairs)[0]


def simulate(steps: StepModel, work, rate: float, max_batch: int, kv_capacity: float, warm=(), measured=(0, None),
             alone: dict | None = None, gaps: Gaps | None = None, stop=None):
    """Prefill-first continuous batching, FCFS, KV (in tokens) reserved for prompt + output on admission.

    `warm` sequences are decoding at t = 0; requests work[lo:hi] are measured, and the run stops
    once they are done; `alone` memoises one prompt's prefill time by length; `gaps` (a Gaps) collects
    the measured requests' inter-token gaps; `stop` = (TTFT target, TPOT target, misses allowed) ends
    the run early, returning None, once more measured requests have missed than allowed. Decode steps
    between events are taken in chunks (each step's time at the chunk's mean context, rounded to a
    token), so the loop runs per event, not per token.
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
    state = {"now": 0.0, "g": 0, "kv": kv_used, "ctx": ctx[0], "next": p, "misses": 0}
    return _run(steps, arrivals, inp, out, running, state, max_batch, kv_capacity, lo, hi,
                {} if alone is None else alone, gaps or NoGaps(), stop)


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


def _missed(r, stop) -> bool:
    return r is None or r[0] > stop[0] or r[1] > stop[1]


def _prefill(st, admitted, inp, out, need, arrivals, result, first_token, prefill_s, running, took, lo, hi, gaps):
    """Book one prefill of the admitted requests: first tokens now; one-token answers finish at once.
    Returns the measured requests that finished."""
    now, g, done, joined = st["now"], st["g"], [], 0
    for i in admitted:
        first_token[i], prefill_s[i] = now, took
        if out[i] == 1:
            result[i] = (now - arrivals[i], 0.0, took)
            st["kv"] -= need[i]
            if lo <= i < hi:
                done.append(i)
        else:   # it finishes after out − 1 more decode steps
            heapq.heappush(running, (g + out[i] - 1, i))
            st["ctx"] += inp[i] + 1 - g
            joined += lo <= i < hi
    gaps.joined(now, joined)
    return done


def _run(steps, arrivals, inp, out, running, st, max_batch, kv_capacity, lo, hi, alone, gaps, stop):
    n, prefill_time = len(inp), steps.prefill_time
    result, first_token, prefill_s, waiting = [None] * n, [0.0] * n, [0.0] * n, deque()
    need, left = [a + b for a, b in zip(inp, out)], hi - lo
    while left:
        while st["next"] < n and arrivals[st["next"]] <= st["now"]:
            waiting.append(st["next"])
            st["next"] += 1
        if not waiting and not running:
            if st["next"] == n:
                break
            st["now"] = arrivals[st["next"]]
            continue
        if waiting and len(running) < max_batch:
            admitted, st["kv"], dropped = _admit(waiting, need, st["kv"], kv_capacity, max_batch - len(running), lo, hi)
            left -= dropped
            st["misses"] += dropped
            if admitted:   # one prefill for all of them
                took = _prefill_time(prefill_time, alone, [inp[i] for i in admitted])
                st["now"] += took
                done = _prefill(st, admitted, inp, out, need, arrivals, result, first_token, prefill_s, running,
                                took, lo, hi, gaps)
                left -= len(done)
                if _stopped(st, result, done, stop):
                    return None
                continue
        if not running:     # head of the queue waits for memory nobody will free: impossible here
            break
        done = _decode(st, steps.decode_time, running, waiting, arrivals, inp, out, need, result, first_token,
                       prefill_s, lo, hi, gaps)
        left -= len(done)
        if _stopped(st, result, done, stop):
            return None
    return result[lo:hi]


def _stopped(st, result, done, stop) -> bool:
    if stop is None:
        return False
    st["misses"] += sum(_missed(result[i], stop) for i in done)
    return st["misses"] > stop[2]


def _decode(st, decode_time, running, waiting, arrivals, inp, out, need, result, first_token, prefill_s, lo, hi,
            gaps) -> list:
    """Run decode steps up to the next finish (or the next arrival); returns the measured requests done."""
    batch, g, now, n = len(running), st["g"], st["now"], len(inp)
    k, took = _chunk(decode_time, batch, (st["ctx"] + batch * g) / batch, running[0][0] - g,
                     None if waiting or st["next"] == n else arrivals[st["next"]] - now)
    gaps.steps(now, k, took)
    st["now"], st["g"] = now + took, g + k
    done = []
    while running and running[0][0] <= st["g"]:
        finish_step, i = heapq.heappop(running)
        result[i] = (first_token[i] - arrivals[i], (st["now"] - first_token[i]) / (out[i] - 1), prefill_s[i])
        st["ctx"] -= inp[i] + 1 - (finish_step - out[i] + 1)
        st["kv"] -= need[i]
        if lo <= i < hi:
            done.append(i)
    gaps.left(len(done))
    return done
