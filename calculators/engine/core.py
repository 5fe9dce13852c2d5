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
last step the free blocks cover; each step of the chunk is priced at the chunk's middle context.
"""
from __future__ import annotations

import math

from ..calcs.goodput_sim import Gaps
from .config import EngineConfig, Request
from .queue import WaitingQueue
from .steps import StepTimes

RUNNING, WAITING, FINISHED, REJECTED = "running", "waiting", "finished", "rejected"


class Engine:
    """State of one simulated replica; run() advances it until the measured requests are done."""

    __slots__ = ("cfg", "times", "n", "arrival", "prompt", "out", "tokens", "done", "gen", "blocks", "first",
                 "last", "started", "finished", "preemptions", "state", "swapped", "free", "running", "waiting",
                 "now", "next", "lo", "hi", "left", "gaps", "extra_s", "steps", "trace", "occupancy", "static_left")

    def __init__(self, times: StepTimes, requests: list[Request], cfg: EngineConfig, measured: tuple[int, int]):
        n = self.n = len(requests)
        self.cfg, self.times = cfg, times
        self.arrival = [r.arrival_s for r in requests]
        self.prompt = [r.prompt_tokens for r in requests]
        self.out = [r.output_tokens for r in requests]
        rank = [r.priority if cfg.policy == "priority" else (r.predicted_output_tokens or r.output_tokens)
                for r in requests]
        self.tokens, self.done, self.gen, self.blocks = list(self.prompt), [0] * n, [0] * n, [0] * n
        self.first, self.last, self.started, self.finished = [-1.0] * n, [0.0] * n, [-1.0] * n, [-1.0] * n
        self.preemptions, self.state, self.swapped = [0] * n, [None] * n, [False] * n
        self.free, self.running = cfg.kv_blocks, []
        self.waiting = WaitingQueue(cfg.policy, cfg.ageing_s, self.arrival, rank)
        self.now, self.next, (self.lo, self.hi) = 0.0, 0, measured
        self.left, self.gaps, self.extra_s, self.steps = self.hi - self.lo, Gaps(), 0.0, 0
        self.trace, self.occupancy, self.static_left = [], [], 0

    # ---- blocks ---------------------------------------------------------------------------------------
    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.cfg.block_size_tokens)

    def _allocate(self, i: int, tokens: int) -> None:
        need = self.blocks_for(tokens) - self.blocks[i]
        if need > 0:
            self.blocks[i] += need
            self.free -= need

    def _release(self, i: int) -> int:
        held, self.blocks[i] = self.blocks[i], 0
        self.free += held
        return held

    # ---- arrivals and departures ----------------------------------------------------------------------
    def _arrive(self) -> None:
        cfg, arrival = self.cfg, self.arrival
        while self.next < self.n and arrival[self.next] <= self.now:
            i, self.next = self.next, self.next + 1
            whole = self.prompt[i] + self.out[i]   # never fits the pool, or (no chunking) never the budget
            too_long = self.blocks_for(whole) > cfg.kv_blocks or (not cfg.chunked_prefill
                                                                   and whole > cfg.max_num_batched_tokens)
            if too_long or (cfg.max_waiting and len(self.waiting) >= cfg.max_waiting):
                self._end(i, REJECTED)
            else:
                self.state[i] = WAITING
                self.waiting.push(i)

    def _end(self, i: int, state: str) -> None:
        self.state[i] = state
        if state == FINISHED:
            self.finished[i] = self.now
            self._release(i)
            self.running.remove(i)
        if self.lo <= i < self.hi:
            self.left -= 1

    def _preempt(self, i: int) -> None:
        self.running.remove(i)
        held = self._release(i)
        self.preemptions[i] += 1
        self.state[i] = WAITING
        if self.cfg.preemption == "swap":
            self.swapped[i] = True
            self.extra_s += held * self.cfg.kv_bytes_per_block / self.cfg.swap_bytes_per_s
        else:
            self.done[i] = 0
        self.waiting.push_preempted(i)

    def _victim(self) -> int:
        """The running sequence to preempt: the last admitted, or under priority the lowest ranked."""
        if self.cfg.policy != "priority":
            return self.running[-1]
        rank, arrival = self.waiting.rank, self.arrival
        return max(self.running, key=lambda j: (rank[j], arrival[j]))

    # ---- scheduling -----------------------------------------------------------------------------------
    def _schedule_running(self, budget: int) -> tuple[dict, int, bool]:
        """Running sequences in order, each its uncomputed tokens cut to the budget; blocks run out:
        preempt (a victim already planned this step gives its tokens back) until they fit."""
        plan, preempted = {}, False
        for i in list(self.running):
            if not budget:
                break
            if self.state[i] != RUNNING:   # preempted earlier in this loop
                continue
            new = min(self.tokens[i] - self.done[i], budget)
            while self.blocks_for(self.done[i] + new) - self.blocks[i] > self.free:
                victim = self._victim()
                self._preempt(victim)
                preempted, budget = True, budget + plan.pop(victim, 0)
                if victim == i:
                    break
            else:
                self._allocate(i, self.done[i] + new)
                plan[i], budget = new, budget - new
        return plan, budget, preempted

    def _admit(self, plan: dict, budget: int) -> None:
        cfg, waiting = self.cfg, self.waiting
        while budget and len(waiting) and len(self.running) < cfg.max_num_seqs:
            i = waiting.peek()
            remaining = self.tokens[i] - self.done[i]
            if not cfg.chunked_prefill and remaining > budget:
                return
            new = min(remaining, budget)
            if self.blocks_for(self.done[i] + new) > self.free:
                return
            waiting.pop()
            self._start(i, self.done[i] + new)
            plan[i], budget = new, budget - new

    def _start(self, i: int, tokens: int) -> None:
        if self.swapped[i]:   # its KV comes back from host memory first
            self.swapped[i] = False
            self.extra_s += self.blocks_for(self.done[i]) * self.cfg.kv_bytes_per_block / self.cfg.swap_bytes_per_s
        self._allocate(i, tokens)
        self.running.append(i)
        self.state[i] = RUNNING
        if self.started[i] < 0:
            self.started[i] = self.now

    def _schedule_static(self) -> list:
        """Idle: admit a batch (whole lengths reserved) and prefill it; busy: decode every member."""
        if self.running:
            return [(i, 1) for i in self.running]
        plan, waiting = [], self.waiting
        while len(waiting) and len(plan) < self.cfg.max_num_seqs:
            i = waiting.peek()
            if self.blocks_for(self.prompt[i] + self.out[i]) > self.free:
                break
            waiting.pop()
            self._start(i, self.prompt[i] + self.out[i])
            plan.append((i, self.tokens[i]))
        return plan

    def schedule(self) -> tuple[list, bool]:
        if self.cfg.batching == "static":
            return self._schedule_static(), False
        plan, budget, preempted = self._schedule_running(self.cfg.max_num_batched_tokens)
        if not preempted:
            self._admit(plan, budget)
        return list(plan.items()), preempted

    # ---- running a step -------------------------------------------------------------------------------
    def _is_decode(self, i: int, new: int) -> bool:
        return new == 1 and self.gen[i] > 0 and self.done[i] == self.tokens[i] - 1

    def _step_time(self, plan: list) -> float:
        decodes = [i for i, new in plan if self._is_decode(i, new)]
        context = sum(self.done[i] + 1 for i in decodes)
        if len(decodes) == len(plan):
            return self.times.decode(len(decodes), context)
        chunks = [(self.done[i], new) for i, new in plan if not self._is_decode(i, new)]
        return self.times.mixed(len(decodes), context, chunks)

    def _emit(self, i: int, step_s: float, count: int = 1) -> None:
        """`count` tokens of sequence i, the last at self.now, `step_s` apart."""
        measured = self.lo <= i < self.hi
        if self.gen[i] == 0:
            self.first[i] = self.now - (count - 1) * step_s
        elif measured:
            self.gaps.values.append(self.now - (count - 1) * step_s - self.last[i])
            self.gaps.weights.append(1)
        if measured and count > 1:
            self.gaps.values.append(step_s)
            self.gaps.weights.append(count - 1)
        self.gen[i] += count
        self.tokens[i] += count
        self.last[i] = self.now
        if self.gen[i] >= self.out[i]:
            self._end(i, FINISHED)

    def _run_step(self, plan: list) -> None:
        start = self.now
        took = self._step_time(plan) + self.extra_s
        self.now, self.extra_s = start + took, 0.0
        self._record(start, took, plan)
        for i, new in plan:
            self.done[i] += new
            if self.done[i] == self.tokens[i] and self.state[i] == RUNNING:
                self._emit(i, took)
        self.steps += 1

    def _stretch(self, plan: list) -> int:
        """How many identical decode-only steps may run as one (1 when the next step differs)."""
        cfg, running = self.cfg, self.running
        if self.extra_s or self.steps < cfg.trace_steps or len(plan) != len(running):
            return 1
        if not all(self._is_decode(i, new) for i, new in plan):
            return 1
        # A request still waiting now waits for blocks or budget, neither of which a decode step frees;
        # only an arrival (under priority or sjf it may rank first and fit) can change the next plan.
        admissible = len(running) < cfg.max_num_seqs and cfg.batching == "continuous"
        k = min(self.out[i] - self.gen[i] for i in running)
        if admissible and self.next < self.n:
            step_s = self.times.decode(len(running), sum(self.done[i] + 1 for i in running))
            k = min(k, max(1, math.ceil((self.arrival[self.next] - self.now) / step_s)))
        return self._blocks_allow(k)

    def _blocks_allow(self, k: int) -> int:
        """The most steps ≤ k whose new blocks the free pool covers (blocks for one step are held)."""
        def need(steps: int) -> int:
            return sum(self.blocks_for(self.done[i] + steps) - self.blocks[i] for i in self.running)
        lo, hi = 1, k
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if need(mid) <= self.free else (lo, mid - 1)
        return lo

    def _run_stretch(self, k: int) -> None:
        running = list(self.running)
        context = sum(self.done[i] + 1 for i in running) + len(running) * (k - 1) / 2
        step_s = self.times.decode(len(running), context)
        start, self.now = self.now, self.now + k * step_s
        self._record(start, k * step_s, [(i, 1) for i in running])
        for i in running:
            self._allocate(i, self.done[i] + k)
            self.done[i] += k
            self._emit(i, step_s, k)
        self.steps += k

    def _record(self, start: float, took: float, plan: list) -> None:
        self.occupancy.append((start, len(self.running), len(self.waiting), self.cfg.kv_blocks - self.free))
        if self.steps < self.cfg.trace_steps:
            self.trace.append((start, took, tuple(plan), tuple(i for _, _, i in self.waiting.heap)))

    def run(self) -> None:
        while self.left:
            self._arrive()
            if not self.running and not len(self.waiting):
                if self.next == self.n:
                    return
                self.now = self.arrival[self.next]
                continue
            plan, preempted = self.schedule()
            if plan:
                k = 1 if preempted else self._stretch(plan)
                self._run_stretch(k) if k > 1 else self._run_step(plan)
            elif not preempted:   # nothing can run (a safety net: requests that never fit are rejected)
                if self.next == self.n:
                    return
                self.now = max(self.now, self.arrival[self.next])
