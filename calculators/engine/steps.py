"""The time of one engine step, from the core's step model.

A step runs some sequences' decode tokens and some prompts' prefill chunks together: the weights are
read once for all its tokens; each decoding sequence reads its KV (context c + 1 keys, the token it
appends included); a chunk of L prompt tokens starting after s cached ones costs the causal attention
of tokens s+1 … s+L, which is the prefill FLOPs of s + L tokens minus those of s, and reads and writes
the KV of s + L tokens. Decodes are priced at their mean context (exact where the cost is linear in the
context, that is without a sliding window cap). Every step adds the fixed overhead. With speculation
(speculation.py) a decode drafts k tokens and verifies k + 1: decode-only steps are priced by
SpeculativeSteps, and in a mixed step each decode counts k + 1 tokens of FLOPs and weights touched, its KV
read once, plus the drafting time.
"""

from __future__ import annotations

from ..calcs.steptime import StepModel
from .pool import pool_charge
from .speculation import Speculation, SpeculativeSteps


class StepTimes:
    __slots__ = ("model", "overhead_s", "decode_time", "alone", "speculation", "_spec", "pool_charge")

    def __init__(self, model: StepModel, overhead_s: float = 0.0, speculation: Speculation | None = None):
        self.model, self.overhead_s, self.speculation = model, overhead_s, speculation
        self._spec = SpeculativeSteps(speculation, model) if speculation else None
        self.decode_time = self._spec.decode_time if speculation else model.decode_time
        self.alone: dict = {}  # a step that prefills one whole prompt and nothing else, by length
        self.pool_charge = pool_charge(model)  # the KV pool's windowed layers and state (pool.py), None for neither

    def tokens_per_step(self, batch: int) -> float:
        """Mean tokens each decoding sequence keeps in a decode step of `batch` (1 without speculation)."""
        return self.speculation.tokens_per_step(batch) if self.speculation else 1.0

    def decode_tokens(self, batch: int) -> int:
        """Tokens each decoding sequence asks of the step's token budget: k + 1 with speculation, else 1."""
        return self.speculation.k(batch) + 1 if self.speculation else 1

    def decode(self, batch: int, context_sum: float, speculative: bool = True) -> float:
        """A decode-only step of `batch` sequences holding `context_sum` keys in all (after appending);
        speculative False prices one plain token each even with speculation on."""
        timer = self.decode_time if speculative else self.model.decode_time
        return timer(batch, round(context_sum / batch)) + self.overhead_s

    def mixed(self, decodes: int, context_sum: float, chunks, speculative: bool = True) -> float:
        """`decodes` decode tokens (contexts summing to context_sum) and prefill chunks [(start, length)]."""
        if not speculative and self._spec:
            return self._mixed(decodes, context_sum, chunks, False)
        if not decodes and len(chunks) == 1 and not chunks[0][0]:
            length = chunks[0][1]
            if length not in self.alone:
                self.alone[length] = self._mixed(0, 0.0, chunks)
            return self.alone[length]
        return self._mixed(decodes, context_sum, chunks)

    def _mixed(self, decodes: int, context_sum: float, chunks, speculative: bool = True) -> float:
        model, flops, kv, tokens, extra = self.model, 0.0, 0.0, decodes, self.overhead_s
        if decodes:
            context = round(context_sum / decodes)
            per_token, held = model.per_sequence(context)
            if self._spec and speculative:
                tokens *= self.decode_tokens(decodes)
                extra += self._spec.draft_time(decodes, context)
            flops, kv = tokens * per_token, decodes * held
        for start, length in chunks:
            end_flops, end_kv = model.per_prompt(start + length)
            flops += end_flops - (model.per_prompt(start)[0] if start else 0.0)
            kv += end_kv
            tokens += length
        return model.step_time(flops, tokens, kv, decodes + len(chunks)) + extra
