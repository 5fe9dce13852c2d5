"""KV conformance vectors: for every model preset and every published config.json the tests read
(tests/fixtures/hf_configs), the bytes the core says one token adds to each layer group, in each KV
format, and the constant state a hybrid model's linear layers keep per sequence.

hooks/conformance.py writes `vectors()` into the site as data/kv-conformance.json, so other tools can
test against the same numbers; tests/sitegen/test_conformance.py checks the file against the calculators
and that it covers every preset and every fixture. The numbers are the core's model of the cache (the
formulas in calculators/calcs/kv_cache.py), the same for every engine: no engine's page-size padding,
block rounding or allocator overhead is in them.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from calculators.calcs.kv_cache import (
    kv_bytes_per_token,
    kv_bytes_per_token_all_layers,
    kv_bytes_per_token_per_layer,
    layer_groups,
    state_bytes_per_sequence,
)
from calculators.catalog import model_presets
from calculators.errors import InputError
from calculators.formats import bytes_per_element
from calculators.hf_import import model_from_hf_config
from calculators.model import Model

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "hf_configs"
URI = "data/kv-conformance.json"
KV_FORMATS = ("bf16", "fp8")
STATE_FORMATS = ("bf16", "fp32")
SCOPE = (
    "The core's bytes for each model's own cache layout (calculators/calcs/kv_cache.py), the same for every "
    "engine and engine version: no engine's page-size padding, block rounding or allocator overhead is included, "
    "and an engine may store a model in another layout (vLLM v0.33.0 keeps MiniCPM3's keys and values expanded "
    "per head, not its MLA latent)."
)


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


def entry(model: Model) -> dict:
    """One model's vector: per layer group, layers, tokens kept and bytes per token (per layer and in all)."""
    per_layer = {f: kv_bytes_per_token_per_layer(model.attention, bytes_per_element(f)) for f in KV_FORMATS}
    groups = [
        {
            "kind": g.kind,
            "layers": g.layers,
            "tokens_kept": g.cap_tokens,  # null: every token of the context
            "bytes_per_token_per_layer": {f: _number(per_layer[f]) for f in KV_FORMATS},
            "bytes_per_token": {f: _number(g.layers * per_layer[f]) for f in KV_FORMATS},
        }
        for g in layer_groups(model, storing=True)
    ]
    linear = model.layer_kinds.count("linear")
    if model.linear_mixer is not None and linear:
        groups.append(
            {
                "kind": "linear",
                "layers": linear,
                "mixer": model.linear_mixer.kind,
                "state_bytes_per_sequence": {
                    f: _number(state_bytes_per_sequence(model, bytes_per_element(f))) for f in STATE_FORMATS
                },
            }
        )
    return {
        "attention": model.attention.kind,
        "layers": model.num_layers,
        "kv_shared_layers": model.kv_shared_layers,
        "groups": groups,
        "bytes_per_token_all_layers": {
            f: _number(kv_bytes_per_token_all_layers(model, bytes_per_element(f))) for f in KV_FORMATS
        },
        "bytes_per_token_past_every_window": {
            f: _number(kv_bytes_per_token(model, bytes_per_element(f))) for f in KV_FORMATS
        },
    }


def sources() -> list[dict]:
    return tomllib.loads((FIXTURES / "SOURCES.toml").read_text())["config"]


def config_entry(source: dict) -> dict:
    cfg = json.loads((FIXTURES / source["file"]).read_text())
    head = {k: source[k] for k in ("family", "model_type", "copy_of", "repository", "commit", "path")}
    try:
        return {**head, **entry(model_from_hf_config(cfg, id=source["file"].removesuffix(".json")))}
    except InputError as exc:
        return {**head, "refused": {"field": exc.field, "message": exc.message}}


def vectors() -> dict:
    return {
        "about": "KV bytes per token per layer group, from the numeric core of LLM Serving, Interactively.",
        "scope": SCOPE,
        "units": "bytes; bf16 = 2 B per element, fp8 = 1 B (DeepSeek's sparse-attention layout for FP8: a "
        "block-scaled latent); state at bf16 or fp32 (the conv state stays at 2 B)",
        "presets": {pid: entry(m) for pid, m in sorted(model_presets().items())},
        "configs": {s["file"]: config_entry(s) for s in sorted(sources(), key=lambda s: s["file"])},
    }


def dumps() -> str:
    return json.dumps(vectors(), indent=1, sort_keys=True) + "\n"
