"""Speculative decoding in the simulator: what a decode step costs and how many tokens it keeps.

Each decode step of a batch of B sequences drafts k tokens per sequence and verifies k + 1 (calcs/speculative.py
prices it on the StepModel: the drafter's k steps, then one target step of k + 1 tokens per sequence) and keeps
E = (1 − α^(k+1)) ÷ (1 − α) tokens per sequence on average (Leviathan et al., arXiv 2211.17192 §3.1). The engine
keeps the expectation, not a draw: every decoding sequence keeps the same whole number of tokens in a step,
⌊A + E⌋ − ⌊A⌋ where A is the running sum of E over the steps (so the count per step is ⌊E⌋ or ⌈E⌉ and the
mean is E), which keeps the decoding set advancing together. The tail spread that random acceptance adds to
inter-token gaps is therefore not modelled; means and throughput are.

k may depend on the batch, as vLLM v0.33.0's num_speculative_tokens_per_batch_size schedules it
(vllm/config/speculative.py; the V1 scheduler reads k from the number of requests scheduled each step): `schedule`
is ((first batch, last batch, k), ...); as vLLM's dense lookup (v1/spec_decode/dynamic/utils.py,
build_dynamic_sd_schedule_lookup) fills it, a batch in a gap or past the last range takes the k of the range before
it, every k is capped at `draft_tokens`, and batches below the first range (vLLM requires it to start at 1) keep
`draft_tokens`; k = 0 turns speculation off there. Each sequence asks the token budget for k + 1 tokens, as vLLM V1
schedules the drafted tokens. Simplifications: the KV slots vLLM reserves for the k lookahead tokens are not
reserved; sequences that decode outside the decoding set (a general-path step: a preemption, a cut budget) decode
one token unspeculated.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..calcs.speculative import ACCEPTANCE_RATE, DRAFT_TOKENS, Drafter, _checked, _tokens_per_step, draft_time
from ..calcs.steptime import StepModel


@dataclass(frozen=True)
class Speculation:
    drafter: Drafter
    acceptance_rate: float
    draft_tokens: int
    schedule: tuple = ()  # ((first_batch, last_batch, k), ...): vLLM's num_speculative_tokens_per_batch_size

    def __post_init__(self):
        _checked(ACCEPTANCE_RATE, self.acceptance_rate)
        _checked(DRAFT_TOKENS, self.draft_tokens)
        for first, last, k in self.schedule:
            if not (1 <= first <= last) or not 0 <= k <= DRAFT_TOKENS["max"]:
                raise ValueError(f"schedule range ({first}, {last}, {k}) needs 1 ≤ first ≤ last and 0 ≤ k ≤ 63")
        object.__setattr__(self, "schedule", tuple(sorted(self.schedule)))  # k() walks it in order, every step

    def k(self, batch: int) -> int:
        found = self.draft_tokens
        for first, _last, k in self.schedule:
            if first > batch:
                break
            found = min(self.draft_tokens, k)  # inside this range, or in the gap or tail after it
        return found

    def tokens_per_step(self, batch: int) -> float:
        k = self.k(batch)
        return _tokens_per_step(self.acceptance_rate, k) if k else 1.0


class SpeculativeSteps:
    """Decode-step times and tokens with speculation, memoised by (batch, context): the engine asks for the same
    ones again and again."""

    __slots__ = ("spec", "model", "_times")

    def __init__(self, spec: Speculation, model: StepModel):
        self.spec, self.model, self._times = spec, model, {}

    def decode_time(self, batch: int, context_tokens: float) -> float:
        key = (batch, context_tokens)
        found = self._times.get(key)
        if found is None:
            k = self.spec.k(batch)
            if k:
                found = self.draft_time(batch, context_tokens) + self.model.decode(batch, context_tokens, k + 1).time_s
            else:
                found = self.model.decode_time(batch, context_tokens)
            self._times[key] = found
        return found

    def draft_time(self, batch: int, context_tokens: float) -> float:
        """The drafting part of a step whose decodes also share it with prefill chunks."""
        k = self.spec.k(batch)
        return draft_time(self.spec.drafter, self.model, batch, context_tokens, k) if k else 0.0
