"""What the core knows about a model, an accelerator and a number format.

These frozen dataclasses are the contract between the data files, the Hugging Face
importer and the calculators. Every size is in the unit its name says; counts are
plain ints. Derived quantities (parameter counts, KV bytes) live in functions, not
in fields, so a model can never disagree with itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ATTENTION_KINDS = ("mha", "gqa", "mqa", "mla")
# What each layer's token mixer can see: full, sliding-window or chunked attention, or "linear":
# a linear-attention / state-space mixer (Gated DeltaNet, Mamba) that keeps a constant state per
# sequence instead of a KV cache (its shape is Model.linear_mixer), or "mlp": a feed-forward block
# with no token mixer (Nemotron-H, where mixers and FFNs are separate layers).
LAYER_KINDS = ("full", "sliding", "chunked", "linear", "mlp")
LINEAR_MIXER_KINDS = ("gated_deltanet", "mamba1", "mamba2")
FFN_KINDS = ("gated", "plain")  # gated: gate+up+down (SwiGLU/GeGLU); plain: up+down (OPT, GPT-2)
# How a chip's scale-up links are wired: "switched" (NVSwitch: any ring can use the whole
# per-chip bandwidth), "mesh" (one point-to-point link group to each peer: MI300X, Gaudi 3),
# "torus" (links to the neighbours along each torus dimension: TPU ICI).
SCALE_UP_TOPOLOGIES = ("switched", "mesh", "torus")
# interconnects.toml links a chip without a scale-up link may name as the one its GPUs reach each other over
PCIE_LINKS = ("pcie4-x16", "pcie5-x16")


@dataclass(frozen=True)
class Attention:
    kind: str  # one of ATTENTION_KINDS
    num_heads: int  # query heads
    num_kv_heads: int  # K/V heads (MHA: = num_heads; MQA: 1; MLA: = num_heads, unused for KV)
    head_dim: int  # query/key head dimension (explicit; not always hidden/heads)
    v_head_dim: int | None = None  # value head dimension when it differs (MLA: 128 for DeepSeek-V3)
    # Multi-head latent attention (DeepSeek V2/V3, Kimi K2): the cache holds one
    # compressed latent of kv_lora_rank plus a shared RoPE key of qk_rope_head_dim per token per layer.
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    q_lora_rank: int = 0  # 0 = queries not compressed
    output_gate: bool = False  # Qwen3-Next gated attention: q_proj also emits a sigmoid gate per head
    # DeepSeek sparse attention (V3.2): a lightning indexer per layer caches one key of
    # index_head_dim per token (FP8 plus an FP32 scale per 128) and scores it with index_n_heads;
    # each query then attends over the index_topk tokens it scored highest.
    index_head_dim: int = 0
    index_n_heads: int = 0
    index_topk: int = 0
    qkv_bias: bool = False
    o_bias: bool = False
    sinks: bool = False  # learned attention sinks (gpt-oss): a logit per head in each softmax
    qk_norm_over_heads: bool = False  # MiniMax-M2: one q (and one k) RMSNorm over all heads, not per head


@dataclass(frozen=True)
class LinearMixer:
    """A recurrent token mixer's shape; the per-sequence state is conv state plus recurrent state.

    gated_deltanet (Qwen3-Next): num_heads value heads of value_head_dim, num_key_heads key heads of
      key_head_dim; state = conv (kernel-1) x (2 Hk dk + Hv dv) and recurrent Hv x dk x dv.
    mamba2 (Nemotron-H): num_heads heads of value_head_dim, inner_size = heads x head_dim, n_groups
      B/C groups of state_size; state = conv (kernel-1) x (inner + 2 G N) and SSM heads x head_dim x N.
    mamba1 (Jamba): inner_size channels, state_size N, dt_rank; state = conv (kernel-1) x inner and
      SSM inner x N.
    Shapes as vLLM's MambaStateShapeCalculator (vllm/model_executor/layers/mamba/mamba_utils.py).
    """

    kind: str  # one of LINEAR_MIXER_KINDS
    conv_kernel: int = 4
    num_heads: int = 0
    num_key_heads: int = 0
    key_head_dim: int = 0
    value_head_dim: int = 0
    inner_size: int = 0
    state_size: int = 0
    n_groups: int = 1
    dt_rank: int = 0
    conv_bias: bool = False


@dataclass(frozen=True)
class MoE:
    num_experts: int  # routed experts per MoE layer
    experts_per_token: int  # top-k
    expert_intermediate_size: int
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0  # per shared expert; 0 means expert_intermediate_size
    first_dense_layers: int = 0  # leading layers with a dense FFN (DeepSeek-V3: 3)
    layer_interval: int = 1  # every n-th layer is MoE (Llama 4 Maverick: 2)
    expert_bias: bool = False  # gpt-oss experts carry biases


@dataclass(frozen=True)
class Model:
    id: str
    name: str
    num_layers: int
    hidden_size: int
    vocab_size: int
    intermediate_size: int  # dense FFN width (dense layers of an MoE model too)
    attention: Attention
    layer_kinds: tuple[str, ...]  # one LAYER_KINDS entry per layer, len == num_layers
    sliding_window_tokens: int | None = None
    attention_chunk_tokens: int | None = None
    moe: MoE | None = None
    linear_mixer: LinearMixer | None = None  # the "linear" layers' mixer (hybrid models)
    # Cross-layer KV sharing: the last kv_shared_layers layers attend over KV an earlier layer of the
    # same kind computed and store none of their own (Gemma 3n num_kv_shared_layers; CLA, arXiv 2405.12981).
    kv_shared_layers: int = 0
    # False: mixer layers carry no FFN and the dense FFN lives only in "mlp" layers, with one norm
    # per layer (Nemotron-H's hybrid_override_pattern of M, * and - blocks).
    ffn_in_mixer_layers: bool = True
    ffn_kind: str = "gated"
    tie_embeddings: bool = False
    max_context_tokens: int | None = None
    # The checkpoint's model class (config.json architectures[0]); "" where unknown. Only engine rules keyed on it
    # read it (which vLLM model runner serves the model: engine_versions.toml v2_runner).
    architecture: str = ""
    official_total_params: float | None = None  # from the model card, for tests and tables
    official_active_params: float | None = None
    source: str = ""
    as_of: str = ""
    notes: str = ""  # added by the data helper: caveats shown beside a preset


@dataclass(frozen=True)
class Accelerator:
    id: str
    name: str
    vendor: str
    memory_bytes: int  # device memory, bytes, as software sees it (see accelerators.toml)
    memory_bandwidth_bytes_per_s: float
    dense_flops_per_s: dict = field(default_factory=dict)  # {"bf16": 989e12, "fp8": ...}; dense only
    # the largest matmul rate measured on the chip (MAMF), by format, FLOP/s; {} = not measured (steptime.matmul_share)
    achievable_matmul_flops_per_s: dict = field(default_factory=dict)
    scale_up_bandwidth_bytes_per_s: float | None = None  # per GPU, per direction (NVLink, ICI, ...)
    scale_up_domain: int | None = None  # chips in one scale-up domain (8, 72, ...)
    scale_up_topology: str = ""  # one of SCALE_UP_TOPOLOGIES; "" = not stated (treated as switched)
    scale_up_link_bandwidth_bytes_per_s: float | None = None  # to ONE neighbour (mesh: one peer), per direction
    pcie_link: str = ""  # one of PCIE_LINKS: its GPUs' path to each other where it lists no scale-up link
    power_watts: float | None = None
    # on-chip shared memory per SM (the SRAM one FlashAttention tile lives in), bytes; None = not sourced
    shared_memory_per_sm_bytes: int | None = None
    price_usd_per_hour: float | None = None
    price_as_of: str = ""
    price_source: str = ""
    source: str = ""
    as_of: str = ""
    notes: str = ""
    memory_note: str = ""  # where memory_bytes comes from: "reported" or "vendor", and the source
    url: str = ""  # a public page for the row's figures (presets always have one)


def vendor_in(vendor: str, vendors) -> bool:
    """Whether a vendor is among these, case-blind: the catalogue writes "NVIDIA", a data file may write "Intel"."""
    return vendor.upper() in {v.upper() for v in vendors}


@dataclass(frozen=True)
class Format:
    """A number format: how many bits one stored element really costs.

    Block-scaled formats (MXFP4, NVFP4, group-wise INT4) store one scale per block, so the
    effective width is ``bits + scale_bits / block_size``.
    """

    id: str
    name: str
    bits_per_element: int
    block_size: int = 0  # elements sharing one scale; 0 = no per-block scale
    scale_bits: int = 0  # width of that shared scale
    flops_key: str = ""  # key into Accelerator.dense_flops_per_s; "" = no native matmul rate
    aliases: tuple[str, ...] = ()
    notes: str = ""
    source: str = ""
    as_of: str = ""

    @property
    def effective_bits(self) -> float:
        if self.block_size:
            return self.bits_per_element + self.scale_bits / self.block_size
        return float(self.bits_per_element)

    @property
    def bytes_per_element(self) -> float:
        return self.effective_bits / 8
