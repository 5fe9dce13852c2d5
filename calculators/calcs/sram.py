"""SRAM-only machines (Groq LPU, Cerebras WSE-3): chips to hold the weights and the KV cache.

  chips for the weights = ⌈weight bytes ÷ SRAM per chip⌉
  chips per sequence of KV = KV bytes per sequence ÷ SRAM per chip   (kv_cache.kv_bytes_per_sequence)
  chips in all = ⌈(weight bytes + sequences × KV bytes per sequence) ÷ SRAM per chip⌉
  per-user tokens/s ≤ chip SRAM bandwidth ÷ (W + KV per sequence): a token passes through the
      chips in turn, each reading its share; an upper bound that ignores compute and the links.
Capacity, and a lower bound on chips: activations, replication, code and the network's
buffers also take SRAM. SRAM per chip is the vendor's figure (interconnects.toml sram_part).
"""

from __future__ import annotations

import math

from ..formats import bytes_per_element
from ..params import weight_bytes
from ..catalog import sram_parts
from ..schema import choice, dtype_field, integer, model_field, output, step
from .kv_cache import kv_bytes_per_sequence

SRAM_PARTS = sram_parts()

SCHEMA = {
    "name": "sram",
    "title": "SRAM-only machines: chips for the weights and the KV cache",
    "description": (
        "Chips an SRAM-only machine (Groq LPU, Cerebras WSE-3) needs to hold a model's weights "
        "and the KV cache of its concurrent sequences: bytes ÷ SRAM per chip. A capacity lower "
        "bound; SRAM per chip is the vendor's figure."
    ),
    "inputs": [
        model_field(),
        dtype_field("weight_dtype", "Weight format", "bf16"),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        choice("sram_part", "SRAM-only part", "groq-lpu", [(k, e["name"]) for k, e in SRAM_PARTS.items()]),
        integer("context_tokens", "Context per sequence", 8192, 1, 10_000_000, "tokens"),
        integer("sequences", "Concurrent sequences", 1, 0, 1_000_000, "sequences"),
    ],
    "outputs": [
        output("sram_bytes_per_chip", "SRAM per chip (vendor figure)", "B", "bytes"),
        output("weight_bytes", "Weight bytes (all parameters)", "B", "bytes"),
        output("sram_chips_for_weights", "Chips just to hold the weights", "chips", "integer"),
        output("kv_bytes_per_sequence", "KV cache per sequence", "B", "bytes"),
        output("chips_per_sequence_of_kv", "Chips of SRAM per sequence of KV", "chips", "number"),
        output("sram_chips_total", "Chips for weights and KV (lower bound)", "chips", "integer"),
        output(
            "tokens_per_s_per_user_sram_bound",
            "Per-user tokens/s if only SRAM bandwidth limited it (chip bandwidth ÷ bytes read per token)",
            "tokens/s",
            "rate",
        ),
    ],
}


NO_BANDWIDTH = "not in the data"  # no SRAM bandwidth for this part; short, so the results table fits at 200% text


def compute(v: dict) -> dict:
    model, part = v["model"], SRAM_PARTS[v["sram_part"]]
    sram = part["sram_bytes"]
    w = weight_bytes(model, v["weight_dtype"], "weight_dtype")
    kv = kv_bytes_per_sequence(model, v["context_tokens"], bytes_per_element(v["kv_dtype"], "kv_dtype"))
    total = math.ceil((w + v["sequences"] * kv) / sram - 1e-9)
    bw = part.get("sram_bandwidth_bytes_per_s", 0.0)
    # a token passes through every chip in turn, each reading its share at its own bandwidth
    per_user = bw / (w + kv) if bw else NO_BANDWIDTH
    return {
        "sram_bytes_per_chip": sram,
        "weight_bytes": w,
        "sram_chips_for_weights": math.ceil(w / sram - 1e-9),
        "kv_bytes_per_sequence": kv,
        "chips_per_sequence_of_kv": kv / sram,
        "sram_chips_total": total,
        "tokens_per_s_per_user_sram_bound": per_user,
        "derivation": _derivation(v, w, kv, sram, bw, total),
    }


def _derivation(v: dict, w: float, kv: float, sram: float, bw: float, total: int) -> list[dict]:
    w_, kv_, sram_ = (w, "B"), (kv, "B"), (sram, "B")
    per_user = bw / (w + kv) if bw else NO_BANDWIDTH
    return [
        step(
            "Chips for the weights",
            "⌈W ÷ SRAM per chip⌉",
            "⌈{} ÷ {}⌉",
            [w_, sram_],
            math.ceil(w / sram - 1e-9),
            "chips",
        ),
        step("KV per sequence", "kv_cache model at the context", "{}", [(v["context_tokens"], "tokens")], kv, "B"),
        step(
            "Chips in all",
            "⌈(W + sequences × KV) ÷ SRAM per chip⌉",
            "⌈({} + {} × {}) ÷ {}⌉",
            [w_, v["sequences"], kv_, sram_],
            total,
            "chips",
        ),
        step(
            "Per-user bound at SRAM bandwidth",
            "chip bandwidth ÷ (W + KV per sequence)",
            "{} ÷ ({} + {})" if bw else "bandwidth not in the data",
            [(bw, "B/s"), w_, kv_] if bw else [],
            per_user,
            "tokens/s" if bw else "",
        ),
    ]
