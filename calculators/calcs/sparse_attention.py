"""Sparse attention and KV eviction: the KV each method keeps and the attention work it saves, against full
attention, for one sequence of T tokens of the reader's model.

Per attention layer with KV (full-attention layers; windowed layers keep their window whatever the method):
  full          keeps T tokens; a decode step reads T of them, FLOPs 2 × H × (d_qk + d_v) × T
  StreamingLLM  keeps s attention-sink tokens + a window of w recent ones (Xiao et al., arXiv 2309.17453 §3.2):
                min(T, s + w) kept and read; prefill attends over the same rolling cache
  H2O / SnapKV  keep a budget of B tokens per layer (Zhang et al., arXiv 2306.14048 §4: heavy hitters plus
                recent; Li et al., arXiv 2404.14469 §4: clustered votes from an observation window after
                prefill): min(T, B) kept and read in decode; prefill is full (the selection needs it)
  DSA           (DeepSeek-V3.2-Exp report §1 and §3; inference/model.py Indexer) keeps every token's latent
                plus one indexer key per token (d_I FP8 values and an FP32 scale per 128). Each query scores
                every earlier token with H_I indexer heads (2 × H_I × d_I FLOPs per key, in FP8) and attends
                over the top k = 2,048: a decode step reads T indexer keys and min(T, k) latents.
Bytes per token per layer are kv_cache's (a DSA model's latent without its indexer key for the other
methods). Linear-layer state (hybrid models) is left out: every method keeps it.
"""

from __future__ import annotations

from dataclasses import replace

from ..formats import bytes_per_element
from ..schema import dtype_field, integer, mark, model_field, output, series, step
from .kv_cache import _scaled_fp8_bytes, kv_bytes_per_token_per_layer, layer_groups
from .steptime import _causal_keys, attention_terms
from ..units import GIB

GRID = [4096 * 2**k for k in range(9)]
METHODS = ("full", "streaming", "budget", "dsa")
NAMES = {
    "full": "full attention",
    "streaming": "StreamingLLM (sinks + window)",
    "budget": "H2O / SnapKV budget",
    "dsa": "DeepSeek sparse attention (top-k)",
}

SCHEMA = {
    "name": "sparse_attention",
    "title": "Sparse attention and KV eviction: what each keeps and saves",
    "description": (
        "For one sequence on your model: the KV kept, the bytes a decode step reads and the attention FLOPs of "
        "a decode step and of the prefill, under full attention, StreamingLLM (attention sinks plus a recent "
        "window), a fixed per-layer budget (H2O, SnapKV) and DeepSeek sparse attention (a lightning indexer "
        "over every token, then attention over the top k). Work and bytes only: what each costs in quality is "
        "measured, not modelled (see Part 15)."
    ),
    "inputs": [
        model_field(default="deepseek-v3.2"),
        integer("context_tokens", "Context length T", 131_072, 1, 10_000_000, "tokens"),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        integer(
            "sink_tokens",
            "StreamingLLM sink tokens s",
            4,
            0,
            1_000_000,
            "tokens",
            "The reference code keeps 4 initial tokens by default (mit-han-lab/streaming-llm "
            "examples/run_streaming_llama.py: --start_size 4, --recent_size 2000).",
        ),
        integer("window_tokens", "StreamingLLM recent window w", 4092, 1, 10_000_000, "tokens"),
        integer(
            "budget_tokens",
            "H2O / SnapKV budget B per layer",
            2048,
            1,
            10_000_000,
            "tokens",
            "SnapKV reports budgets of 1,024 to 4,096 tokens on LongBench.",
        ),
        integer(
            "top_k", "DSA tokens selected per query k", 2048, 1, 10_000_000, "tokens", "2,048 in DeepSeek-V3.2-Exp."
        ),
        integer("index_heads", "Indexer heads H_I (models without their own indexer)", 64, 1, 1024, "heads"),
        integer("index_head_dim", "Indexer key width d_I (models without their own indexer)", 128, 1, 4096, ""),
    ],
    "outputs": [output(f"kv_bytes_{m}", f"KV kept per sequence, {NAMES[m]}", "B", "bytes") for m in METHODS]
    + [output(f"decode_bytes_{m}", f"KV read per decode step, {NAMES[m]}", "B", "bytes") for m in METHODS]
    + [output(f"decode_flops_{m}", f"Attention FLOPs per decode token, {NAMES[m]}", "FLOP", "number") for m in METHODS]
    + [output(f"prefill_flops_{m}", f"Attention FLOPs of the prefill, {NAMES[m]}", "FLOP", "number") for m in METHODS]
    + [
        output("decode_bytes_saving_dsa", "DSA: decode KV read, full ÷ DSA", "×", "number"),
        output("decode_bytes_saving_budget", "Budget: decode KV read, full ÷ budget", "×", "number"),
        output("prefill_flops_saving_dsa", "DSA: prefill attention FLOPs, full ÷ DSA", "×", "number"),
        output("indexer_share_dsa", "DSA: indexer share of its decode FLOPs", "", "percent"),
    ],
}


def _widths(v: dict) -> tuple[int, int]:
    a = v["model"].attention
    return (a.index_n_heads, a.index_head_dim) if a.index_head_dim else (v["index_heads"], v["index_head_dim"])


def _layers(model) -> tuple[int, int]:
    """(full-attention layers, windowed layers) that keep KV."""
    groups = layer_groups(model, storing=True)
    return sum(g.layers for g in groups if g.cap_tokens is None), sum(g.layers for g in groups if g.cap_tokens)


def _constants(v: dict, t: int) -> dict:
    """Per-layer bytes and FLOPs per key, and the windowed layers' totals, at context t."""
    model, b = v["model"], bytes_per_element(v["kv_dtype"], "kv_dtype")
    h_i, d_i = _widths(v)
    full_layers, _ = _layers(model)
    latent = kv_bytes_per_token_per_layer(replace(model.attention, index_head_dim=0, index_n_heads=0), b)
    windowed = [(g.layers, g.cap_tokens) for g in layer_groups(model, storing=True) if g.cap_tokens]
    decode_terms = attention_terms(model, sparse=False)  # every method against full attention
    prefill_terms = attention_terms(model, prefill=True, sparse=False)
    return {
        "layers": full_layers,
        "latent": latent,
        "index_key": _scaled_fp8_bytes(d_i),
        "index_flops": 2 * h_i * d_i,  # per key per layer
        "per_key": sum(c for c, cap in decode_terms if cap is None) / max(full_layers, 1),
        "per_key_prefill": sum(c for c, cap in prefill_terms if cap is None) / max(full_layers, 1),
        "win_bytes": sum(n * latent * min(t, cap) for n, cap in windowed),
        "win_decode": sum(c * min(t, cap) for c, cap in decode_terms if cap),
        "win_prefill": sum(c * _causal_keys(cap, t) for c, cap in prefill_terms if cap),
    }


def work(v: dict, t: int) -> dict:
    """Every method's KV kept, decode bytes read and attention FLOPs at context t."""
    c = _constants(v, t)
    n, latent = c["layers"], c["latent"]
    kept = {
        "full": t,
        "streaming": min(t, v["sink_tokens"] + v["window_tokens"]),
        "budget": min(t, v["budget_tokens"]),
        "dsa": min(t, v["top_k"]),
    }
    out = {}
    for m in METHODS:
        k, dsa = kept[m], m == "dsa"
        extra = c["index_key"] * t if dsa else 0.0  # DSA: every token's indexer key, kept and read
        out[f"kv_bytes_{m}"] = n * (latent * (t if dsa else k) + extra) + c["win_bytes"]
        out[f"decode_bytes_{m}"] = n * (latent * k + extra) + c["win_bytes"]
        index = c["index_flops"] * t if dsa else 0.0
        out[f"decode_flops_{m}"] = n * (c["per_key"] * k + index) + c["win_decode"]
        # H2O and SnapKV prefill in full; StreamingLLM over its rolling cache; DSA in the MQA (absorbed) form
        # over the selected keys (report §1) plus the indexer over every earlier token
        keys = _causal_keys(None if m in ("full", "budget") else k, t)
        per_key = c["per_key"] if dsa else c["per_key_prefill"]
        index = c["index_flops"] * _causal_keys(None, t) if dsa else 0.0
        out[f"prefill_flops_{m}"] = n * (per_key * keys + index) + c["win_prefill"]
    out["_index_decode"] = n * c["index_flops"] * t
    return out


def _series(v: dict, here: dict) -> dict:
    xs = sorted({*GRID, v["context_tokens"]})
    pts = [here if x == v["context_tokens"] else work(v, x) for x in xs]
    kept = series(
        "KV kept per sequence vs context",
        "Context length",
        "tokens",
        xs,
        [(NAMES[m], "GiB", [p[f"kv_bytes_{m}"] / GIB for p in pts]) for m in METHODS],
        log_axes=True,
    )
    read = series(
        "KV read per decode step vs context",
        "Context length",
        "tokens",
        xs,
        [(NAMES[m], "GiB", [p[f"decode_bytes_{m}"] / GIB for p in pts]) for m in METHODS],
        log_axes=True,
    )
    for plot in (kept, read):
        mark(plot, "context_tokens", v["context_tokens"])
    return {"kv_kept_vs_context": kept, "decode_read_vs_context": read}


def _derivation(v: dict, w: dict, out: dict, full_layers: int) -> list[dict]:
    t = v["context_tokens"]
    h_i, d_i = _widths(v)
    rows = [
        ("Tokens each method keeps per full layer",
         "full T; StreamingLLM min(T, s + w); budget min(T, B); DSA all T (attends to min(T, k))",
         "T = {}, s + w = {}, B = {}, k = {}",
         [(t, "tokens"), v["sink_tokens"] + v["window_tokens"], v["budget_tokens"], v["top_k"]], full_layers,
         "full layers"),
        ("DSA indexer key per token per layer", "d_I FP8 + 4 B per 128 (FP32 scale)", "{} + 4 × ⌈{}/128⌉",
         [d_i, d_i], _scaled_fp8_bytes(d_i), "B"),
        ("DSA decode KV read", "L_full × (T × indexer key + min(T, k) × latent)", "T = {}, k = {}",
         [(t, "tokens"), v["top_k"]], w["decode_bytes_dsa"], "B"),
        ("DSA indexer FLOPs per decode token", "L_full × 2 × H_I × d_I × T", "{} × 2 × {} × {} × {}",
         [full_layers, h_i, d_i, (t, "tokens")], w["_index_decode"], "FLOP"),
        ("Decode KV read saving", "full ÷ DSA", "{} ÷ {}", [(w["decode_bytes_full"], "B"),
         (w["decode_bytes_dsa"], "B")], out["decode_bytes_saving_dsa"], "×"),
    ]  # fmt: skip
    return [step(*row) for row in rows]


def compute(v: dict) -> dict:
    t = v["context_tokens"]
    w = work(v, t)
    full_layers, _ = _layers(v["model"])
    out = {k: val for k, val in w.items() if not k.startswith("_")}
    out.update(
        {
            "decode_bytes_saving_dsa": w["decode_bytes_full"] / w["decode_bytes_dsa"],
            "decode_bytes_saving_budget": w["decode_bytes_full"] / w["decode_bytes_budget"],
            "prefill_flops_saving_dsa": w["prefill_flops_full"] / w["prefill_flops_dsa"],
            "indexer_share_dsa": w["_index_decode"] / w["decode_flops_dsa"] if w["decode_flops_dsa"] else 0.0,
        }
    )
    notes = []
    if not full_layers:
        notes.append("this model has no full-attention layers with KV: every method keeps the same windows")
    out["notes"] = notes
    out["series"] = _series(v, w)
    out["derivation"] = _derivation(v, w, out, full_layers)
    return out
