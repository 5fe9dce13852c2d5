"""Step-time model: the time a decode or prefill step cannot beat, shared by roofline, latency and goodput.

  Ridge I* = peak FLOP/s ÷ bandwidth; attainable = min(peak, I × BW)   (Williams et al., CACM 2009)
  Decode step ≥ max(bytes read ÷ BW, FLOPs ÷ peak)                     (scaling book inference.md; numbers.md F8)
  MoE: distinct experts a batch touches per layer = E × (1 − (1 − k/E)^B)  (uniform, independent routing)
  FLOPs: 2 × active params per token (Kaplan et al. arXiv 2001.08361) plus attention,
         2 × H × (d_qk + d_v) per held token per layer (QKᵀ and AV, one multiply-add each).
With efficiencies at 1.0 the times are lower bounds and the rates upper bounds.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..schema import (DTYPE_CHOICES, accelerator_field, dtype_field, expert_dtype, expert_dtype_field, integer,
                      model_field, number, step)
from ..errors import InputError
from ..formats import bytes_per_element, get_format
from ..model import Accelerator, Model
from ..params import active_params, expert_params, total_params
from .kv_cache import kv_bytes_per_sequence, layer_groups

COMPUTE_DTYPES = tuple(c for c in DTYPE_CHOICES if c[0] != "int4")   # int4 has no native matmul rate
SAME_RATE = {"fp16": "bf16", "bf16": "fp16"}   # every listed chip runs FP16 and BF16 at one rate


@dataclass(frozen=True)
class Deployment:
    model: Model
    accelerator: Accelerator
    weight_elem_bytes: float
    kv_elem_bytes: float
    peak_flops_per_s: float        # dense, per GPU, at the compute format
    num_gpus: int = 1              # tensor-parallel group; FLOPs and bytes split evenly
    bandwidth_efficiency: float = 1.0
    compute_efficiency: float = 1.0
    expert_elem_bytes: float | None = None   # routed-expert weights; None = weight_elem_bytes


@dataclass(frozen=True)
class StepCost:
    flops: float                   # whole step, all GPUs
    weight_bytes: float
    kv_bytes: float
    memory_time_s: float
    compute_time_s: float

    @property
    def time_s(self) -> float:
        return max(self.memory_time_s, self.compute_time_s)

    @property
    def intensity(self) -> float:
        return self.flops / (self.weight_bytes + self.kv_bytes)

    @property
    def compute_bound(self) -> bool:
        """Compute time exceeds memory time: intensity above the effective ridge (η_F·F)/(η_W·W)."""
        return self.compute_time_s > self.memory_time_s


def peak_flops(accelerator: Accelerator, compute_dtype: str, field: str = "compute_dtype") -> float:
    key = get_format(compute_dtype, field).flops_key
    rates = accelerator.dense_flops_per_s
    rate = rates.get(key) or rates.get(SAME_RATE.get(key, ""))
    if not rate:
        listed = ", ".join(sorted(rates)) or "none"
        raise InputError(field, f"{accelerator.name} lists no dense FLOP/s for {compute_dtype}; it lists: {listed}")
    return float(rate)


def deployment(v: dict) -> Deployment:
    """A Deployment from validated inputs (shared by roofline, latency and goodput)."""
    experts = expert_dtype(v)
    return Deployment(v["model"], v["hardware"], bytes_per_element(v["weight_dtype"], "weight_dtype"),
                      bytes_per_element(v["kv_dtype"], "kv_dtype"),
                      peak_flops(v["hardware"], v["compute_dtype"]), v["num_gpus"],
                      v["bandwidth_efficiency"], v["compute_efficiency"],
                      bytes_per_element(experts, "expert_weight_dtype") if experts else None)


@lru_cache(maxsize=64)
def _param_counts(model: Model) -> tuple[int, int, int]:
    """(total, active without the embedding lookup, routed-expert params)."""
    return total_params(model), active_params(model, include_embedding=False), expert_params(model)


def experts_touched(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts per MoE layer when `tokens` tokens each pick top_k uniformly."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def weight_bytes_touched(dep: Deployment, tokens: float) -> float:
    """Weights read once per step: all of a dense model; for MoE only the experts some token picks.

    Routed experts are priced at expert_elem_bytes when set, everything else at weight_elem_bytes."""
    total, _, experts = _param_counts(dep.model)
    moe = dep.model.moe
    if moe is None:
        return total * dep.weight_elem_bytes
    e, k = moe.num_experts, moe.experts_per_token
    share = 1.0 if e <= k else experts_touched(e, k, tokens) / e
    expert_b = dep.weight_elem_bytes if dep.expert_elem_bytes is None else dep.expert_elem_bytes
    return (total - experts) * dep.weight_elem_bytes + experts * share * expert_b


def attention_flops_per_token(model: Model, held_tokens_sum) -> float:
    """FLOPs of QKᵀ and AV for one query; held_tokens_sum(cap) gives the keys it sees."""
    a = model.attention
    if a.kind == "mla":   # absorbed MLA attends over the latent: d_qk = r + d_rope, d_v = r
        qk, vd = a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank
    else:
        qk, vd = a.head_dim, a.v_head_dim or a.head_dim
    return sum(g.layers * 2 * a.num_heads * (qk + vd) * held_tokens_sum(g.cap_tokens)
               for g in layer_groups(model))


def _causal_keys(cap: int | None, prompt_tokens: int) -> float:
    """Σ_{t=1..T} min(t, cap): keys seen by every query of a causal prefill."""
    t = prompt_tokens
    if cap is None or t <= cap:
        return t * (t + 1) / 2
    return cap * (cap + 1) / 2 + (t - cap) * cap


def _cost(dep: Deployment, flops: float, weight_bytes: float, kv_bytes: float) -> StepCost:
    n, acc = dep.num_gpus, dep.accelerator
    bandwidth = acc.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency
    return StepCost(flops, weight_bytes, kv_bytes, (weight_bytes + kv_bytes) / n / bandwidth,
                    flops / n / (dep.peak_flops_per_s * dep.compute_efficiency))


class StepModel:
    """Step costs for one deployment, memoised by batch and context (the simulator calls it a lot)."""

    def __init__(self, dep: Deployment):
        self.dep = dep
        self.active = _param_counts(dep.model)[1]
        self._weights: dict = {}
        self._per_seq: dict = {}
        self._per_prompt: dict = {}

    def weight_bytes(self, tokens: float) -> float:
        if tokens not in self._weights:
            self._weights[tokens] = weight_bytes_touched(self.dep, tokens)
        return self._weights[tokens]

    def per_sequence(self, context_tokens: float) -> tuple[float, float]:
        """(FLOPs per generated token, KV bytes held) for one sequence at this context."""
        if context_tokens not in self._per_seq:
            m = self.dep.model
            held = lambda cap: context_tokens if cap is None else min(context_tokens, cap)  # noqa: E731
            self._per_seq[context_tokens] = (2 * self.active + attention_flops_per_token(m, held),
                                             kv_bytes_per_sequence(m, context_tokens, self.dep.kv_elem_bytes))
        return self._per_seq[context_tokens]

    def decode(self, batch: int, context_tokens: float) -> StepCost:
        """One decode step: `batch` sequences each generate one token at `context_tokens` of context."""
        flops, kv = self.per_sequence(context_tokens)
        return _cost(self.dep, batch * flops, self.weight_bytes(batch), batch * kv)

    def per_prompt(self, prompt_tokens: int) -> tuple[float, float]:
        """(FLOPs, KV bytes written) to prefill one prompt under a causal mask."""
        if prompt_tokens not in self._per_prompt:
            m, t = self.dep.model, prompt_tokens
            self._per_prompt[t] = (2 * self.active * t + attention_flops_per_token(m, lambda cap: _causal_keys(cap, t)),
                                   kv_bytes_per_sequence(m, t, self.dep.kv_elem_bytes))
        return self._per_prompt[prompt_tokens]

    def prefill(self, prompt_lengths) -> StepCost:
        """One prefill of the given prompts together: weights read once, KV written once."""
        costs = [self.per_prompt(t) for t in prompt_lengths]
        return _cost(self.dep, sum(c[0] for c in costs), self.weight_bytes(sum(prompt_lengths)),
                     sum(c[1] for c in costs))


def decode_step(dep: Deployment, batch: int, context_tokens: float) -> StepCost:
    return StepModel(dep).decode(batch, context_tokens)


def prefill_step(dep: Deployment, prompt_lengths) -> StepCost:
    return StepModel(dep).prefill(prompt_lengths)


def effective_ridge(dep: Deployment) -> float:
    """The ridge the step times obey: (η_compute × peak) ÷ (η_bw × bandwidth), FLOP/B."""
    return (dep.peak_flops_per_s * dep.compute_efficiency
            / (dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency))


def compute_ceiling_tokens_per_s_per_gpu(dep: Deployment) -> float:
    """Decode tokens/s per GPU as the batch grows without limit: 2 × active params per token."""
    return dep.peak_flops_per_s * dep.compute_efficiency / (2 * _param_counts(dep.model)[1])


# ---- inputs shared by roofline, latency and goodput ------------------------------------

def deployment_fields(bandwidth_efficiency: float, compute_efficiency: float) -> list[dict]:
    return [
        model_field(default="llama-3.1-8b"),
        accelerator_field(),
        integer("num_gpus", "GPUs (tensor parallel)", 1, 1, 1024, "GPUs",
                  "FLOPs and bytes split evenly across them; communication is not counted."),
        dtype_field("weight_dtype", "Weight format", "bf16"),
        expert_dtype_field(),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        dtype_field("compute_dtype", "Matmul format", "bf16", "Selects the accelerator's dense FLOP/s figure.",
                choices=COMPUTE_DTYPES),
        number("bandwidth_efficiency", "Bandwidth efficiency", bandwidth_efficiency, 0.01, 1.0, "",
                 "Fraction of peak memory bandwidth achieved (FlashMLA reaches ~0.9 on H800, "
                 "deepseek-ai/FlashMLA README).", 0.01),
        number("compute_efficiency", "Compute efficiency", compute_efficiency, 0.01, 1.0, "",
                 "Fraction of dense peak FLOP/s achieved (FlashAttention-3: 0.75 on H100, arXiv 2407.08608).",
                 0.01),
    ]


def efficiency_steps(dep: Deployment) -> list[dict]:
    acc = dep.accelerator
    return [
        step("Effective bandwidth per GPU", "BW × η_bw",
               f"{acc.memory_bandwidth_bytes_per_s:.4g} × {dep.bandwidth_efficiency}",
               acc.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency, "B/s"),
        step("Effective FLOP/s per GPU", "peak × η_compute",
               f"{dep.peak_flops_per_s:.4g} × {dep.compute_efficiency}",
               dep.peak_flops_per_s * dep.compute_efficiency, "FLOP/s"),
    ]


def decode_steps(dep: Deployment, batch: int, context: int, cost: StepCost) -> list[dict]:
    n = dep.num_gpus
    return [
        step("Weight bytes read per step", "params touched × b_w", f"{cost.weight_bytes:.6g}",
               cost.weight_bytes, "B"),
        step("KV bytes read per step", "B × KV per sequence(T)", f"{batch} × KV({context})",
               cost.kv_bytes, "B"),
        step("Memory time", "(weights + KV) ÷ (N_gpu × BW × η_bw)",
               f"{cost.weight_bytes + cost.kv_bytes:.6g} ÷ ({n} × effective BW)", cost.memory_time_s, "s"),
        step("Compute time", "B × (2 × P_active + attention FLOPs) ÷ (N_gpu × peak × η_compute)",
               f"{cost.flops:.6g} ÷ ({n} × effective FLOP/s)", cost.compute_time_s, "s"),
        step("Decode step time", "max(memory time, compute time)",
               f"max({cost.memory_time_s:.6g}, {cost.compute_time_s:.6g})", cost.time_s, "s"),
    ]
