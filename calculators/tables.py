"""The reference tables (accelerators, models, number formats, engines, prices) as rows of numbers.

One dict per row, plain values with units in the field names (`memory_bytes`, `ridge_bf16_flops_per_byte`),
None where a figure does not apply. Derived figures come from the calculators themselves (ridge points
from `roofline`, KV bytes per token from `kv_cache`, parameter counts from `params`), so a table can
never disagree with a calculator. Turning the numbers into text is the reader's side's job
(`calculators.display`); the glossary page does it at build time.
"""

from __future__ import annotations

from . import catalog
from .api import run
from .checks import FLOPS_KEYS
from .errors import InputError
from .params import active_params, total_params

ENGINE_FEATURES = (
    "paged_kv",
    "prefix_caching",
    "chunked_prefill",
    "speculative_decoding",
    "disaggregation",
    "expert_parallelism",
    "structured_output",
    "multi_lora",
)
FEATURE_VALUES = ("yes", "via engine", "not verified")


def _ridge(acc_id: str, dtype: str) -> float | None:
    """Ridge point at one precision, from the roofline calculator; None where the chip has no figure."""
    try:
        return run("roofline", {"hardware": acc_id, "compute_dtype": dtype})["ridge_point_flops_per_byte"]
    except InputError:
        return None


def flops_keys() -> list[str]:
    """The precisions at least one preset accelerator has a dense figure for, in the core's order."""
    return [k for k in FLOPS_KEYS if any(k in a.dense_flops_per_s for a in catalog.accelerator_presets().values())]


def accelerators() -> list[dict]:
    rows = []
    for a in catalog.accelerator_presets().values():
        rows.append(
            {
                "id": a.id,
                "name": a.name,
                "memory_bytes": a.memory_bytes,
                "memory_basis": a.memory_note.split(":", 1)[0].strip(),  # "reported" or "vendor"
                "memory_bandwidth_bytes_per_s": a.memory_bandwidth_bytes_per_s,
                "dense_flops_per_s": {k: a.dense_flops_per_s.get(k) for k in flops_keys()},
                "ridge_bf16_flops_per_byte": _ridge(a.id, "bf16") if "bf16" in a.dense_flops_per_s else None,
                "ridge_fp8_flops_per_byte": _ridge(a.id, "fp8") if "fp8" in a.dense_flops_per_s else None,
                "scale_up_bytes_per_s": a.scale_up_bandwidth_bytes_per_s or None,
                "scale_up_domain_chips": a.scale_up_domain,
                "power_watts": a.power_watts,
                "source": a.source,
                "as_of": a.as_of,
                "url": a.url,
            }
        )
    return rows


def _attention(m) -> dict:
    kinds = m.layer_kinds
    return {
        "attention_kind": m.attention.kind,
        "num_heads": m.attention.num_heads,
        "num_kv_heads": None if m.attention.kind == "mla" else m.attention.num_kv_heads,
        "head_dim": m.attention.head_dim,
        "sliding_layers": kinds.count("sliding"),
        "chunked_layers": kinds.count("chunked"),
        "sliding_window_tokens": m.sliding_window_tokens,
        "attention_chunk_tokens": m.attention_chunk_tokens,
    }


def _experts(m) -> dict:
    moe = m.moe
    if moe is None:
        return {"num_experts": None, "experts_per_token": None, "num_shared_experts": None}
    return {
        "num_experts": moe.num_experts,
        "experts_per_token": moe.experts_per_token,
        "num_shared_experts": moe.num_shared_experts,
    }


def models() -> list[dict]:
    """Every preset model but the hidden ones (counterfactuals the prose uses, not the reader's choices)."""
    rows = []
    for m in catalog.model_presets(include_hidden=False).values():
        kv = run("kv_cache", {"model": m.id, "kv_dtype": "bf16"})
        rows.append(
            {
                "id": m.id,
                "name": m.name,
                "num_layers": m.num_layers,
                **_attention(m),
                **_experts(m),
                "total_params": total_params(m),
                "official_total_params": m.official_total_params,
                "active_params": active_params(m),
                "official_active_params": m.official_active_params,
                "kv_bytes_per_token_all_layers_bf16": kv["kv_bytes_per_token_all_layers"],
                "kv_bytes_per_token_full_layers_bf16": kv["kv_bytes_per_token"],
                "source": m.source,
                "as_of": m.as_of,
            }
        )
    return rows


def formats() -> list[dict]:
    return [
        {
            "id": f.id,
            "name": f.name,
            "bits_per_element": f.bits_per_element,
            "block_size_elements": f.block_size or None,
            "scale_bits": f.scale_bits if f.block_size else None,
            "effective_bits": f.effective_bits,
            "source": f.source,
            "as_of": f.as_of,
        }
        for f in catalog.formats().values()
    ]


def engines(data: dict | None = None) -> list[dict]:
    """engines.toml's rows, checked: every feature is one of FEATURE_VALUES (raises ValueError)."""
    rows = list(catalog.engines().values()) if data is None else data["engine"]
    for e in rows:
        for key in ENGINE_FEATURES:
            if e["features"][key] not in FEATURE_VALUES:
                raise ValueError(f"engines.toml: {e['id']}.{key} = {e['features'][key]!r}; allowed {FEATURE_VALUES}")
    return rows


def prices() -> list[dict]:
    return catalog.prices()
