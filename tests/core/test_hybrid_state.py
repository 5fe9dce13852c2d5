"""Hybrid linear-attention / state-space models: a constant state per sequence plus a few attention
layers (review parts-4-5 (c) Part 4 item 1).

State shapes reproduced from vLLM's MambaStateShapeCalculator (vllm/model_executor/layers/mamba/
mamba_utils.py): gated_delta_net_state_shape conv (kernel-1, 2*Hk*dk + Hv*dv) and temporal
(Hv, dv, dk); mamba1_state_shape conv (inner, kernel-1) and SSM (inner, d_state). Configs: Qwen3-Next
80B-A3B and AI21 Jamba 1.5 Mini config.json (models.toml sources).
"""

import pytest

from calculators import InputError, run
from calculators.calcs.kv_cache import state_bytes_per_sequence, state_elements_per_layer
from calculators.catalog import model_presets

P = model_presets()
QNEXT, JAMBA = P["qwen3-next-80b-a3b"], P["jamba-1.5-mini"]


def test_gated_deltanet_layer_state_matches_vllm_shapes():
    conv, recurrent = state_elements_per_layer(QNEXT.linear_mixer)
    assert conv == 3 * (2 * 16 * 128 + 32 * 128)
    assert recurrent == 32 * 128 * 128
    assert state_bytes_per_sequence(QNEXT, 2) == 36 * (conv * 2 + recurrent * 2)
    assert state_bytes_per_sequence(QNEXT, 4) == 36 * (conv * 2 + recurrent * 4)  # FP32 SSM, BF16 conv


def test_mamba1_layer_state_matches_vllm_shapes():
    assert state_elements_per_layer(JAMBA.linear_mixer) == (3 * 8192, 8192 * 16)
    assert state_bytes_per_sequence(JAMBA, 2) == 28 * (3 * 8192 + 8192 * 16) * 2


@pytest.mark.parametrize(
    "mid, attention_layers, per_layer",
    [("qwen3-next-80b-a3b", 12, 2 * 2 * 256 * 2), ("jamba-1.5-mini", 4, 2 * 8 * 128 * 2)],
)
def test_only_attention_layers_grow_with_context(mid, attention_layers, per_layer):
    short = run("kv_cache", {"model": mid, "context_tokens": 1024})
    long = run("kv_cache", {"model": mid, "context_tokens": 131072})
    assert short["kv_bytes_per_token"] == long["kv_bytes_per_token"] == attention_layers * per_layer
    assert short["kv_bytes_per_token_all_layers"] == attention_layers * per_layer
    assert short["state_bytes_per_sequence"] == long["state_bytes_per_sequence"] > 0
    assert long["kv_bytes_per_sequence"] == 131072 * attention_layers * per_layer + long["state_bytes_per_sequence"]


def test_state_splits_over_tp_heads_but_not_over_dcp():
    base = dict(model="qwen3-next-80b-a3b", hardware="h200", tensor_parallel=2, context_tokens=8192)
    state = state_bytes_per_sequence(QNEXT, 2)
    kv = 8192 * 12 * 2 * 2 * 256 * 2
    plain = run("memory", base)["kv_bytes_per_sequence_per_gpu"]
    striped = run("memory", dict(base, decode_context_parallel=1))["kv_bytes_per_sequence_per_gpu"]
    assert plain == striped == pytest.approx(kv / 2 + state / 2)
    tp4_dcp2 = run("memory", dict(base, tensor_parallel=4, decode_context_parallel=2))["kv_bytes_per_sequence_per_gpu"]
    assert tp4_dcp2 == pytest.approx(kv / 2 / 2 + state / 4)  # 2 KV heads: TP 4 copies each twice, DCP 2 stripes


def test_fp32_state_input_changes_only_the_state():
    bf16 = run("kv_cache", {"model": "qwen3-next-80b-a3b"})
    fp32 = run("kv_cache", {"model": "qwen3-next-80b-a3b", "state_dtype": "fp32"})
    assert fp32["kv_bytes_full_layers"] == bf16["kv_bytes_full_layers"]
    assert fp32["state_bytes_per_sequence"] - bf16["state_bytes_per_sequence"] == 36 * 32 * 128 * 128 * 2


def test_mamba2_layer_state_matches_vllm_shapes():
    """mamba2_state_shape: conv (kernel-1, inner + 2 G N), temporal (heads, head_dim, d_state)."""
    nemo = P["nemotron-h-8b"]
    assert state_elements_per_layer(nemo.linear_mixer) == (3 * (8192 + 2 * 8 * 128), 128 * 64 * 128)
    out = run("kv_cache", {"model": "nemotron-h-8b", "context_tokens": 8192})
    assert out["kv_bytes_per_token"] == 4 * 2 * 8 * 128 * 2  # MLP blocks hold nothing
    assert out["state_bytes_per_sequence"] == 24 * (3 * 10240 + 128 * 64 * 128) * 2


def test_non_hybrid_models_hold_no_state():
    assert run("kv_cache", {"model": "llama-3.1-8b"})["state_bytes_per_sequence"] == 0


def test_linear_layers_need_a_mixer():
    bad = {
        "id": "x",
        "name": "x",
        "num_layers": 4,
        "hidden_size": 64,
        "vocab_size": 10,
        "intermediate_size": 64,
        "layer_pattern": ["linear", "full"],
        "attention": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
    }
    with pytest.raises(InputError) as e:
        run("kv_cache", {"model": bad})
    assert e.value.field == "model.linear_mixer"
    bad["linear_mixer"] = {"kind": "mamba2", "num_heads": 4}
    with pytest.raises(InputError) as e:
        run("kv_cache", {"model": bad})
    assert e.value.field.startswith("model.linear_mixer.")


def test_mlp_only_layers_need_the_split_ffn_flag():
    bad = {
        "id": "x",
        "name": "x",
        "num_layers": 2,
        "hidden_size": 64,
        "vocab_size": 10,
        "intermediate_size": 64,
        "layer_kinds": ["full", "mlp"],
        "attention": {"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16},
    }
    with pytest.raises(InputError) as e:
        run("kv_cache", {"model": bad})
    assert e.value.field == "model.ffn_in_mixer_layers"
