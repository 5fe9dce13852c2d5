"""The glossary and numbers-to-know page: `<!-- glossary:NAME -->` markers become tables.

Terms and abbreviations come from `terms`; accelerators, models, number formats, serving engines
and prices come from the numeric core as numbers (`calculators.tables`) and are written by the
core's one formatter (`calculators.display`), so a figure reads here as it reads in a calculator.
The tables are plain Markdown inside `<div class="data-table" markdown>` wrappers, so they read
fine without JavaScript; docs/assets/tables.js adds sorting and a filter.
"""

from __future__ import annotations

import re

from calculators import display, tables

from .series import Series
from .terms import Terms, cell, render_abbreviations, render_terms, wrap

GLOSSARY = "glossary.md"
FEATURE_LABELS = {
    "paged_kv": "Paged KV",
    "prefix_caching": "Prefix caching",
    "chunked_prefill": "Chunked prefill",
    "speculative_decoding": "Speculative decoding",
    "disaggregation": "P/D disaggregation",
    "expert_parallelism": "Expert parallelism",
    "structured_output": "Structured output",
    "multi_lora": "Multi-LoRA",
}
ACCELERATOR_NOTE = (
    "One unit policy for memory. **reported**: the total the driver reports (nvidia-smi, in MiB), "
    "where a public reading exists; that is why an “80GB” H100 shows 85.52 GB (81,559 MiB) and a "
    "B200 more than the 180 GB NVIDIA states. **vendor**: otherwise the vendor's own figure in the "
    "vendor's own unit, converted exactly: AMD states GiB (ROCm gpu-specs “VRAM (GiB)”), Google's "
    "TPU7x comparison table states GiB for v5p, v6e and TPU7x. GB = 10^9 B, GiB = 2^30 B. "
    "Bandwidth is the vendor's headline peak for every row (an upper bound; TB/s = 10^12 B/s). "
    "FLOP/s are dense (vendor 2:4-sparse headlines halved). Ridge point = dense FLOP/s ÷ memory "
    "bandwidth, from the core's `roofline` calculator. Each row's memory note and caveats are in "
    "`calculators/data/accelerators.toml`."
)
MODEL_NOTE = (
    "Core parameter counts are computed from each architecture (`calculators.params`) and count "
    "every matrix a token multiplies, the embedding and the unembedding (output) matrix included. "
    "Publishers' figures come from each model card or report (the source is in "
    "`calculators/data/models.toml`) and often leave one of those matrices out of the active count: "
    "gpt-oss's card leaves out one vocabulary matrix, DeepSeek-V3's 36.7B leaves out the input "
    "table; others round to two digits, and multimodal models' published totals (Llama 4, Gemma 3) "
    "include a vision encoder this text-decoder description leaves out. "
    "KV per token: “below every window” counts every layer (the cost while a sequence is shorter "
    "than its sliding windows or chunks, the figure Part 4 teaches); “beyond every window” counts "
    "only the full-attention layers, the marginal cost of each token once the windowed layers have "
    "stopped growing. The two are equal for models without windows. MLA caches a latent, not "
    "per-head keys and values."
)
FORMAT_NOTE = "Effective bits = bits per element + scale bits ÷ block size, from the core's format table."
ENGINE_NOTE = (
    "“not verified” means we did not find the feature in the sources we read: it is not a “no”. "
    "“via engine” marks an orchestration layer that relies on the engine it runs."
)
PRICE_NOTE = (
    "Prices are indicative and change often; check the source before you quote one. The AWS rows are "
    "Capacity Blocks, reserved in advance, not on-demand rates. No current on-demand rate is listed: "
    "none could be dated to the day and sourced to a page a reader can open."
)


def fig(x, digits: int = 4, scale: float = 1.0) -> str:
    """A figure in `scale` units, `digits` significant digits (`display.sig`); '—' when absent."""
    return "—" if x is None else display.sig(x / scale, digits)


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _source(text: str, as_of: str = "", url: str = "") -> str:
    """A Source cell: the source text, its date, and a link to the page when there is one."""
    return cell(text + (f" (as of {as_of})" if as_of else "")) + (f" ([link]({url}))" if url else "")


def _accelerator_cells(a: dict) -> list[str]:
    return (
        [
            cell(a["name"]),
            fig(a["memory_bytes"], scale=1e9),
            fig(a["memory_bytes"], scale=2**30),
            a["memory_basis"] or "—",
            fig(a["memory_bandwidth_bytes_per_s"], scale=1e12),
        ]
        + [fig(v, scale=1e12) for v in a["dense_flops_per_s"].values()]
        + [
            fig(a["ridge_bf16_flops_per_byte"], 3),
            fig(a["ridge_fp8_flops_per_byte"], 3),
            fig(a["scale_up_bytes_per_s"], scale=1e9),
            fig(a["scale_up_domain_chips"]),
            fig(a["power_watts"]),
            _source(a["source"], a["as_of"], a["url"]),
        ]
    )


def render_accelerators() -> str:
    head = (
        ["Accelerator", "Memory (GB)", "Memory (GiB)", "Memory basis", "Bandwidth (TB/s)"]
        + [f"{k.upper()} dense (TFLOP/s)" for k in tables.flops_keys()]
        + [
            "Ridge, BF16 (FLOP/B)",
            "Ridge, FP8 (FLOP/B)",
            "Scale-up per direction (GB/s)",
            "Scale-up domain (chips)",
            "Power (W)",
            "Source",
        ]
    )
    return wrap("Accelerators", _table(head, [_accelerator_cells(a) for a in tables.accelerators()]), ACCELERATOR_NOTE)


def _experts(m: dict) -> str:
    if m["num_experts"] is None:
        return "dense"
    shared = f" + {m['num_shared_experts']} shared" if m["num_shared_experts"] else ""
    return f"{m['experts_per_token']} of {m['num_experts']}{shared}"


def _attention(m: dict) -> str:
    layers, extra = m["num_layers"], []
    if m["sliding_layers"]:
        extra.append(f"{m['sliding_layers']} of {layers} layers window {display.sig(m['sliding_window_tokens'])}")
    if m["chunked_layers"]:
        extra.append(f"{m['chunked_layers']} of {layers} layers chunk {display.sig(m['attention_chunk_tokens'])}")
    return m["attention_kind"].upper() + (f" ({'; '.join(extra)})" if extra else "")


def _model_cells(m: dict) -> list[str]:
    kv_heads = "latent" if m["num_kv_heads"] is None else fig(m["num_kv_heads"])
    return [
        cell(m["name"]),
        fig(m["num_layers"]),
        fig(m["num_heads"]),
        kv_heads,
        fig(m["head_dim"]),
        cell(_attention(m)),
        cell(_experts(m)),
        fig(m["total_params"], scale=1e9),
        fig(m["official_total_params"] or None, scale=1e9),
        fig(m["active_params"], scale=1e9),
        fig(m["official_active_params"] or None, scale=1e9),
        fig(m["kv_bytes_per_token_all_layers_bf16"], 6),
        fig(m["kv_bytes_per_token_full_layers_bf16"], 6),
        _source(m["source"], m["as_of"]),
    ]


def render_models() -> str:
    head = [
        "Model",
        "Layers",
        "Q heads",
        "KV heads",
        "Head dim",
        "Attention",
        "Experts per token",
        "Total params, core (B)",
        "Total params, publisher (B)",
        "Active params, core (B)",
        "Active params, publisher (B)",
        "KV per token below every window, BF16 (B)",
        "KV per token beyond every window, BF16 (B)",
        "Source",
    ]
    return wrap("Models", _table(head, [_model_cells(m) for m in tables.models()]), MODEL_NOTE)


def render_formats() -> str:
    head = ["Format", "Bits per element", "Block size", "Scale bits", "Effective bits", "Source"]
    rows = [
        [
            cell(f["name"]),
            fig(f["bits_per_element"]),
            fig(f["block_size_elements"]),
            fig(f["scale_bits"]),
            fig(f["effective_bits"]),
            _source(f["source"], f["as_of"]),
        ]
        for f in tables.formats()
    ]
    return wrap("Number formats", _table(head, rows), FORMAT_NOTE)


def _engine_cells(e: dict) -> list[str]:
    notes = e.get("notes", {})
    features = [cell(e["features"][k] + (f" ({notes[k]})" if k in notes else "")) for k in tables.ENGINE_FEATURES]
    status = f" **Status:** {e['status']}" if e.get("status") else ""
    return (
        [cell(e["name"])]
        + features
        + [cell(f"{e['version']}, read {e['as_of']}.{status}"), f"[{cell(e['name'])} docs]({e['url']})"]
    )


def render_engines(data: dict | None = None) -> str:
    head = ["Engine"] + [FEATURE_LABELS[k] for k in tables.ENGINE_FEATURES] + ["Version read", "Source"]
    return wrap("Serving engines", _table(head, [_engine_cells(e) for e in tables.engines(data)]), ENGINE_NOTE)


def render_prices() -> str:
    head = ["Item", "Price (USD)", "Unit", "As of", "Source"]
    rows = [
        [
            cell(p["item"]),
            display.fixed(p["usd"], 2),
            cell(p["unit"]),
            cell(p["as_of"]),
            _source(p["source"], "", p.get("url", "")),
        ]
        for p in tables.prices()
    ]
    return wrap("Prices", _table(head, rows), PRICE_NOTE)


def render_glossary(markdown: str, terms: Terms, series: Series, written: frozenset[int]) -> str:
    """The glossary page's Markdown with every marker replaced (an unknown marker raises ValueError)."""
    renderers = {
        "terms": lambda: render_terms(terms, series, written),
        "abbreviations": lambda: render_abbreviations(terms),
        "accelerators": render_accelerators,
        "models": render_models,
        "formats": render_formats,
        "engines": render_engines,
        "prices": render_prices,
    }
    for name, render in renderers.items():
        marker = f"<!-- glossary:{name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    leftover = re.findall(r"<!-- glossary:([\w-]+) -->", markdown)
    if leftover:
        raise ValueError(f"glossary.md: unknown markers {leftover}")
    return markdown
