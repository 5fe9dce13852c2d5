"""KV-cache size: per token, per sequence, per batch, and in paged blocks.

Formulas (Kwon et al., PagedAttention, arXiv 2309.06180 §3; DeepSeek-V2, arXiv 2405.04434 §2.1 for MLA):
  MHA/GQA/MQA: 2 × H_kv × d_head × b per layer per token (K and V; d_v may differ from d_head)
  MLA:         (kv_lora_rank + qk_rope_head_dim) × b per layer per token
               (DeepSeek-V2 arXiv 2405.04434 Table 1; DeepSeek-V3 inference/model.py kv_cache + pe_cache)
  DeepSeek sparse attention (V3.2): the MLA latent plus one indexer key per layer per token,
               index_head_dim FP8 values and one FP32 scale per 128 (DeepSeek-V3.2-Exp inference/model.py
               Indexer.k_cache / k_scale_cache). With an FP8 cache the latent takes DeepSeek's
               "FP8 with scale" layout: 512 FP8 + 4 FP32 scales + 64 BF16 rope = 656 B (FlashMLA README).
  Linear-attention / SSM layers (Gated DeltaNet, Mamba) keep no KV: each holds a constant state per
               sequence, conv state (at the model dtype, BF16) plus recurrent state (at the state
               format), shapes as vLLM's MambaStateShapeCalculator (see model.LinearMixer).
  Sliding-window layers hold min(T, window) tokens, chunked-attention layers min(T, chunk)
  (Mistral 7B arXiv 2310.06825 rolling buffer; gpt-oss model.py; Gemma 2/3 reports; Llama 4 iRoPE).
"""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass, replace

from ..schema import dtype_field, integer, mark, model_field, output, series, step
from ..errors import InputError
from ..formats import bytes_per_element
from ..model import Attention, LinearMixer, Model
from ..units import GIB


@dataclass(frozen=True)
class LayerGroup:
    kind: str  # "full", "sliding" or "chunked"
    layers: int
    cap_tokens: int | None  # tokens a layer of this kind keeps; None = all of them


def kv_elements_per_token_per_layer(attention: Attention) -> int:
    if attention.kind == "mla":
        return attention.kv_lora_rank + attention.qk_rope_head_dim
    v_dim = attention.v_head_dim or attention.head_dim
    return attention.num_kv_heads * (attention.head_dim + v_dim)


FP8_SCALE_BLOCK = 128  # elements per FP32 scale in DeepSeek's FP8 latent and indexer-key layouts
SCALE_BYTES = 4


def _scaled_fp8_bytes(elements: int) -> int:
    return elements + SCALE_BYTES * math.ceil(elements / FP8_SCALE_BLOCK)


def kv_bytes_per_token_per_layer(attention: Attention, elem_bytes: float) -> float:
    """Bytes one token adds to one attention layer's cache in a format of `elem_bytes`."""
    a = attention
    if not a.index_head_dim:
        return kv_elements_per_token_per_layer(a) * elem_bytes
    if elem_bytes == 1:  # FP8: the latent is block-scaled, the rotary part stays BF16
        latent = _scaled_fp8_bytes(a.kv_lora_rank) + 2 * a.qk_rope_head_dim
    else:
        latent = (a.kv_lora_rank + a.qk_rope_head_dim) * elem_bytes
    return latent + _scaled_fp8_bytes(a.index_head_dim)


CONV_STATE_BYTES = 2  # conv state at the model dtype (vLLM --mamba-cache-dtype auto; BF16 checkpoints)


def state_elements_per_layer(m: LinearMixer) -> tuple[int, int]:
    """(conv state, recurrent state) elements one linear layer keeps per sequence."""
    history = m.conv_kernel - 1
    if m.kind == "gated_deltanet":
        conv = 2 * m.num_key_heads * m.key_head_dim + m.num_heads * m.value_head_dim
        return history * conv, m.num_heads * m.key_head_dim * m.value_head_dim
    if m.kind == "mamba2":
        conv = m.inner_size + 2 * m.n_groups * m.state_size
        return history * conv, m.num_heads * m.value_head_dim * m.state_size
    return history * m.inner_size, m.inner_size * m.state_size  # mamba1


def state_bytes_per_sequence(model: Model, state_bytes: float) -> float:
    """Constant bytes per sequence in all linear layers, whatever the context length."""
    if model.linear_mixer is None:
        return 0.0
    conv, recurrent = state_elements_per_layer(model.linear_mixer)
    return model.layer_kinds.count("linear") * (conv * CONV_STATE_BYTES + recurrent * state_bytes)


def kv_replication(model: Model, tensor_parallel: int) -> int:
    """How many TP ranks hold a copy of each KV head (MLA: one latent, so every rank)."""
    a = model.attention
    kv_heads = 1 if a.kind == "mla" else a.num_kv_heads
    return max(1, tensor_parallel // kv_heads)


def decode_context_parallel_allowed(model: Model, tensor_parallel: int, dcp: int) -> bool:
    """vLLM v0.33.0's rules: DCP divides TP (config/parallel.py) and is at most TP / H_kv, the replication
    it removes (context_parallel_deployment.md: "[1, tp_size/H]"); for GQA/MQA the query heads per KV
    head must divide by it too (config/model.py, verify_with_parallel_config)."""
    if dcp < 1 or tensor_parallel % dcp or dcp > kv_replication(model, tensor_parallel):
        return False
    a = model.attention
    return dcp == 1 or a.kind == "mla" or (a.num_heads // a.num_kv_heads) % dcp == 0


def check_decode_context_parallel(
    model: Model, tensor_parallel: int, dcp: int, field: str = "decode_context_parallel"
) -> None:
    if not decode_context_parallel_allowed(model, tensor_parallel, dcp):
        top = kv_replication(model, tensor_parallel)
        raise InputError(
            field,
            f"must divide the tensor-parallel size {tensor_parallel}, lie between 1 and {top} "
            f"(TP ÷ KV heads, the copies of each KV head it removes) and, for GQA, divide the "
            f"query heads per KV head",
        )


def kv_fraction_per_gpu(model: Model, tensor_parallel: int, decode_context_parallel: int = 1) -> float:
    """Share of each sequence's KV that one TP rank stores: its KV heads (at least one),
    divided over the DCP ranks that stripe the sequence by token."""
    check_decode_context_parallel(model, tensor_parallel, decode_context_parallel)
    a = model.attention
    heads = 1.0 if a.kind == "mla" else math.ceil(a.num_kv_heads / tensor_parallel) / a.num_kv_heads
    return heads / decode_context_parallel


def state_fraction_per_gpu(model: Model, tensor_parallel: int) -> float:
    """Share of a sequence's linear-layer state on one TP rank: the mixer's heads (or Mamba-1
    channels) split over ranks, at least one each (vLLM divides them by the TP size); DCP does not
    stripe a state, which has no token axis."""
    m = model.linear_mixer
    if m is None:
        return 0.0
    units = m.inner_size if m.kind == "mamba1" else m.num_heads
    return math.ceil(units / tensor_parallel) / units


def layer_groups(model: Model, storing: bool = False) -> list[LayerGroup]:
    """Attention layers by kind; storing=True leaves out layers that read another layer's KV."""
    caps = {"full": None, "sliding": model.sliding_window_tokens, "chunked": model.attention_chunk_tokens}
    kinds = model.layer_kinds[: model.num_layers - model.kv_shared_layers] if storing else model.layer_kinds
    return [
        LayerGroup(kind, kinds.count(kind), caps[kind]) for kind in ("full", "sliding", "chunked") if kinds.count(kind)
    ]


def tokens_held(cap_tokens: int | None, context_tokens: float) -> float:
    return context_tokens if cap_tokens is None else min(context_tokens, cap_tokens)


def kv_terms(model: Model, elem_bytes: float) -> list[tuple[str, float, int | None]]:
    """(kind, bytes per held token over that kind's layers, cap) per layer kind."""
    per_layer_token = kv_bytes_per_token_per_layer(model.attention, elem_bytes)
    return [(g.kind, g.layers * per_layer_token, g.cap_tokens) for g in layer_groups(model, storing=True)]


def kv_read_terms(model: Model, elem_bytes: float) -> list[tuple[float, int | None]]:
    """(bytes a decode step reads per token over that kind's layers, cap) per layer kind: kv_terms, except that a
    DeepSeek-sparse-attention model's full layers read every token's indexer key but only the index_topk selected
    tokens' latents."""
    a = model.attention
    if not a.index_topk:
        return [(per_token, cap) for _, per_token, cap in kv_terms(model, elem_bytes)]
    per_layer_token = kv_bytes_per_token_per_layer(a, elem_bytes)
    latent = kv_bytes_per_token_per_layer(replace(a, index_head_dim=0, index_n_heads=0, index_topk=0), elem_bytes)
    terms = []
    for g in layer_groups(model, storing=True):
        if g.cap_tokens is None:
            terms += [(g.layers * latent, a.index_topk), (g.layers * _scaled_fp8_bytes(a.index_head_dim), None)]
        else:
            terms.append((g.layers * per_layer_token, g.cap_tokens))
    return terms


@lru_cache(maxsize=256)  # per model: pool_tokens_held asks once per request of a workload
def windowed_layers(model: Model) -> tuple[int, tuple[tuple[int, int], ...]] | None:
    """(full-attention layers, ((layers, window in tokens) per windowed kind)) of a model that mixes
    full-attention layers with windowed ones (sliding or chunked local attention), else None. An engine's paged
    pool keeps only the last window of the latter for each sequence (engine/pool.py), so a sequence holds less
    than its length at every layer; a model whose every layer is windowed is counted at every token."""
    groups = layer_groups(model, storing=True)
    full = sum(g.layers for g in groups if g.cap_tokens is None)
    windowed = tuple((g.layers, g.cap_tokens) for g in groups if g.cap_tokens is not None)
    return (full, windowed) if full and windowed else None


def pool_tokens_held(model: Model, tokens: float, state_tokens: float = 0.0) -> float:
    """Tokens of the KV pool, counted at every storing layer's KV per token (as kv_pool_tokens and the engines'
    logs count them), that one sequence of `tokens` tokens holds: its windowed layers keep only their window, and
    a hybrid model's linear-layer state adds `state_tokens` (state_pool_tokens) whatever the length."""
    w = windowed_layers(model)
    if w is None:
        return tokens + state_tokens
    full, windowed = w
    held = math.fsum(n * min(tokens, cap) for n, cap in windowed)  # fsum: CPython 3.11 and 3.12+ agree
    return (full * tokens + held) / (full + sum(n for n, _ in windowed)) + state_tokens


def state_pool_tokens(
    model: Model, kv_elem_bytes: float, state_elem_bytes: float, tensor_parallel: int, dcp: int = 1
) -> float:
    """A hybrid model's linear-layer state per sequence as tokens of its KV pool (kv_pool_tokens' unit: one token's
    KV at every storing attention layer, on one rank): the state per GPU ÷ that token's KV per GPU, as
    memory.budget splits them (0 without linear layers)."""
    if model.linear_mixer is None:
        return 0.0
    state = state_bytes_per_sequence(model, state_elem_bytes) * state_fraction_per_gpu(model, tensor_parallel)
    token = kv_bytes_per_token_all_layers(model, kv_elem_bytes) * kv_fraction_per_gpu(model, tensor_parallel, dcp)
    return state / token


def kv_bytes_by_kind(model: Model, context_tokens: float, elem_bytes: float, state_bytes: float = 2.0) -> dict:
    """Bytes one sequence of `context_tokens` holds, per layer kind ("linear": the constant state)."""
    out = {kind: per_token * tokens_held(cap, context_tokens) for kind, per_token, cap in kv_terms(model, elem_bytes)}
    if model.linear_mixer is not None:
        out["linear"] = state_bytes_per_sequence(model, state_bytes)
    return out


def kv_bytes_per_sequence(model: Model, context_tokens: float, elem_bytes: float, state_bytes: float = 2.0) -> float:
    """KV plus any linear-layer state (state_bytes: the recurrent state's format, BF16 by default)."""
    return sum(kv_bytes_by_kind(model, context_tokens, elem_bytes, state_bytes).values())


def kv_bytes_per_token(model: Model, elem_bytes: float) -> float:
    """One more token once the context exceeds every window: full-attention layers only."""
    full = sum(g.layers for g in layer_groups(model, storing=True) if g.cap_tokens is None)
    return full * kv_bytes_per_token_per_layer(model.attention, elem_bytes)


def kv_bytes_per_token_all_layers(model: Model, elem_bytes: float) -> float:
    """A token stored in every attention layer: the unit paged allocators count in."""
    attention_layers = sum(g.layers for g in layer_groups(model, storing=True))
    return attention_layers * kv_bytes_per_token_per_layer(model.attention, elem_bytes)


def paged_blocks(
    model: Model, context_tokens: int, elem_bytes: float, block_tokens: int, state_bytes: float = 2.0
) -> dict:
    """Blocks of `block_tokens` per layer kind (vLLM PagedAttention, arXiv 2309.06180 §4); linear
    layers' states are whole per sequence and add no fragmentation here."""
    per_layer_token = kv_bytes_per_token_per_layer(model.attention, elem_bytes)
    allocated = state_bytes_per_sequence(model, state_bytes)
    for g in layer_groups(model, storing=True):
        blocks = math.ceil(tokens_held(g.cap_tokens, context_tokens) / block_tokens)
        allocated += blocks * block_tokens * g.layers * per_layer_token
    exact = kv_bytes_per_sequence(model, context_tokens, elem_bytes, state_bytes)
    return {
        "block_bytes": block_tokens * kv_bytes_per_token_all_layers(model, elem_bytes),
        "blocks_per_sequence": math.ceil(context_tokens / block_tokens),
        "allocated_bytes": allocated,
        "fragmentation_bytes": allocated - exact,
        "fragmentation_fraction": (allocated - exact) / allocated if allocated else 0.0,
    }


# ---- the calculator ------------------------------------------------------------------

STATE_DTYPES = (("fp32", "FP32"), ("bf16", "BF16"), ("fp16", "FP16"))


def state_dtype_field():
    return dtype_field(
        "state_dtype",
        "Recurrent-state format (hybrid models)",
        "bf16",
        choices=STATE_DTYPES,
        help="Format of the Gated DeltaNet / Mamba recurrent state (vLLM --mamba-ssm-cache-dtype; "
        "'auto' follows the model dtype unless the model's config sets one). The conv state "
        "stays at BF16. No effect on models without linear layers.",
    )


SCHEMA = {
    "name": "kv_cache",
    "title": "KV-cache size",
    "description": (
        "Bytes of key/value cache per token, per sequence and per batch, by layer kind "
        "(full, sliding-window, chunked), and the paged-block view with its internal "
        "fragmentation. Sizes are in bytes (GiB = 2^30 B, GB = 10^9 B)."
    ),
    "inputs": [
        model_field(),
        integer(
            "context_tokens",
            "Context length",
            8192,
            1,
            10_000_000,
            "tokens",
            "Prompt plus generated tokens held for one sequence.",
        ),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        integer("batch_size", "Concurrent sequences", 1, 1, 100_000, "sequences"),
        integer(
            "block_size_tokens",
            "Block size",
            16,
            1,
            4096,
            "tokens",
            "Tokens per paged block. vLLM v0.33.0 keeps 16 where the attention backend accepts it, else the backend's "
            "smallest size (FlashMLA 64, FlashInfer-MLA 32, CUTLASS MLA 128; see Part 5).",
        ),
        state_dtype_field(),
    ],
    "outputs": [
        output("kv_bytes_per_token", "KV per additional token (full-attention layers)", "B", "bytes"),
        output("kv_bytes_per_token_all_layers", "KV per token if every layer kept it", "B", "bytes"),
        output("kv_bytes_per_sequence", "KV per sequence", "B", "bytes"),
        output("kv_bytes_full_layers", "of which full-attention layers", "B", "bytes"),
        output(
            "kv_bytes_sliding_layers",
            "of which sliding-window layers",
            "B",
            "bytes",
            words={0: "none"},
        ),
        output(
            "kv_bytes_chunked_layers",
            "of which chunked-attention layers",
            "B",
            "bytes",
            words={0: "none"},
        ),
        output(
            "state_bytes_per_sequence",
            "of which linear-attention / SSM state (constant)",
            "B",
            "bytes",
            words={0: "none"},
        ),
        output("kv_bytes_batch", "KV for the whole batch", "B", "bytes"),
        output("kv_gib_batch", "KV for the whole batch, in GiB (2^30 B)", "GiB", "number", shown=False),
        output("block_bytes", "Bytes per block (all layers)", "B", "bytes"),
        output("blocks_per_sequence", "Blocks per sequence", "blocks", "integer"),
        output("fragmentation_bytes_per_sequence", "Internal fragmentation per sequence", "B", "bytes"),
        output("fragmentation_fraction", "Internal fragmentation", "", "percent"),
    ],
}


def _context_grid(context: int, model: Model) -> list[int]:
    top = max(context, model.max_context_tokens or 131_072)
    grid = [2**k for k in range(10, 25) if 2**k <= top] + [context]
    return sorted(set(grid))


def _series(model, context, elem_bytes, batch, state_b):
    xs = _context_grid(context, model)
    batches = sorted({1, 8, 64, batch})
    ys = [
        (f"batch {b}", "GiB", [b * kv_bytes_per_sequence(model, x, elem_bytes, state_b) / GIB for x in xs])
        for b in batches
    ]
    plot = series("KV cache vs context length", "Context length", "tokens", xs, ys)
    return {"kv_vs_context": mark(plot, "context_tokens", context, on=f"batch {batch}")}


def _state_step(model, state_b):
    conv, recurrent = state_elements_per_layer(model.linear_mixer)
    n = model.layer_kinds.count("linear")
    # bytes per element (b_state) as a plain factor: bytes' own format would round 0.5 B to "0 B"
    return step(
        "State per sequence (linear layers)",
        "L_linear × (conv × 2 + recurrent × b_state)",
        "{} × ({} × 2 + {} × {})",
        [n, conv, recurrent, state_b],
        state_bytes_per_sequence(model, state_b),
        "B",
    )


def _blocks(elements: int) -> int:
    """FP32 scales in DeepSeek's block-scaled FP8 layouts: one per FP8_SCALE_BLOCK elements."""
    return math.ceil(elements / FP8_SCALE_BLOCK)


def _per_layer_step(a: Attention, elem_bytes: float) -> dict:
    """Bytes one token adds to one layer, by attention kind; b (bytes per element) is a plain factor."""
    if a.index_head_dim and elem_bytes == 1:
        formula = "r_kv + 4⌈r_kv/128⌉ + 2 d_rope + d_index + 4⌈d_index/128⌉"
        template = "{} + 4 × {} + 2 × {} + {} + 4 × {}"
        terms = [
            a.kv_lora_rank,
            _blocks(a.kv_lora_rank),
            a.qk_rope_head_dim,
            a.index_head_dim,
            _blocks(a.index_head_dim),
        ]
    elif a.index_head_dim:
        formula, template = "(r_kv + d_rope) × b + d_index + 4⌈d_index/128⌉", "({} + {}) × {} + {} + 4 × {}"
        terms = [a.kv_lora_rank, a.qk_rope_head_dim, elem_bytes, a.index_head_dim, _blocks(a.index_head_dim)]
    elif a.kind == "mla":
        formula, template = "(r_kv + d_rope) × b", "({} + {}) × {}"
        terms = [a.kv_lora_rank, a.qk_rope_head_dim, elem_bytes]
    else:
        formula, template = "H_kv × (d_head + d_v) × b", "{} × ({} + {}) × {}"
        terms = [a.num_kv_heads, a.head_dim, a.v_head_dim or a.head_dim, elem_bytes]
    return step("Bytes per layer per token", formula, template, terms, kv_bytes_per_token_per_layer(a, elem_bytes), "B")


def _sequence_step(groups: list[LayerGroup], per_layer: float, context: int, state: list[dict], per_seq) -> dict:
    """Bytes per sequence: each layer kind holds T tokens, or min(T, its window); formula and template
    are written from the same groups, so they always match."""
    formula = " + ".join(f"{g.layers} × min(T, {g.cap_tokens})" if g.cap_tokens else f"{g.layers} × T" for g in groups)
    template = " + ".join("{} × min({}, {})" if g.cap_tokens else "{} × {}" for g in groups)
    terms = [t for g in groups for t in ((g.layers, context, g.cap_tokens) if g.cap_tokens else (g.layers, context))]
    formula_tail, template_tail = (" + state", " + {}") if state else ("", "")
    return step(
        "Bytes per sequence",
        f"bytes per layer per token × ({formula}){formula_tail}",
        f"{{}} × ({template}){template_tail}",
        [(per_layer, "B")] + terms + [(s["value"], "B") for s in state],
        per_seq,
        "B",
    )


def _derivation(model, v, elem_bytes, per_token, per_seq, state_b):
    per_layer = _per_layer_step(model.attention, elem_bytes)
    groups = layer_groups(model, storing=True)
    state = [_state_step(model, state_b)] if model.linear_mixer else []
    return state + [
        per_layer,
        step(
            "Bytes per additional token (full layers)",
            "L_full × bytes per layer per token",
            "{} × {}",
            [sum(g.layers for g in groups if not g.cap_tokens), (per_layer["value"], "B")],
            per_token,
            "B",
        ),
        _sequence_step(groups, per_layer["value"], v["context_tokens"], state, per_seq),
        step(
            "Batch",
            "B × bytes per sequence",
            "{} × {}",
            [v["batch_size"], (per_seq, "B")],
            v["batch_size"] * per_seq,
            "B",
        ),
    ]


def compute(v: dict) -> dict:
    model, context, batch = v["model"], v["context_tokens"], v["batch_size"]
    elem_bytes = bytes_per_element(v["kv_dtype"], "kv_dtype")
    state_b = bytes_per_element(v["state_dtype"], "state_dtype")
    by_kind = kv_bytes_by_kind(model, context, elem_bytes, state_b)
    per_seq = sum(by_kind.values())
    per_token = kv_bytes_per_token(model, elem_bytes)
    paged = paged_blocks(model, context, elem_bytes, v["block_size_tokens"], state_b)
    notes = []
    if model.max_context_tokens and context > model.max_context_tokens:
        notes.append(f"context exceeds the model's maximum of {model.max_context_tokens:,} tokens")
    return {
        "kv_bytes_per_token": per_token,
        "kv_bytes_per_token_all_layers": kv_bytes_per_token_all_layers(model, elem_bytes),
        "kv_bytes_per_sequence": per_seq,
        "kv_bytes_full_layers": by_kind.get("full", 0.0),
        "kv_bytes_sliding_layers": by_kind.get("sliding", 0.0),
        "kv_bytes_chunked_layers": by_kind.get("chunked", 0.0),
        "state_bytes_per_sequence": by_kind.get("linear", 0.0),
        "kv_bytes_batch": batch * per_seq,
        "kv_gib_batch": batch * per_seq / GIB,
        "block_bytes": paged["block_bytes"],
        "blocks_per_sequence": paged["blocks_per_sequence"],
        "fragmentation_bytes_per_sequence": paged["fragmentation_bytes"],
        "fragmentation_fraction": paged["fragmentation_fraction"],
        "derivation": _derivation(model, v, elem_bytes, per_token, per_seq, state_b),
        "series": _series(model, context, elem_bytes, batch, state_b),
        "notes": notes,
    }
