"""Read a Hugging Face ``config.json`` (as published) into a Model.

Families: Llama 1-4, Mistral, Mixtral, Qwen2/2.5, Qwen3 (+MoE), Qwen3-Next, DeepSeek V2/V3/V3.2,
Kimi K2, gpt-oss, Gemma 2/3, Falcon, GPT-2, OPT, StarCoder2, GPT-NeoX, Cohere, Jamba, Nemotron-H (dense).
Multimodal configs (Gemma 3, Llama 4) keep the text decoder in ``text_config``; the vision tower is not modelled.
"""

from __future__ import annotations

from .checks import model_from_dict
from .errors import InputError
from .model import Model

# model_type -> family. Architectures map through _ARCH_PREFIX when model_type is absent.
FAMILIES = {
    "llama": "llama",
    "llama4": "llama4",
    "llama4_text": "llama4",
    "mistral": "mistral",
    "mixtral": "mixtral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen2_moe": "qwen_moe",
    "qwen3_moe": "qwen_moe",
    "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek",
    "kimi_k2": "deepseek",
    "gpt_oss": "gpt_oss",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",
    "falcon": "falcon",
    "refinedweb": "falcon",
    "refinedwebmodel": "falcon",
    "gpt2": "gpt2",
    "opt": "opt",
    "qwen3_next": "qwen3_next",
    "qwen3_5": "qwen3_next",  # Qwen3.5: Qwen3-Next's layout (Gated DeltaNet + gated attention), dense or MoE
    "qwen3_5_text": "qwen3_next",
    "qwen3_5_moe": "qwen3_next",
    "qwen3_5_moe_text": "qwen3_next",
    "deepseek_v32": "deepseek",
    "jamba": "jamba",
    "nemotron_h": "nemotron_h",
    "smollm3": "smollm3",  # Llama's layout with NoPE layers; ties embeddings by default (SmolLM3Config)
    # Read from the standard decoder fields like any other model_type, but with their own FFN or embedding
    # defaults: the generic reading (gated FFN, separate head) oversized each (StarCoder2-7B 10.1B, not 7.2B)
    "starcoder2": "starcoder2",  # c_fc -> GELU -> c_proj, no gate; ties embeddings (7.17B published)
    "gpt_neox": "gpt_neox",  # dense_h_to_4h -> GELU -> dense_4h_to_h, no gate
    "cohere": "cohere",  # CohereConfig(tie_word_embeddings=True): Command-R and Aya tie their embeddings
    # Families whose configs name the standard quantities otherwise (the generic reading refused or missized them)
    "chatglm": "chatglm",  # ChatGLM2/3, GLM-4-9B: multi_query_group_num KV heads, kv_channels, ffn_hidden_size
    "qwen": "qwen_v1",  # Qwen (1.0): intermediate_size counts both gated branches; kv_channels is the head dim
    "gptj": "gptj",  # GPT-J: fc_in -> GELU -> fc_out, n_inner default 4 × n_embd
    "gpt_bigcode": "gpt_bigcode",  # SantaCoder / StarCoder 1: multi-query, n_inner, tied embeddings
    "phi": "phi",  # Phi-1.5 / Phi-2: fc1 -> GELU -> fc2
    "phi-msft": "phi",  # the same models under their earlier remote-code model_type
}
# model_types with nothing this site can size, refused naming model_type: encoder-only models (no causal decoding,
# no KV cache) and RWKV (attention-free: a per-sequence time-mixing state, not modelled here).
_ENCODERS = ("bert", "roberta", "xlm-roberta", "distilbert", "electra", "deberta", "deberta-v2", "modernbert")
_RWKV = ("rwkv", "rwkv5", "rwkv6", "rwkv7")
_ARCH_PREFIX = {
    "Llama4": "llama4",
    "Llama": "llama",
    "Mistral": "mistral",
    "Mixtral": "mixtral",
    "Qwen3Next": "qwen3_next",
    "Qwen3_5": "qwen3_next",
    "Jamba": "jamba",
    "NemotronH": "nemotron_h",
    "Qwen2Moe": "qwen_moe",
    "Qwen3Moe": "qwen_moe",
    "Qwen2": "qwen2",
    "Qwen3": "qwen3",
    "DeepseekV": "deepseek",
    "GptOss": "gpt_oss",
    "Gemma3": "gemma3",
    "Gemma2": "gemma2",
    "Gemma": "gemma",
    "Falcon": "falcon",
    "RW": "falcon",
    "GPT2": "gpt2",
    "OPT": "opt",
}
_PLAIN_FFN = ("falcon", "gpt2", "opt", "nemotron_h", "starcoder2", "gpt_neox", "gptj", "gpt_bigcode", "phi")
_TIED_BY_DEFAULT = (
    "gemma",
    "gemma2",
    "gemma3",
    "falcon",
    "gpt2",
    "opt",
    "smollm3",
    "starcoder2",
    "cohere",
    "gpt_bigcode",
)
_DEFAULT_CONTEXT = {"gemma3": 131072}  # Gemma3TextConfig's max_position_embeddings; published configs omit it
_GPT2_WIDTH = ("gpt2", "gptj", "gpt_bigcode", "phi")  # n_inner (or intermediate_size), default 4 × hidden
_LAYER_TYPES = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "global": "full",
    "local": "sliding",
    "linear_attention": "linear",
}


GENERIC = "decoder"  # any other model_type: read from the standard decoder fields, as Llama's


class _Reads(dict):
    """A config that remembers which of its (non-null) keys were read, and what the reading assumed:
    the note beside an imported model names both. One `log` and `assumed` serve a config and its
    text_config (whose keys are listed as text_config.KEY)."""

    def __init__(self, data: dict, log: dict, assumed: list, prefix: str = ""):
        super().__init__(data)
        self.log, self.assumed, self.prefix = log, assumed, prefix

    def _mark(self, key):
        if dict.get(self, key) is not None and key != "text_config":
            self.log.setdefault(self.prefix + key, None)

    def get(self, key, default=None):
        self._mark(key)
        return dict.get(self, key, default)

    def __getitem__(self, key):
        self._mark(key)
        return dict.__getitem__(self, key)

    def __contains__(self, key):
        self._mark(key)
        return dict.__contains__(self, key)


def _assume(cfg: dict, text: str) -> None:
    if isinstance(cfg, _Reads) and text not in cfg.assumed:
        cfg.assumed.append(text)


# Keys whose presence means one attention or FFN shape per model is not enough: refused, naming the key.
_ONE_SHAPE = "this site sizes one attention shape for every layer"
_UNSIZABLE = {
    "block_configs": "gives every layer its own attention and FFN shape (Nemotron-NAS / DeciLM); " + _ONE_SHAPE,
    "compress_ratios": "compresses some layers' KV by a per-layer ratio (DeepSeek-V4); compressed attention is "
    "not modelled here",
    "linear_attn_config": "mixes Kimi Delta Attention layers into the stack; only Gated DeltaNet and Mamba "
    "states are modelled here",
    "hybrid_layer_pattern": "is a per-layer attention pattern this site does not read (use layer_types)",
    "full_attn_idxs": "lists the attention layers; the others are short-convolution layers (LFM2), whose state is "
    "not modelled here",
    "num_attention_heads_per_layer": "gives layers different numbers of query heads (Laguna); " + _ONE_SHAPE,
}
# Keys that give some layers another KV shape than the main one: refused only when they differ from it.
_OTHER_SHAPE = {
    "swa_num_key_value_heads": "num_key_value_heads",
    "swa_head_dim": "head_dim",
    "swa_v_head_dim": "v_head_dim",
    "num_global_key_value_heads": "num_key_value_heads",
    "global_head_dim": "head_dim",
}


class _Unsizable(InputError):
    """A config this site cannot size, whatever its model_type: the message says why in full."""


def _refuse_unsizable(cfg: dict, field: str) -> None:
    for key, why in _UNSIZABLE.items():
        if cfg.get(key):
            raise _Unsizable(f"{field}.{key}", f"{why}, so this config cannot be sized correctly")
    for key, main in _OTHER_SHAPE.items():
        if cfg.get(key) is not None and cfg.get(key) != cfg.get(main):
            raise _Unsizable(
                f"{field}.{key}",
                f"({cfg.get(key)}) differs from {main} ({cfg.get(main)}): some layers have another KV shape, "
                f"and {_ONE_SHAPE}",
            )
    mt = str(cfg.get("model_type", "")).lower()
    if mt in _ENCODERS:
        why = "is an encoder-only model: it does not decode token by token and keeps no KV cache"
        raise _Unsizable(f"{field}.model_type", f"{mt!r} {why}, so there is nothing for this site to size")
    if mt in _RWKV:
        why = "has no attention layers: each RWKV block keeps a per-sequence time-mixing state, not modelled here"
        raise _Unsizable(f"{field}.model_type", f"{mt!r} {why}, so this config cannot be sized correctly")
    if cfg.get("mlp_only_layers"):
        raise InputError(f"{field}.mlp_only_layers", "puts dense layers among MoE ones, which is not supported here")


_MAX_LAYERS = 1000  # checks.model_from_dict's bound, checked here first: a layer list is built per layer


def _family(cfg: dict, field: str) -> str:
    mt = cfg.get("model_type")
    if mt is not None and not isinstance(mt, str):
        raise InputError(f"{field}.model_type", f'must be a string such as "llama", got {mt!r}')
    archs = cfg.get("architectures")
    if archs is not None and (not isinstance(archs, list) or not all(isinstance(a, str) for a in archs)):
        example = '["LlamaForCausalLM"]'
        raise InputError(f"{field}.architectures", f"must be a list of class names such as {example}, got {archs!r}")
    mt = (mt or "").lower()
    if mt in FAMILIES:
        return FAMILIES[mt]
    for arch in archs or []:
        for prefix, fam in _ARCH_PREFIX.items():
            if arch.startswith(prefix):
                return fam
    if mt or archs:
        return GENERIC
    raise InputError(f"{field}.model_type", "is required (or architectures) to read a Hugging Face config")


def _get(cfg: dict, field: str, *keys, default=...):
    """First present, non-null key; error names the first key when none is."""
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    if default is ...:
        raise InputError(f"{field}.{keys[0]}", "is required")
    return default


def _int(cfg: dict, field: str, *keys, default=...):
    value = _get(cfg, field, *keys, default=default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
        raise InputError(f"{field}.{keys[0]}", f"must be a non-negative integer, got {value!r}")
    return int(value)


def _kv_heads(cfg: dict, fam: str, heads: int, field: str) -> int:
    if fam == "falcon":
        if cfg.get("new_decoder_architecture"):
            return _int(cfg, field, "num_kv_heads", "n_head_kv", "num_key_value_heads")
        return 1 if cfg.get("multi_query", True) else heads
    if fam == "gpt_bigcode":
        return 1 if cfg.get("multi_query", True) else heads
    if fam == "chatglm":
        return _int(cfg, field, "multi_query_group_num") if cfg.get("multi_query_attention") else heads
    kv = _int(cfg, field, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads)
    if kv < 1 or heads % kv:
        raise InputError(f"{field}.num_key_value_heads", f"must divide num_attention_heads ({heads}), got {kv}")
    return kv


def _attention(cfg: dict, fam: str, hidden: int, field: str) -> dict:
    heads = _int(cfg, field, "num_attention_heads", "n_head")
    if heads < 1 or (not cfg.get("head_dim") and hidden % heads):
        raise InputError(f"{field}.num_attention_heads", f"must divide hidden_size ({hidden}) when head_dim is absent")
    if cfg.get("kv_lora_rank"):  # MLA (DeepSeek V2/V3, Kimi K2)
        rope, nope = _int(cfg, field, "qk_rope_head_dim"), _int(cfg, field, "qk_nope_head_dim")
        return dict(
            kind="mla",
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=rope + nope,
            v_head_dim=_mla_v_head_dim(cfg, field, hidden, heads),
            kv_lora_rank=_int(cfg, field, "kv_lora_rank"),
            qk_rope_head_dim=rope,
            qk_nope_head_dim=nope,
            q_lora_rank=_int(cfg, field, "q_lora_rank", default=0),
            index_head_dim=_int(cfg, field, "index_head_dim", default=0),  # DeepSeek-V3.2 indexer
            index_n_heads=_int(cfg, field, "index_n_heads", default=0),
            index_topk=_int(cfg, field, "index_topk", default=0),
        )
    kv = _kv_heads(cfg, fam, heads, field)
    kind = "mha" if kv == heads else "mqa" if kv == 1 else "gqa"
    qkv_only = ("qwen2", "qwen_v1", "chatglm")  # a bias on the QKV projection, none on the output
    family_bias = {"qwen2": True, "qwen_v1": True, "gpt2": True, "chatglm": bool(cfg.get("add_qkv_bias"))}
    family_bias["opt"] = cfg.get("enable_bias", True)
    bias = family_bias.get(fam, bool(cfg.get("attention_bias", cfg.get("bias", False))))
    return dict(
        kind=kind,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=_head_dim(cfg, field, hidden, heads),
        qkv_bias=bias,
        o_bias=bias and fam not in qkv_only,
        output_gate=bool(cfg.get("attn_output_gate", fam == "qwen3_next")),
        sinks=fam == "gpt_oss",  # GptOssAttention's learned sinks (transformers modeling_gpt_oss.py: self.sinks)
        # MiniMax-M2's q/k RMSNorm spans all heads ("per_layer", SGLang 0.5.8 minimax_m2.py's default for the family):
        # under TP it all-reduces each token's sums of squares
        qk_norm_over_heads=bool(cfg.get("use_qk_norm"))
        and cfg.get("qk_norm_type", "per_layer" if cfg.get("model_type") == "minimax_m2" else None) == "per_layer",
    )


def _head_dim(cfg: dict, field: str, hidden: int, heads: int) -> int:
    d = _int(cfg, field, "head_dim", "kv_channels", default=None)
    if d is None:
        d = hidden // heads
        _assume(cfg, f"No head_dim: hidden_size / num_attention_heads = {d}.")
    return d


def _mla_v_head_dim(cfg: dict, field: str, hidden: int, heads: int) -> int:
    v = _int(cfg, field, "v_head_dim", default=None)
    if v is None:  # MiniCPM3: hidden_size / heads, as transformers 5.24.0's MiniCPM3Config sets it
        v = hidden // heads
        _assume(
            cfg,
            f"No v_head_dim: hidden_size / num_attention_heads = {v} assumed (weights only; the MLA cache "
            "does not depend on it).",
        )
    return v


def _linear_mixer(cfg: dict, fam: str, hidden: int, field: str) -> dict | None:
    """Qwen3-Next's Gated DeltaNet (linear_* keys) or Jamba's Mamba (mamba_* keys)."""
    if fam == "qwen3_next":
        return dict(
            kind="gated_deltanet",
            conv_kernel=_int(cfg, field, "linear_conv_kernel_dim", default=4),
            num_heads=_int(cfg, field, "linear_num_value_heads"),
            num_key_heads=_int(cfg, field, "linear_num_key_heads"),
            key_head_dim=_int(cfg, field, "linear_key_head_dim"),
            value_head_dim=_int(cfg, field, "linear_value_head_dim"),
        )
    if fam == "nemotron_h":
        heads, head_dim = _int(cfg, field, "mamba_num_heads"), _int(cfg, field, "mamba_head_dim")
        return dict(
            kind="mamba2",
            conv_kernel=_int(cfg, field, "conv_kernel", default=4),
            num_heads=heads,
            value_head_dim=head_dim,
            inner_size=heads * head_dim,
            state_size=_int(cfg, field, "ssm_state_size", "mamba_d_state"),
            n_groups=_int(cfg, field, "n_groups", default=1),
            conv_bias=bool(cfg.get("use_conv_bias", True)),
        )
    if fam == "jamba":
        rank = cfg.get("mamba_dt_rank", "auto")
        return dict(
            kind="mamba1",
            conv_kernel=_int(cfg, field, "mamba_d_conv", default=4),
            inner_size=_int(cfg, field, "mamba_expand", default=2) * hidden,
            state_size=_int(cfg, field, "mamba_d_state", default=16),
            dt_rank=-(-hidden // 16) if rank == "auto" else _int(cfg, field, "mamba_dt_rank"),
            conv_bias=bool(cfg.get("mamba_conv_bias", True)),
        )
    return None


_NEMOTRON_BLOCKS = {"M": "linear", "*": "full", "-": "mlp"}


def _hybrid_kinds(cfg: dict, fam: str, n: int, field: str) -> list[str] | None:
    if fam == "nemotron_h":
        pattern = _get(cfg, field, "hybrid_override_pattern")
        if not isinstance(pattern, str) or len(pattern) != n or any(c not in _NEMOTRON_BLOCKS for c in pattern):
            raise InputError(
                f"{field}.hybrid_override_pattern",
                f"must be {n} characters of M (Mamba-2), * (attention) or - (MLP); MoE blocks (E) are not supported",
            )
        return [_NEMOTRON_BLOCKS[c] for c in pattern]
    if fam == "qwen3_next" and cfg.get("layer_types") is None:
        every = _int(cfg, field, "full_attention_interval", default=4)
        return ["full" if (i + 1) % every == 0 else "linear" for i in range(n)]
    if fam == "jamba":
        period = _int(cfg, field, "attn_layer_period", default=8)
        offset = _int(cfg, field, "attn_layer_offset", default=4)
        return ["full" if i % period == offset else "linear" for i in range(n)]
    return None


def _pattern_kinds(cfg: dict, fam: str, n: int, field: str) -> list[str]:
    """Per-layer attention kind from layer_types, or the family's fixed pattern."""
    hybrid = _hybrid_kinds(cfg, fam, n, field)
    if hybrid is not None:
        return hybrid
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n:
            got = len(types) if isinstance(types, list) else types
            raise InputError(f"{field}.layer_types", f"must list num_hidden_layers ({n}) entries, got {got}")
        bad = [t for t in types if t not in _LAYER_TYPES]
        if bad:
            raise InputError(f"{field}.layer_types", f"unknown entry {bad[0]!r}; allowed: {', '.join(_LAYER_TYPES)}")
        return [_LAYER_TYPES[t] for t in types]
    if fam == "llama4":
        return _llama4_kinds(cfg, n, field)
    if cfg.get("sliding_window") is None:
        return ["full"] * n
    if fam == "gemma2" or fam == "gpt_oss":  # local first, then alternate
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    if fam == "gemma3":
        every = _int(cfg, field, "sliding_window_pattern", default=6)
        return ["full" if (i + 1) % every == 0 else "sliding" for i in range(n)]
    if fam in ("qwen2", "qwen3", "qwen_moe"):
        if not cfg.get("use_sliding_window", False):
            return ["full"] * n
        first = _int(cfg, field, "max_window_layers", default=n)
        return ["sliding" if i >= first else "full" for i in range(n)]
    if fam == GENERIC and _window_covers_context(cfg):
        return ["full"] * n
    return ["sliding"] * n  # Mistral v0.1 and others: one window on every layer


def _window_covers_context(cfg: dict) -> bool:
    """A window switched off, or as long as the context (Phi-3-mini-128k: 262,144 over 131,072): full attention."""
    window, context = cfg.get("sliding_window"), cfg.get("max_position_embeddings")
    if cfg.get("use_sliding_window") is False:
        return True
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in (window, context))
    return numbers and window >= context


def _llama4_kinds(cfg: dict, n: int, field: str) -> list[str]:
    """RoPE layers use chunked attention; NoPE layers (no_rope_layers[i] == 0) attend globally."""
    rope = cfg.get("no_rope_layers") or [
        int((i + 1) % _int(cfg, field, "no_rope_layer_interval", default=4) != 0) for i in range(n)
    ]
    if len(rope) != n:
        raise InputError(f"{field}.no_rope_layers", f"must list num_hidden_layers ({n}) entries, got {len(rope)}")
    chunked = cfg.get("attention_chunk_size") is not None
    return ["chunked" if r and chunked else "full" for r in rope]


_FIXED_EXPERT_WIDTH = ("mixtral", "gpt_oss", "llama4", "jamba")  # experts of intermediate_size
_SHARED_WIDTH_KEYS = (
    "shared_expert_intermediate_size",  # Qwen2/3-MoE, Qwen3-Next, Qwen3.5: one shared expert of this width
    "moe_shared_expert_intermediate_size",  # Nemotron-H MoE
    "share_expert_dim",  # Step
    "shared_intermediate_size",  # MiniMax
)


def _moe_layers(cfg: dict, field: str, n: int) -> tuple[int, int]:
    """(first dense layers, MoE layer interval). moe_layer_freq may be a per-layer list (MiniMax-M3:
    0 for dense, 1 for MoE): read when it is dense layers first, then MoE ones."""
    first = _int(cfg, field, "first_k_dense_replace", default=0)
    freq = cfg.get("moe_layer_freq")
    if isinstance(freq, list):
        k = next((i for i, f in enumerate(freq) if f), len(freq))
        if len(freq) != n or any(f != 1 for f in freq[k:]) or any(freq[:k]) or (first and first != k):
            raise InputError(
                f"{field}.moe_layer_freq", f"as a list must be {n} entries, dense layers (0) first then MoE (1)"
            )
        return k, 1
    return first, _int(cfg, field, "moe_layer_freq", "decoder_sparse_step", default=1)


def _moe(cfg: dict, fam: str, field: str, n: int) -> dict | None:
    experts = _int(cfg, field, "n_routed_experts", "num_local_experts", "num_experts", default=0)
    if not experts:
        return None
    fixed = fam in _FIXED_EXPERT_WIDTH
    if not fixed and cfg.get("moe_intermediate_size") is None:
        _assume(cfg, "No moe_intermediate_size: intermediate_size read as each expert's width (as Mixtral's).")
    moe = dict(
        num_experts=experts,
        experts_per_token=_int(cfg, field, "num_experts_per_tok", "experts_per_token", "num_experts_per_token"),
        expert_intermediate_size=_int(
            cfg, field, *(("intermediate_size",) if fixed else ("moe_intermediate_size", "intermediate_size"))
        ),
        expert_bias=fam == "gpt_oss",
    )
    if fam == "llama4":
        moe.update(num_shared_experts=1, layer_interval=_int(cfg, field, "interleave_moe_layer_step", default=1))
    elif fam == "jamba":  # MoE on layers offset, offset + period, ...: expressible when offset = period - 1
        period = _int(cfg, field, "expert_layer_period", default=2)
        offset = _int(cfg, field, "expert_layer_offset", default=1)
        if offset != period - 1:
            raise InputError(
                f"{field}.expert_layer_offset", f"only period - 1 ({period - 1}) is supported, got {offset}"
            )
        moe.update(layer_interval=period)
    elif not fixed:  # DeepSeek, Qwen-MoE, GLM, MiniMax, Step and any other: shared experts, dense layers first
        shared_width = _int(cfg, field, *_SHARED_WIDTH_KEYS, default=0)
        shared = _int(cfg, field, "n_shared_experts", "num_shared_experts", default=1 if shared_width else 0)
        first, interval = _moe_layers(cfg, field, n)
        moe.update(num_shared_experts=shared, first_dense_layers=first, layer_interval=interval)
        if shared and shared_width:
            moe.update(shared_intermediate_size=shared_width)
    if moe["experts_per_token"] > experts:
        raise InputError(f"{field}.num_experts_per_tok", f"must be at most the number of experts ({experts})")
    return moe


def _dense_width(cfg: dict, fam: str, hidden: int, field: str) -> int:
    if fam == "opt":
        return _int(cfg, field, "ffn_dim")
    if fam in _GPT2_WIDTH:
        return _int(cfg, field, "n_inner", "intermediate_size", default=4 * hidden)
    if fam == "chatglm":
        return _int(cfg, field, "ffn_hidden_size")
    if fam == "qwen_v1":  # QWenMLP: w1 and w2 are intermediate_size // 2 wide each (the gate and the up branch)
        _assume(cfg, "Qwen (1.0)'s intermediate_size counts both gated branches: each is half as wide.")
        return _int(cfg, field, "intermediate_size") // 2
    if fam == "falcon":
        return _int(cfg, field, "ffn_hidden_size", default=4 * hidden)
    if fam == "llama4":
        return _int(cfg, field, "intermediate_size_mlp", "intermediate_size")
    return _int(cfg, field, "dense_intermediate_size", "intermediate_size")


# The project's field -> the config.json keys it is read from (first present one named in an error).
_HF_KEYS = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "intermediate_size": ("intermediate_size_mlp", "ffn_dim", "n_inner", "ffn_hidden_size", "intermediate_size"),
    "sliding_window_tokens": ("sliding_window",),
    "attention_chunk_tokens": ("attention_chunk_size",),
    "max_context_tokens": ("max_position_embeddings", "n_positions", "seq_length"),
    "attention.num_heads": ("num_attention_heads", "n_head"),
    "attention.num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"),
    "attention.head_dim": ("head_dim", "kv_channels"),
    "attention.v_head_dim": ("v_head_dim",),
    "moe.num_experts": ("n_routed_experts", "num_local_experts", "num_experts"),
    "moe.experts_per_token": ("num_experts_per_tok", "experts_per_token"),
    "moe.expert_intermediate_size": ("moe_intermediate_size", "intermediate_size"),
}


def _as_pasted(exc: InputError, cfg: dict, field: str) -> InputError:
    """The checker's error on a project field, renamed to the config.json key the reader pasted."""
    keys = _HF_KEYS.get(exc.field.removeprefix(f"{field}."), ())
    key = next((k for k in keys if k in cfg), keys[0] if keys else None)
    return InputError(f"{field}.{key}", exc.message) if key else exc


_MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")
_STATE_DTYPE_KEYS = ("mamba_ssm_dtype", "mamba_ssm_cache_dtype")


def _assumptions(cfg: dict, raw: dict, fam: str, attention: dict, out: dict) -> None:
    """What the reading assumed beyond what it read, in the order a reader checks them."""
    if fam == GENERIC:
        mt = raw.get("model_type") or raw.get("architectures")
        _assume(
            cfg,
            f"model_type {mt!r} is not one this site knows: read from the standard decoder fields, "
            "with a gated (SwiGLU-style) FFN.",
        )
    if cfg is not raw:
        _assume(cfg, "The text decoder is read from text_config; a vision or audio tower is not counted.")
    stated = any(k in cfg for k in _HF_KEYS["attention.num_kv_heads"])
    if attention["kind"] == "mha" and attention["num_heads"] > 1 and fam != "falcon" and not stated:
        _assume(cfg, "No num_key_value_heads: multi-head attention assumed (Hugging Face's default).")
    if cfg.get("tie_word_embeddings") is None:
        tied = (
            "tied input and output embeddings (the family's default)"
            if fam in _TIED_BY_DEFAULT
            else "a separate output head"
        )
        _assume(cfg, f"No tie_word_embeddings: {tied} assumed.")
    if fam == GENERIC and set(out["layer_kinds"]) == {"sliding"}:
        _assume(cfg, f"No layer_types: sliding_window = {cfg.get('sliding_window')} read as a window on every layer.")
    if cfg.get("sliding_window") is not None and "sliding" not in out["layer_kinds"]:
        _assume(cfg, "sliding_window is off or covers the whole context: full attention on every layer.")
    mtp = next((k for k in _MTP_KEYS if cfg.get(k)), None)
    if mtp:
        _assume(cfg, f"{mtp} = {cfg.get(mtp)}: multi-token-prediction layers are not counted.")
    state = next((k for k in _STATE_DTYPE_KEYS if cfg.get(k)), None)
    if state and out["linear_mixer"] is not None:
        _assume(cfg, f"{state} = {cfg.get(state)!r}: pick that recurrent-state format in the calculators.")
    if cfg.get("quantization_config") is not None or raw.get("quantization_config") is not None:
        _assume(cfg, "quantization_config is not read: weights are sized at the format each calculator is given.")


def _note(cfg: dict) -> str:
    read = ", ".join(cfg.log)
    assumed = " ".join(cfg.assumed)
    return f"Read: {read}." + (f" Assumed: {assumed}" if assumed else "")


def model_from_hf_config(cfg: dict, id: str = "custom", name: str | None = None, field: str = "model") -> Model:
    """A checked Model from a Hugging Face config.json dict, exactly as published. A model_type this
    module does not list is read from the standard decoder fields; what they cannot size is refused,
    naming the key. The Model's notes say which keys were read and what was assumed."""
    if not isinstance(cfg, dict):
        raise InputError(field, "must be a config.json object")
    cfg = _Reads(cfg, {}, [])
    fam = _family(cfg, field)
    text = cfg.get("text_config")
    if isinstance(text, dict) and str(text.get("model_type", "")).lower() in FAMILIES:
        fam = FAMILIES[str(text["model_type"]).lower()]  # Kimi-K2.5 wraps a kimi_k2 (DeepSeek-V3) decoder
    try:
        return _read(cfg, fam, id, name, field)
    except InputError as exc:
        if fam != GENERIC or isinstance(exc, _Unsizable):
            raise
        raise InputError(
            exc.field,
            f"{exc.message} (model_type {cfg.get('model_type')!r} is not one this site "
            "knows, so only the standard decoder fields are read)",
        ) from None


def _layer_count(cfg: dict, field: str) -> int:
    """num_hidden_layers, bounded before any per-layer list is built (10^9 layers: a MemoryError in Pyodide)."""
    n = _int(cfg, field, "num_hidden_layers", "n_layer", "num_layers")
    if not 1 <= n <= _MAX_LAYERS:
        key = next(k for k in _HF_KEYS["num_layers"] if cfg.get(k) is not None)
        raise InputError(f"{field}.{key}", f"must be an integer between 1 and {_MAX_LAYERS:,}, got {n:,}")
    return n


def _dense_or_expert_width(cfg: dict, fam: str, hidden: int, field: str, moe: dict | None) -> int:
    """The dense FFN width; an all-MoE config may omit it (Qwen3.5-MoE), and then nothing uses it."""
    all_moe = moe is not None and moe.get("first_dense_layers", 0) == 0 and moe.get("layer_interval", 1) == 1
    if all_moe and cfg.get("intermediate_size") is None and cfg.get("dense_intermediate_size") is None:
        return moe["expert_intermediate_size"]
    return _dense_width(cfg, fam, hidden, field)


def _decoder(raw: _Reads, field: str) -> tuple[_Reads, str]:
    """The config the decoder is read from: text_config where there is one (Gemma 3, Llama 4, Qwen3.5,
    Kimi-K2.5), sharing the record of keys read and assumptions."""
    text = raw.get("text_config")
    if text is None:
        return raw, field
    if not isinstance(text, dict):
        raise InputError(f"{field}.text_config", "must be an object")
    return _Reads(text, raw.log, raw.assumed, "text_config."), f"{field}.text_config"


def _read(raw: _Reads, fam: str, id: str, name: str | None, field: str) -> Model:
    cfg, field = _decoder(raw, field)
    _refuse_unsizable(cfg, field)
    n = _layer_count(cfg, field)
    hidden = _int(cfg, field, "hidden_size", "n_embd", "d_model")
    default_vocab = 262208 if fam == "gemma3" else ...  # Gemma3TextConfig's default; published configs omit it
    kinds = _pattern_kinds(cfg, fam, n, field)
    window = cfg.get("sliding_window") if "sliding" in kinds else None
    attention = _attention(cfg, fam, hidden, field)
    moe = _moe(cfg, fam, field, n)
    out = dict(
        id=id,
        name=name or id,
        num_layers=n,
        hidden_size=hidden,
        vocab_size=_int(cfg, field, "vocab_size", "padded_vocab_size", default=default_vocab),
        intermediate_size=_dense_or_expert_width(cfg, fam, hidden, field, moe),
        attention=attention,
        layer_kinds=kinds,
        sliding_window_tokens=window,
        attention_chunk_tokens=cfg.get("attention_chunk_size") if "chunked" in kinds else None,
        moe=moe,
        linear_mixer=_linear_mixer(cfg, fam, hidden, field),
        ffn_in_mixer_layers=fam != "nemotron_h",
        ffn_kind="plain" if fam in _PLAIN_FFN else "gated",
        tie_embeddings=bool(cfg.get("tie_word_embeddings", fam in _TIED_BY_DEFAULT)),
        max_context_tokens=_int(cfg, field, *_HF_KEYS["max_context_tokens"], default=_DEFAULT_CONTEXT.get(fam)),
        architecture=(raw.get("architectures") or [""])[0],
        source="Hugging Face config.json",
    )
    _assumptions(cfg, raw, fam, attention, out)
    out["notes"] = _note(cfg)
    try:
        return model_from_dict(out, field)
    except InputError as exc:
        raise _as_pasted(exc, cfg, field) from None
