"""Paging: how much reserved KV memory holds tokens, contiguous reservation versus paged blocks.

Kwon et al., "Efficient Memory Management for Large Language Model Serving with PagedAttention"
(SOSP 2023, arXiv 2309.06180) §3 and Fig. 2 split a contiguous allocator's KV memory into token
states, slots reserved for tokens the request will generate later, internal fragmentation (slots
beyond the request's final length) and external fragmentation (allocator gaps). Paging allocates
fixed blocks of `block_size` tokens on demand, so the only waste is the unfilled tail of each
sequence's last block (§4.1–4.3).

Model used here (a time average over each request's decode steps, the view Fig. 2 measures):
  a request with prompt p and output o holds h(t) = p + t tokens at decode step t = 1..o;
  contiguous: reserves M slots throughout          → waste M − h(t)
  paged:      holds ⌈h(t)/s⌉ × s slots              → waste ⌈h(t)/s⌉ × s − h(t) < s
Requests are weighted by their decode steps, as a snapshot of memory would weight them.
Lengths come from deterministic quantiles of a lognormal, uniform or fixed distribution of
p + o, split by a fixed output share. External fragmentation is not modelled (it depends on the
allocator), so the contiguous figures are a best case for contiguous reservation.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from ..errors import InputError
from ..formats import bytes_per_element
from ..schema import choice, dtype_field, integer, mark, model_field, number, output, series, step
from .kv_cache import kv_bytes_per_token_all_layers
from .lengths import lognormal_mu_sigma, uniform_half_width
from ..units import GIB

QUANTILES = 256  # deterministic sample: the midpoints of 256 equal-probability bins
PLOT_BLOCKS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
UNIFORM_MAX_CV = 1 / math.sqrt(3)  # uniform on [0, 2m] has CV 1/√3; wider would go negative


def total_lengths(mean: float, cv: float, shape: str, n: int = QUANTILES) -> list[float]:
    """p + o at n equal-probability quantiles of a distribution with this mean and CV."""
    probs = [(i + 0.5) / n for i in range(n)]
    if shape == "fixed" or cv == 0:
        return [mean] * n
    if shape == "uniform":
        if cv > UNIFORM_MAX_CV + 1e-12:
            raise InputError(
                "length_cv",
                f"must be at most {UNIFORM_MAX_CV:.3f} for a uniform distribution (wider would need negative lengths)",
            )
        half = uniform_half_width(mean, cv)
        return [mean - half + 2 * half * q for q in probs]
    mu, sigma = lognormal_mu_sigma(mean, cv)
    z = NormalDist()
    return [math.exp(mu + sigma * z.inv_cdf(q)) for q in probs]


def split(total: float, output_share: float, cap: int) -> tuple[int, int]:
    """(prompt, output) tokens: at least one of each, truncated to `cap` slots."""
    length = max(2, min(cap, round(total)))
    out = min(length - 1, max(1, round(output_share * length)))
    return length - out, out


def slots_up_to(h: int, s: int) -> int:
    """Σ_{x=1..h} ⌈x/s⌉ × s: paged slots summed over holding 1, 2, …, h tokens."""
    q, r = divmod(h, s)
    return s * s * q * (q + 1) // 2 + r * (q + 1) * s


def request_sums(p: int, o: int, s: int, m: int) -> dict:
    """Slot-steps of one request over its o decode steps (h = p+1 … p+o)."""
    held = o * p + o * (o + 1) // 2
    return {
        "steps": o,
        "held": held,
        "future": o * (p + o) - held,
        "never": o * (m - p - o),
        "paged": slots_up_to(p + o, s) - slots_up_to(p, s),
    }


def occupancy(lengths: list[float], output_share: float, s: int, m: int) -> dict:
    """Totals over the sample; every *_fraction is of the slots that allocator holds."""
    tot = {"steps": 0, "held": 0, "future": 0, "never": 0, "paged": 0}
    over = 0
    for total in lengths:
        over += total > m
        for k, v in request_sums(*split(total, output_share, m), s, m).items():
            tot[k] += v
    contiguous = tot["steps"] * m
    return dict(
        tot,
        contiguous=contiguous,
        over=over / len(lengths),
        token_contig=tot["held"] / contiguous,
        future_contig=tot["future"] / contiguous,
        never_contig=tot["never"] / contiguous,
        token_paged=tot["held"] / tot["paged"],
    )


# ---- the calculator ------------------------------------------------------------------

SCHEMA = {
    "name": "paging",
    "title": "KV waste: contiguous reservation versus paged blocks",
    "description": (
        "Share of KV memory that holds tokens when every request reserves its maximum "
        "length up front, against paged allocation in blocks of s tokens, averaged over "
        "each request's decode steps (Kwon et al., SOSP 2023, Fig. 2). Lengths are "
        "deterministic quantiles of the chosen distribution. External fragmentation is "
        "not modelled, so contiguous figures are a best case."
    ),
    "inputs": [
        model_field(default="llama-3.1-8b"),
        dtype_field("kv_dtype", "KV-cache format", "bf16"),
        integer(
            "max_context_tokens",
            "Slots reserved per request (contiguous)",
            8192,
            2,
            10_000_000,
            "tokens",
            "What a contiguous allocator reserves for every request: the maximum prompt + output.",
        ),
        choice(
            "length_distribution",
            "Length distribution (prompt + output)",
            "lognormal",
            [("lognormal", "Lognormal"), ("uniform", "Uniform"), ("fixed", "Fixed (every request the mean)")],
        ),
        number(
            "mean_tokens",
            "Mean prompt + output",
            381.0,
            2.0,
            10_000_000.0,
            "tokens",
            "ShareGPT as vLLM benchmarks it averages 202 input + 179 output tokens.",
        ),
        number(
            "length_cv",
            "Spread (coefficient of variation)",
            1.0,
            0.0,
            5.0,
            "",
            "Standard deviation ÷ mean of prompt + output. Uniform allows at most 0.577.",
            0.05,
        ),
        number(
            "output_share",
            "Output share of each request",
            0.47,
            0.0,
            1.0,
            "",
            "Fraction of prompt + output that is generated (179 ÷ 381 ≈ 0.47 for ShareGPT).",
            0.01,
        ),
        integer(
            "block_size_tokens",
            "Block size s",
            16,
            1,
            4096,
            "tokens",
            "Tokens per paged block. vLLM v0.19.1 uses 16 unless the attention backend needs "
            "another size (FlashMLA 64, CUTLASS MLA 128); SGLang defaults to 1.",
        ),
        number(
            "kv_budget_gib",
            "KV budget",
            50.0,
            0.01,
            1_000_000.0,
            "GiB",
            "Memory for KV across the replica (Part 4's memory calculator gives it).",
            0.5,
        ),
    ],
    "outputs": [
        output("kv_bytes_per_token", "KV per token slot (all layers)", "B", "bytes"),
        output("block_bytes", "Bytes per block", "B", "bytes"),
        output("contiguous_token_fraction", "Contiguous: share of reserved memory holding tokens", "", "percent"),
        output("contiguous_reserved_fraction", "Contiguous: reserved for tokens not yet generated", "", "percent"),
        output("contiguous_internal_fraction", "Contiguous: internal fragmentation (never used)", "", "percent"),
        output("paged_token_fraction", "Paged: share of allocated memory holding tokens", "", "percent"),
        output("paged_waste_fraction", "Paged: unfilled tail of last blocks", "", "percent"),
        output("contiguous_waste_bytes_per_request", "Contiguous: wasted bytes per running request", "B", "bytes"),
        output("paged_waste_bytes_per_request", "Paged: wasted bytes per running request", "B", "bytes"),
        output("mean_tokens_held", "Tokens held per running request (mean)", "tokens", "number"),
        output("contiguous_concurrency", "Contiguous: requests that fit in the budget", "requests", "integer"),
        output("paged_concurrency", "Paged: requests that fit (mean occupancy)", "requests", "integer"),
        output("concurrency_gain", "Paged ÷ contiguous concurrency", "×", "number"),
        output("fraction_requests_truncated", "Requests longer than the reservation (truncated)", "", "percent"),
    ],
}


def _block_series(lengths, share, m, s_chosen, contig_fraction):
    blocks = sorted(set(PLOT_BLOCKS) | {s_chosen})
    paged = [occupancy(lengths, share, s, m)["token_paged"] * 100 for s in blocks]
    return mark(
        series(
            "Share of KV memory holding tokens vs block size",
            "Block size s",
            "tokens",
            blocks,
            [("paged", "%", paged), ("contiguous reservation", "%", [contig_fraction * 100] * len(blocks))],
        ),
        "block_size_tokens",
        s_chosen,
    )


SHARE = "share"  # a fraction in the work, read as a percent like the results (reader walk #20)


def _derivation(v, occ, b_tok, held_mean, paged_mean):
    m, s = v["max_context_tokens"], v["block_size_tokens"]
    held, paged = (held_mean, "tokens"), (paged_mean, "tokens")
    return [
        step("KV per token slot", "2 × L × H_kv × d_head × b (all layers)", "{}", [(b_tok, "B")], b_tok, "B"),
        step(
            "Tokens held per running request",
            "Σ_i Σ_t (p_i + t) ÷ Σ_i o_i",
            "{} ÷ {}",
            [occ["held"], occ["steps"]],
            held_mean,
            "tokens",
        ),
        step("Contiguous: token share", "mean held ÷ M", "{} ÷ {}", [held, (m, "tokens")], occ["token_contig"], SHARE),
        step(
            "Contiguous: reserved, used later",
            "Σ_i Σ_t (o_i − t) ÷ (Σ_i o_i × M)",
            "{} ÷ {}",
            [occ["future"], occ["contiguous"]],
            occ["future_contig"],
            "share",
        ),
        step(
            "Contiguous: never used",
            "Σ_i o_i (M − p_i − o_i) ÷ (Σ_i o_i × M)",
            "{} ÷ {}",
            [occ["never"], occ["contiguous"]],
            occ["never_contig"],
            "share",
        ),
        step(
            "Paged: slots per running request",
            "Σ_i Σ_t ⌈(p_i + t)/s⌉ × s ÷ Σ_i o_i",
            "{} ÷ {} (s = {})",
            [occ["paged"], occ["steps"], (s, "tokens")],
            paged_mean,
            "tokens",
        ),
        step("Paged: token share", "mean held ÷ mean paged slots", "{} ÷ {}", [held, paged], occ["token_paged"], SHARE),
    ]


def compute(v: dict) -> dict:
    model, m, s = v["model"], v["max_context_tokens"], v["block_size_tokens"]
    b_tok = kv_bytes_per_token_all_layers(model, bytes_per_element(v["kv_dtype"], "kv_dtype"))
    lengths = total_lengths(v["mean_tokens"], v["length_cv"], v["length_distribution"])
    occ = occupancy(lengths, v["output_share"], s, m)
    held_mean, paged_mean = occ["held"] / occ["steps"], occ["paged"] / occ["steps"]
    budget = v["kv_budget_gib"] * GIB
    contig_n = math.floor(budget / (m * b_tok))
    paged_n = math.floor(budget / (paged_mean * b_tok))
    notes = []
    if occ["over"] > 0:
        notes.append(
            f"{occ['over']:.1%} of requests are longer than the {m:,}-token reservation; "
            "they are truncated to it in both columns"
        )
    if model.sliding_window_tokens or model.attention_chunk_tokens:
        notes.append(
            "windowed layers are counted as holding every token, as an allocator without a hybrid manager would"
        )
    return {
        "kv_bytes_per_token": b_tok,
        "block_bytes": s * b_tok,
        "contiguous_token_fraction": occ["token_contig"],
        "contiguous_reserved_fraction": occ["future_contig"],
        "contiguous_internal_fraction": occ["never_contig"],
        "paged_token_fraction": occ["token_paged"],
        "paged_waste_fraction": 1 - occ["token_paged"],
        "contiguous_waste_bytes_per_request": (m - held_mean) * b_tok,
        "paged_waste_bytes_per_request": (paged_mean - held_mean) * b_tok,
        "mean_tokens_held": held_mean,
        "contiguous_concurrency": contig_n,
        "paged_concurrency": paged_n,
        "concurrency_gain": paged_n / contig_n if contig_n else 0.0,
        "fraction_requests_truncated": occ["over"],
        "derivation": _derivation(v, occ, b_tok, held_mean, paged_mean),
        "series": {"token_share_vs_block_size": _block_series(lengths, v["output_share"], m, s, occ["token_contig"])},
        "notes": notes,
    }
