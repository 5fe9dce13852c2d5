"""What the core knows about a model and an accelerator.

These frozen dataclasses are the contract between the data files, the Hugging Face
importer and the calculators. Every size is in the unit its name says; counts are
plain ints. Derived quantities (parameter counts, KV bytes) live in functions, not
in fields, so a model can never disagree with itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field

ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla")
LAYER_KINDS = ("full", "sliding", "chunked")  # what each layer's attention can see
FFN_KINDS = ("gated", "plain")  # gated: gate+up+down (SwiGLU/GeGLU); plain: up+down (OPT, GPT-2)
# How a chip's scale-up links are wired: "switched" (NVSwitch: any ring can use the whole
# per-chip bandwidth), "mesh" (one point-to-point link group to each peer: MI300X, Gaudi 3),
# "torus" (links to the neighbours along each torus dimension: TPU ICI).
SCALE_UP_TOPOLOGIES = ("switched", "mesh", "torus")


@dataclass(frozen=True)
class Attention:
    kind: str                  # one of ATTENTION_KINDS
    num_heads: int             # query heads
    num_kv_heads: int          # K/V heads (MHA: = num_heads; MQA: 1; MLA: = num_heads, unused for KV)
    head_dim: int              # query/key head dimension (explicit; not always hidden/heads)
    v_head_dim: int | None = None   # value head dimension when it differs (MLA: 128 for DeepSeek-V3)
    # Multi-head latent attention (DeepSeek V2/V3, Kimi K2): the cache holds one
    # compressed latent of kv_lora_rank plus a shared RoPE key of qk_rope_head_dim per token per layer.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    q_lora_rank: int = 0       # 0 = queries not compressed
    # DeepSeek sparse attention (V3.2): a lightning indexer per layer caches one key of
    # index_head_dim per token (FP8 plus an FP32 scale per 128) and scores it with index_n_heads.
    index_head_dim: int = 0
    index_n_heads: int = 0
    qkv_bias: bool = False
    o_bias: bool = False


@dataclass(frozen=True)
class MoE:
    num_experts: int           # routed experts per MoE layer
    experts_per_token: int     # top-k
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0   # per shared expert; 0 means expert_intermediate_size
    first_dense_layers: int = 0         # leading layers with a dense FFN (DeepSeek-V3: 3)
    layer_interval: int = 1             # every n-th layer is MoE (Llama 4 Maverick: 2)
    expert_bias: bool = False           # gpt-oss experts carry biases


@dataclass(frozen=True)
class Model:
    id: str
    name: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    intermediate_size: int     # dense FFN width (dense layers of an MoE model too)
    attention: Attention
    layer_kinds: tuple[str, ...]           # one LAYER_KINDS entry per layer, len == num_layers
    sliding_window_tokens: int | None = None
    attention_chunk_tokens: int | None = None
    moe: MoE | None = None
    ffn_kind: str = "gated"
    tie_embeddings: bool = False
    max_context_tokens: int | None = None
    official_total_params: float | None = None    # from the model card, for tests and tables
    official_active_params: float | None = None
    source: str = ""
    as_of: str = ""
    notes: str = ""                               # added by the data helper: caveats shown beside a preset


@dataclass(frozen=True)
class Accelerator:
    id: str
    name: str
    vendor: str
    memory_bytes: int                       # device memory, bytes, as software sees it (see accelerators.toml)
    memory_bandwidth_bytes_per_s: float
    dense_flops_per_s: dict = field(default_factory=dict)   # {"bf16": 989e12, "fp8": ...}; dense only
    scale_up_bandwidth_bytes_per_s: float | None = None     # per GPU, per direction (NVLink, ICI, ...)
    scale_up_domain: int | None = None      # chips in one scale-up domain (8, 72, ...)
    scale_up_topology: str = ""             # one of SCALE_UP_TOPOLOGIES; "" = not stated (treated as switched)
    scale_up_link_bandwidth_bytes_per_s: float | None = None  # to ONE neighbour (mesh: one peer), per direction
    power_watts: float | None = None
    price_usd_per_hour: float | None = None
    price_as_of: str = ""
    price_source: str = ""
    source: str = ""
    as_of: str = ""
    notes: str = ""
    memory_note: str = ""                   # where memory_bytes comes from: "reported" or "vendor", and the source
