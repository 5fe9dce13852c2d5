"""A multi-GPU deployment behind steptime.StepModel's interface, so that the engine simulator and the latency,
goodput and memory calculators price any sharding (parallel.Parallelism on a cluster.Cluster), communication
included, with the code Part 12's sharding search uses (parallel.DeploymentModel.slot).

One engine instance serves the deployment, its batch spread evenly over the dp × cp attention ranks. vLLM
v0.33.0 runs one scheduler per DP rank (vllm/v1/engine/core.py DPEngineCoreProc) and its ranks step in
lockstep, idle ones on dummy batches (execute_dummy_batch), so a balanced load is this model exactly and an
unbalanced one is slower than it says. A step of T tokens with pp stages runs as m micro-batches of T ÷ m
(m = pp unless set) cycling through the stages, and every sequence advances once per cycle:

  step = max(m, pp) × slot(T ÷ m)     slot = kernels + communication + overhead       (overlap "none")
                                           = max(kernels, communication) + overhead   (overlap "full")
and under "two-batch" overlap each of the m micro-batches runs as two halves (parallel.halves: where every
attention rank has two sequences or more), each max(kernels, all-to-all) + other communication + overhead

so a decode step is parallel.Decode's TPOT and, on one GPU, StepModel's step. A step's work goes to at most
as many attention ranks as it has sequences (a prompt is prefilled by one DP rank; CP splits it), so one
prompt alone on a DP deployment is priced on one rank. FLOPs and the logical KV bytes a step moves are the
TP group's StepModel sums, so the engine's accounting of chunks and decodes is unchanged.
"""

from __future__ import annotations

import math

from .calcs.steptime import StepCost
from .parallel import (
    DeploymentModel,
    Parallelism,
    StageStep,
    check_parallelism,
    pipeline_micro_batches,
    stage_fraction,
    step_overlap,
    with_overlap,
)


class ShardedSteps:
    """StepModel's interface (decode, prefill, their timers, per_sequence, per_prompt, step_time) for one
    Parallelism on DeploymentModel's cluster; `num_gpus` is the deployment's GPUs (tp × dp × cp × pp)."""

    def __init__(self, dm: DeploymentModel, p: Parallelism):
        check_parallelism(dm.model, p, dm.cluster)
        self.dm, self.p = dm, p
        self.group = group = dm.group_model(p)
        self.dep, self.active, self.overhead = group.dep, group.active, group.overhead
        self.attention_weight = group.attention_weight
        self.per_sequence, self.per_prompt = group.per_sequence, group.per_prompt
        self.state_pool_tokens = group.state_pool_tokens
        self.num_gpus = p.gpus
        self.micro = pipeline_micro_batches(p)
        self._frac = stage_fraction(dm.model, p.pp)
        # one GPU's share of a step's logical KV bytes: its ranks' part × its stage's layers
        self.kv_share = group.kv_share * self._frac / p.attention_ranks
        self._decode_times: dict = {}

    def _ranks(self, sequences: float) -> float:
        """Attention ranks a micro-batch of `sequences` sequences keeps busy: cp × min(dp, sequences)."""
        p = self.p
        return p.attention_ranks if sequences >= p.dp else p.cp * max(1.0, sequences)

    def _slot(
        self, tokens: float, flops: float, kv: float, sequences: float, prefill: bool, micro: int
    ) -> tuple[StageStep, int]:
        """One micro-batch's slot, and the two-batch cut (1 or 2 halves per pipeline micro-batch)."""
        cut = self.dm.cut(self.p, sequences)
        m = micro * cut
        ranks = self._ranks(sequences / m)
        # the busiest ranks' share: priced as if the micro-batch spread over `ranks` of the attention ranks
        scale = self.p.attention_ranks / ranks
        rows = sequences / m * scale if prefill else None
        st = self.dm.slot(self.p, tokens / m * scale, flops / m * scale, kv / m * scale, rows, prefill)
        return with_overlap(st, step_overlap(self.dm.overlap, cut)), cut

    def _cost(self, tokens: float, flops: float, kv: float, sequences: float, prefill: bool, micro=None) -> StepCost:
        micro = self.micro if micro is None else micro
        st, cut = self._slot(tokens, flops, kv, sequences, prefill, micro)
        k = max(micro, self.p.pp) * cut  # stage slots: max(m, pp), a bubble when m < pp (1 and 1 without stages)
        kv_gpu = kv * self.kv_share  # per GPU over the whole step (every micro-batch passes every stage)
        exposed = st.exposed_comm_s
        w, m = self.attention_weight, self.group.matmul_weight
        matmul = 2 * self.active * tokens
        true_flops = flops if w == 1.0 and m == 1.0 else matmul + (flops - matmul * m) / w
        weights_gpu = max(0.0, st.bytes * micro * cut - kv_gpu)  # each micro-batch reads the stage's weights
        return StepCost(
            true_flops,
            weights_gpu * self.num_gpus,
            kv,
            st.memory_s * k,
            st.compute_s * k,
            self.num_gpus,
            self.kv_share,
            st.overhead_s * k,
            exposed * k,
        )

    def decode(self, batch: int, context_tokens: float, tokens_per_sequence: float = 1) -> StepCost:
        """A decode step of `batch` sequences at `context_tokens` each, `tokens_per_sequence` tokens each."""
        flops, kv = self.per_sequence(context_tokens)
        tokens = batch * tokens_per_sequence
        return self._cost(tokens, tokens * flops, batch * kv, batch, False)

    def decode_time(self, batch: int, context_tokens: float) -> float:
        """decode(...).time_s, memoised: the simulator asks for the same (batch, context) many times."""
        key = (batch, context_tokens)
        found = self._decode_times.get(key)
        if found is None:
            found = self._decode_times[key] = self.decode(batch, context_tokens).time_s
        return found

    def prefill(self, prompt_lengths, micro: int | None = None) -> StepCost:
        """One prefill of the given prompts together, each on one attention rank (split over cp), as `micro`
        pipeline micro-batches (None: the deployment's)."""
        costs = [self.per_prompt(t) for t in prompt_lengths]
        flops, kv = math.fsum(c[0] for c in costs), math.fsum(c[1] for c in costs)  # as StepModel._prefill_parts
        return self._cost(sum(prompt_lengths), flops, kv, len(costs), True, micro)

    def prefill_time(self, prompt_lengths) -> float:
        return self.prefill(prompt_lengths).time_s

    def prefill_alone(self, prompt_lengths) -> StepCost:
        """prefill(), but as one micro-batch crossing every stage in turn: the latency of a step nothing follows
        into the pipeline (prefill() is its share of a pipeline kept full, which consecutive steps are)."""
        return self.prefill(prompt_lengths, micro=1)

    def step_time(self, flops: float, tokens: float, kv_bytes: float, sequences: int = 0) -> float:
        """A step with prefill in it (the engine's mixed steps): `sequences` of them sample a token."""
        return self._cost(tokens, flops, kv_bytes, max(1, sequences), True).time_s
