"""resolve_model / resolve_accelerator: every way in, every number checked, JSON round trip."""

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from calculators.errors import InputError
from calculators.model import Accelerator, Model
from calculators.catalog import accelerator_presets, model_presets
from calculators.resolve import accelerator_to_json, model_to_json, resolve_accelerator, resolve_model


@pytest.mark.parametrize("mid", sorted(model_presets()))
def test_model_json_round_trip(mid):
    m = model_presets()[mid]
    data = json.loads(json.dumps(model_to_json(m)))
    assert resolve_model(data) == m and resolve_model(m) == m and resolve_model(mid) == m


@pytest.mark.parametrize("aid", sorted(accelerator_presets()))
def test_accelerator_json_round_trip(aid):
    a = accelerator_presets()[aid]
    data = json.loads(json.dumps(accelerator_to_json(a)))
    assert resolve_accelerator(data) == a and resolve_accelerator(a) == a


def test_preset_ids_case_insensitive():
    assert resolve_model(" Llama-3.1-8B ").id == "llama-3.1-8b"
    assert resolve_accelerator("H100-SXM").id == "h100-sxm"


def test_unknown_preset_lists_choices():
    with pytest.raises(InputError) as e:
        resolve_accelerator("h900", field="hardware")
    assert e.value.field == "hardware" and "h100-sxm" in e.value.message


def small_model(**over):
    d = {
        "num_layers": 4,
        "hidden_size": 256,
        "vocab_size": 1000,
        "intermediate_size": 512,
        "attention": {"kind": "gqa", "num_heads": 8, "num_kv_heads": 2, "head_dim": 32},
    }
    d.update(over)
    return d


def test_minimal_custom_model_defaults():
    m = resolve_model(small_model())
    assert isinstance(m, Model) and m.layer_kinds == ("full",) * 4 and m.id == "custom"


def test_layer_pattern_expands():
    m = resolve_model(small_model(layer_pattern=["sliding", "full"], sliding_window_tokens=64))
    assert m.layer_kinds == ("sliding", "full", "sliding", "full")


@pytest.mark.parametrize(
    "over, field",
    [
        ({"num_layers": 0}, "model.num_layers"),
        ({"num_layers": 2.5}, "model.num_layers"),
        ({"num_layers": True}, "model.num_layers"),
        ({"hidden_size": float("nan")}, "model.hidden_size"),
        ({"vocab_size": float("inf")}, "model.vocab_size"),
        ({"num_layers": 10**6}, "model.num_layers"),
        (
            {"attention": {"kind": "gqa", "num_heads": 8, "num_kv_heads": 3, "head_dim": 32}},
            "model.attention.num_kv_heads",
        ),
        (
            {"attention": {"kind": "mqa", "num_heads": 8, "num_kv_heads": 2, "head_dim": 32}},
            "model.attention.num_kv_heads",
        ),
        ({"attention": {"kind": "flash", "num_heads": 8, "head_dim": 32}}, "model.attention.kind"),
        ({"attention": {"kind": "mla", "num_heads": 8, "head_dim": 32}}, "model.attention.kv_lora_rank"),
        ({"layer_kinds": ["full"] * 3}, "model.layer_kinds"),
        ({"layer_pattern": ["sliding"]}, "model.sliding_window_tokens"),
        ({"layer_pattern": ["chunked"]}, "model.attention_chunk_tokens"),
        ({"ffn_kind": "swiglu"}, "model.ffn_kind"),
        ({"tie_embeddings": "yes"}, "model.tie_embeddings"),
        (
            {"moe": {"num_experts": 8, "experts_per_token": 9, "expert_intermediate_size": 64}},
            "model.moe.experts_per_token",
        ),
        (
            {
                "moe": {
                    "num_experts": 8,
                    "experts_per_token": 2,
                    "expert_intermediate_size": 64,
                    "first_dense_layers": 4,
                }
            },
            "model.moe.first_dense_layers",
        ),
        ({"heads": 8}, "model.heads"),
    ],
)
def test_bad_model_fields_named(over, field):
    with pytest.raises(InputError) as e:
        resolve_model(small_model(**over))
    assert e.value.field == field, e.value
    assert "must" in e.value.message or "unknown" in e.value.message or "required" in e.value.message


def test_integral_float_accepted_for_int():  # JS numbers arrive as floats
    assert resolve_model(small_model(num_layers=4.0)).num_layers == 4


def acc(**over):
    d = {"memory_bytes": 80e9, "memory_bandwidth_bytes_per_s": 3.35e12, "dense_flops_per_s": {"bf16": 989e12}}
    d.update(over)
    return d


@pytest.mark.parametrize(
    "over, field",
    [
        ({"memory_bytes": -1}, "hardware.memory_bytes"),
        ({"memory_bandwidth_bytes_per_s": 0}, "hardware.memory_bandwidth_bytes_per_s"),
        ({"dense_flops_per_s": {"bf17": 1e12}}, "hardware.dense_flops_per_s.bf17"),
        ({"dense_flops_per_s": {"bf16": -1}}, "hardware.dense_flops_per_s.bf16"),
        ({"dense_flops_per_s": [1]}, "hardware.dense_flops_per_s"),
        ({"price_usd_per_hour": float("nan")}, "hardware.price_usd_per_hour"),
        ({"scale_up_domain": 0}, "hardware.scale_up_domain"),
        ({"scale_up_topology": "ring"}, "hardware.scale_up_topology"),
        (
            {"scale_up_bandwidth_bytes_per_s": 100e9, "scale_up_link_bandwidth_bytes_per_s": 200e9},
            "hardware.scale_up_link_bandwidth_bytes_per_s",
        ),  # one link cannot exceed the total
        ({"hbm": 1}, "hardware.hbm"),
    ],
)
def test_bad_accelerator_fields_named(over, field):
    with pytest.raises(InputError) as e:
        resolve_accelerator(acc(**over))
    assert e.value.field == field


def test_custom_accelerator():
    a = resolve_accelerator(acc(name="Mine"))
    assert isinstance(a, Accelerator) and a.memory_bytes == 80_000_000_000


def test_wrong_type_input():
    with pytest.raises(InputError):
        resolve_model(42)
    with pytest.raises(InputError):
        resolve_accelerator(["h100"])


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["num_layers", "hidden_size", "vocab_size", "intermediate_size"]),
        st.one_of(st.integers(-10, 10**8), st.floats(allow_nan=True), st.text(max_size=3), st.none(), st.booleans()),
    )
)
def test_fuzzed_model_input_never_escapes_as_other_error(over):
    try:
        m = resolve_model(small_model(**over))
    except InputError as e:
        assert e.field.startswith("model.")
        return
    for f in ("num_layers", "hidden_size", "vocab_size", "intermediate_size"):
        v = getattr(m, f)
        assert isinstance(v, int) and v >= 1 and math.isfinite(v)
