"""Waiting requests in the order the scheduling policy serves them.

A heap of (key, tie, index). The keys do not change while a request waits, even with ageing: a credit
of (now − arrival) ÷ ageing_s subtracted from every key shifts them all by the same now ÷ ageing_s, so
ranking by base + arrival ÷ ageing_s is the same order at every instant.
  fcfs:     arrival order; a preempted request goes back to the front, the latest preempted first, as
            vLLM V1's scheduler prepends it (v0.33.0, vllm/v1/core/sched/scheduler.py, _preempt_request).
  priority: (priority, arrival), lower first, as vLLM's priority policy; a preempted request keeps its key.
  sjf:      the predicted output length (the true length when no prediction is given), shortest first.
"""

from __future__ import annotations

import heapq


class WaitingQueue:
    __slots__ = ("policy", "ageing_s", "arrival", "rank", "heap", "preempted")

    def __init__(self, policy: str, ageing_s: float, arrival: list[float], rank: list[float]):
        self.policy, self.ageing_s, self.arrival, self.rank = policy, ageing_s, arrival, rank
        self.heap: list = []
        self.preempted = 0

    def _key(self, i: int) -> float:
        if self.policy == "fcfs":
            return 1.0
        return self.rank[i] + (self.arrival[i] / self.ageing_s if self.ageing_s else 0.0)

    def push(self, i: int) -> None:
        heapq.heappush(self.heap, (self._key(i), i, i))

    def push_preempted(self, i: int) -> None:
        if self.policy == "fcfs":  # to the front, the most recently preempted first
            self.preempted += 1
            heapq.heappush(self.heap, (0.0, -self.preempted, i))
        else:
            self.push(i)

    def peek(self) -> int:
        return self.heap[0][2]

    def pop(self) -> int:
        return heapq.heappop(self.heap)[2]

    def __len__(self) -> int:
        return len(self.heap)
