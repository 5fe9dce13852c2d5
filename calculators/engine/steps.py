"""The time of one engine step, from the core's step model.

A step runs some sequences' decode tokens and some prompts' prefill chunks together: the weights are
read once for all its tokens; each decoding sequence reads its KV (context c + 1 keys, the token it
appends included); a chunk of L prompt tokens starting after s cached ones costs the causal attention
of tokens s+1 … s+L, which is the prefill FLOPs of s + L tokens minus those of s, and reads and writes
the KV of s + L tokens. Decodes are priced at their mean context (exact where the cost is linear in the
context, that is without a sliding window cap). Every step adds the fixed overhead.
"""

from __future__ import annotations

from ..calcs.steptime import StepModel


class StepTimes:
    __slots__ = ("model", "overhead_s", "decode_time", "alone")

    def __init__(self, model: StepModel, overhead_s: float = 0.0):
        self.model, self.overhead_s = model, overhead_s
        self.decode_time = model.decode_time
        self.alone: dict = {}  # a step that prefills one whole prompt and nothing else, by length

    def decode(self, batch: int, context_sum: float) -> float:
        """A decode-only step of `batch` sequences holding `context_sum` keys in all (after appending)."""
        return self.decode_time(batch, round(context_sum / batch)) + self.overhead_s

    def mixed(self, decodes: int, context_sum: float, chunks) -> float:
        """`decodes` decode tokens (contexts summing to context_sum) and prefill chunks [(start, length)]."""
        if not decodes and len(chunks) == 1 and not chunks[0][0]:
            length = chunks[0][1]
            if length not in self.alone:
                self.alone[length] = self._mixed(0, 0.0, chunks)
            return self.alone[length]
        return self._mixed(decodes, context_sum, chunks)

    def _mixed(self, decodes: int, context_sum: float, chunks) -> float:
        model, flops, kv, tokens = self.model, 0.0, 0.0, decodes
        if decodes:
            per_token, held = model.per_sequence(round(context_sum / decodes))
            flops, kv = decodes * per_token, decodes * held
        for start, length in chunks:
            end_flops, end_kv = model.per_prompt(start + length)
            flops += end_flops - (model.per_prompt(start)[0] if start else 0.0)
            kv += end_kv
            tokens += length
        return model.step_time(flops, tokens, kv) + self.overhead_s
