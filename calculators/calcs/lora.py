"""LoRA adapters: their size, the GPU slots an engine reserves for them, their kernel cost, their swap.

A LoRA adapter (Hu et al., arXiv 2106.09685 §4.1) adds to a frozen weight W (d_out × d_in) the product
B·A of two small matrices, A (r × d_in) and B (d_out × r), r the rank. Per target module per layer it
holds r × (d_in + d_out) parameters, and a token through it costs 2 × r × (d_in + d_out) FLOPs more
(A·x, then B·(A·x)). The modules are the base model's own linear layers, with their real shapes
(params.py counts the same matrices):

  q    d → H × d_h           column-parallel      o     H × d_v → d   row-parallel
  k    d → H_kv × d_h        column-parallel      gate  d → d_ff      column-parallel
  v    d → H_kv × d_v        column-parallel      up    d → d_ff      column-parallel
                                                  down  d_ff → d      row-parallel

Slots (vLLM v0.33.0, vllm/lora/layers/base_linear.py `create_lora_weights`): every LoRA-wrapped linear
layer holds `max_loras` stacked A and B buffers sized at `max_lora_rank`, in lora_dtype (the model's
activation dtype when "auto", vllm/config/lora.py), allocated when the model loads, so before the KV
pool is sized: their bytes come out of the KV budget. With target_modules unset every supported module
is wrapped. Under tensor parallelism a column-parallel layer keeps A whole (r × d_in) and its B
sharded (d_out ÷ N × r); a row-parallel layer the other way round (fully_sharded_loras off, the
default). With target_modules unset vLLM also wraps the embedding and the LM head, unsharded
(vocab_slot_bytes_per_gpu). Adapters beyond the slots wait in host memory (max_cpu_loras, an LRU cache,
vllm/lora/model_manager.py) and are copied in when a request needs one: bytes ÷ host-link bandwidth.

Left out: an adapter's own weights on embeddings and the LM head (PEFT's modules_to_save), on MoE
experts and on MLA's low-rank projections (InputError), DoRA and other variants, and the per-step
kernel launch (counted by the step overhead).
"""

from __future__ import annotations

from ..errors import InputError
from ..model import Model

MODULES = ("q", "k", "v", "o", "gate", "up", "down")
TARGETS = {
    "qv": ("q", "v"),
    "qkvo": ("q", "k", "v", "o"),
    "all": MODULES,
}
TARGET_CHOICES = [
    ("qv", "q, v (the LoRA paper's choice)"),
    ("qkvo", "q, k, v, o (attention)"),
    ("all", "All linear: q, k, v, o, gate, up, down"),
]
ROW_PARALLEL = ("o", "down")
ATTENTION_KINDS = ("full", "sliding", "chunked")
VLLM_MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm/config/lora.py MaxLoRARanks, v0.33.0


def module_shapes(model: Model, modules, field: str = "target_modules") -> dict[str, tuple[int, int, int]]:
    """module -> (d_in, d_out, layers that carry it), from the model's real shapes."""
    a, d = model.attention, model.hidden_size
    attention_layers = sum(1 for kind in model.layer_kinds if kind in ATTENTION_KINDS)
    if model.ffn_in_mixer_layers:
        ffn_layers = model.num_layers
    else:
        ffn_layers = sum(1 for kind in model.layer_kinds if kind == "mlp")
    out = {}
    for m in modules:
        if m in ("q", "k", "v", "o"):
            if a.kind == "mla":
                raise InputError(field, "LoRA on MLA's low-rank projections is not modelled: choose a non-MLA model")
            v_dim = a.v_head_dim or a.head_dim
            shape = {
                "q": (d, a.num_heads * a.head_dim),
                "k": (d, a.num_kv_heads * a.head_dim),
                "v": (d, a.num_kv_heads * v_dim),
                "o": (a.num_heads * v_dim, d),
            }[m]
            out[m] = (*shape, attention_layers)
        else:
            if model.moe is not None:
                raise InputError(field, "LoRA on MoE experts is not modelled: choose attention modules (qv or qkvo)")
            if m == "gate" and model.ffn_kind != "gated":
                continue  # a plain FFN has no gate projection
            width = model.intermediate_size
            out[m] = ((d, width) if m != "down" else (width, d)) + (ffn_layers,)
    return out


def adapter_params(model: Model, rank: int, modules) -> int:
    """Parameters of one adapter: r × (d_in + d_out) per module per layer."""
    return sum(rank * (i + o) * n for i, o, n in module_shapes(model, modules).values())


def adapter_bytes(model: Model, rank: int, modules, elem_bytes: float) -> float:
    return adapter_params(model, rank, modules) * elem_bytes


def adapter_bytes_per_gpu(model: Model, rank: int, modules, elem_bytes: float, tensor_parallel: int) -> float:
    """One adapter's bytes on one GPU of a tensor-parallel group, sharded as vLLM shards its slots: a
    column-parallel layer keeps A whole and splits B's outputs, a row-parallel layer splits A's inputs
    and keeps B whole (fully_sharded_loras off)."""
    n, total = tensor_parallel, 0.0
    for m, (d_in, d_out, layers) in module_shapes(model, modules).items():
        per_layer = rank * (d_in / n + d_out) if m in ROW_PARALLEL else rank * (d_in + d_out / n)
        total += per_layer * layers
    return total * elem_bytes


def slot_bytes_per_gpu(model: Model, max_rank: int, modules, elem_bytes: float, tensor_parallel: int) -> float:
    """One GPU slot (vLLM's max_loras counts them): every wrapped module's A and B at max_lora_rank."""
    return adapter_bytes_per_gpu(model, max_rank, modules, elem_bytes, tensor_parallel)


# Presets whose vLLM v0.33.0 class lists embed_tokens and lm_head in embedding_modules (llama.py
# LlamaForCausalLM: Llama 2 and 3.x; qwen3.py Qwen3ForCausalLM). Qwen2, Mistral (mistral.py: {}), Gemma,
# OPT, Falcon and others declare none (interfaces.py default {}), so their slots hold the linear layers only.
VLLM_VOCAB_LORA_PREFIXES = ("llama-2-", "llama-3.", "qwen3-8b", "qwen3-32b")


def vllm_wraps_vocab(model: Model) -> bool:
    return model.id.startswith(VLLM_VOCAB_LORA_PREFIXES)


def vocab_slot_bytes_per_gpu(model: Model, max_rank: int, elem_bytes: float) -> float:
    """What one slot adds for the embedding and the LM head, which vLLM v0.33.0 also wraps when
    target_modules is unset (the model's embedding_modules, e.g. Llama's embed_tokens and lm_head, are
    supported LoRA modules: vllm/lora/utils.py get_supported_lora_modules). Per slot and per GPU, unsharded:
    VocabParallelEmbeddingWithLoRA holds A (vocab × r) and B (d × r), LogitsProcessorWithLoRA A (r × d)
    and B (vocab × r) (vllm/lora/layers/vocab_parallel_embedding.py, logits_processor.py create_lora_weights)."""
    return 2.0 * max_rank * (model.vocab_size + model.hidden_size) * elem_bytes


def flops_per_token(model: Model, rank: int, modules) -> float:
    """Extra FLOPs one token costs through one adapter: 2 × r × (d_in + d_out) per module per layer."""
    return 2.0 * adapter_params(model, rank, modules)


def swap_time_s(bytes_per_gpu: float, link_bytes_per_s: float) -> float:
    """Copy one adapter into its GPU slot from host memory: every GPU copies its share over its own link."""
    return bytes_per_gpu / link_bytes_per_s
