"""Step-time model: the time a decode or prefill step cannot beat, shared by roofline, latency and goodput.

  Ridge I* = peak FLOP/s ÷ bandwidth; attainable = min(peak, I × BW)   (Williams et al., CACM 2009)
  Decode step ≥ max(bytes read ÷ BW, FLOPs ÷ peak)                     (scaling book, 'All About Transformer Inference')
  MoE: distinct experts a batch touches per layer = E × (1 − (1 − k/E)^B)  (uniform, independent routing)
  FLOPs: 2 × active params per token (Kaplan et al. arXiv 2001.08361) plus attention,
         2 × H × (d_qk + d_v) per held token per layer (QKᵀ and AV, one multiply-add each).
  MLA (DeepSeek-V2 arXiv 2405.04434 §2.1; vLLM v1/attention/backends/mla/common.py): prefill runs the
         expanded "compute friendly" form, d_qk = qk_nope + qk_rope, d_v = v_head_dim (192/128 on V3);
         decode the absorbed "data-movement friendly" form over the latent, d_qk = r_kv + qk_rope,
         d_v = r_kv (576/512). The latent's up-projections (kv_b_proj: prefill expands each new token,
         decode folds them into the query and output) are r_kv × H × (qk_nope + v) weights that
         params.py counts, so 2 × active params already prices them in either form.
Bytes per GPU: weights ÷ N, but KV × kv_fraction_per_gpu (kv_cache.py), not ÷ N: TP beyond H_kv
         replicates KV heads and MLA's latent sits whole on every rank (the rule memory.py uses).
Embeddings: the input embedding is a row lookup, one row of d_model per token (capped at the table);
         an untied LM head is read in full; a tied table is read once, in full, by the LM head.
Attention (QKᵀ, AV) is not a weight matmul and does not run at the matmul format's rate: production kernels run it
         in BF16/FP16 whatever the weights (W8A8 and FP4 recipes quantize the linear layers only), or in FP8 when
         the KV cache is FP8 on a chip with an FP8 rate (FlashAttention-3 FP8, arXiv 2407.08608 §3.3; vLLM v0.33.0
         v1/attention/backends/flash_attn.py quantizes the queries and views the cache as FP8). attention_peak_flops
         picks that rate; StepModel prices attention FLOPs at it (matmul-rate-equivalent FLOPs in per_sequence and
         per_prompt, which the engine sums; StepCost.flops stays the true count). The FP8 rate is the best case:
         vLLM v0.33.0 runs FP8-KV attention in FP8 only on SM90/SM100 and never for E5M2 (fa_utils.py
         flash_attn_supports_kv_cache_dtype); FlashInfer keeps BF16 queries on FA2-only chips (SM89, SM120) and
         for Hopper's XQA decode (flashinfer.py get_q_data_type), so on Ada and RTX 5090 this is optimistic.
DeepSeek sparse attention (index_topk above 0; DeepSeek-V3.2-Exp report §1, vLLM's FLASHMLA_SPARSE backend):
         both phases attend in the absorbed form over at most index_topk selected keys, 2 × H × (r_kv + d_rope +
         r_kv) FLOPs per key, and the indexer scores every earlier key, 2 × H_I × d_I; a decode step reads the
         selected keys' latents and every key's indexer entry. The kernels' shape adds work (attention_kernels.toml):
         a GPU's query heads are padded to the kernel's head tile (64 on Hopper, 128 on Blackwell), and where the
         kernel is not told how many of a query's k slots are valid it works through all k (vLLM v0.11.0-v0.13.0 as
         read, likely until vLLM PR #36616 of 2026; the FP8 cache's decode kernel still). Both run at the BF16
         rate (FlashMLA's sparse kernels multiply in BF16, FP8 cache or not); the indexer's scores are FP8 in the
         reference and are priced at that same BF16 rate, which overstates the indexer (a fifth of the attention
         work at 32K context) by up to 2×. A bound drops the padding and the unused slots.
Sliced experts: where each routed expert is cut across GPUs (tensor parallelism without expert parallelism), the
         experts' matmul FLOPs are divided by a share of the chip's BF16 rate fitted to the calibration ledger
         (fitted.toml [sliced_experts]; matmul_flops_per_token), whatever the compute format: FP8 experts gain
         nothing from the FP8 rate there. StepCost.flops stays the true count. Never in a bound.
Dequantised weights: a 4-bit float weight format on a chip with no rate for it (MXFP4 or NVFP4 on Hopper, Ada,
         Ampere) is widened to BF16 inside the GEMM, which then runs at a fitted rate in FLOP/s (fitted.toml
         [dequant_matmul]), not at the chip's peak: those weights' matmul FLOPs (the routed experts' only, when only
         the experts are 4-bit) are divided by that rate ÷ the peak, at most 1. Attention and the BF16 weights run
         at their own rates. Never in a bound.
Achievable matmul share: chips reach different shares of their datasheet peaks (the maximum achievable matmul
         FLOPS measured on each, accelerators.toml achievable_matmul_flops_per_s): an estimate's compute rate is
         peak × the reader's compute efficiency × the chip's measured share ÷ the reference chip's (the H100's), at
         most 1 (matmul_share; 1 unmeasured), the matmul format's factor for the whole step's compute, attention
         included (an assumption: that a chip's attention kernels trail the H100's as its GEMMs do). Never in a bound.
Per-step overhead (overhead.py): every step adds the fixed time of its launches, by the kind of step
         and its tokens (CUDA graphs on by default, as vLLM v0.33.0 runs), after the roofline max:
         step = max(memory time, compute time) + overhead. Deployment.overhead None adds nothing.
With efficiencies at 1.0 and no overhead the times are lower bounds and the rates upper bounds
(bound_deployment drops the overhead term).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
import math
from math import fsum

from ..catalog import accelerator_presets, achievable_matmul, attention_kernels, fitted
from ..schema import expert_dtype
from ..errors import InputError
from ..formats import bytes_per_element, get_format
from ..model import Accelerator, Model
from ..params import active_params, embedding_params, expert_params, total_params
from .kv_cache import (
    kv_fraction_per_gpu,
    kv_read_terms,
    layer_groups,
    state_bytes_per_sequence,
    state_fraction_per_gpu,
    state_pool_tokens,
)
from .overhead import DEFAULT_MODE, StepOverhead, step_overhead

STATE_ELEM_BYTES = 2.0  # hybrid models' recurrent state at BF16, the default of memory's state_dtype
SAME_RATE = {"fp16": "bf16", "bf16": "fp16"}  # every listed chip runs FP16 and BF16 at one rate


@dataclass(frozen=True)
class Deployment:
    model: Model
    accelerator: Accelerator
    weight_elem_bytes: float
    kv_elem_bytes: float
    peak_flops_per_s: float  # dense, per GPU, at the compute format
    num_gpus: int = 1  # tensor-parallel group; FLOPs and bytes split evenly
    bandwidth_efficiency: float = 1.0
    compute_efficiency: float = 1.0
    expert_elem_bytes: float | None = None  # routed-expert weights; None = weight_elem_bytes
    attention_flops_per_s: float | None = None  # dense, per GPU, for QKᵀ and AV; None = peak_flops_per_s
    attention_kernel_efficiency: float = 1.0  # the attention kernel's share of that rate (triton_attention_share)
    overhead: StepOverhead | None = None  # per-step launch overhead (overhead.py); None = kernel time only
    decode_context_parallel: int = 1  # DCP ranks striping each sequence's KV inside the TP group (kv_cache.py)
    sliced_expert_efficiency: float = 1.0  # the routed experts' share of the matmul rate when TP slices them
    expert_slices: int = 0  # GPUs each routed expert is sliced across: 0 num_gpus (TP), 1 whole (expert parallel)
    # the share of the matmul rate a weight matmul keeps when it dequantises 4-bit float weights the chip has no rate
    # for (dequant_factors): the non-expert weights', the routed experts'; 1 where the chip multiplies the format
    dense_dequant_efficiency: float = 1.0
    expert_dequant_efficiency: float = 1.0
    # DeepSeek sparse attention's kernels (sparse_mla_kernel): query heads per GPU padded to a multiple of this
    # (1: none), and whether each query works through all index_topk slots rather than the valid ones
    sparse_head_tile: int = 1
    sparse_all_slots: bool = False
    # the chip's measured achievable matmul share at the compute format ÷ the reference chip's (matmul_share)
    matmul_share: float = 1.0


def compute_share(dep: Deployment) -> float:
    """The share of the dense peak an estimate's matmuls reach: η_compute × the chip's matmul share (s_chip)."""
    return dep.compute_efficiency * dep.matmul_share


def compute_rate(dep: Deployment) -> float:
    """The dense FLOP/s per GPU an estimate's matmuls run at: peak × η_compute × s_chip."""
    return dep.peak_flops_per_s * compute_share(dep)


def bound_deployment(dep: Deployment) -> Deployment:
    """The same deployment at efficiencies 1.0 and without the per-step overhead: its step times are
    lower bounds, its rates upper bounds."""
    return replace(
        dep,
        bandwidth_efficiency=1.0,
        compute_efficiency=1.0,
        overhead=None,
        sliced_expert_efficiency=1.0,
        dense_dequant_efficiency=1.0,
        expert_dequant_efficiency=1.0,
        sparse_head_tile=1,
        sparse_all_slots=False,
        attention_kernel_efficiency=1.0,
        matmul_share=1.0,
    )


def without_overhead(dep: Deployment) -> Deployment:
    """The same deployment, its steps priced at kernel time only (the roofline max)."""
    return replace(dep, overhead=None)


@dataclass(frozen=True)
class StepCost:
    flops: float  # whole step, all GPUs
    weight_bytes: float  # weights read once per step, split over the GPUs
    kv_bytes: float  # every sequence's KV once (the logical total)
    memory_time_s: float
    compute_time_s: float
    num_gpus: int = 1
    kv_share: float = 1.0  # kv_fraction_per_gpu: the part of each sequence's KV one GPU reads
    overhead_s: float = 0.0  # the step's fixed launch overhead (overhead.py), after the roofline max
    comm_s: float = 0.0  # communication on the critical path (a multi-GPU deployment: sharded_steps.py)

    @property
    def kernel_time_s(self) -> float:
        """max(memory time, compute time): the step's kernels at the roofline."""
        return max(self.memory_time_s, self.compute_time_s)

    @property
    def time_s(self) -> float:
        return max(self.memory_time_s, self.compute_time_s) + self.overhead_s + self.comm_s

    @property
    def kv_bytes_per_gpu(self) -> float:
        return self.kv_bytes * self.kv_share

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.weight_bytes / self.num_gpus

    @property
    def bytes_read(self) -> float:
        """Bytes every GPU together reads: weights once, KV once per replica."""
        return self.weight_bytes + self.kv_bytes_per_gpu * self.num_gpus

    @property
    def kv_share_of_bytes(self) -> float:
        return self.kv_bytes_per_gpu / (self.kv_bytes_per_gpu + self.weight_bytes_per_gpu)

    @property
    def intensity(self) -> float:
        """FLOPs per byte on one GPU (the same ratio over the group, replicas counted)."""
        return self.flops / self.bytes_read

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


# an unmeasured format takes the chip's nearest measured one: the narrower formats reach less of their peak (FP8 than
# BF16 on every NVIDIA chip measured in both), so FP4 takes FP8's share before BF16's
NEAREST_MEASURED = {"fp4": ("fp4", "fp8", "bf16"), "fp8": ("fp8", "bf16"), "int8": ("int8", "fp8", "bf16")}


def measured_format(accelerator: Accelerator, compute_dtype: str) -> str | None:
    """The format the chip's matmul rate was measured in that stands for the compute format: itself or the nearest
    measured one (NEAREST_MEASURED; FP16 and BF16 share a rate); None where the chip has no measurement."""
    key = get_format(compute_dtype, "compute_dtype").flops_key
    measured = accelerator.achievable_matmul_flops_per_s
    nearest = NEAREST_MEASURED.get(key, (key, SAME_RATE.get(key, ""), "bf16"))
    return next((f for f in nearest if measured.get(f) and accelerator.dense_flops_per_s.get(f)), None)


def achievable_share(accelerator: Accelerator, compute_dtype: str) -> float | None:
    """The chip's largest measured matmul rate ÷ its datasheet peak, in measured_format; None where not measured."""
    fmt = measured_format(accelerator, compute_dtype)
    return accelerator.achievable_matmul_flops_per_s[fmt] / accelerator.dense_flops_per_s[fmt] if fmt else None


def reference_chip() -> Accelerator:
    """The chip the reader's compute efficiency is stated for by default (accelerators.toml [achievable_matmul])."""
    return accelerator_presets()[achievable_matmul()["reference"]]


def matmul_share(accelerator: Accelerator, compute_dtype: str) -> float:
    """The factor an estimate's compute rate carries for the chip: its achievable share ÷ the reference chip's, both
    in the format the chip was measured in (measured_format), at most 1 (no estimate is made faster for the
    measurement); 1 on a chip with no measurement."""
    fmt = measured_format(accelerator, compute_dtype)
    if fmt is None:
        return 1.0
    return min(1.0, achievable_share(accelerator, fmt) / achievable_share(reference_chip(), fmt))


def chip_share(v: dict, compute_dtype: str) -> float:
    """The Deployment's matmul_share for these inputs at a compute format: the chip's (matmul_share) unless the reader
    states the compute efficiency as reached on this chip (efficiency_of "chip")."""
    return 1.0 if v.get("efficiency_of") == "chip" else matmul_share(v["hardware"], compute_dtype)


def attention_peak_flops(
    accelerator: Accelerator, kv_dtype: str, compute_dtype: str, model: Model | None = None
) -> float:
    """Dense FLOP/s attention runs at: FP8 when the KV cache is an 8-bit float and the chip lists FP8 (not for
    DeepSeek sparse attention: FlashMLA's sparse kernels multiply in BF16 whatever the cache), else BF16 (FP16); the
    matmul rate when the matmuls are wider than 16 bits or the chip lists no BF16/FP16."""
    rates = accelerator.dense_flops_per_s
    matmul = get_format(compute_dtype, "compute_dtype")
    if matmul.bits_per_element > 16:
        return peak_flops(accelerator, compute_dtype)
    fp8_kv = get_format(kv_dtype, "kv_dtype").flops_key == "fp8"
    if fp8_kv and rates.get("fp8") and not (model and model.attention.index_topk):
        return float(rates["fp8"])
    rate = rates.get("bf16") or rates.get("fp16")
    return float(rate) if rate else peak_flops(accelerator, compute_dtype)


def dequantises(accelerator: Accelerator, dtype: str, field: str) -> bool:
    """Whether weights in this format are widened to BF16 inside the GEMM on this chip: a 4-bit float format (MXFP4,
    NVFP4) on a chip that lists no FP4 matmul rate."""
    fmt = get_format(dtype, field)
    return fmt.bits_per_element == 4 and fmt.flops_key == "fp4" and not accelerator.dense_flops_per_s.get("fp4")


def dequant_factors(v: dict, rate_flops_per_s: float | None = None) -> tuple[float, float]:
    """(non-expert, routed-expert) weight matmuls' shares of the matmul rate where their weights are dequantised
    inside the GEMM (dequantises): the dequantising GEMM's rate (fitted.toml [dequant_matmul], or `rate_flops_per_s`)
    ÷ the chip's matmul peak at the compute format, at most 1; 1 for weights the chip multiplies as they are.
    Attention never pays it: it multiplies activations, not these weights."""
    rate = float(fitted()["dequant_matmul"]["flops_per_s"]) if rate_flops_per_s is None else rate_flops_per_s
    share = min(1.0, rate / peak_flops(v["hardware"], v["compute_dtype"]))
    experts = expert_dtype(v)
    dense = share if dequantises(v["hardware"], v["weight_dtype"], "weight_dtype") else 1.0
    if not experts:  # the experts in the weights' format
        return dense, dense
    return dense, share if dequantises(v["hardware"], experts, "expert_weight_dtype") else 1.0


def sliced_expert_factor(v: dict, share: float | None = None) -> float:
    """The share of the matmul rate a mixture-of-experts model's routed-expert GEMMs keep when tensor parallelism
    slices every expert across the GPUs: a share of the chip's BF16 rate (fitted.toml [sliced_experts], or `share`)
    whatever the compute format, so FP8 experts keep half as large a share of the FP8 rate. 1 for a dense model,
    and for experts dequantised inside the GEMM (dequantises), whose rate was fitted on sliced runs and holds the
    slicing already."""
    experts = expert_dtype(v) or v["weight_dtype"]
    if v["model"].moe is None or dequantises(v["hardware"], experts, "expert_weight_dtype"):
        return 1.0
    share = float(fitted()["sliced_experts"]["factor"]) if share is None else share
    return share * peak_flops(v["hardware"], "bf16") / peak_flops(v["hardware"], v["compute_dtype"])


def attention_fields(model: Model, accelerator: Accelerator, kv_dtype: str, compute_dtype: str, release=None) -> dict:
    """The Deployment fields the KV format sets through the attention kernels: their rate (attention_peak_flops), the
    kernel's share of it (triton_attention_share) and the sparse MLA kernels' head tile and slots (sparse_mla_kernel,
    at vLLM `release`; None: the newest read)."""
    tile, all_slots = sparse_mla_kernel(model, accelerator, kv_dtype, release)
    return {
        "attention_flops_per_s": attention_peak_flops(accelerator, kv_dtype, compute_dtype, model),
        "attention_kernel_efficiency": triton_attention_share(model, accelerator),
        "sparse_head_tile": tile,
        "sparse_all_slots": all_slots,
    }


def triton_attention_share(model: Model, accelerator: Accelerator, share: float | None = None) -> float:
    """The share of the attention rate vLLM's attention keeps where it runs Triton's kernel instead of
    FlashAttention: a model with learned attention sinks on a chip below Hopper (attention_kernels.toml
    [triton_attention]); the share is fitted.toml's, or `share`. 1 elsewhere."""
    if not (model.attention.sinks and accelerator.id in attention_kernels()["triton_attention"]["chips"]):
        return 1.0
    return float(fitted()["triton_attention"]["factor"]) if share is None else share


def deployment(v: dict, release: str | None = None) -> Deployment:
    """A Deployment from validated inputs (shared by roofline, latency and goodput). The per-step
    overhead follows v["step_overhead"] (deployment_fields; the default mode when a caller has no such key).
    The weight matmuls run at the reader's compute efficiency × a share of it: dequant_factors for 4-bit float
    weights on a chip without FP4 matmuls (the non-expert and the routed-expert weights each by their format),
    sliced_expert_factor for routed experts sliced by tensor parallelism. `release`: the vLLM release whose attention
    kernels to price (attention_fields)."""
    experts = expert_dtype(v)
    dense_dequant, expert_dequant = dequant_factors(v)
    return Deployment(
        v["model"],
        v["hardware"],
        bytes_per_element(v["weight_dtype"], "weight_dtype"),
        bytes_per_element(v["kv_dtype"], "kv_dtype"),
        peak_flops(v["hardware"], v["compute_dtype"]),
        v["num_gpus"],
        v["bandwidth_efficiency"],
        v["compute_efficiency"],
        bytes_per_element(experts, "expert_weight_dtype") if experts else None,
        overhead=step_overhead(v["model"], v["hardware"], v["num_gpus"], v.get("step_overhead", DEFAULT_MODE)),
        sliced_expert_efficiency=sliced_expert_factor(v),
        dense_dequant_efficiency=dense_dequant,
        expert_dequant_efficiency=expert_dequant,
        matmul_share=chip_share(v, v["compute_dtype"]),
        **attention_fields(v["model"], v["hardware"], v["kv_dtype"], v["compute_dtype"], release),
    )


def sparse_mla_kernel(
    model: Model, accelerator: Accelerator, kv_dtype: str, release: str | None = None
) -> tuple[int, bool]:
    """(head tile, all slots) of vLLM's sparse MLA kernels for a DeepSeek-sparse-attention model on this chip
    (attention_kernels.toml [sparse_mla]): the multiple a GPU's query heads are padded to, and whether each query
    works through all index_topk slots. `release`: a vLLM version string as the ledger writes it (None: the newest
    release read). (1, False) for any other model, and on a chip FlashMLA's sparse kernels do not run on."""
    if not model.attention.index_topk:
        return 1, False
    rules = attention_kernels()["sparse_mla"]
    arch = next((a for a in ("sm90", "sm100") if accelerator.id in rules[a]), None)
    if arch is None:  # no FlashMLA kernel on this chip
        return 1, False
    if release is not None and release_key(release) <= release_key(rules["all_slots_until"]):
        return rules["head_tile"][arch], True
    fp8 = get_format(kv_dtype, "kv_dtype").flops_key == "fp8"
    return rules["head_tile"][arch], fp8 and rules["fp8_kv_all_slots"]


def release_key(version: str) -> tuple[int, ...]:
    """'v0.13.0' -> (0, 13, 0); a suffix after the numbers (rc1, .post1) is dropped."""
    parts = []
    for piece in version.lstrip("v").split("."):
        digits = len(piece) - len(piece.lstrip("0123456789"))
        if not digits:
            break
        parts.append(int(piece[:digits]))
        if digits < len(piece):
            break
    return tuple(parts)


def attention_weight(dep: Deployment) -> float:
    """Matmul peak ÷ the rate attention runs at (its peak × its kernel's share): what one attention FLOP costs in
    matmul-rate FLOPs (1 at one rate and a full share)."""
    rate = dep.peak_flops_per_s if dep.attention_flops_per_s is None else dep.attention_flops_per_s
    return dep.peak_flops_per_s / (rate * dep.attention_kernel_efficiency)


@lru_cache(maxsize=64)
def _param_counts(model: Model) -> tuple[int, int, int]:
    """(total, active without the embedding lookup, routed-expert params)."""
    return total_params(model), active_params(model, include_embedding=False), expert_params(model)


def experts_sliced(dep: Deployment) -> bool:
    """Whether the step prices routed experts at the sliced share: an MoE model whose experts are each cut across
    GPUs (expert_slices, or num_gpus under plain tensor parallelism, above 1) with a share below 1."""
    return dep.model.moe is not None and dep.sliced_expert_efficiency != 1.0 and (dep.expert_slices or dep.num_gpus) > 1


def matmul_shares(dep: Deployment) -> tuple[float, float]:
    """(non-expert, routed-expert) weight matmuls' shares of the matmul rate: the dequantising GEMM's for 4-bit float
    weights on a chip without FP4, the sliced share for experts cut across GPUs (never both: sliced_expert_factor),
    1 otherwise."""
    routed = dep.expert_dequant_efficiency * (dep.sliced_expert_efficiency if experts_sliced(dep) else 1.0)
    return dep.dense_dequant_efficiency, routed


def matmul_flops_per_token(dep: Deployment, counts: tuple | None = None) -> float:
    """Weight-matmul FLOPs per token in matmul-rate-equivalent units: 2 × active params, each class of weights
    divided by its share of the matmul rate (matmul_shares); 2 × active params exactly where both are 1."""
    _, active, experts = counts or _param_counts(dep.model)
    dense_share, expert_share = matmul_shares(dep)
    if dense_share == 1.0 and expert_share == 1.0:
        return 2 * active
    moe = dep.model.moe
    routed = experts * moe.experts_per_token / moe.num_experts if moe else 0.0
    return 2 * ((active - routed) / dense_share + routed / expert_share)


def experts_touched(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts per MoE layer when `tokens` tokens each pick top_k uniformly."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def embedding_lookup_saving(model: Model, tokens: float) -> float:
    """Parameters of the input-embedding table a step does not read: a lookup reads one row per
    token (at most the whole table). 0 for a tied table, which the LM head reads in full."""
    if model.tie_embeddings:
        return 0.0
    return max(0.0, embedding_params(model) - min(tokens, model.vocab_size) * model.hidden_size)


def weight_bytes_touched(
    dep: Deployment, tokens: float, counts: tuple | None = None, all_experts: bool = False
) -> float:
    """Weights read once per step: all of a dense model; for MoE only the experts some token picks
    (every expert with all_experts); of the input embedding only the rows looked up.

    Routed experts are priced at expert_elem_bytes when set, everything else at weight_elem_bytes.
    `counts` is _param_counts(model) when the caller already has it (hashing a Model is not free)."""
    total, _, experts = counts or _param_counts(dep.model)
    shared = total - experts - embedding_lookup_saving(dep.model, tokens)
    moe = dep.model.moe
    if moe is None:
        return shared * dep.weight_elem_bytes
    e, k = moe.num_experts, moe.experts_per_token
    share = 1.0 if e <= k or all_experts else experts_touched(e, k, tokens) / e
    expert_b = dep.weight_elem_bytes if dep.expert_elem_bytes is None else dep.expert_elem_bytes
    return shared * dep.weight_elem_bytes + experts * share * expert_b


def attention_widths(model: Model, prefill: bool) -> tuple[int, int]:
    """(d_qk, d_v) each query head multiplies per key. MLA: expanded form for prefill, absorbed for decode."""
    a = model.attention
    if a.kind != "mla":
        return a.head_dim, a.v_head_dim or a.head_dim
    if prefill:  # per-head K and V expanded from the latent: MHA with these widths (as params.py sizes them)
        return a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim or a.head_dim
    return a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank  # every head against the shared latent


def attention_terms(model: Model, prefill: bool = False, sparse: bool = True) -> list[tuple[int, int | None]]:
    """(FLOPs per key seen over that kind's layers, cap) per layer kind: 2 × H × (d_qk + d_v) × layers. A model with
    DeepSeek sparse attention (`sparse` False: as if it attended every key) has its full-attention layers as two
    terms, first, in both phases: the absorbed form over at most index_topk keys, then the indexer over every key."""
    a, groups = model.attention, layer_groups(model)
    qk, vd = attention_widths(model, prefill)
    own = [(g.layers * 2 * a.num_heads * (qk + vd), g.cap_tokens) for g in groups]
    if not (sparse and a.index_topk):
        return own
    full = sum(g.layers for g in groups if g.cap_tokens is None)
    absorbed = sum(attention_widths(model, prefill=False))
    selected = (full * 2 * a.num_heads * absorbed, a.index_topk)
    indexer = (full * 2 * a.index_n_heads * a.index_head_dim, None)
    return [selected, indexer] + [term for term in own if term[1] is not None]


def sparse_head_padding(dep: Deployment) -> float:
    """Query heads a GPU's sparse MLA kernel computes ÷ the heads it holds (Deployment.sparse_head_tile)."""
    held = max(1, dep.model.attention.num_heads // dep.num_gpus)
    tile = dep.sparse_head_tile
    return math.ceil(held / tile) * tile / held


def attention_flops_per_token(model: Model, held_tokens_sum, prefill: bool = False) -> float:
    """FLOPs of QKᵀ and AV for one query; held_tokens_sum(cap) gives the keys it sees."""
    return sum(per_key * held_tokens_sum(cap) for per_key, cap in attention_terms(model, prefill))


def _causal_keys(cap: int | None, prompt_tokens: int) -> float:
    """Σ_{t=1..T} min(t, cap): keys seen by every query of a causal prefill."""
    t = prompt_tokens
    if cap is None or t <= cap:
        return t * (t + 1) / 2
    return cap * (cap + 1) / 2 + (t - cap) * cap


class StepModel:
    """Step costs for one deployment, memoised by batch and context (the simulator calls it a lot)."""

    def __init__(self, dep: Deployment):
        self.dep = dep
        self._counts = _param_counts(dep.model)
        self.active = self._counts[1]
        # weight-matmul FLOPs per token at the matmul rate (2 × active, more when TP slices the experts), and
        # what one true matmul FLOP costs in those units
        self.matmul_per_token = matmul_flops_per_token(dep, self._counts)
        self.matmul_weight = self.matmul_per_token / (2 * self.active)
        self._n = self.num_gpus = dep.num_gpus
        self.kv_share = kv_fraction_per_gpu(dep.model, dep.num_gpus, dep.decode_context_parallel)
        self._bandwidth = dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency
        self._flops = compute_rate(dep)
        self.overhead = dep.overhead
        self._decode_overhead: dict = {}  # by tokens in the step
        self._mixed_overhead: dict = {}
        self._weights: dict = {}
        self._per_seq: dict = {}
        self._per_prompt: dict = {}
        # attention FLOPs in matmul-rate-equivalent units (× matmul peak ÷ attention peak; 1 at one rate)
        self.attention_weight = attention_weight(dep)
        self._set_attention_terms(dep)
        self._kv = kv_read_terms(dep.model, dep.kv_elem_bytes)
        # Hybrid models' linear-layer state is read every step like KV but splits over ranks by its own
        # heads; carried in this deployment's KV units so that KV × kv_share is exact per GPU (BF16 state,
        # memory.py's default).
        state = state_bytes_per_sequence(dep.model, STATE_ELEM_BYTES)
        self._state_as_kv = state * state_fraction_per_gpu(dep.model, dep.num_gpus) / self.kv_share if state else 0.0
        # the same state as tokens of the KV pool, which the engine's pool charges each sequence (engine/pool.py)
        self.state_pool_tokens = state_pool_tokens(
            dep.model, dep.kv_elem_bytes, STATE_ELEM_BYTES, dep.num_gpus, dep.decode_context_parallel
        )
        # decode(...).time_s and prefill(...).time_s, bit for bit, for the simulator's hot path
        self.decode_time = self._decode_timer()
        self.prefill_time = self._prefill_timer()

    def _set_attention_terms(self, dep: Deployment) -> None:
        """Decode (MLA absorbed) and prefill (expanded) attention terms in matmul-rate-equivalent FLOPs. A sparse-
        attention model's selected-key term comes first, its kernel's padded heads included; where the kernel works
        through every slot it leaves the terms for a cost per query whatever the context (_fixed_attention)."""
        w = self.attention_weight
        decode, prefill = attention_terms(dep.model), attention_terms(dep.model, prefill=True)
        self._fixed_attention = 0.0
        sparse = dep.model.attention.index_topk > 0
        if sparse:
            selected, k = decode[0][0] * sparse_head_padding(dep), decode[0][1]
            if dep.sparse_all_slots:
                self._fixed_attention, selected = selected * k * w, 0
            decode[0] = prefill[0] = (selected, k)
        self._attention = [(c * w, cap) for c, cap in decode]
        self._prefill_attention = [(c * w, cap) for c, cap in prefill]
        self._full_layer_term = [cap is None or (sparse and i == 0) for i, (_, cap) in enumerate(prefill)]

    def _times(self, flops: float, weight_bytes: float, kv_bytes: float) -> tuple[float, float]:
        """(memory time, compute time): (W ÷ N + KV × share) ÷ (BW × η_bw), FLOPs ÷ (N × peak × η_compute × s_chip)."""
        return (weight_bytes / self._n + kv_bytes * self.kv_share) / self._bandwidth, flops / self._n / self._flops

    def _cost(
        self, flops: float, weight_bytes: float, kv_bytes: float, matmul_flops: float = 0.0, overhead_s: float = 0.0
    ) -> StepCost:
        """`flops` in matmul-rate-equivalent units; the StepCost carries the true count (`matmul_flops` of them
        are weight matmuls, at matmul_weight, the rest attention at attention_weight)."""
        w, m = self.attention_weight, self.matmul_weight
        true_flops = flops if w == 1.0 and m == 1.0 else matmul_flops + (flops - matmul_flops * m) / w
        return StepCost(
            true_flops,
            weight_bytes,
            kv_bytes,
            *self._times(flops, weight_bytes, kv_bytes),
            self._n,
            self.kv_share,
            overhead_s,
        )

    def decode_overhead(self, tokens: float) -> float:
        """The fixed overhead of a decode-only step of `tokens` tokens (0 without an overhead model)."""
        found = self._decode_overhead.get(tokens)
        if found is None:
            found = self._decode_overhead[tokens] = self.overhead.decode_s(tokens) if self.overhead else 0.0
        return found

    def mixed_overhead(self, tokens: float) -> float:
        """The fixed overhead of a step with prefill in it, of `tokens` tokens in all."""
        found = self._mixed_overhead.get(tokens)
        if found is None:
            found = self._mixed_overhead[tokens] = self.overhead.mixed_s(tokens) if self.overhead else 0.0
        return found

    def stage_overhead(self, tokens: float, share: float, prefill: bool = False) -> float:
        """The overhead of a pipeline stage's step, which runs `share` of the layers' kernels (1: the whole step)."""
        if share == 1.0 or self.overhead is None:
            return self.mixed_overhead(tokens) if prefill else self.decode_overhead(tokens)
        return self.overhead.mixed_s(tokens, share) if prefill else self.overhead.decode_s(tokens, share)

    def step_time(self, flops: float, tokens: float, kv_bytes: float, sequences: int = 0) -> float:
        """A step of `tokens` tokens doing these FLOPs and moving these KV bytes (any mix of prefill and
        decode): max(memory time, compute time), the weights read once for all the tokens, plus the
        overhead of a step with prefill in it (the engine prices decode-only steps with decode_time).
        `sequences` (those the step samples a token for) matters only to a sharded deployment's logits gather."""
        memory, compute = self._times(flops, self.weight_bytes(tokens), kv_bytes)
        return (compute if compute > memory else memory) + self.mixed_overhead(tokens)

    def weight_bytes(self, tokens: float) -> float:
        if tokens not in self._weights:
            self._weights[tokens] = weight_bytes_touched(self.dep, tokens, self._counts)
        return self._weights[tokens]

    def per_sequence(self, context_tokens: float) -> tuple[float, float]:
        """(FLOPs per generated token, KV bytes held) for one sequence at this context."""
        found = self._per_seq.get(context_tokens)
        if found is None:  # the same sums as attention_flops_per_token and kv_bytes_per_sequence
            t = context_tokens  # tokens_held(cap, t) = min(t, cap), written out (a memo miss per new context)
            found = self._per_seq[t] = (
                self.matmul_per_token
                + self._fixed_attention
                + sum([c * (t if cap is None or not cap < t else cap) for c, cap in self._attention]),
                sum([c * (t if cap is None or not cap < t else cap) for c, cap in self._kv]) + self._state_as_kv,
            )
        return found

    def decode(self, batch: int, context_tokens: float, tokens_per_sequence: float = 1) -> StepCost:
        """One decode step: `batch` sequences each run `tokens_per_sequence` tokens (1, or the tokens a
        speculative verification step keeps) at `context_tokens` of context. Each sequence's KV is read
        once whatever its token count; FLOPs and the experts touched grow with the tokens."""
        flops, kv = self.per_sequence(context_tokens)
        tokens = batch * tokens_per_sequence
        return self._cost(
            tokens * flops,
            self.weight_bytes(tokens),
            batch * kv,
            tokens * 2 * self.active,
            self.decode_overhead(tokens),
        )

    def _decode_timer(self):
        """decode(batch, context).time_s as a closure over this model's constants and memos, bit for bit:
        the same operations in the same order as _times, without attribute look-ups or a StepCost (the
        simulator calls it once or twice per event)."""
        per_seq, weights, per_sequence, weight_bytes = (
            self._per_seq,
            self._weights,
            self.per_sequence,
            self.weight_bytes,
        )
        overheads, overhead = self._decode_overhead, self.decode_overhead
        n, share, bandwidth, peak = self._n, self.kv_share, self._bandwidth, self._flops

        def decode_time(batch: int, context_tokens: float) -> float:
            flops, kv = per_seq.get(context_tokens) or per_sequence(context_tokens)
            memory = ((weights.get(batch) or weight_bytes(batch)) / n + batch * kv * share) / bandwidth
            compute = batch * flops / n / peak
            extra = overheads.get(batch)
            if extra is None:
                extra = overhead(batch)
            return (compute if compute > memory else memory) + extra  # max(memory, compute), ties to the first

        return decode_time

    def per_prompt(self, prompt_tokens: int) -> tuple[float, float]:
        """(FLOPs, KV bytes written) to prefill one prompt under a causal mask."""
        found = self._per_prompt.get(prompt_tokens)
        if found is None:  # the same sums as attention_flops_per_token and kv_bytes_per_sequence
            t = prompt_tokens
            attention = sum(c * _causal_keys(cap, t) for c, cap in self._prefill_attention) + self._fixed_attention * t
            found = self._per_prompt[t] = (self.matmul_per_token * t + attention, self.per_sequence(t)[1])
        return found

    def prefill_attention(self, prompt_tokens: int) -> tuple[float, float, float]:
        """One prompt's prefill attention: (matmul-rate-equivalent FLOPs of its full-attention layers, of its windowed
        layers, as the kernels run them (padded heads, every slot), and the attention FLOPs the model itself asks)."""
        t, full, windowed = prompt_tokens, self._fixed_attention * prompt_tokens, 0.0
        for (c, cap), is_full in zip(self._prefill_attention, self._full_layer_term):
            if is_full:
                full += c * _causal_keys(cap, t)
            else:
                windowed += c * _causal_keys(cap, t)
        own = sum(c * _causal_keys(cap, t) for c, cap in attention_terms(self.dep.model, prefill=True))
        return full, windowed, own

    def _prefill_parts(self, prompt_lengths) -> tuple[float, float, float]:
        costs = [self.per_prompt(t) for t in prompt_lengths]
        # fsum: prompts of different lengths give fractions that CPython 3.11 and Pyodide's 3.14 sum() round apart
        return fsum(c[0] for c in costs), self.weight_bytes(sum(prompt_lengths)), fsum(c[1] for c in costs)

    def prefill(self, prompt_lengths) -> StepCost:
        """One prefill of the given prompts together: weights read once, KV written once."""
        tokens = sum(prompt_lengths)
        return self._cost(*self._prefill_parts(prompt_lengths), 2 * self.active * tokens, self.mixed_overhead(tokens))

    prefill_alone = prefill  # one GPU has no pipeline stages to cross (sharded_steps.ShardedSteps.prefill_alone)

    def _prefill_timer(self):
        """prefill(prompt_lengths).time_s as a closure, bit for bit (the same sums in the same order as
        _prefill_parts, then _times), for the simulator's hot path."""
        per_prompt_memo, per_prompt, weights, weight_bytes = (
            self._per_prompt,
            self.per_prompt,
            self._weights,
            self.weight_bytes,
        )
        n, share, bandwidth, peak = self._n, self.kv_share, self._bandwidth, self._flops
        overhead = self.mixed_overhead

        def prefill_time(prompt_lengths) -> float:
            costs = [per_prompt_memo.get(t) or per_prompt(t) for t in prompt_lengths]
            tokens = sum(prompt_lengths)
            memory = (
                (weights.get(tokens) or weight_bytes(tokens)) / n + fsum([c[1] for c in costs]) * share
            ) / bandwidth
            compute = fsum([c[0] for c in costs]) / n / peak
            return (compute if compute > memory else memory) + overhead(tokens)  # max(memory, compute) + overhead

        return prefill_time


def decode_step(dep: Deployment, batch: int, context_tokens: float) -> StepCost:
    return StepModel(dep).decode(batch, context_tokens)


def prefill_step(dep: Deployment, prompt_lengths) -> StepCost:
    return StepModel(dep).prefill(prompt_lengths)


def ridge_point(dep: Deployment) -> float:
    """Dense peak FLOP/s ÷ memory bandwidth, FLOP/B: where the roofline bends."""
    return dep.peak_flops_per_s / dep.accelerator.memory_bandwidth_bytes_per_s


def effective_ridge(dep: Deployment) -> float:
    """The ridge the step times obey: (η_compute × s_chip × peak) ÷ (η_bw × bandwidth), FLOP/B."""
    return compute_rate(dep) / (dep.accelerator.memory_bandwidth_bytes_per_s * dep.bandwidth_efficiency)


def compute_ceiling_tokens_per_s_per_gpu(dep: Deployment) -> float:
    """Decode tokens/s per GPU as the batch grows without limit: 2 × active params per token (at the rate TP-sliced
    experts keep, matmul_flops_per_token)."""
    return compute_rate(dep) / matmul_flops_per_token(dep)
