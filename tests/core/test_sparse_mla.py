"""DeepSeek-V3.2 sparse attention: exact cache bytes (review parts-4-5 (c) Part 4 item 1).

Sources reproduced: deepseek-ai/FlashMLA README @066b5ba ("each token's KV cache is 656 Bytes":
512 float8_e4m3 + 4 float32 scales + 64 bfloat16 rope); DeepSeek-V3.2-Exp inference/model.py @6d8cb70
(Indexer.k_cache float8_e4m3fn of index_head_dim 128, k_scale_cache float32 of 128 // block_size 128).
"""

import pytest

from calculators import InputError, run
from calculators.calcs.kv_cache import kv_bytes_per_token_per_layer
from calculators.params import total_params
from calculators.catalog import model_presets

V32 = model_presets()["deepseek-v3.2"]


def test_fp8_layer_token_is_656_latent_plus_132_indexer():
    assert kv_bytes_per_token_per_layer(V32.attention, 1) == 656 + 132


def test_bf16_layer_token_is_plain_latent_plus_fp8_indexer():
    assert kv_bytes_per_token_per_layer(V32.attention, 2) == 576 * 2 + 132


def test_sequence_bytes_are_layers_times_layer_bytes():
    out = run("kv_cache", {"model": "deepseek-v3.2", "kv_dtype": "fp8", "context_tokens": 4096})
    assert out["kv_bytes_per_sequence"] == 61 * 788 * 4096
    assert out["derivation"][0]["value"] == 788


def test_dense_mla_models_are_unchanged():
    out = run("kv_cache", {"model": "deepseek-v3", "kv_dtype": "fp8"})
    assert out["kv_bytes_per_token"] == 61 * 576


def test_indexer_adds_its_projections_to_the_v3_count():
    # wq_b 1536x8192, wk 7168x128, LayerNorm 2x128, weights_proj 7168x64, in each of 61 layers
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert total_params(V32) - total_params(model_presets()["deepseek-v3"]) == 61 * per_layer


def _model_with(attention: dict) -> dict:
    return {
        "id": "x",
        "name": "x",
        "num_layers": 2,
        "hidden_size": 64,
        "vocab_size": 10,
        "intermediate_size": 64,
        "attention": attention,
    }


def test_indexer_needs_mla():
    bad = _model_with({"kind": "gqa", "num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "index_head_dim": 128})
    with pytest.raises(InputError) as e:
        run("kv_cache", {"model": bad})
    assert e.value.field.endswith("index_head_dim")


def test_an_indexer_without_top_k_is_refused_naming_the_field():
    mla = {
        "kind": "mla",
        "num_heads": 4,
        "head_dim": 24,
        "v_head_dim": 16,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "q_lora_rank": 32,
        "index_head_dim": 16,
        "index_n_heads": 4,
    }
    with pytest.raises(InputError) as e:
        run("kv_cache", {"model": _model_with(mla)})
    assert e.value.field.endswith("index_topk")
    assert run("kv_cache", {"model": _model_with(mla | {"index_topk": 8})})["kv_bytes_per_token"] > 0
