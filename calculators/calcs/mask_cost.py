"""The constraint tax: the time a token mask adds to every decode step, against vocabulary size and batch.

  bitmask per sequence     = ⌈V ÷ 32⌉ × 4 bytes (one bit a token, in 32-bit words: the int32 layout
                             XGrammar's allocate_token_bitmask and vLLM v0.33.0's backends use)
  CPU time per mask, t_m   by how the mask is made:
    precomputed  one per-state mask copied out: bitmask bytes ÷ copy bandwidth (a regex's DFA, Outlines' index)
    trie_walk    a full walk of the vocabulary trie: nodes × cycles per node ÷ clock, nodes ≈ 2V and
                 13 cycles a node on AMD EPYC at 2 GHz (llguidance docs/optimizations.md, commit c75b0d90)
    measured     llguidance's JSONSchemaBench mean, 50 µs per mask for a 128K vocabulary, scaled by V ÷ 128K
                 (llguidance README, commit c75b0d90: single core; the slicer optimisation makes most masks
                 far cheaper than the full walk)
  CPU time per step        = ⌈B ÷ threads⌉ × t_m (masks of different sequences are independent)
  GPU time to apply        = launch floor + read and write of B × V fp32 logits ÷ HBM bandwidth (checked
                             against XGrammar's apply_token_bitmask_inplace table on H100: tests)
  exposed time             = max(0, CPU time − step time) when mask work overlaps the forward pass, else
                             all of it; plus the apply, which sits between the logits and the sampler
  constrained TPOT         = step time + exposed time; the tax = exposed ÷ constrained TPOT
Estimates: the copy bandwidth, the launch floor and the overlap are assumptions the inputs name; a
grammar (JSON with nesting) is priced by the measured figure, since its context-dependent tokens need
the parser at run time and no closed form.
"""

from __future__ import annotations

import math

from ..schema import accelerator_field, boolean, choice, integer, mark, number, output, series, step

METHODS = [
    ("precomputed", "Precomputed per-state masks (regex DFA, Outlines-style index)"),
    ("measured", "Grammar, measured mean (llguidance, JSONSchemaBench)"),
    ("trie_walk", "Full vocabulary-trie walk every step (no precomputation)"),
]
# Published figures the model uses or is checked against, each with its source and hardware.
PUBLISHED = {
    "llguidance_mean_us": {
        "value": 50.0,
        "vocab": 128_000,
        "source": "llguidance README (github.com/guidance-ai/llguidance, commit c75b0d90, v1.8.0+): mask "
        "computation ~50 µs of single-core CPU time for a 128k tokenizer, JSON-schema grammars; mean over "
        "JSONSchemaBench (2.5M tokens, 10k schemas)",
    },
    "llguidance_full_mask_ms": {
        "value": 1.5,
        "vocab": 128_000,
        "source": "llguidance README, commit c75b0d90: full mask computation for a typical JSON schema ~1.5 ms "
        "(128k tokenizer); docs/optimizations.md: ~1.5 ms for a simple regex on the 128k Llama 3 tokenizer, "
        "AMD EPYC at 2 GHz",
    },
    "llguidance_cycles_per_node": {
        "value": 13.0,
        "source": "llguidance docs/optimizations.md, commit c75b0d90: visiting one trie node takes about 13 "
        "cycles on AMD EPYC; the trie has about 2 × n_vocab nodes",
    },
    "llguidance_batch_claim": {
        "value": 3200,
        "source": "llguidance README, commit c75b0d90: with 16 cores and a 10 ms forward pass, batch sizes up "
        "to 3,200 without slowing the model",
    },
    "xgrammar_median_us": {
        "value": 8.0,
        "source": "llguidance README, commit c75b0d90, measuring XGrammar: masks under 8 µs in half of the masks "
        "tested when its precomputation fits the input; tens or hundreds of ms when it does not",
    },
    # XGrammar examples/benchmark/README.md (commit 53da3ff8): apply_token_bitmask_inplace on H100, vocab
    # 128,000, CUDA kernel, µs, by batch size and masked count.
    "xgrammar_apply_h100_us": {
        "vocab": 128_000,
        "rows": [  # (batch, masked tokens, CUDA kernel µs)
            (1, 127_000, 5.95),
            (8, 127_000, 8.06),
            (64, 127_000, 26.29),
            (512, 127_000, 157.51),
            (4096, 127_000, 1207.38),
            (4096, 64_000, 1993.29),
        ],
        "source": "XGrammar examples/benchmark/README.md (github.com/mlc-ai/xgrammar, commit 53da3ff8): "
        "apply_token_bitmask_inplace kernels on H100, vocabulary 128,000",
    },
}
TRIE_NODES_PER_TOKEN = 2.0
CLOCK_HZ = 2.0e9
APPLY_FLOOR_S = 5e-6  # a kernel launch and its tail (XGrammar's batch-1 rows: 5.4-6.2 µs)


def mask_seconds(method: str, vocab: int, copy_bw: float) -> float:
    """CPU seconds for one sequence's mask."""
    if method == "precomputed":
        return bitmask_bytes(vocab) / copy_bw
    if method == "trie_walk":
        return TRIE_NODES_PER_TOKEN * vocab * PUBLISHED["llguidance_cycles_per_node"]["value"] / CLOCK_HZ
    m = PUBLISHED["llguidance_mean_us"]
    return m["value"] * 1e-6 * vocab / m["vocab"]


def bitmask_bytes(vocab: int) -> int:
    return math.ceil(vocab / 32) * 4


def apply_seconds(batch: int, vocab: int, hbm_bw: float) -> float:
    """GPU seconds to set the masked logits to −∞: a read and a write of B × V fp32 logits."""
    return APPLY_FLOOR_S + 2 * 4 * batch * vocab / hbm_bw


def _step(method, vocab, batch, threads, step_s, overlap, copy_bw, hbm_bw):
    t_m = mask_seconds(method, vocab, copy_bw)
    cpu = math.ceil(batch / threads) * t_m
    apply = apply_seconds(batch, vocab, hbm_bw)
    exposed = (max(0.0, cpu - step_s) if overlap else cpu) + apply
    return t_m, cpu, apply, exposed


SCHEMA = {
    "name": "mask_cost",
    "title": "The constraint tax: mask cost per decode step",
    "description": (
        "Time a structured-output token mask adds to each decode step: making the bitmask on the CPU "
        "(precomputed per-state masks, a grammar at llguidance's measured mean, or a full trie walk) and "
        "applying it to the logits on the GPU, against vocabulary size and batch, as a share of TPOT."
    ),
    "inputs": [
        choice("method", "How the mask is made", "measured", METHODS),
        integer("vocab_size", "Vocabulary size V", 128_256, 1_000, 1_000_000, "tokens"),
        integer("batch_size", "Constrained sequences in the batch B", 64, 1, 8192, "sequences"),
        integer("cpu_threads", "CPU threads filling masks", 8, 1, 256, "threads"),
        number("step_ms", "Decode step time without constraints", 10.0, 0.1, 10_000, "ms"),
        boolean("overlap", "Mask work overlaps the GPU forward pass", True),
        number("copy_gb_s", "CPU copy bandwidth for a precomputed mask", 10.0, 0.1, 1000, "GB/s"),
        accelerator_field(),
    ],
    "outputs": [
        output("bitmask_bytes", "Bitmask per sequence (one bit a token)", "B", "bytes"),
        output("mask_s", "CPU time per mask", "s", "seconds"),
        output("cpu_s_per_step", "CPU time for the batch's masks per step", "s", "seconds"),
        output("apply_s", "GPU time to apply the masks", "s", "seconds"),
        output("exposed_s", "Time the constraint adds to the step", "s", "seconds"),
        output("constrained_tpot_s", "TPOT with the constraint", "s", "seconds"),
        output("tax_share", "Constraint tax (share of TPOT)", "", "percent"),
        output("max_hidden_batch", "Largest batch whose masks hide behind the step", "sequences", "integer"),
    ],
}


def compute(v: dict) -> dict:
    method, V, B, threads = v["method"], v["vocab_size"], v["batch_size"], v["cpu_threads"]
    step_s, overlap = v["step_ms"] / 1000, v["overlap"]
    copy_bw, hbm_bw = v["copy_gb_s"] * 1e9, v["hardware"].memory_bandwidth_bytes_per_s
    t_m, cpu, apply, exposed = _step(method, V, B, threads, step_s, overlap, copy_bw, hbm_bw)
    tpot = step_s + exposed
    hidden = threads * math.floor(step_s / t_m + 1e-9)
    batches = sorted({1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, B})
    curves = []
    for m, label in METHODS:
        shares = []
        for b in batches:
            *_, ex = _step(m, V, b, threads, step_s, overlap, copy_bw, hbm_bw)
            shares.append(ex / (step_s + ex) * 100)
        curves.append((label.split(" (")[0], "%", shares))
    plot = series("Constraint tax against batch size", "batch size B", "sequences", batches, curves)
    mark(plot, "batch_size", B, on=dict(METHODS)[method].split(" (")[0])
    return {
        "bitmask_bytes": bitmask_bytes(V),
        "mask_s": t_m,
        "cpu_s_per_step": cpu,
        "apply_s": apply,
        "exposed_s": exposed,
        "constrained_tpot_s": tpot,
        "tax_share": exposed / tpot,
        "max_hidden_batch": hidden,
        "derivation": _derivation(v, t_m, cpu, apply, exposed, tpot, hbm_bw),
        "series": {"tax_vs_batch": plot},
        "notes": [PUBLISHED["llguidance_mean_us"]["source"], PUBLISHED["xgrammar_apply_h100_us"]["source"]],
    }


def _mask_step(v, t_m) -> dict:
    V = v["vocab_size"]
    formula, template, terms = {
        "precomputed": (
            "bitmask bytes ÷ copy bandwidth",
            "{} ÷ {}",
            [(bitmask_bytes(V), "B"), (v["copy_gb_s"] * 1e9, "B/s")],
        ),
        "trie_walk": ("2V nodes × 13 cycles ÷ 2 GHz", "2 × {} × 13 ÷ 2 GHz", [(V, "tokens")]),
        "measured": ("50 µs × V ÷ 128,000", "50 µs × {} ÷ 128,000", [(V, "tokens")]),
    }[v["method"]]
    return step("CPU time per mask", formula, template, terms, t_m, "s")


def _derivation(v, t_m, cpu, apply, exposed, tpot, hbm_bw) -> list[dict]:
    V, B, threads = v["vocab_size"], v["batch_size"], v["cpu_threads"]
    step_s = v["step_ms"] / 1000
    if v["overlap"]:
        added = ("max(0, CPU − step) + apply", "max(0, {} − {}) + {}", [(cpu, "s"), (step_s, "s"), (apply, "s")])
    else:
        added = ("CPU + apply", "{} + {}", [(cpu, "s"), (apply, "s")])
    return [
        step("Bitmask per sequence", "⌈V ÷ 32⌉ × 4 B", "⌈{} ÷ 32⌉ × 4 B", [(V, "tokens")], bitmask_bytes(V), "B"),
        _mask_step(v, t_m),
        step(
            "CPU time per step",
            "⌈B ÷ threads⌉ × t_m",
            "⌈{} ÷ {}⌉ × {}",
            [(B, "sequences"), threads, (t_m, "s")],
            cpu,
            "s",
        ),
        step(
            "GPU time to apply",
            "5 µs + 2 × 4 B × B × V ÷ HBM bandwidth",
            "5 µs + 8 B × {} × {} ÷ {}",
            [B, V, (hbm_bw, "B/s")],
            apply,
            "s",
        ),
        step("Added to the step", *added, exposed, "s"),
        step(
            "Constraint tax",
            "added ÷ (step + added)",
            "{} ÷ {}",
            [(exposed, "s"), (tpot, "s")],
            exposed / tpot,
            "share",
        ),
    ]
