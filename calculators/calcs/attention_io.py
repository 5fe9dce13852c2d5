"""Attention HBM traffic: the standard (naive) kernel against FlashAttention's tiled one.

Dao et al., FlashAttention (NeurIPS 2022, arXiv 2205.14135), per head, N tokens attending to N
(a prefill's self-attention, no causal skipping), Q and K of width d_qk, V and O of width d_v:

  standard (Algorithm 0): read Q, K; write S = QKᵀ; read S; write P = softmax(S); read P, V; write O
      elements = 2·N·d_qk + 2·N·d_v + 4·N²                                   (Θ(Nd + N²), Theorem 2)
  tiled (Algorithm 1): Bc = ⌈M / 4d⌉, Br = min(Bc, d), M = SRAM in elements, d = max(d_qk, d_v);
      outer loop over the Tc = ⌈N / Bc⌉ blocks of K and V (each read once), inner loop over the
      blocks of Q, reading Q_i, O_i, ℓ_i, m_i and writing O_i, ℓ_i, m_i back each time:
      elements = N·d_v + 2N (initialise O, ℓ, m) + N·(d_qk + d_v) + Tc·(N·d_qk + 2·N·d_v + 4N)
                                                                              (Θ(N²d²/M), Theorem 2)
  FlashAttention-2 loop order (Dao, arXiv 2307.08691; read here in the Triton implementation of it,
      python/tutorials/06-fused-attention.py): Q blocks outside, K/V inside, so Q is read and O and
      the log-sum-exp written once, and K, V are read Tr = ⌈N / Br⌉ times, with Algorithm 1's tiles
      (FlashAttention-2 tunes its own): elements = N·d_qk + Tr·N·(d_qk + d_v) + N·d_v + N
  floor: every element of Q, K, V and O touched once, N·(2·d_qk + 2·d_v): what a tiled kernel
      approaches when its re-reads of K and V are served by an on-chip cache rather than HBM.

Bytes = elements × bytes per element of the chosen format (S and P stored in it too), times query
heads × batch × attention layers (sliding-window layers are counted at full length). Time = bytes ÷
HBM bandwidth (a bound: no overlap, no cache), set beside the attention FLOPs (4·N²·d per head,
QKᵀ and PV) at the dense peak. M is the accelerator's shared memory per SM (accelerators.toml,
CUDA Programming Guide) unless the reader gives one. What it leaves out: causal masking (a causal
kernel skips about half of the tiles), the L2 cache, GQA sharing of K/V between query heads, MLA's
absorbed decode path, and the backward pass.
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..formats import get_format
from ..schema import accelerator_field, dtype_field, integer, model_field, number, output, series, step
from ..units import GIB

MIN_TOKENS, MAX_TOKENS = 16, 1_048_576


SCHEMA = {
    "name": "attention_io",
    "title": "Attention HBM traffic: naive versus tiled (FlashAttention)",
    "description": (
        "Bytes that one prefill's self-attention moves between HBM and the chip, for the standard "
        "kernel (the N×N score matrix written and read back) and for FlashAttention's tiled kernel "
        "(Algorithm 1 of arXiv 2205.14135, tiles sized to the SRAM), with the FlashAttention-2 loop "
        "order and the floor of touching Q, K, V and O once; the tile the SRAM allows; and the time "
        "each takes at the chip's HBM bandwidth beside the attention FLOPs at its dense peak. An "
        "estimate with no cache and no causal skipping."
    ),
    "inputs": [
        model_field(default="llama-3.1-8b"),
        accelerator_field(),
        dtype_field("dtype", "Format of Q, K, V, O and the scores", "bf16"),
        integer(
            "sequence_tokens",
            "Sequence length N",
            8192,
            MIN_TOKENS,
            MAX_TOKENS,
            "tokens",
            "Tokens in the prefill; every token attends to all N (no causal skipping).",
        ),
        integer("batch_size", "Sequences in the batch", 1, 1, 4096, "sequences"),
        number(
            "sram_kib",
            "SRAM per SM, M (0 = the accelerator's)",
            0.0,
            0.0,
            1_048_576.0,
            "KiB",
            "On-chip shared memory one tile lives in. 0 takes the accelerator's figure (H100: 228 KiB, "
            "CUDA Programming Guide); give a value for a chip without one.",
        ),
    ],
    "outputs": [
        output("sram_bytes", "SRAM per SM, M", "B", "bytes"),
        output("tile_cols_bc", "K/V tile rows, Bc = ⌈M ÷ 4d⌉", "tokens", "integer"),
        output("tile_rows_br", "Q tile rows, Br = min(Bc, d)", "tokens", "integer"),
        output("tile_bytes", "SRAM the four tiles use (Q, K, V, O)", "B", "bytes"),
        output("kv_passes", "Passes over Q and O, Tc = ⌈N ÷ Bc⌉", "passes", "integer"),
        output("score_matrix_bytes", "Score matrix S of one layer (naive kernel)", "B", "bytes"),
        output("naive_bytes", "HBM traffic, standard attention", "B", "bytes"),
        output("tiled_bytes", "HBM traffic, FlashAttention (Algorithm 1)", "B", "bytes"),
        output("tiled_fa2_bytes", "HBM traffic, FlashAttention-2 loop order", "B", "bytes"),
        output("floor_bytes", "HBM traffic floor (Q, K, V, O once)", "B", "bytes"),
        output("naive_to_tiled_ratio", "Standard ÷ tiled (Algorithm 1)", "×", "number"),
        output("naive_time_s", "Standard: traffic at HBM bandwidth", "s", "seconds"),
        output("tiled_time_s", "Tiled: traffic at HBM bandwidth", "s", "seconds"),
        output("floor_time_s", "Floor: traffic at HBM bandwidth", "s", "seconds"),
        output("attention_flops", "Attention FLOPs (QKᵀ and PV)", "FLOP", "number"),
        output("flops_time_s", "Attention FLOPs at dense peak", "s", "seconds"),
    ],
}


class Tiling:
    """Per-head element counts for N tokens, head widths d_qk and d_v, SRAM of `m` elements."""

    def __init__(self, d_qk: int, d_v: int, m: int):
        self.d_qk, self.d_v = d_qk, d_v
        self.d = max(d_qk, d_v)
        self.bc = math.ceil(m / (4 * self.d))
        self.br = min(self.bc, self.d)

    def naive(self, n: int) -> int:
        return 2 * n * self.d_qk + 2 * n * self.d_v + 4 * n * n

    def passes(self, n: int) -> int:
        return math.ceil(n / self.bc)

    def tiled(self, n: int) -> int:
        init = n * self.d_v + 2 * n
        return init + n * (self.d_qk + self.d_v) + self.passes(n) * (n * self.d_qk + 2 * n * self.d_v + 4 * n)

    def tiled_fa2(self, n: int) -> int:
        return n * self.d_qk + math.ceil(n / self.br) * n * (self.d_qk + self.d_v) + n * self.d_v + n

    def floor(self, n: int) -> int:
        return n * (2 * self.d_qk + 2 * self.d_v)

    def tile_elements(self) -> int:
        return self.br * self.d_qk + self.bc * (self.d_qk + self.d_v) + self.br * self.d_v


def _sram_bytes(v: dict) -> float:
    if v["sram_kib"] > 0:
        return v["sram_kib"] * 1024
    acc = v["hardware"]
    if not acc.shared_memory_per_sm_bytes:
        raise InputError(
            "sram_kib", f"{acc.name} has no shared-memory figure in the data; give M in KiB (between 1 and 1,048,576)"
        )
    return float(acc.shared_memory_per_sm_bytes)


def attention_layers(model) -> int:
    return model.num_layers - model.layer_kinds.count("linear") - model.layer_kinds.count("mlp")


def _peak(acc, fmt) -> float:
    rates = acc.dense_flops_per_s
    rate = rates.get(fmt.flops_key) or rates.get("bf16") or max(rates.values(), default=0.0)
    if not rate:
        raise InputError("hardware", f"{acc.name} has no dense FLOP/s figure")
    return rate


def compute(v: dict) -> dict:
    model, acc, n = v["model"], v["hardware"], v["sequence_tokens"]
    fmt = get_format(v["dtype"], "dtype")
    eb, att = fmt.bytes_per_element, model.attention
    d_qk, d_v = att.head_dim, att.v_head_dim or att.head_dim
    sram = _sram_bytes(v)
    if sram // eb < 4 * max(d_qk, d_v):
        raise InputError(
            "sram_kib",
            f"must hold four tiles of width {max(d_qk, d_v)}: at least "
            f"{4 * max(d_qk, d_v) * eb / 1024:g} KiB for this head and format",
        )
    t, layers, per = Tiling(d_qk, d_v, int(sram // eb)), attention_layers(model), att.num_heads * v["batch_size"]
    scale = eb * per * layers  # bytes per per-head element, whole pass
    bw, peak = acc.memory_bandwidth_bytes_per_s, _peak(acc, fmt)
    naive, tiled, fa2, floor_ = (f(n) * scale for f in (t.naive, t.tiled, t.tiled_fa2, t.floor))
    flops = 2 * n * n * (d_qk + d_v) * per * layers
    out = {
        "sram_bytes": sram,
        "tile_cols_bc": t.bc,
        "tile_rows_br": t.br,
        "tile_bytes": t.tile_elements() * eb,
        "kv_passes": t.passes(n),
        "score_matrix_bytes": n * n * eb * per,
        "naive_bytes": naive,
        "tiled_bytes": tiled,
        "tiled_fa2_bytes": fa2,
        "floor_bytes": floor_,
        "naive_to_tiled_ratio": naive / tiled,
        "naive_time_s": naive / bw,
        "tiled_time_s": tiled / bw,
        "floor_time_s": floor_ / bw,
        "attention_flops": flops,
        "flops_time_s": flops / peak,
    }
    out["derivation"] = _derivation(v, t, out, eb, layers, bw, peak)
    return out | {"series": {"traffic_vs_length": _series(t, n, scale)}, "notes": _notes(v, model, out)}


def _derivation(v, t: Tiling, o: dict, eb: float, layers: int, bw: float, peak: float) -> list[dict]:
    return _tile_steps(v, t, o, eb) + _traffic_steps(v, t, o, eb, layers, bw, peak)


def _tile_steps(v, t: Tiling, o: dict, eb: float) -> list[dict]:
    n = v["sequence_tokens"]
    m = int(o["sram_bytes"] // eb)
    return [
        step(
            "SRAM in elements",
            "M = SRAM ÷ bytes per element",
            "{} ÷ {}",
            [(o["sram_bytes"], "B"), (eb, "B")],
            m,
            "elements",
        ),
        step("K/V tile", "Bc = ⌈M ÷ 4d⌉", "⌈M ÷ (4 × {})⌉", [t.d], t.bc, "tokens"),
        step("Q tile", "Br = min(Bc, d)", "min({}, {})", [t.bc, t.d], t.br, "tokens"),
        step("Passes over Q and O", "Tc = ⌈N ÷ Bc⌉", "⌈{} ÷ {}⌉", [(n, "tokens"), t.bc], t.passes(n), "passes"),
        step("Standard, per head", "2N·d_qk + 2N·d_v + 4N²", "N = {}", [(n, "tokens")], t.naive(n), "elements"),
        step(
            "Tiled, per head",
            "N·d_v + 2N + N(d_qk + d_v) + Tc(N·d_qk + 2N·d_v + 4N)",
            "N = {}, Tc = {}",
            [(n, "tokens"), t.passes(n)],
            t.tiled(n),
            "elements",
        ),
    ]


def _traffic_steps(v, t: Tiling, o: dict, eb: float, layers: int, bw: float, peak: float) -> list[dict]:
    n, heads, batch = v["sequence_tokens"], v["model"].attention.num_heads, v["batch_size"]
    naive, tiled = (o["naive_bytes"], "B"), (o["tiled_bytes"], "B")
    return [
        step(
            "Whole pass scale",
            "bytes per element × heads × batch × attention layers",
            "{} × {} × {} × {}",
            [(eb, "B"), heads, batch, layers],
            eb * heads * batch * layers,
            "B",
        ),
        step("Standard traffic", "elements × scale", "{} → {}", [t.naive(n), naive], o["naive_bytes"], "B"),
        step("Tiled traffic", "elements × scale", "{} → {}", [t.tiled(n), tiled], o["tiled_bytes"], "B"),
        step("Standard at bandwidth", "bytes ÷ BW", "{} ÷ {}", [naive, (bw, "B/s")], o["naive_time_s"], "s"),
        step("Tiled at bandwidth", "bytes ÷ BW", "{} ÷ {}", [tiled, (bw, "B/s")], o["tiled_time_s"], "s"),
        step(
            "FLOPs at peak",
            "2N²(d_qk + d_v) × heads × batch × layers ÷ peak",
            "{} ÷ {}",
            [(o["attention_flops"], "FLOP"), (peak, "FLOP/s")],
            o["flops_time_s"],
            "s",
        ),
    ]


def _series(t: Tiling, n: int, scale: float) -> dict:
    xs = sorted({2**k for k in range(9, 21)} | {n})
    gb = scale / GIB
    at = [x if x == n else None for x in xs]
    return series(
        "Attention HBM traffic vs sequence length",
        "Sequence length N",
        "tokens",
        xs,
        [
            ("standard (N×N scores in HBM)", "GiB", [t.naive(x) * gb for x in xs]),
            ("tiled, FlashAttention Algorithm 1", "GiB", [t.tiled(x) * gb for x in xs]),
            ("floor: Q, K, V, O once", "GiB", [t.floor(x) * gb for x in xs]),
            ("standard at your N", "GiB", [t.naive(x) * gb if x else None for x in at]),
            ("tiled at your N", "GiB", [t.tiled(x) * gb if x else None for x in at]),
        ],
        log_axes=True,
    )


def _notes(v: dict, model, o: dict) -> list[str]:
    notes = []
    if model.sliding_window_tokens or model.attention_chunk_tokens:
        notes.append("sliding-window or chunked layers are counted at the full length N")
    if model.attention.kind == "mla":
        notes.append("MLA is counted as plain attention over its query and value head widths")
    if o["flops_time_s"] > o["tiled_time_s"]:
        notes.append("the tiled kernel is compute-bound here: its FLOPs take longer than its traffic")
    return notes
