"""Cross-layer KV sharing: layers that read an earlier layer's KV store none (review parts-4-5 (c)
Part 4 item 1). Semantics of Gemma 3n's num_kv_shared_layers (the last N layers share), which vLLM's
CacheConfig.kv_sharing_fast_prefill docstring names with YOCO (arXiv 2405.05254); CLA (arXiv
2405.12981) is the same saving with another pairing."""

import pytest

from calculators import InputError, run
from calculators.calcs.steptime import attention_terms
from calculators.catalog import model_presets

LLAMA = {
    "id": "llama-shared",
    "name": "Llama 3.1 8B, last 16 layers sharing KV",
    "num_layers": 32,
    "hidden_size": 4096,
    "vocab_size": 128256,
    "intermediate_size": 14336,
    "attention": {"kind": "gqa", "num_heads": 32, "num_kv_heads": 8, "head_dim": 128},
}


def test_shared_layers_store_nothing():
    plain = run("kv_cache", {"model": dict(LLAMA), "context_tokens": 8192})
    shared = run("kv_cache", {"model": dict(LLAMA, kv_shared_layers=16), "context_tokens": 8192})
    assert shared["kv_bytes_per_token"] == plain["kv_bytes_per_token"] / 2 == 16 * 2 * 8 * 128 * 2
    assert shared["kv_bytes_per_sequence"] == plain["kv_bytes_per_sequence"] / 2


def test_shared_layers_still_compute_attention():
    from calculators.checks import model_from_dict

    shared = model_from_dict(dict(LLAMA, kv_shared_layers=16))
    assert attention_terms(shared) == attention_terms(model_presets()["llama-3.1-8b"])


def test_capacity_doubles_when_half_the_layers_share():
    base = dict(hardware="h100-sxm", tensor_parallel=1, context_tokens=8192)
    plain = run("memory", dict(base, model=dict(LLAMA)))["kv_bytes_per_sequence_per_gpu"]
    shared = run("memory", dict(base, model=dict(LLAMA, kv_shared_layers=16)))["kv_bytes_per_sequence_per_gpu"]
    assert shared == plain / 2


def test_a_sharing_kind_needs_a_storing_layer_of_that_kind():
    bad = dict(
        LLAMA,
        num_layers=4,
        layer_kinds=["full", "full", "full", "sliding"],
        sliding_window_tokens=512,
        kv_shared_layers=1,
    )
    with pytest.raises(InputError) as e:
        run("kv_cache", {"model": bad})
    assert e.value.field == "model.kv_shared_layers"
