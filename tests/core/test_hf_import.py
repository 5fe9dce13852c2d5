"""Hugging Face config.json fixtures (as published) read into Models."""

import copy
import json
from pathlib import Path

import pytest

from calculators.errors import InputError
from calculators.hf_import import model_from_hf_config
from calculators.params import total_params
from calculators.catalog import model_presets
from calculators.resolve import resolve_model

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
PRESETS = model_presets()
ARCH_FIELDS = (
    "num_layers",
    "hidden_size",
    "attention",
    "layer_kinds",
    "sliding_window_tokens",
    "attention_chunk_tokens",
    "moe",
    "ffn_kind",
    "tie_embeddings",
    "intermediate_size",
    "linear_mixer",
    "kv_shared_layers",
    "ffn_in_mixer_layers",
)


def load(name):
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json") if p.stem in PRESETS))
def test_fixture_matches_preset_architecture(name):
    m, p = model_from_hf_config(load(name), id=name), PRESETS[name]
    for f in ARCH_FIELDS:
        if f == "intermediate_size" and p.moe and p.moe.first_dense_layers == 0 and p.moe.layer_interval == 1:
            continue  # unused dense width in all-MoE models
        assert getattr(m, f) == getattr(p, f), f
    if name != "gemma-3-27b":  # published text_config omits vocab_size; HF default is 262208
        assert m.vocab_size == p.vocab_size


def test_gemma3_nested_text_config_and_default_vocab():
    m = model_from_hf_config(load("gemma-3-27b"))
    assert m.vocab_size == 262208 and m.layer_kinds.count("full") == 10
    assert m.attention.head_dim == 128 and m.tie_embeddings


def test_llama31_rope_scaling_context():
    assert model_from_hf_config(load("llama-3.1-8b")).max_context_tokens == 131072


def test_qwen25_bias_and_sliding_disabled():
    m = model_from_hf_config(load("qwen2.5-7b"))
    assert m.attention.qkv_bias and not m.attention.o_bias and set(m.layer_kinds) == {"full"}


def test_llama1_without_kv_heads_is_mha():
    m = model_from_hf_config(load("llama-7b-v1"))
    assert m.attention.kind == "mha" and m.attention.num_kv_heads == 32


def test_falcon_multi_query_and_new_architecture():
    f7, f40 = model_from_hf_config(load("falcon-7b")), model_from_hf_config(load("falcon-40b"))
    assert f7.attention.kind == "mqa" and f7.attention.head_dim == 64 and f7.ffn_kind == "plain"
    assert f40.attention.num_kv_heads == 8 and f40.intermediate_size == 4 * 8192


def test_gpt2_small():
    m = model_from_hf_config(load("gpt2"))
    assert (m.num_layers, m.hidden_size, m.attention.num_heads, m.max_context_tokens) == (12, 768, 12, 1024)
    assert 123e6 < total_params(m) < 125e6  # 124M; the 0.8M learned positions are not counted


def test_opt_plain_ffn_tied():
    m = model_from_hf_config(load("opt-13b"))
    assert m.ffn_kind == "plain" and m.tie_embeddings and m.intermediate_size == 20480


def test_deepseek_and_kimi_mla():
    for name, dense in (("deepseek-v3", 3), ("kimi-k2", 1)):
        m = model_from_hf_config(load(name))
        assert m.attention.kind == "mla" and m.attention.kv_lora_rank == 512
        assert m.moe.first_dense_layers == dense and m.moe.num_shared_experts == 1


def test_resolve_detects_hf_config():
    assert resolve_model(load("mistral-7b-v0.1")).sliding_window_tokens == 4096


def test_indivisible_kv_heads_names_field():
    cfg = load("llama-3.1-8b")
    cfg["num_key_value_heads"] = 5
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "model.num_key_value_heads"


def test_layer_types_length_mismatch():
    cfg = load("gpt-oss-20b")
    cfg["layer_types"] = cfg["layer_types"][:-1]
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "model.layer_types"


def test_missing_required_field():
    cfg = load("qwen3-8b")
    del cfg["num_hidden_layers"]
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "model.num_hidden_layers"


def test_missing_field_inside_text_config():
    cfg = copy.deepcopy(load("llama-4-scout"))
    del cfg["text_config"]["hidden_size"]
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "model.text_config.hidden_size"


def test_unknown_architecture_is_read_from_the_standard_fields_or_refused_naming_one():
    """Reader walk #8: any model_type is read as a decoder; what cannot be sized names the missing key."""
    mamba = {"model_type": "mamba", "num_hidden_layers": 64, "hidden_size": 2560, "vocab_size": 50280}
    with pytest.raises(InputError) as e:  # a state-space model has no attention heads to size a KV cache by
        model_from_hf_config(mamba)
    assert e.value.field == "model.num_attention_heads" and "'mamba' is not one this site knows" in e.value.message


def test_top_k_above_expert_count():
    cfg = load("mixtral-8x7b")
    cfg["num_experts_per_tok"] = 9
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "model.num_experts_per_tok"


def test_negative_number_rejected():
    cfg = load("llama-2-7b")
    cfg["hidden_size"] = -4096
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "model.hidden_size"


# Hybrid and sparse families (qwen3-next-80b-a3b, jamba-1.5-mini, deepseek-v3.2 fixtures): reduced to
# the keys the importer reads, with the values of the published configs (models.toml sources).
def test_qwen3_next_layers_gate_and_gated_deltanet():
    m = model_from_hf_config(load("qwen3-next-80b-a3b"))
    assert m.layer_kinds.count("linear") == 36 and m.layer_kinds[3] == "full"
    assert m.attention.output_gate and m.linear_mixer.kind == "gated_deltanet"
    assert m.moe.num_shared_experts == 1 and m.moe.shared_intermediate_size == 512


def test_qwen3_next_layer_types_list_is_read_too():
    cfg = load("qwen3-next-80b-a3b")
    cfg["layer_types"] = (["linear_attention"] * 3 + ["full_attention"]) * 12
    del cfg["full_attention_interval"]
    assert model_from_hf_config(cfg).layer_kinds == PRESETS["qwen3-next-80b-a3b"].layer_kinds


def test_jamba_period_offset_and_auto_dt_rank():
    cfg = load("jamba-1.5-mini")
    m = model_from_hf_config(cfg)
    assert [i for i, k in enumerate(m.layer_kinds) if k == "full"] == [4, 12, 20, 28]
    cfg["mamba_dt_rank"] = "auto"
    assert model_from_hf_config(cfg).linear_mixer.dt_rank == 256  # ceil(4096 / 16)
    cfg["expert_layer_offset"] = 0
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field.endswith("expert_layer_offset")


def test_deepseek_v32_keeps_its_indexer():
    """Without index_head_dim the importer would size V3.2 as V3 and miss 132 B per layer per token."""
    m = model_from_hf_config(load("deepseek-v3.2"))
    assert m.attention.index_head_dim == 128 and m.attention.index_n_heads == 64


def test_nemotron_h_pattern_blocks_and_moe_refused():
    cfg = load("nemotron-h-8b")
    m = model_from_hf_config(cfg)
    assert (m.layer_kinds.count("linear"), m.layer_kinds.count("full"), m.layer_kinds.count("mlp")) == (24, 4, 24)
    assert not m.ffn_in_mixer_layers and m.ffn_kind == "plain" and m.linear_mixer.inner_size == 8192
    cfg["hybrid_override_pattern"] = cfg["hybrid_override_pattern"].replace("-", "E")
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field.endswith("hybrid_override_pattern")


def test_gpt_oss_has_attention_sinks_and_the_preset_agrees():
    # GptOssAttention's learned sinks are not a config field: the family says so (vLLM picks its kernel by them)
    imported = model_from_hf_config(load("gpt-oss-20b"))
    assert imported.attention.sinks and not model_from_hf_config(load("qwen3-8b")).attention.sinks
    assert model_presets()["gpt-oss-20b"].attention.sinks == imported.attention.sinks
