"""Turn a dict in the project's JSON shape into a checked record: Model, Accelerator and their parts.

Every number is checked here, and every error names the field (dotted: ``model.attention.num_heads``)
and the allowed range, so the data files, a reader's own definitions and an imported Hugging Face
config are all held to the same rules, and calculators can trust what they get.
"""

from __future__ import annotations

import math
from dataclasses import fields

from .errors import InputError
from .model import (
    ATTENTION_KINDS,
    FFN_KINDS,
    LAYER_KINDS,
    LINEAR_MIXER_KINDS,
    PCIE_LINKS,
    SCALE_UP_TOPOLOGIES,
    Accelerator,
    Attention,
    LinearMixer,
    Model,
    MoE,
)

FLOPS_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp6", "fp4", "int4")
_BIG = 10**15


def _plain(x: float) -> str:
    """A range end as the site prints numbers: 1,000,000,000 (not 1e+09); 0.5 as it is."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def _num(
    d: dict, key: str, field: str, lo: float, hi: float, integer: bool = True, default=..., allow_none: bool = False
):
    """One checked number from d[key]; the error names field.key and the range."""
    value = d.get(key, default)
    name = f"{field}.{key}"
    if value is ...:
        raise InputError(name, "is required")
    if value is None and (allow_none or default is None):
        return None
    kind = "an integer" if integer else "a number"
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and integer and isinstance(value, float):
        ok = math.isfinite(value) and value.is_integer()
        value = int(value) if ok else value
    if not ok or not math.isfinite(value) or not lo <= value <= hi:
        raise InputError(name, f"must be {kind} between {_plain(lo)} and {_plain(hi)}, got {value!r}")
    return value


def flag(d: dict, key: str, field: str, default: bool) -> bool:
    """A checked true/false from d[key]; the error names field.key."""
    value = d.get(key, default)
    if not isinstance(value, bool):
        raise InputError(f"{field}.{key}", f"must be true or false, got {value!r}")
    return value


def _text(d: dict, key: str, field: str, default: str = "", choices=None) -> str:
    value = d.get(key, default)
    if not isinstance(value, str) or (choices and value not in choices):
        allowed = f"one of {', '.join(choices)}" if choices else "a string"
        raise InputError(f"{field}.{key}", f"must be {allowed}, got {value!r}")
    return value


def _no_unknown(d: dict, cls, field: str, extra: tuple = ()) -> None:
    known = {f.name for f in fields(cls)} | set(extra)
    for key in d:
        if key not in known:
            raise InputError(f"{field}.{key}", f"unknown field; allowed: {', '.join(sorted(known))}")


def attention_from_dict(d: dict, field: str) -> Attention:
    if not isinstance(d, dict):
        raise InputError(field, "must be an object with kind, num_heads, num_kv_heads, head_dim")
    _no_unknown(d, Attention, field)
    kind = _text(d, "kind", field, choices=ATTENTION_KINDS)
    heads = _num(d, "num_heads", field, 1, 4096)
    kv = _num(d, "num_kv_heads", field, 1, heads, default=heads if kind in ("mha", "mla") else ...)
    if kind != "mla" and heads % kv:
        raise InputError(f"{field}.num_kv_heads", f"must divide num_heads ({heads}), got {kv}")
    if (kind == "mha" and kv != heads) or (kind == "mqa" and kv != 1):
        want = heads if kind == "mha" else 1
        raise InputError(f"{field}.num_kv_heads", f"must be {want} for {kind} attention, got {kv}")
    a = Attention(
        kind=kind,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=_num(d, "head_dim", field, 1, 4096),
        v_head_dim=_num(d, "v_head_dim", field, 1, 4096, default=None),
        kv_lora_rank=_num(d, "kv_lora_rank", field, 0, 65536, default=0),
        qk_rope_head_dim=_num(d, "qk_rope_head_dim", field, 0, 4096, default=0),
        qk_nope_head_dim=_num(d, "qk_nope_head_dim", field, 0, 4096, default=0),
        q_lora_rank=_num(d, "q_lora_rank", field, 0, 65536, default=0),
        output_gate=flag(d, "output_gate", field, False),
        index_head_dim=_num(d, "index_head_dim", field, 0, 4096, default=0),
        index_n_heads=_num(d, "index_n_heads", field, 0, 4096, default=0),
        index_topk=_num(d, "index_topk", field, 0, 10_000_000, default=0),
        qkv_bias=flag(d, "qkv_bias", field, False),
        o_bias=flag(d, "o_bias", field, False),
        sinks=flag(d, "sinks", field, False),
        qk_norm_over_heads=flag(d, "qk_norm_over_heads", field, False),
    )
    if kind == "mla" and not (a.kv_lora_rank and a.qk_rope_head_dim):
        raise InputError(f"{field}.kv_lora_rank", "must be above 0 for MLA, as must qk_rope_head_dim")
    _check_indexer(a, field)
    return a


def _check_indexer(a: Attention, field: str) -> None:
    """A DeepSeek-sparse-attention indexer needs MLA with compressed queries, its heads and its top-k."""
    if a.index_head_dim and (a.kind != "mla" or not a.index_n_heads or not a.q_lora_rank):
        raise InputError(
            f"{field}.index_head_dim",
            "a sparse-attention indexer needs MLA attention with q_lora_rank and index_n_heads above 0",
        )
    if a.index_head_dim and not a.index_topk:
        raise InputError(
            f"{field}.index_topk",
            "a sparse-attention indexer needs index_topk, the tokens each query attends (2,048 on DeepSeek-V3.2)",
        )


def moe_from_dict(d: dict, field: str, num_layers: int) -> MoE:
    if not isinstance(d, dict):
        raise InputError(field, "must be an object with num_experts, experts_per_token, expert_intermediate_size")
    _no_unknown(d, MoE, field)
    experts = _num(d, "num_experts", field, 1, 100_000)
    return MoE(
        num_experts=experts,
        experts_per_token=_num(d, "experts_per_token", field, 1, experts),
        expert_intermediate_size=_num(d, "expert_intermediate_size", field, 1, 1_000_000),
        num_shared_experts=_num(d, "num_shared_experts", field, 0, 1024, default=0),
        shared_intermediate_size=_num(d, "shared_intermediate_size", field, 0, 1_000_000, default=0),
        first_dense_layers=_num(d, "first_dense_layers", field, 0, num_layers - 1, default=0),
        layer_interval=_num(d, "layer_interval", field, 1, num_layers, default=1),
        expert_bias=flag(d, "expert_bias", field, False),
    )


_MIXER_NEEDS = {
    "gated_deltanet": ("num_heads", "num_key_heads", "key_head_dim", "value_head_dim"),
    "mamba2": ("num_heads", "value_head_dim", "inner_size", "state_size"),
    "mamba1": ("inner_size", "state_size", "dt_rank"),
}


def linear_mixer_from_dict(d: dict, field: str) -> LinearMixer:
    if not isinstance(d, dict):
        raise InputError(field, "must be an object with kind (" + ", ".join(LINEAR_MIXER_KINDS) + ") and its sizes")
    _no_unknown(d, LinearMixer, field)
    kind = _text(d, "kind", field, choices=LINEAR_MIXER_KINDS)
    sizes = {
        k: _num(d, k, field, 0, 1_000_000, default=0)
        for k in ("num_heads", "num_key_heads", "key_head_dim", "value_head_dim", "inner_size", "state_size", "dt_rank")
    }
    for key in _MIXER_NEEDS[kind]:
        if not sizes[key]:
            raise InputError(f"{field}.{key}", f"must be above 0 for a {kind} mixer")
    return LinearMixer(
        kind=kind,
        conv_kernel=_num(d, "conv_kernel", field, 1, 64, default=4),
        n_groups=_num(d, "n_groups", field, 1, 4096, default=1),
        conv_bias=flag(d, "conv_bias", field, False),
        **sizes,
    )


def _layer_kinds(d: dict, field: str, n: int) -> tuple[str, ...]:
    """layer_kinds as given, or layer_pattern repeated, or all full."""
    kinds, pattern = d.get("layer_kinds"), d.get("layer_pattern")
    key = "layer_kinds" if kinds is not None else "layer_pattern"
    seq = kinds if kinds is not None else (pattern or ["full"])
    if not isinstance(seq, (list, tuple)) or not seq or any(k not in LAYER_KINDS for k in seq):
        raise InputError(f"{field}.{key}", f"must be a list of {', '.join(LAYER_KINDS)}")
    if kinds is not None and len(kinds) != n:
        raise InputError(f"{field}.layer_kinds", f"must have num_layers ({n}) entries, got {len(kinds)}")
    return tuple(seq[i % len(seq)] for i in range(n))


def _reuses_earlier(kinds: tuple[str, ...], shared: int) -> bool:
    """Every attention kind among the last `shared` layers also appears among the layers that store KV."""
    storing = set(kinds[: len(kinds) - shared])
    return all(k in storing for k in kinds[len(kinds) - shared :] if k not in ("linear", "mlp"))


def _hybrid_layout(d: dict, kinds: tuple[str, ...], field: str) -> tuple[bool, int]:
    """Check linear, mlp-only and KV-sharing layers; (FFN only in mlp layers, kv_shared_layers)."""
    n = len(kinds)
    if ("linear" in kinds) != (d.get("linear_mixer") is not None):
        raise InputError(f"{field}.linear_mixer", "is required when a layer is linear, and only then")
    split_ffn = not flag(d, "ffn_in_mixer_layers", field, True)
    if ("mlp" in kinds) != split_ffn:
        raise InputError(f"{field}.ffn_in_mixer_layers", "must be false exactly when some layers are mlp-only")
    if split_ffn and d.get("moe") is not None:
        raise InputError(f"{field}.moe", "is not supported with separate mlp layers")
    shared = _num(d, "kv_shared_layers", field, 0, n - 1, default=0)
    if not _reuses_earlier(kinds, shared):
        raise InputError(f"{field}.kv_shared_layers", "each sharing layer needs an earlier layer of its kind to read")
    if all(k in ("linear", "mlp") for k in kinds):
        raise InputError(f"{field}.layer_kinds", "needs at least one attention layer (full, sliding or chunked)")
    return split_ffn, shared


def model_from_dict(d: dict, field: str = "model") -> Model:
    """A Model from the project's JSON shape; every number checked."""
    _no_unknown(d, Model, field, extra=("layer_pattern",))
    n = _num(d, "num_layers", field, 1, 1000)
    kinds = _layer_kinds(d, field, n)
    window = _num(d, "sliding_window_tokens", field, 1, 10**9, default=None)
    chunk = _num(d, "attention_chunk_tokens", field, 1, 10**9, default=None)
    if "sliding" in kinds and window is None:
        raise InputError(f"{field}.sliding_window_tokens", "is required when a layer is sliding")
    if "chunked" in kinds and chunk is None:
        raise InputError(f"{field}.attention_chunk_tokens", "is required when a layer is chunked")
    moe, mixer = d.get("moe"), d.get("linear_mixer")
    split_ffn, shared = _hybrid_layout(d, kinds, field)
    return Model(
        id=_text(d, "id", field, "custom"),
        name=_text(d, "name", field, d.get("id", "custom")),
        num_layers=n,
        hidden_size=_num(d, "hidden_size", field, 1, 1_000_000),
        vocab_size=_num(d, "vocab_size", field, 1, 10_000_000),
        intermediate_size=_num(d, "intermediate_size", field, 1, 10_000_000),
        attention=attention_from_dict(d.get("attention"), f"{field}.attention"),
        layer_kinds=kinds,
        sliding_window_tokens=window,
        attention_chunk_tokens=chunk,
        moe=None if moe is None else moe_from_dict(moe, f"{field}.moe", n),
        linear_mixer=None if mixer is None else linear_mixer_from_dict(mixer, f"{field}.linear_mixer"),
        kv_shared_layers=shared,
        ffn_in_mixer_layers=not split_ffn,
        ffn_kind=_text(d, "ffn_kind", field, "gated", FFN_KINDS),
        tie_embeddings=flag(d, "tie_embeddings", field, False),
        max_context_tokens=_num(d, "max_context_tokens", field, 1, 10**9, default=None),
        architecture=_text(d, "architecture", field),
        official_total_params=_num(d, "official_total_params", field, 1, 1e14, False, None),
        official_active_params=_num(d, "official_active_params", field, 1, 1e14, False, None),
        source=_text(d, "source", field),
        as_of=_text(d, "as_of", field),
        notes=_text(d, "notes", field),
    )


def _flops(value, field: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(field, 'must be an object like {"bf16": 989e12}')
    out = {}
    for key in value:
        if key not in FLOPS_KEYS:
            raise InputError(f"{field}.{key}", f"unknown precision; allowed: {', '.join(FLOPS_KEYS)}")
        out[key] = float(_num(value, key, field, 1e6, 1e19, integer=False))
    return out


def _achievable(d: dict, field: str) -> dict:
    """The measured achievable matmul rates: each for a format the chip lists a dense peak for, at most that peak."""
    name = f"{field}.achievable_matmul_flops_per_s"
    measured = _flops(d.get("achievable_matmul_flops_per_s", {}), name)
    peaks = d.get("dense_flops_per_s", {})
    for key, rate in measured.items():
        if not isinstance(peaks, dict) or key not in peaks:
            raise InputError(f"{name}.{key}", f"the chip lists no dense peak for {key} to measure against")
        if rate > float(peaks[key]):
            raise InputError(
                f"{name}.{key}", f"must be at most the dense peak for {key}, {float(peaks[key]):.4g} FLOP/s"
            )
    return measured


def accelerator_from_dict(d: dict, field: str = "hardware") -> Accelerator:
    """An Accelerator from JSON; every number checked (FLOP/s dense, per chip)."""
    _no_unknown(d, Accelerator, field)
    opt = dict(integer=False, default=None)
    total = _num(d, "scale_up_bandwidth_bytes_per_s", field, 1e6, 1e16, **opt)
    link = _num(d, "scale_up_link_bandwidth_bytes_per_s", field, 1e6, total or 1e16, **opt)
    return Accelerator(
        id=_text(d, "id", field, "custom"),
        name=_text(d, "name", field, d.get("id", "custom")),
        vendor=_text(d, "vendor", field, ""),
        memory_bytes=_num(d, "memory_bytes", field, 1, _BIG),
        memory_bandwidth_bytes_per_s=float(_num(d, "memory_bandwidth_bytes_per_s", field, 1e6, 1e17, False)),
        dense_flops_per_s=_flops(d.get("dense_flops_per_s", {}), f"{field}.dense_flops_per_s"),
        achievable_matmul_flops_per_s=_achievable(d, field),
        scale_up_bandwidth_bytes_per_s=total,
        scale_up_domain=_num(d, "scale_up_domain", field, 1, 1_000_000, default=None),
        scale_up_topology=(
            _text(d, "scale_up_topology", field)  # "" (not stated) or one of the kinds
            and _text(d, "scale_up_topology", field, "", SCALE_UP_TOPOLOGIES)
        ),
        scale_up_link_bandwidth_bytes_per_s=link,
        pcie_link=_text(d, "pcie_link", field) and _text(d, "pcie_link", field, "", PCIE_LINKS),
        power_watts=_num(d, "power_watts", field, 1, 1e6, **opt),
        shared_memory_per_sm_bytes=_num(d, "shared_memory_per_sm_bytes", field, 1024, 1 << 30, default=None),
        price_usd_per_hour=_num(d, "price_usd_per_hour", field, 0, 1e5, **opt),
        price_as_of=_text(d, "price_as_of", field),
        price_source=_text(d, "price_source", field),
        source=_text(d, "source", field),
        as_of=_text(d, "as_of", field),
        notes=_text(d, "notes", field),
        memory_note=_text(d, "memory_note", field),
        url=_text(d, "url", field),
    )
