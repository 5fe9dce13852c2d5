"""The engine loop: each turn, requests that have arrived join the queue, the scheduler plans one step
(running sequences first, then waiting ones while the token budget, the sequence cap and the KV pool
allow, as vLLM V1's scheduler does), and the step runs.

Scheduling (continuous batching, vLLM V1 v0.33.0 `Scheduler.schedule`): every running sequence asks for
the tokens it has not computed (1 when decoding, the rest of its prompt when prefilling), cut to the
budget left; its KV blocks grow to cover them, and when the pool is empty the last-admitted running
sequence is preempted (the lowest ranked, under priority) until they fit; if nothing was preempted,
waiting requests are admitted in policy order while budget, cap and blocks last. Without chunked
prefill a prompt that does not fit in the budget left waits for the next step. A preempted sequence
frees its blocks and, under recompute, prefills its prompt and generated tokens again when readmitted;
under swap its KV goes to host memory and comes back, each way costing blocks × bytes ÷ host bandwidth
added to that step. Static batching admits a batch only when the engine is idle, reserving every
member's whole length, and admits nothing until the last member finishes.

Speed: a stretch of decode-only steps with no admission possible (the same batch, every sequence
decoding) runs as one chunk up to the next finish, the next arrival that could be admitted, or the
last step the free blocks cover; each step of the chunk is priced at the chunk's middle context. When
every running sequence decodes and the pool has the blocks, the plan is made in one pass (the common
step); inter-token gaps are pooled by value as they are booked.
"""

from __future__ import annotations

import heapq
import math

from ..calcs.goodput_sim import Gaps
from .config import EngineConfig, Request
from .pool import KvPool
from .queue import WaitingQueue
from .steps import StepTimes

RUNNING, WAITING, FINISHED, REJECTED = "running", "waiting", "finished", "rejected"


class Engine:
    """State of one simulated replica; run() advances it until the measured requests are done.
    Per request i: tokens[i] = prompt + generated, done[i] = tokens whose KV is computed and held,
    blocks[i] = KV blocks held (blocks_for(done[i]) between steps, except under static batching);
    `prefilling` holds running sequences that have tokens to compute before their next token. With
    prefix caching, held[i] lists the cached blocks i holds (shared, counted once in the pool) and
    blocks[i] counts only its own; names[i] names the blocks of its whole sequence."""

    __slots__ = (
        "cfg",
        "times",
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
    )

    def __init__(self, times: StepTimes, requests: list[Request], cfg: EngineConfig, measured: tuple[int, int]):
        n = self.n = len(requests)
        self.cfg, self.times = cfg, times
        self.arrival = [r.arrival_s for r in requests]
        self.prompt = [r.prompt_tokens for r in requests]
        self.out = [r.output_tokens for r in requests]
        rank = [
            r.priority if cfg.policy == "priority" else (r.predicted_output_tokens or r.output_tokens) for r in requests
        ]
        self.tokens, self.done, self.gen = list(self.prompt), [0] * n, [0] * n
        self.first, self.last, self.started, self.finished = [-1.0] * n, [0.0] * n, [-1.0] * n, [-1.0] * n
        self.preemptions, self.state, self.swapped = [0] * n, [None] * n, [False] * n
        self.lo, self.hi = measured
        self.measured = [self.lo <= i < self.hi for i in range(n)]
        self.running, self.prefilling = [], set()
        self.waiting = WaitingQueue(cfg.policy, cfg.ageing_s, self.arrival, rank)
        self.now, self.left, self.gaps = 0.0, self.hi - self.lo, Gaps()
        # Arrivals to come, (time, index); a request that follows another (closed loop, agent turns)
        # joins when its predecessor ends, think_s later.
        self.pending = [(r.arrival_s, i) for i, r in enumerate(requests) if r.after < 0]
        heapq.heapify(self.pending)
        self.followers: dict[int, list[int]] = {}
        for i, r in enumerate(requests):
            if r.after >= 0:
                self.followers.setdefault(r.after, []).append(i)
        self.extra_s, self.steps, self.trace, self.occupancy = 0.0, 0, [], []
        self.requests, self.hit_gpu, self.hit_host, self.pool = requests, [0] * n, [0] * n, KvPool(cfg, n)

    # ---- arrivals and departures ----------------------------------------------------------------------
    def _arrive(self) -> None:
        cfg, arrival = self.cfg, self.arrival
        while self.pending and self.pending[0][0] <= self.now:
            t, i = heapq.heappop(self.pending)
            arrival[i] = t
            whole = self.prompt[i] + self.out[i]  # never fits the pool, or (no chunking) never the budget
            too_long = self.pool.blocks_for(whole) > cfg.kv_blocks or (
                not cfg.chunked_prefill and whole > cfg.max_num_batched_tokens
            )
            if too_long or (cfg.max_waiting and len(self.waiting) >= cfg.max_waiting):
                self._end(i, REJECTED)
            else:
                self.state[i] = WAITING
                self.waiting.push(i)
                if self.pool.cache is not None:
                    self.pool.name(i, self.requests[i])

    def _end(self, i: int, state: str) -> None:
        self.state[i] = state
        if state == FINISHED:
            self.finished[i] = self.now
            self.pool.release(i)
        if self.measured[i]:
            self.left -= 1
        for j in self.followers.get(i, ()):
            heapq.heappush(self.pending, (self.now + self.requests[j].think_s, j))

    def _preempt(self, i: int) -> None:
        self.running.remove(i)
        self.prefilling.discard(i)
        held = self.pool.release(i)
        self.preemptions[i] += 1
        self.state[i] = WAITING
        if self.cfg.preemption == "swap":
            self.swapped[i] = True
            self.extra_s += held * self.cfg.kv_bytes_per_block / self.cfg.swap_bytes_per_s
        else:
            self.done[i] = 0
            self.prefilling.add(i)
        self.waiting.push_preempted(i)

    def _victim(self) -> int:
        """The running sequence to preempt: the last admitted, or under priority the lowest ranked."""
        if self.cfg.policy != "priority":
            return self.running[-1]
        rank, arrival = self.waiting.rank, self.arrival
        return max(self.running, key=lambda j: (rank[j], arrival[j]))

    # ---- scheduling -----------------------------------------------------------------------------------
    def _decode_all(self, budget: int) -> dict | None:
        """The common step in one pass: every running sequence decodes and the pool has the blocks
        (a sequence needs a new block when its held tokens fill its last one); None otherwise."""
        running, done, bs = self.running, self.done, self.cfg.block_size_tokens
        if self.prefilling or len(running) > budget:
            return None
        if self.cfg.reserve_full_length:
            return dict.fromkeys(running, 1)
        growing = [i for i in running if done[i] % bs == 0]
        if len(growing) > self.pool.free:
            return None
        for i in growing:
            self.pool.blocks[i] += 1
        self.pool.take(len(growing))
        return dict.fromkeys(running, 1)

    def _schedule_running(self, budget: int) -> tuple[dict, bool]:
        """Running sequences in order, each its uncomputed tokens cut to the budget; blocks run out:
        preempt (a victim already planned this step gives its tokens back) until they fit."""
        plan, preempted = {}, False
        for i in list(self.running):
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

    def _admit(self, plan: dict) -> None:
        cfg, waiting = self.cfg, self.waiting
        budget = cfg.max_num_batched_tokens - sum(plan.values())
        bs = cfg.block_size_tokens
        while budget > 0 and len(waiting) and len(self.running) < cfg.max_num_seqs:
            i = waiting.peek()
            gpu, host, evictable = self.pool.hits(i, self.done[i], self.tokens[i])
            start = self.done[i] or (gpu + host) * bs
            remaining = self.tokens[i] - start
            if not cfg.chunked_prefill and remaining > budget:
                return
            new = min(remaining, budget)
            reserve = self.prompt[i] + self.out[i] if cfg.reserve_full_length else start + new
            if self.pool.blocks_for(reserve) - gpu + evictable > self.pool.free:
                return
            waiting.pop()
            self._reuse(i, gpu, host)
            self._start(i, reserve)
            plan[i], budget = new, budget - new

    def _reuse(self, i: int, gpu: int, host: int) -> None:
        """Start i from its cached leading blocks (host-tier ones copied back, the copy added to the step)."""
        if not gpu + host:
            return
        bs = self.cfg.block_size_tokens
        self.extra_s += self.pool.reuse(i, gpu, host)
        self.done[i] = (gpu + host) * bs
        if self.started[i] < 0:
            self.hit_gpu[i], self.hit_host[i] = gpu * bs, host * bs

    def _start(self, i: int, tokens: int) -> None:
        if self.swapped[i]:  # its KV comes back from host memory first
            self.swapped[i] = False
            self.extra_s += self.pool.blocks_for(self.done[i]) * self.cfg.kv_bytes_per_block / self.cfg.swap_bytes_per_s
        elif self.gen[i] == 0 or self.done[i] < self.tokens[i] - 1:
            self.prefilling.add(i)
        self.pool.allocate(i, tokens)
        self.running.append(i)
        self.state[i] = RUNNING
        if self.started[i] < 0:
            self.started[i] = self.now

    def _schedule_static(self) -> dict:
        """Idle: admit a batch (whole lengths reserved) and prefill it; busy: decode every member."""
        if self.running:
            return dict.fromkeys(self.running, 1)
        plan, waiting = {}, self.waiting
        while len(waiting) and len(plan) < self.cfg.max_num_seqs:
            i = waiting.peek()
            if self.pool.blocks_for(self.prompt[i] + self.out[i]) > self.pool.free:
                break
            waiting.pop()
            self._start(i, self.prompt[i] + self.out[i])
            plan[i] = self.tokens[i]
        return plan

    def schedule(self) -> tuple[dict, bool]:
        if self.cfg.batching == "static":
            return self._schedule_static(), False
        budget = self.cfg.max_num_batched_tokens
        if not self.cfg.mixed_batches:  # vLLM V0: admitted prompts are prefilled alone, decodes wait
            prefills: dict = {}
            self._admit(prefills)
            if prefills:
                return prefills, False
        plan = self._decode_all(budget)
        preempted = False
        if plan is None:
            plan, preempted = self._schedule_running(budget)
        if not preempted and self.cfg.mixed_batches:
            self._admit(plan)
        return plan, preempted

    # ---- running a step -------------------------------------------------------------------------------
    def _step_time(self, plan: dict) -> float:
        prefilling, done = self.prefilling, self.done
        decodes = [i for i in plan if i not in prefilling]
        context = sum([done[i] for i in decodes]) + len(decodes)
        if len(decodes) == len(plan):
            return self.times.decode(len(decodes), context)
        chunks = [(done[i], new) for i, new in plan.items() if i in prefilling]
        return self.times.mixed(len(decodes), context, chunks)

    def _emit(self, ids, step_s: float, count: int = 1) -> None:
        """`count` tokens of each sequence in ids, the last at self.now, `step_s` apart; gaps pooled."""
        gen, tokens, last, first, out, measured = self.gen, self.tokens, self.last, self.first, self.out, self.measured
        first_at, pooled, finished, booked = self.now - (count - 1) * step_s, {}, [], 0
        for i in ids:
            if gen[i] == 0:
                first[i] = first_at
            elif measured[i]:
                gap = first_at - last[i]
                pooled[gap] = pooled.get(gap, 0) + 1
            booked += measured[i]
            gen[i] += count
            tokens[i] += count
            last[i] = self.now
            if gen[i] >= out[i]:
                finished.append(i)
        self.prefilling.difference_update(ids)
        self._book(pooled, step_s, booked * (count - 1))
        self._finish(finished)

    def _book(self, pooled: dict, step_s: float, repeats: int) -> None:
        values, weights = self.gaps.values, self.gaps.weights
        values.extend(pooled)
        weights.extend(pooled.values())
        if repeats:
            values.append(step_s)
            weights.append(repeats)

    def _finish(self, finished: list) -> None:
        if finished:
            for i in finished:
                self._end(i, FINISHED)
            gone = set(finished)
            self.running = [i for i in self.running if i not in gone]

    def _run_step(self, plan: dict) -> None:
        start = self.now
        took = self._step_time(plan) + self.extra_s
        self.now, self.extra_s = start + took, 0.0
        self._record(start, took, plan)
        done, tokens = self.done, self.tokens
        for i, new in plan.items():
            done[i] += new
        if self.pool.cache is not None:
            self.pool.register(plan, done)
        self._emit([i for i in plan if done[i] == tokens[i]], took)
        self.steps += 1

    def _stretch(self, plan: dict) -> int:
        """How many identical decode-only steps may run as one (1 when the next step differs)."""
        cfg, running = self.cfg, self.running
        if self.extra_s or self.prefilling or self.steps < cfg.trace_steps or len(plan) != len(running):
            return 1
        # A request still waiting now waits for blocks or budget, neither of which a decode step frees;
        # only an arrival (under priority or sjf it may rank first and fit) can change the next plan.
        gen, out = self.gen, self.out
        k = min([out[i] - gen[i] for i in running])
        if len(running) < cfg.max_num_seqs and cfg.batching == "continuous" and self.pending:
            step_s = self.times.decode(len(running), sum([self.done[i] for i in running]) + len(running))
            k = min(k, max(1, math.ceil((self.pending[0][0] - self.now) / step_s)))
        return self._blocks_allow(k)

    def _blocks_allow(self, k: int) -> int:
        """The most steps ≤ k whose new blocks the free pool covers (blocks for one step are held)."""
        pool, done, running, need = self.pool, self.done, self.running, self.pool.need

        def fits(steps: int) -> bool:
            return sum([need(i, done[i] + steps) for i in running]) <= pool.free

        if k == 1 or self.cfg.reserve_full_length or fits(k):
            return k
        lo, hi = 1, k - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        return lo

    def _run_stretch(self, k: int) -> None:
        running, done = list(self.running), self.done
        context = sum([done[i] for i in running]) + len(running) * (1 + (k - 1) / 2)
        step_s = self.times.decode(len(running), context)
        start, self.now = self.now, self.now + k * step_s
        self._record(start, k * step_s, dict.fromkeys(running, 1))
        if self.cfg.reserve_full_length:  # reserved on admission
            for i in running:
                done[i] += k
        else:
            for i in running:
                self.pool.allocate(i, done[i] + k)
                done[i] += k
        if self.pool.cache is not None:
            self.pool.register(running, done)
        self._emit(running, step_s, k)
        self.steps += k

    def _record(self, start: float, took: float, plan: dict) -> None:
        self.occupancy.append((start, len(self.running), len(self.waiting), self.cfg.kv_blocks - self.pool.free))
        if self.steps < self.cfg.trace_steps:
            self.trace.append((start, took, tuple(plan.items()), tuple(i for _, _, i in self.waiting.heap)))

    def run(self) -> None:
        while self.left:
            self._arrive()
            if not self.running and not len(self.waiting):
                if not self.pending:
                    return
                self.now = self.pending[0][0]
                continue
            plan, preempted = self.schedule()
            if plan:
                k = 1 if preempted else self._stretch(plan)
                self._run_stretch(k) if k > 1 else self._run_step(plan)
            elif not preempted:  # nothing can run (a safety net: requests that never fit are rejected)
                if not self.pending:
                    return
                self.now = max(self.now, self.pending[0][0])
