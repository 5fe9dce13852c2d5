"""SGLang's own mem_fraction_static: the share of GPU memory it keeps for weights and the KV pool, as a named release
sets it when the launch gives none, and the cut it makes on ROCm to a given one too (engine_versions.toml
[version.default_fraction], each figure with its source).

  gpu_mem   = the GPU's total memory in MiB (nvidia-smi's, rocminfo's; here the catalogue's, or the memory entered)
  chunked_prefill_size, decode graph max_bs = by gpu_mem's tier (max_bs by TP < 4 or ≥ 4)
  reserved  = 512 + 1.5 × max(chunked_prefill_size, 2,048) + TP ÷ 8 × 1,024 + graphs, at least 10,240 above 60 GiB
  graphs    = 2 × decode max_bs + the breakable prefill graphs (CUDA only; none for a model SGLang serves as
              multimodal, unless allowlisted): 8 per captured size up to chunked_prefill_size (4,096 for a Llama 2
              path), or 1,536 for an MLA model
  fraction  = round((gpu_mem − reserved) ÷ gpu_mem, 3)
  ROCm      : × 0.85, given or not, where the aiter attention backend serves the model and context_len > 8,192

v0.5.23's figures; an older release's entry (v0.5.9) differs in the tiers and reserves no prefill graphs.

Every figure in MiB. A multimodal launch's further cut by its vision tower, DP attention, DeepEP and a disaggregated
prefill or decode server's own reserve are not modelled (the notes beside the result say so).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Accelerator, Model, vendor_in
from .overhead import graph_memory_bytes, memory_tier
from ..units import MIB


@dataclass(frozen=True)
class DefaultFraction:
    fraction: float  # as SGLang uses it: the rule's, × 0.85 where scaled
    gpu_mib: float
    chunked_prefill_size: int
    decode_max_bs: int
    graph_mib: float  # decode and prefill graphs
    prefill_graph_mib: float
    reserved_mib: float
    aiter_scaled: bool
    multimodal: bool
    before_cut: float  # the rule's own value, before the aiter cut (the same where none applies)


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """The token counts SGLang 0.5.23 captures a breakable prefill graph for, up to max_tokens
    (arg_groups/cuda_graph_hook.py:480-497)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64)]
    sizes += [*range(1280, 4097, 256), *range(4608, max_tokens + 1, 512)]
    return [s for s in sizes if s <= max_tokens]


def multimodal(rule: dict, model: Model) -> bool:
    """A model SGLang serves as multimodal in a plain launch: a multimodal class that it does not leave text-only
    unless --enable-multimodal is given (Gemma 3 and Llama 4 among those)."""
    return model.architecture in rule["multimodal_architectures"] and (
        model.architecture not in rule["text_only_unless_enabled"]
    )


def _prefill_graph_mib(rule: dict, model: Model, hardware: Accelerator, chunk: int) -> float:
    if not vendor_in(hardware.vendor, rule["prefill_graph_vendors"]):
        return 0.0
    if multimodal(rule, model) and model.architecture not in rule["multimodal_prefill_graph_architectures"]:
        return 0.0
    if model.attention.kind == "mla":
        return float(rule["mla_prefill_graph_mib"])
    capped = any(name in model.id.lower() for name in rule["prefill_graph_cap_by_path"])
    largest = min(chunk, rule["prefill_graph_cap_tokens"]) if capped else chunk
    return rule["prefill_graph_mib_per_size"] * len(prefill_graph_sizes(largest))


def aiter_scaled(rule: dict, model: Model, hardware: Accelerator, tensor_parallel: int, context_len: int) -> bool:
    """Whether SGLang takes 85% of mem_fraction_static, given or not: on ROCm, where its default attention backend is
    aiter (for MLA only with 16 or 128 KV heads a rank; a sparse-attention (DSA) model takes its own backend, and the
    classes aiter_excluded_architectures lists take another) and context_len (--context-length; the calculator's
    max_model_len) is above 8,192 tokens."""
    if not vendor_in(hardware.vendor, rule["aiter_vendors"]) or model.attention.index_topk:
        return False
    if model.architecture in rule["aiter_excluded_architectures"]:
        return False
    heads = max(1, model.attention.num_kv_heads // tensor_parallel)
    if model.attention.kind == "mla" and heads not in rule["aiter_mla_kv_heads"]:
        return False
    return context_len > rule["aiter_above_context"]


def default_fraction(ver: dict, model: Model, hardware: Accelerator, tensor_parallel: int, context_len: int):
    """The mem_fraction_static this SGLang release sets for the model on this GPU and TP degree when given none."""
    rule = ver["default_fraction"]
    mib = hardware.memory_bytes / MIB
    chunk, small, large = memory_tier(mib, rule["tiers_below_mib"], rule["tier_above"])
    max_bs = small if tensor_parallel < 4 else large
    prefill_graphs = _prefill_graph_mib(rule, model, hardware, chunk)
    graphs = graph_memory_bytes(max_bs) / MIB + prefill_graphs
    reserved = rule["base_mib"] + rule["activation_mib_per_token"] * max(chunk, rule["min_activation_tokens"])
    reserved += tensor_parallel / 8 * rule["parallel_mib_per_8_gpus"] + graphs
    if mib > rule["floor_above_mib"]:
        reserved = max(reserved, rule["floor_mib"])
    fraction = round((mib - reserved) / mib, 3)
    scaled = aiter_scaled(rule, model, hardware, tensor_parallel, context_len)
    return DefaultFraction(
        fraction * rule["aiter_scale"] if scaled else fraction,
        mib,
        chunk,
        max_bs,
        graphs,
        prefill_graphs,
        reserved,
        scaled,
        multimodal(rule, model),
        fraction,
    )
