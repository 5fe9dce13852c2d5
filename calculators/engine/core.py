"""The engine loop: each turn, requests that have arrived join the queue, the scheduler plans one step
(running sequences first, then waiting ones while the token budget, the sequence cap and the KV pool
allow, as vLLM V1's scheduler does), and the step runs.

Scheduling (continuous batching, vLLM V1 v0.33.0 `Scheduler.schedule`): every running sequence asks for
the tokens it has not computed (1 when decoding, the rest of its prompt when prefilling), cut to the
budget left; its KV blocks grow to cover them, and when the pool is empty the last-admitted running
sequence is preempted (the lowest ranked, under priority) until they fit; if nothing was preempted,
waiting requests are admitted in policy order while budget, cap and blocks last. Without chunked
prefill a prompt that does not fit in the budget left waits for the next step. Without mixed batches (vLLM V0,
and SGLang's default with chunked prefill: EngineConfig) a step that prefills carries no decodes. A preempted sequence
frees its blocks and, under recompute, prefills its prompt and generated tokens again when readmitted;
under swap its KV goes to host memory and comes back, each way costing blocks × bytes ÷ host bandwidth
added to that step. Static batching admits a batch only when the engine is idle, reserving every
member's whole length, and admits nothing until the last member finishes.

Speed: the sequences that decode are kept as one set (decoding.Decoding) advanced together, so a
step's cost does not grow with the batch. A step in which every one of them decodes, and any
prefilling sequence comes after them in the running order (the common case), is planned from the
set's sums (the fast path); anything else (a sequence cut by the budget, blocks short, preemption,
static admission) goes the general way above, one sequence at a time. A stretch of decode-only steps
with nothing to change the next plan (the same batch, no prefill) runs as one chunk up to the next
finish, the next arrival that could be admitted, or the last step the free blocks cover; each step of
the chunk is priced at the chunk's middle context. Inter-token gaps are pooled by value as booked.
"""

from __future__ import annotations

import heapq
import math

from .config import EngineConfig, Request
from .decoding import Decoding
from .metrics import Gaps
from .pool import KvPool
from .queue import WaitingQueue
from .steps import StepTimes

RUNNING, WAITING, FINISHED, REJECTED = "running", "waiting", "finished", "rejected"
NO_HITS = (0, 0, 0)  # no prefix cache: (GPU, host, evictable) blocks found
PREDICTOR_CHUNK = 8192  # tokens of the prefill step whose rate predicts a TTFT on arrival
EMPTY: dict = {}  # no sequence outside the decoding set runs (never written to)


def _due_by(heap: list, t: float) -> list[int]:
    """The requests of a min-heap of (time, request) due at or before t, visiting only those and their children."""
    due, stack = [], [0] if heap else []
    while stack:
        k = stack.pop()
        if heap[k][0] <= t:
            due.append(heap[k][1])
            stack.extend(c for c in (2 * k + 1, 2 * k + 2) if c < len(heap))
    return due


class Engine:
    """State of one simulated replica; run() advances it until the measured requests are done.
    Per request i: tokens[i] = prompt + generated, done[i] = tokens whose KV is computed and held,
    blocks[i] = KV blocks held (blocks_for(done[i]) between steps, except under static batching);
    `prefilling` holds running sequences that have tokens to compute before their next token, and
    `decoding` (a Decoding) the others, whose arrays it keeps up to date lazily; `running` maps the
    running sequences, in the order they were admitted, to that order's number. With
    prefix caching, held[i] lists the cached blocks i holds (shared, counted once in the pool) and
    blocks[i] counts only its own; names[i] names the blocks of its whole sequence."""

    __slots__ = (
        "cfg",
        "times",
        "plain",
        "n",
        "arrival",
        "prompt",
        "out",
        "tokens",
        "done",
        "gen",
        "first",
        "last",
        "started",
        "finished",
        "preemptions",
        "state",
        "swapped",
        "measured",
        "running",
        "prefilling",
        "waiting",
        "now",
        "pending",
        "followers",
        "lo",
        "hi",
        "left",
        "gaps",
        "extra_s",
        "steps",
        "trace",
        "occupancy",
        "requests",
        "pool",
        "hit_gpu",
        "hit_host",
        "decoding",
        "admitted",
        "misses",
        "stop",
        "stopped",
        "until",
        "since_recv",
        "planned_s",
    )

    def __init__(
        self, times: StepTimes, requests: list[Request], cfg: EngineConfig, measured: tuple[int, int], stop=None
    ):
        self.cfg, self.times, self.n = cfg, times, 0
        self.plain = times.speculation is None  # one token per decode step: the hot paths skip the speculation calls
        self.arrival, self.prompt, self.out, self.tokens, self.done, self.gen = [], [], [], [], [], []
        self.first, self.last, self.started, self.finished = [], [], [], []
        self.preemptions, self.state, self.swapped, self.measured = [], [], [], []
        self.requests, self.hit_gpu, self.hit_host, self.pool = [], [], [], KvPool(cfg, 0, times.pool_charge)
        self.running, self.prefilling, self.admitted = {}, set(), 0
        self.waiting = WaitingQueue(cfg.policy, cfg.ageing_s, self.arrival, [])
        self.now, self.gaps, self.until = 0.0, Gaps(), math.inf
        self.since_recv = 0  # decode steps since the scheduler last read new requests (recv_interval_steps)
        self.planned_s = 0.0  # when the next step is planned: now, or (schedule_ahead, busy) when the last step began
        # Arrivals to come, (time, index); a request that follows another (closed loop, agent turns)
        # joins when its predecessor ends, think_s later.
        self.pending: list = []
        self.followers: dict[int, list[int]] = {}
        self.extra_s, self.steps, self.trace, self.occupancy = 0.0, 0, [], []
        arrays = (self.done, self.gen, self.tokens, self.last, self.out, self.measured)
        grows = cfg.batching == "continuous" and not cfg.reserve_full_length
        self.decoding = Decoding(arrays, self.pool, grows, self.gaps)
        self.misses, self.stop, self.stopped = 0, stop, False
        self.lo, self.hi, self.left = *measured, 0
        self.extend(requests)

    def extend(self, requests: list[Request]) -> None:
        """Requests join the run (at construction, or between run() calls: a fleet's router hands each replica
        the requests it routes there, fleet.py); those with indices in [lo, hi) are measured."""
        base, rank_key = self.n, self.cfg.policy
        self.n += len(requests)
        self.requests += requests
        self.arrival += [r.arrival_s for r in requests]
        self.prompt += [r.prompt_tokens for r in requests]
        self.out += [r.output_tokens for r in requests]
        self.waiting.rank += [
            r.priority if rank_key == "priority" else (r.predicted_output_tokens or r.output_tokens) for r in requests
        ]
        k = len(requests)
        self.tokens += self.prompt[base:]
        self.done += [0] * k
        self.gen += [0] * k
        self.first += [-1.0] * k
        self.last += [0.0] * k
        self.started += [-1.0] * k
        self.finished += [-1.0] * k
        self.preemptions += [0] * k
        self.state += [None] * k
        self.swapped += [False] * k
        self.hit_gpu += [0] * k
        self.hit_host += [0] * k
        self.measured += [self.lo <= i < self.hi for i in range(base, self.n)]
        self.left += sum(self.measured[base:])
        self.pool.extend(k, [r.prompt_tokens + r.output_tokens for r in requests])
        for i, r in enumerate(requests, base):
            if r.after >= 0:
                self.followers.setdefault(r.after, []).append(i)
            elif r.generated:
                self._warm(i, r.generated)
        self.pending += [(r.arrival_s, i) for i, r in enumerate(requests, base) if r.after < 0 and not r.generated]
        heapq.heapify(self.pending)

    def _warm(self, i: int, generated: int) -> None:
        """i is decoding at t = 0, `generated` tokens out (the last one's KV still to compute)."""
        self.gen[i], self.tokens[i] = generated, self.prompt[i] + generated
        self.done[i] = self.tokens[i] - 1
        self.first[i] = self.started[i] = self.arrival[i] = 0.0
        self.pool.allocate(i, self.prompt[i] + self.out[i] if self.cfg.reserve_full_length else self.done[i])
        self.running[i], self.admitted, self.state[i] = self.admitted, self.admitted + 1, RUNNING
        self.decoding.add(i, self.running[i])

    # ---- arrivals and departures ----------------------------------------------------------------------
    def _reads(self) -> bool:
        """Whether the scheduler reads new requests this turn (every turn, unless recv_interval_steps > 1; then
        when the counter is due or the engine is idle, and the counter starts again, as SGLang's skipper)."""
        interval = self.cfg.recv_interval_steps
        if interval == 1:
            return True
        if self.since_recv >= interval or not (self.running or self.waiting.heap):
            self.since_recv = 0
            return True
        return False

    def _steps_to_read(self, steps: int) -> int:
        """The first step count ≥ steps (≥ 1) after which the scheduler reads: a read comes every
        recv_interval_steps decode steps, counted from the last."""
        interval, steps = self.cfg.recv_interval_steps, max(steps, 1)
        return steps + (-(self.since_recv + steps)) % interval

    def _seen_by(self) -> float:
        """Arrivals up to this time are seen by the next step's plan: now, or when the step that just ran began
        (schedule_ahead: the next step was planned then, while that one ran)."""
        return self.planned_s if self.cfg.plans_ahead else self.now

    def _arrive(self) -> None:
        cfg, arrival, pending, now = self.cfg, self.arrival, self.pending, self._seen_by()
        while pending and pending[0][0] <= now:
            t, i = heapq.heappop(pending)
            arrival[i] = t
            whole = self.prompt[i] + self.out[i]  # never fits the pool, or (no chunking) never the budget
            too_long = self.pool.whole(i, whole) > self.pool.total or (
                not cfg.chunked_prefill and whole > cfg.max_num_batched_tokens
            )
            if too_long or self._shed(i):
                self._end(i, REJECTED)
            else:
                self.state[i] = WAITING
                self.waiting.push(i)
                if self.pool.cache is not None:
                    self.pool.name(i, self.requests[i])

    def _shed(self, i: int) -> bool:
        """Admission control on arrival: the queue already holds max_waiting requests, or i's predicted TTFT
        is over max_predicted_ttft_s (both answered with an HTTP 429)."""
        cfg = self.cfg
        if cfg.max_waiting and len(self.waiting.heap) >= cfg.max_waiting:
            return True
        return bool(cfg.max_predicted_ttft_s) and self._predicted_ttft(i) > cfg.max_predicted_ttft_s

    def _predicted_ttft(self, i: int) -> float:
        """What a gateway can predict on arrival: the prompt tokens waiting ahead (all of the queue, whatever
        the policy) and i's own, prefilled at the rate of a full-budget prefill chunk (capped at 8,192
        tokens). It ignores the decodes that share each step and prefix-cache hits, so it errs low under
        load and high with caching: an estimate, as a real one is."""
        chunk = min(self.cfg.max_num_batched_tokens, PREDICTOR_CHUNK)
        rate = chunk / self.times.mixed(0, 0.0, [(0, chunk)])
        tokens, done = self.tokens, self.done
        ahead = sum([tokens[j] - done[j] for _, _, j in self.waiting.heap])
        return (ahead + self.prompt[i]) / rate

    def _end(self, i: int, state: str) -> None:
        self.state[i] = state
        if state == FINISHED:
            self.finished[i] = self.now
            self.pool.release(i)
        if self.measured[i]:
            self.left -= 1
            if self.stop is not None and self._missed(i, state):
                self.misses += 1
                if self.misses > self.stop[2]:  # the run has answered its question: stop here
                    self.stopped, self.left = True, 0
        for j in self.followers.get(i, ()):
            heapq.heappush(self.pending, (self.now + self.requests[j].think_s, j))

    def _missed(self, i: int, state: str) -> bool:
        """Whether request i, ended, missed the stop's TTFT or mean-TPOT target (a rejection misses both)."""
        if state != FINISHED:
            return True
        ttft, tpot = self.first[i] - self.arrival[i], 0.0
        if self.out[i] > 1:
            tpot = (self.finished[i] - self.first[i]) / (self.out[i] - 1)
        return ttft > self.stop[0] or tpot > self.stop[1]

    def _preempt(self, i: int) -> None:
        del self.running[i]
        self.prefilling.discard(i)
        held = self.pool.release(i)
        self.preemptions[i] += 1
        self.state[i] = WAITING
        if self.cfg.preemption == "swap":
            self.swapped[i] = True
            self.extra_s += held * self.pool.block_bytes / self.cfg.swap_bytes_per_s
        else:
            self.done[i] = 0  # to prefill again when readmitted
        self.waiting.push_preempted(i)

    def _victim(self) -> int:
        """The running sequence to preempt: the last admitted, or under priority the lowest ranked."""
        if self.cfg.policy != "priority":
            return next(reversed(self.running))
        rank, arrival = self.waiting.rank, self.arrival
        return max(self.running, key=lambda j: (rank[j], arrival[j]))

    # ---- the general path: one sequence at a time ------------------------------------------------------
    def _schedule_running(self, budget: int, only: list[int] | None = None) -> tuple[dict, bool]:
        """Running sequences in order (or those of `only`), each its uncomputed tokens cut to the budget; blocks
        run out: preempt (a victim already planned this step gives its tokens back) until they fit."""
        plan, preempted = {}, False
        for i in list(self.running if only is None else only):
            if budget <= 0:
                break
            if self.state[i] != RUNNING:  # preempted earlier in this loop
                continue
            new = min(self.tokens[i] - self.done[i], budget)
            while self.pool.need(i, self.done[i] + new) > self.pool.free:
                victim = self._victim()
                self._preempt(victim)
                preempted, budget = True, budget + plan.pop(victim, 0)
                if victim == i:
                    break
            else:
                self.pool.allocate(i, self.done[i] + new)
                plan[i], budget = new, budget - new
        return plan, preempted

    def _admit(self, plan: dict, budget: int) -> None:
        """Waiting requests in policy order, into `plan`, while the budget, the cap and the blocks last."""
        cfg, waiting = self.cfg, self.waiting
        bs = cfg.block_size_tokens
        while budget > 0 and waiting.heap and len(self.running) < cfg.max_num_seqs:
            i = waiting.peek()
            cached = self.pool.cache is not None
            gpu, host, evictable = self.pool.hits(i, self.done[i], self.tokens[i]) if cached else NO_HITS
            start = self.done[i] or (gpu + host) * bs
            remaining = self.tokens[i] - start
            if not cfg.chunked_prefill and remaining > budget:
                return
            new = min(remaining, budget)
            reserve = self.prompt[i] + self.out[i] if cfg.reserve_full_length else start + new
            must_fit = max(reserve, self.tokens[i]) if cfg.whole_prompt_must_fit else reserve
            if self.pool.whole(i, must_fit) - gpu + evictable > self.pool.free:
                return
            waiting.pop()
            if gpu + host:
                self._reuse(i, gpu, host)
            self._start(i, reserve)
            plan[i], budget = new, budget - new

    def _reuse(self, i: int, gpu: int, host: int) -> None:
        """Start i from its cached leading blocks (host-tier ones copied back, the copy added to the step)."""
        bs = self.cfg.block_size_tokens
        self.extra_s += self.pool.reuse(i, gpu, host)
        self.done[i] = (gpu + host) * bs
        if self.started[i] < 0:
            self.hit_gpu[i], self.hit_host[i] = gpu * bs, host * bs

    def _start(self, i: int, tokens: int) -> None:
        if self.swapped[i]:  # its KV comes back from host memory first
            self.swapped[i] = False
            self.extra_s += self.pool.whole(i, self.done[i]) * self.pool.block_bytes / self.cfg.swap_bytes_per_s
        if self.gen[i] == 0 or self.done[i] < self.tokens[i] - 1:  # prompt (or recomputed) tokens to go
            self.prefilling.add(i)
        self.pool.allocate(i, tokens)
        self.running[i] = self.admitted
        self.admitted += 1
        self.state[i] = RUNNING
        if self.started[i] < 0:
            self.started[i] = self.now

    def _admit_static(self) -> dict:
        """Static batching, idle engine: admit a batch (whole lengths reserved) to prefill together."""
        plan, waiting = {}, self.waiting
        while len(waiting) and len(plan) < self.cfg.max_num_seqs:
            i = waiting.peek()
            if self.pool.whole(i, self.prompt[i] + self.out[i]) > self.pool.free:
                break
            waiting.pop()
            self._start(i, self.prompt[i] + self.out[i])
            plan[i] = self.tokens[i]
        return plan

    def _general(self) -> tuple[dict, bool]:
        """The plan of a step the fast path cannot make, with every sequence taken one by one."""
        cfg = self.cfg
        if cfg.batching == "static":
            return self._admit_static(), False
        budget = cfg.max_num_batched_tokens
        if not cfg.mixed_batches and cfg.chunked_prefill:  # SGLang: a step of prefill alone while there is one
            plan, preempted = self._schedule_running(budget, sorted(self.prefilling, key=self.running.__getitem__))
            if not preempted:
                self._admit(plan, budget - sum(plan.values()))
            if plan or preempted:
                return plan, preempted
            return self._schedule_running(budget)  # the decodes, when no prompt can be prefilled
        plan, preempted = self._schedule_running(budget)
        if not preempted:
            self._admit(plan, budget - sum(plan.values()))
        return plan, preempted

    # ---- the fast path: the decoding set at once ------------------------------------------------------
    def _fast_plan(self) -> dict | None:
        """The step in which every decoding sequence decodes: the prefilling ones' chunks and admissions
        (in `plan`), or None when the general path must decide (budget or blocks too short for that, a
        prefilling sequence ahead of a decoding one, static admission)."""
        cfg, dec, pool = self.cfg, self.decoding, self.pool
        if cfg.batching == "static":
            return {} if dec else None
        n = len(dec)  # asks: the decodes' share of the token budget
        per_step, asks = (1.0, n) if self.plain else (self.times.tokens_per_step(n), n * self.times.decode_tokens(n))
        grow = dec.blocks_needed(1, per_step) if dec.grows else 0
        if not cfg.mixed_batches:  # vLLM V0, SGLang: admitted prompts are prefilled alone, decodes wait
            if cfg.chunked_prefill and self.prefilling:  # SGLang: the chunked prompt's next chunk goes first
                return None
            plan: dict = {}
            if self.waiting.heap:
                self._admit(plan, cfg.max_num_batched_tokens)
            if plan or self.prefilling or grow > pool.free or asks > cfg.max_num_batched_tokens:
                return plan or None
            pool.take(grow)
            return plan
        budget, free = cfg.max_num_batched_tokens - asks, pool.free - grow
        if budget < 0 or free < 0:
            return None
        order = sorted(self.prefilling, key=self.running.__getitem__)
        if order and self.running[order[0]] < dec.newest:
            return None
        chunks = {}
        for i in order:
            if budget <= 0:
                break
            new = min(self.tokens[i] - self.done[i], budget)
            need = max(0, pool.need(i, self.done[i] + new))
            if need > free:
                return None
            chunks[i], budget, free = new, budget - new, free - need
        pool.take(grow)
        for i, new in chunks.items():
            pool.allocate(i, self.done[i] + new)
        self._admit(chunks, budget)
        return chunks

    def _stretch(self, step_s: float, per_step: float) -> int:
        """How many decode-only steps of step_s (the next one's time) may run as one: to the next finish,
        the step that passes the next arrival that could be admitted, or the last step the free blocks
        cover (1 while tracing)."""
        cfg, dec = self.cfg, self.decoding
        if self.extra_s or self.prefilling or self.steps < cfg.trace_steps:
            return 1
        # A request still waiting now waits for blocks or budget, neither of which a decode step frees;
        # only an arrival (under priority or sjf it may rank first and fit) can change the next plan.
        k = dec.steps_to_finish(per_step)
        pending = self.pending[0][0] if self.pending else math.inf
        # with a recv interval an arrival is read (queued) at the first read after it, full batch or not: a
        # stretch that ran past that read would leave it unread until a later one
        read_later = cfg.recv_interval_steps > 1 and pending < math.inf
        room = len(self.running) < cfg.max_num_seqs or read_later
        if pending < math.inf and room and cfg.batching == "continuous":
            to_arrival = math.ceil((pending - self.now) / step_s)
            if cfg.plans_ahead:  # first seen by the step after the one begun after it
                to_arrival += 1
            if read_later:
                to_arrival = self._steps_to_read(to_arrival)
            k = min(k, to_arrival)
        # run(until) ends before the first step that would begin at or after `until` (requests may join after it,
        # extend), full batch or not
        k = max(1, min(k, self._steps_to_until(step_s)))
        return self._blocks_allow(k, per_step) if k > 1 and dec.grows else k

    def _steps_to_until(self, step_s: float) -> int | float:
        """Steps from now to the first end at or after `until` (infinite without one)."""
        return math.ceil((self.until - self.now) / step_s) if self.until < math.inf else math.inf

    def _blocks_allow(self, k: int, per_step: float) -> int:
        """The most steps ≤ k whose new blocks the free pool covers (the plan took the first step's)."""
        dec, free = self.decoding, self.pool.free
        first = dec.blocks_needed(1, per_step)

        def fits(steps: int) -> bool:
            return dec.blocks_needed(steps, per_step) - first <= free

        if fits(k):
            return k
        lo, hi = 1, k - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        return lo

    def _run_decodes(self) -> None:
        """A stretch of decode-only steps of the decoding set (see _stretch): the hot loop of a run."""
        dec, decode = self.decoding, self.times.decode
        n = len(dec.joined)
        per_step = 1.0 if self.plain else self.times.tokens_per_step(n)
        step_s = decode(n, dec.context())
        k = self._stretch(step_s, per_step)
        if k > 1:
            if dec.grows:
                self.pool.take(dec.blocks_needed(k, per_step) - dec.blocks_needed(1, per_step))
            step_s = decode(n, dec.context(k, per_step))  # each step at the stretch's middle context
        start = self.now
        took = k * step_s + self.extra_s
        self.now, self.extra_s, self.planned_s = start + took, 0.0, start + (k - 1) * step_s
        self._record(start, took, EMPTY, n)
        self.since_recv = (self.since_recv + k - 1) % self.cfg.recv_interval_steps + 1  # reads within the stretch
        dec.advance(k, self.now, took / k, per_step)
        if self.pool.cache is not None:  # filled blocks with a name become cached before anyone leaves
            dec.sync()
            self.pool.register(dec.members(), self.done)
        self._finish_decodes()
        self.steps += k

    def _run_fast(self, plan: dict, decode: bool) -> None:
        """A step in which every decoding sequence decodes (unless `decode` is False: vLLM V0's
        prefill-only step, where they wait, or a general-path step, where the set is empty) and plan's
        sequences compute their tokens."""
        dec, pool = self.decoding, self.pool
        n = len(dec) if decode else 0
        if self.cfg.recv_interval_steps > 1:  # after a step with prefill the scheduler reads at once
            prefills = any(i in self.prefilling for i in plan)
            self.since_recv = self.cfg.recv_interval_steps if prefills else self.since_recv + 1
        start = self.now
        took = self._step_time(plan, n) + self.extra_s
        self.now, self.extra_s, self.planned_s = start + took, 0.0, start
        self._record(start, took, plan, n)
        if n:
            dec.advance(1, self.now, took, 1.0 if self.plain else self.times.tokens_per_step(n))
        done = self.done
        for i, new in plan.items():
            done[i] += new
        if pool.cache is not None:  # filled blocks with a name become cached before anyone leaves
            dec.sync()
            pool.register([*dec.members(), *plan], done)
        self._emit_and_join(plan)
        self._finish_decodes()
        self.steps += 1

    def _finish_decodes(self) -> None:
        for i in self.decoding.finished():
            self._end(i, FINISHED)
            del self.running[i]

    def _step_time(self, plan: dict, n: int) -> float:
        """A step of n decoding-set members (0 on the general path) and plan's sequences: their prefill
        chunks, and the decodes of those outside the set (all of them on the general path)."""
        dec, done, prefilling = self.decoding, self.done, self.prefilling
        others = [i for i in plan if i not in prefilling]  # decodes outside the set (back from a swap)
        context = (dec.context() if n else 0) + sum([done[i] + 1 for i in others])
        chunks = [(done[i], new) for i, new in plan.items() if i in prefilling]
        speculative = n > 0  # the general path's decodes (n = 0) keep one token each: priced plainly
        if not chunks:
            return self.times.decode(n + len(others), context, speculative)
        return self.times.mixed(n + len(others), context, chunks, speculative)

    def _emit_and_join(self, plan: dict) -> None:
        """Plan's sequences (outside the decoding set) that computed all their tokens emit the next one;
        those still running join the decoding set."""
        done, tokens = self.done, self.tokens
        emitted = [i for i in plan if done[i] == tokens[i]]
        self._emit(emitted, self.now)
        for i in emitted:
            if i in self.running:
                self.decoding.add(i, self.running[i])

    # ---- both paths -----------------------------------------------------------------------------------
    def _emit(self, ids, at: float) -> None:
        """A token of each sequence in ids (outside the decoding set), at `at`; measured gaps booked."""
        gen, tokens, last, first, out, measured = self.gen, self.tokens, self.last, self.first, self.out, self.measured
        pooled, finished = {}, []
        for i in ids:
            if gen[i] == 0:
                first[i] = at
            elif measured[i]:
                gap = at - last[i]
                pooled[gap] = pooled.get(gap, 0) + 1
            gen[i] += 1
            tokens[i] += 1
            last[i] = at
            if gen[i] >= out[i]:
                finished.append(i)
        self.prefilling.difference_update(ids)
        self._book(pooled.items())
        for i in finished:
            self._end(i, FINISHED)
            del self.running[i]

    def _book(self, gaps) -> None:
        values, weights = self.gaps.values, self.gaps.weights
        for value, weight in gaps:
            values.append(value)
            weights.append(weight)

    def _run_general(self) -> tuple[dict, bool]:
        """A step planned one sequence at a time (the decoding set is taken apart first, and rebuilt)."""
        dec = self.decoding
        dec.clear()
        plan, preempted = self._general()
        if plan:  # the set is empty, so this is a step of plan's sequences alone
            self._run_fast(plan, decode=False)
        for i, order in self.running.items():
            if i not in self.prefilling and i not in dec:
                dec.add(i, order)
        return plan, preempted

    def _record(self, start: float, took: float, plan: dict, n: int) -> None:
        """Occupancy at this step, and (the first trace_steps steps) who ran: the n decoding-set members
        first, in running order, then plan's sequences."""
        unseen = _due_by(self.pending, start)  # arrived after this step was planned: queued all the same
        waiting = len(self.waiting.heap) + len(unseen)
        self.occupancy.append((start, len(self.running), waiting, self.pool.total - self.pool.free))
        if self.steps < self.cfg.trace_steps:
            dec = self.decoding
            ran = [(i, 1) for i in self.running if i in dec] if n else []
            queued = (*(i for _, _, i in self.waiting.heap), *sorted(unseen))
            self.trace.append((start, took, (*ran, *plan.items()), queued))

    def run(self, until: float = math.inf) -> None:
        """Step until the measured requests are done or nothing is left to run; with `until`, stop before the
        first step that would start at or after it (an idle engine waits there), so that a fleet can step its
        replicas together and hand each the requests routed to it meanwhile (extend)."""
        self.until = until
        while self.left > 0 and self.now < until:
            if self._reads() and self.pending and self.pending[0][0] <= self.now:
                self._arrive()
            if not self.running and not self.waiting.heap:
                if not self.pending:
                    return
                self.now = self.planned_s = max(self.now, min(self.pending[0][0], until))  # idle: plans on arrival
                continue
            plan = self._fast_plan()
            if plan:
                self._run_fast(plan, decode=self.cfg.mixed_batches)
                continue
            if plan is not None and self.decoding:
                self._run_decodes()
                continue
            plan, preempted = self._run_general()
            if not plan and not preempted:  # nothing can run (a safety net: requests that never fit are rejected)
                if not self.pending:
                    return
                self.now = self.planned_s = max(self.now, self.pending[0][0])
                self.since_recv = self.cfg.recv_interval_steps  # an empty turn: the skipper's count runs on
