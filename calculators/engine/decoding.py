"""The decoding sequences of one replica, advanced together.

A sequence that decodes computes one token, generates one and grows by one in every step it runs, so the
set keeps each member as an offset from a shared step count g: member i joined when the count was
joined[i], with the engine's arrays (done, gen, tokens) current then, and is done[i] + g − joined[i]
tokens along now. A decode step over every member then costs O(1), not O(batch): a heap of finish counts
gives the next finish, a histogram of (done − g) mod block size counts the KV blocks the next k steps
need, sums give the context the step reads, and inter-token gaps are booked per cohort (the measured
members whose last token came at the same instant). sync() writes the true values back to the arrays
when the engine needs them one by one (the general scheduling path, prefix-cache registration).

With speculative decoding a step keeps `per_step` ≥ 1 tokens per member on average (speculation.py); the
shared count g then counts tokens, and k steps add ⌊f + k × per_step⌋ to it, f the fraction carried over
from earlier steps, so that every member keeps the same whole number of tokens each step. At per_step 1
(no speculation) f stays 0 and a step adds exactly one token.
"""

from __future__ import annotations

import math
from heapq import heappop, heappush


class Decoding:
    __slots__ = (
        "g",
        "joined",
        "ends",
        "phase",
        "rel_sum",
        "cohorts",
        "step_end",
        "newest",
        "arrays",
        "pool",
        "grows",
        "gaps",
        "frac",
    )

    def __init__(self, arrays: tuple, pool, grows: bool, gaps):
        """arrays: the engine's (done, gen, tokens, last, out, measured); pool: its KvPool, whose own-block
        counts are kept for members only when `grows` (KV not reserved up front); gaps: the run's Gaps,
        where advance() books the measured members' inter-token gaps."""
        self.arrays, self.pool, self.grows, self.gaps = arrays, pool, grows, gaps
        self.phase = [0] * pool.block_size
        self.g, self.joined, self.ends, self.rel_sum, self.cohorts = 0, {}, [], 0, {}
        self.step_end, self.newest, self.frac = 0.0, -1, 0.0

    def __len__(self) -> int:
        return len(self.joined)

    def __contains__(self, i: int) -> bool:
        return i in self.joined

    def members(self):
        return self.joined.keys()

    def add(self, i: int, order: int) -> None:
        """i decodes from the next step on; its arrays are current and its last token came at last[i]."""
        done, gen, _, last, out, measured = self.arrays
        g, rel = self.g, done[i] - self.g
        self.joined[i] = g
        heappush(self.ends, (g + out[i] - gen[i], i))
        self.phase[rel % len(self.phase)] += 1
        self.rel_sum += rel
        self.cohorts[last[i]] = self.cohorts.get(last[i], 0) + measured[i]
        self.newest = max(self.newest, order)

    def context(self, k: int = 1, per_step: float = 1.0) -> float:
        """Keys read by one of k steps from now, summed over members, at the k steps' middle."""
        n = len(self.joined)
        return self.rel_sum + n * (self.g + 1 + (k - 1) * per_step / 2)

    def tokens(self, k: int, per_step: float = 1.0) -> int:
        """Tokens every member keeps in the next k steps."""
        return k if per_step == 1.0 else math.floor(self.frac + k * per_step)

    def steps_to_finish(self, per_step: float = 1.0) -> int:
        """Steps until the next member has generated its last token."""
        left = self.ends[0][0] - self.g
        if per_step == 1.0:
            return left
        steps = max(1, math.ceil((left - self.frac) / per_step))
        while self.tokens(steps, per_step) < left:  # rounding: never one step short
            steps += 1
        return steps

    def blocks_needed(self, k: int, per_step: float = 1.0) -> int:
        """New KV blocks the next k steps take: a member needs one whenever its computed tokens fill a block."""
        if not self.grows:
            return 0
        bs, g, need, k = len(self.phase), self.g, 0, self.tokens(k, per_step)
        for r, count in enumerate(self.phase):
            if count:
                first = -(r + g) % bs  # steps until this phase's members sit on a block boundary
                if first < k:
                    need += count * ((k - 1 - first) // bs + 1)
        return need

    def advance(self, k: int, end: float, step_s: float, per_step: float = 1.0) -> None:
        """k decode steps of every member, the last ending at `end`; books the measured gaps: each
        cohort's first gap, then k − 1 steps for every measured member (a step's tokens arrive together)."""
        first_at, total = end - (k - 1) * step_s, 0
        values, weights = self.gaps.values, self.gaps.weights
        for t, count in self.cohorts.items():
            if count:
                values.append(first_at - t)
                weights.append(count)
                total += count
        if k > 1 and total:
            values.append(step_s)
            weights.append((k - 1) * total)
        if per_step == 1.0:
            tokens = k
        else:
            tokens = self.tokens(k, per_step)
            self.frac += k * per_step - tokens
        self.cohorts, self.g, self.step_end = {end: total}, self.g + tokens, end

    def finished(self) -> list:
        """Members whose last token the steps so far generated: synced and removed."""
        ends, out = self.ends, []
        while ends and ends[0][0] <= self.g:
            i = heappop(ends)[1]
            self._sync(i)
            self._remove(i, self.arrays[0][i] - self.joined[i])
            out.append(i)
        return out

    def _remove(self, i: int, rel: int) -> None:
        _, _, _, last, _, measured = self.arrays
        del self.joined[i]
        self.phase[rel % len(self.phase)] -= 1
        self.rel_sum -= rel
        self.cohorts[last[i]] -= measured[i]

    def _sync(self, i: int) -> None:
        done, gen, tokens, last, out, _ = self.arrays
        moved = self.g - self.joined[i]
        steps = min(moved, out[i] - gen[i])  # a speculative step may pass the last token
        if steps:
            if self.grows:  # own blocks cover the computed tokens (those past the last as well: the blocks
                pool = self.pool  # were taken for them), less the cached ones it holds
                pool.blocks[i] = pool.blocks_for(done[i] + moved) - len(pool.held[i])
            done[i] += steps
            gen[i] += steps
            tokens[i] += steps
            last[i] = self.step_end
            self.joined[i] += steps  # keeps done − joined, the member's offset, even when capped

    def sync(self) -> None:
        """Write every member's true counts back to the engine's arrays (the set stays as it is)."""
        for i in self.joined:
            self._sync(i)

    def clear(self) -> None:
        """Sync and empty the set (the general path takes the members one by one)."""
        self.sync()
        self.joined, self.ends, self.rel_sum, self.cohorts, self.newest = {}, [], 0, {}, -1
        self.phase = [0] * len(self.phase)
