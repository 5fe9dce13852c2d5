"""The goodput simulator: seeded workload, offered load against capacity, continuous batching.

Steady state, cheaply: the run starts warm (the batch already holds the number of sequences the
load implies, drawn length-biased with uniform progress, as a random look at a running server
would find them), a short stretch of arrivals settles the queue, and only the requests after it
are measured; later arrivals keep the batch loaded while the measured ones finish.
"""
from __future__ import annotations

import heapq
import math
from heapq import heappop, heappush
from math import ceil
import random
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import accumulate

from .lengths import lognormal_mu_sigma, uniform_half_width
from .steptime import StepModel

ANALYSIS_REQUESTS = 300    # sample that the offered-load estimate averages over
SIZE_CAP = 2000            # most sequences a warm start, settling stretch or tail may hold


def length_sampler(kind: str, mean: float, cv: float):
    """rng -> one length with the given mean and coefficient of variation (spread ÷ mean); the
    distribution's constants are worked out once, not per draw."""
    if kind == "fixed" or cv == 0:
        fixed = max(1, round(mean))
        return lambda rng: fixed
    if kind == "uniform":   # no wider than the mean: lengths stay positive
        half = uniform_half_width(mean, cv, 1.0)
        lo, hi = mean - half, mean + half
        return lambda rng: max(1, round(rng.uniform(lo, hi)))
    mu, sigma = lognormal_mu_sigma(mean, cv)
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


def _preload(warm, running: list, ctx: list, m: int) -> tuple[list, list, float]:
    """Put the warm-start sequences in the batch: (inputs, outputs, KV used); they are never measured.
    Heap keys are finish step × m + index (m above every index), so the heap compares plain ints."""
    inp, out, kv_used = [], [], 0.0
    for i, (a, b, left) in enumerate(warm):
        inp.append(a)
        out.append(b)
        kv_used += a + b
        running.append(left * m + i)           # finishes after `left` more decode steps
        ctx[0] += a + 1 + (b - 1 - left)       # context now = prompt + first token + steps done
    heapq.heapify(running)
    return inp, out, kv_used


class Gaps:
    """Inter-token gaps of the measured requests, pooled, as values with weights (how many): every
    sequence in the batch shares each decode step, so a run of k identical steps over m measured
    sequences is one value, the step, of weight (k − 1) × m, and the first step after a prefill is the
    stall plus the step for the sequences that were waiting on it. Filled by simulate; weights are
    never 0 (a gap nobody saw moves no percentile)."""

    def __init__(self):
        self.values, self.weights = [], []

    @property
    def pairs(self) -> list[tuple[float, int]]:
        return list(zip(self.values, self.weights))

    def percentiles(self, pcts) -> list[float]:
        """Nearest-rank percentiles: the smallest gap whose cumulative weight reaches ⌈pct% × total⌉
        (at least 1); 0.0 for none. One sort (of floats, by index) and one running total for all."""
        values, weights = self.values, self.weights
        order = sorted(range(len(values)), key=values.__getitem__)
        cumulative = list(accumulate([weights[i] for i in order]))
        total = cumulative[-1] if cumulative else 0
        if not total:
            return [0.0 for _ in pcts]
        return [values[order[bisect_left(cumulative, max(1, math.ceil(pct / 100 * total)))]] for pct in pcts]

    def longest(self) -> float:
        return max(self.values, default=0.0)


def weighted_percentile(pairs: list, pct: float) -> float:
    """Nearest-rank percentile of (value, weight) pairs; 0.0 for none."""
    gaps = Gaps()
    for value, w in pairs:
        if w:
            gaps.values.append(value)
            gaps.weights.append(w)
    return gaps.percentiles((pct,))[0]


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
    run = _Run(steps, max_batch, kv_capacity, {} if alone is None else alone, gaps, stop)
    run.load(warm, work, rate, measured)
    return run.run()


def _no_gaps(now: float, took: float, k: int) -> None:
    """book_gaps for a run that keeps no inter-token gaps."""


class _Run:
    """The event loop of one simulation: every request's arrays and the batch's counters, as slots.

    Requests queue in arrival order, so the queue is the index range [head, nxt). Each turn: arrivals
    up to now join the queue; if there is room, FCFS admission with KV for prompt + output reserved,
    and one prefill of all admitted (admit, prefill); otherwise a decode chunk: steps up to the next
    finish or, when the queue is empty, up to the step boundary that passes the next arrival, each
    step timed at the chunk's middle context rounded to a token; then the sequences it finishes leave
    (finish). `running` is a heap of finish step × m + index (m = every request and warm sequence);
    every sequence the chunk finishes finishes on its last step. Inter-token gaps go to `values` and
    `weights` by cohort (book_gaps): `last`/`count` for the measured sequences that decoded together
    last step, `new` for those prefilled since.

    Speed: run() turns once per event, a few thousand times a run, and the goodput search makes a
    dozen runs. The clock, the queue's end and the steps done are run()'s locals, and every method
    binds the slots it reads to locals once per call and writes back what it changed: a local costs a
    fraction of an attribute look-up in CPython. The decode chunk, which every turn runs, stays inline
    in run(): a method call per turn was most of what the split into methods cost (about 20% over the
    single function it replaced, measured in CPython 3.11).
    """
    __slots__ = ("decode_time", "prefill_time", "max_batch", "kv_capacity", "alone", "ttft_max", "tpot_max",
                 "allowed", "record", "values", "weights", "arrivals", "inp", "out", "need", "result", "first_token",
                 "prefill_s", "running", "kv", "ctx", "head", "n", "lo", "hi", "last", "count", "new", "left", "misses")

    def __init__(self, steps: StepModel, max_batch: int, kv_capacity: float, alone: dict, gaps: Gaps | None, stop):
        self.decode_time, self.prefill_time = steps.decode_time, steps.prefill_time
        self.max_batch, self.kv_capacity, self.alone = max_batch, kv_capacity, alone
        self.ttft_max, self.tpot_max, self.allowed = stop if stop is not None else (0.0, 0.0, math.inf)
        self.record = gaps is not None
        self.values, self.weights = (gaps.values, gaps.weights) if self.record else ([], [])

    def load(self, warm, work, rate: float, measured) -> None:
        """The warm-start sequences in the batch, then `work` arriving at `rate`; work[lo:hi] measured."""
        self.running, ctx = [], [0]
        inp, out, self.kv = _preload(warm, self.running, ctx, len(warm) + len(work))
        p = len(inp)
        inp += [w[1] for w in work]
        out += [w[2] for w in work]
        arrivals, t = [0.0] * p, 0.0
        for w in work:
            t += w[0] / rate
            arrivals.append(t)
        n = len(inp)
        self.arrivals, self.inp, self.out, self.ctx, self.head, self.n = arrivals, inp, out, ctx[0], p, n
        self.lo, self.hi = p + measured[0], p + (len(work) if measured[1] is None else measured[1])
        self.need, self.result = [a + b for a, b in zip(inp, out)], [None] * n
        self.first_token, self.prefill_s = [0.0] * n, [0.0] * n
        self.last, self.count, self.new = 0.0, 0, []
        self.left, self.misses = self.hi - self.lo, 0

    def run(self):
        """Events until every measured request is done; None once more have missed than allowed."""
        arrivals, n, running, max_batch, allowed, decode_time, admit, finish, book = (
            self.arrivals, self.n, self.running, self.max_batch, self.allowed, self.decode_time, self.admit,
            self.finish, self.book_gaps if self.record else _no_gaps)
        now, g, nxt, next_at = 0.0, 0, self.head, -math.inf   # -inf: the first turn reads the queue's end
        while self.left:
            if next_at <= now:   # arrivals up to now join the queue
                nxt = bisect_right(arrivals, now, nxt)
                next_at = arrivals[nxt] if nxt < n else math.inf
            if self.head == nxt and not running:   # idle: on to the next arrival, if there is one
                if nxt == n:
                    break
                now = next_at
                continue
            if self.head != nxt and len(running) < max_batch and (after := admit(nxt, now, g)) is not None:
                now = after
                if self.misses > allowed:
                    return None
                continue
            if not running:     # head of the queue waits for memory nobody will free: impossible here
                break
            # the decode chunk, inline as it runs every event (see the class docstring)
            batch = len(running)
            context = (self.ctx + batch * g) / batch
            k, start, step_s = running[0] // n - g, round(context), 0.0   # k: steps to the next finish
            if self.head == nxt < n:   # empty queue: min(k, max(1, ⌈to arrival ÷ step⌉)), without slow builtins
                step_s = decode_time(batch, start)
                to_arrival = ceil((next_at - now) / step_s)
                if to_arrival < k:
                    k = to_arrival if to_arrival > 1 else 1
            middle = start if k == 1 else round(context + (k - 1) / 2)
            took = k * (step_s if middle == start and step_s else decode_time(batch, middle))
            book(now, took, k)
            now, g = now + took, g + k
            if running[0] < g * n + n:   # someone's last step (else the chunk stopped at an arrival)
                finish(now, g)
                if self.misses > allowed:
                    return None
        return self.result[self.lo:self.hi]

    def admit(self, nxt: int, now: float, g: int) -> float | None:
        """FCFS from the head of the queue (up to nxt) while there is room and KV (one that can never fit
        is dropped: it misses both SLOs), then one prefill for all admitted; returns the time it ends
        (their first token), or None when nobody was admitted."""
        admitted, head, kv, need, cap = [], self.head, self.kv, self.need, self.kv_capacity
        room = self.max_batch - len(self.running)
        while room and head < nxt:
            q = need[head]
            if q > cap:
                if self.lo <= head < self.hi:
                    self.left, self.misses = self.left - 1, self.misses + 1
            elif kv + q > cap:
                break
            else:
                kv += q
                admitted.append(head)
                room -= 1
            head += 1
        self.head, self.kv = head, kv
        return self.prefill(admitted, now, g) if admitted else None

    def prefill(self, admitted: list[int], now: float, g: int) -> float:
        """One prefill for all admitted (one prompt alone is memoised by length): their first token at its
        end, which it returns."""
        inp, out, lo, hi, n = self.inp, self.out, self.lo, self.hi, self.n
        if len(admitted) == 1:
            t = inp[admitted[0]]
            took = self.alone.get(t)
            if took is None:
                took = self.alone[t] = self.prefill_time([t])
        else:
            took = self.prefill_time([inp[i] for i in admitted])
        now += took
        joined, first_token, prefill_s, running, ctx = 0, self.first_token, self.prefill_s, self.running, self.ctx
        for i in admitted:
            first_token[i], prefill_s[i] = now, took
            if out[i] == 1:   # a one-token answer finishes at once (rare: attributes, not locals)
                self.result[i] = (now - self.arrivals[i], 0.0, took)
                self.kv -= self.need[i]
                if lo <= i < hi:
                    self.left, self.misses = self.left - 1, self.misses + (now - self.arrivals[i] > self.ttft_max)
            else:   # it finishes after out − 1 more decode steps
                heappush(running, (g + out[i] - 1) * n + i)
                ctx += inp[i] + 1 - g
                joined += lo <= i < hi
        self.ctx = ctx
        if joined:
            self.new.append((now, joined))
        return now

    def book_gaps(self, now: float, took: float, k: int) -> None:
        """A chunk of k steps from `now`: each cohort's first gap, then k − 1 steps shared by all measured
        sequences in the batch."""
        values, weights, count, step_s = self.values, self.weights, self.count, took / k
        if count:
            values.append(now + step_s - self.last)
            weights.append(count)
        for t, c in self.new:
            values.append(now + step_s - t)
            weights.append(c)
            count += c
        if k > 1 and count:
            values.append(step_s)
            weights.append((k - 1) * count)
        self.count, self.new, self.last = count, [], now + took

    def finish(self, now: float, g: int) -> None:
        """The sequences whose last step the chunk ran leave the batch, with their TTFT and mean TPOT."""
        running, n = self.running, self.n
        base = g * n
        limit = base + n
        first_token, arrivals, out, inp, result, prefill_s, need = (self.first_token, self.arrivals, self.out, self.inp,
                                                                    self.result, self.prefill_s, self.need)
        lo, hi, ttft_max, tpot_max = self.lo, self.hi, self.ttft_max, self.tpot_max
        ctx, kv, count, left, misses = self.ctx, self.kv, self.count, self.left, self.misses
        while running and running[0] < limit:
            i = heappop(running) - base
            ttft = first_token[i] - arrivals[i]
            tpot = (now - first_token[i]) / (out[i] - 1)
            result[i] = (ttft, tpot, prefill_s[i])
            ctx -= inp[i] + 1 - (g - out[i] + 1)
            kv -= need[i]
            if lo <= i < hi:
                count, left, misses = count - 1, left - 1, misses + (ttft > ttft_max or tpot > tpot_max)
        self.ctx, self.kv, self.count, self.left, self.misses = ctx, kv, count, left, misses
