"""LoRA adapters (calcs/lora.py) and the lora_capacity calculator: sizes by hand, a published adapter's
size, vLLM's slot rule, and the checks on what is not modelled."""

from __future__ import annotations

import pytest

from calculators import api
from calculators.calcs import lora
from calculators.catalog import model_presets
from calculators.errors import InputError

MODELS = model_presets()


def test_adapter_params_by_hand_llama_3_1_8b():
    # d = 4096, 32 query heads and 8 KV heads of 128, 32 layers: q 4096→4096, k and v 4096→1024, o 4096→4096
    m = MODELS["llama-3.1-8b"]
    per_layer = (4096 + 4096) + (4096 + 1024) + (4096 + 1024) + (4096 + 4096)
    assert lora.adapter_params(m, 16, lora.TARGETS["qkvo"]) == 16 * per_layer * 32
    # the FFN: gate and up 4096→14336, down 14336→4096
    ffn = 3 * (4096 + 14336)
    assert lora.adapter_params(m, 8, lora.MODULES) == 8 * (per_layer + ffn) * 32
    assert lora.flops_per_token(m, 16, lora.TARGETS["qkvo"]) == 2 * 16 * per_layer * 32


def test_a_published_adapter_size():
    """bertin-project/bertin-alpaca-lora-7b (Hugging Face, commit 61d05ab): r = 8 on q_proj and v_proj of
    LLaMA-7B, saved by PEFT in FP32; its adapter_model.bin is 16,822,989 bytes (the LFS pointer's size).
    LLaMA-7B has Llama 2 7B's shapes (32 layers, d = 4096, MHA). 8 × (4096 + 4096) × 2 × 32 × 4 B =
    16,777,216 B; the rest (0.27 %) is the pickle's names and headers: tolerance 0.5 %."""
    size = lora.adapter_bytes(MODELS["llama-2-7b"], 8, lora.TARGETS["qv"], 4.0)
    assert size == 16_777_216
    assert size == pytest.approx(16_822_989, rel=0.005)


def test_tensor_parallel_shards_as_vllm_does():
    m = MODELS["llama-3.1-8b"]
    whole = lora.adapter_bytes(m, 16, ("q",), 2.0)
    assert lora.adapter_bytes_per_gpu(m, 16, ("q",), 2.0, 1) == whole
    # column-parallel q: A (r × d_in) whole on every GPU, B's outputs split
    assert lora.adapter_bytes_per_gpu(m, 16, ("q",), 2.0, 2) == 16 * (4096 + 2048) * 32 * 2.0
    # row-parallel o: A's inputs split, B whole
    assert lora.adapter_bytes_per_gpu(m, 16, ("o",), 2.0, 4) == 16 * (1024 + 4096) * 32 * 2.0


def test_slots_come_out_of_the_kv_pool():
    base = api.run("lora_capacity", {"max_loras": 1})
    r = api.run("lora_capacity", {})
    per_token = 32 * 2 * 8 * 128 * 2  # Llama 3.1 8B, BF16 KV: layers × (K, V) × heads × dim × bytes
    slot = 64 * (4096 * 2 + 4096 + 1024) * 2 * 32 * 2 + 64 * 3 * (4096 + 14336) * 32 * 2  # all 7 modules, rank 64
    # vLLM v0.33.0 also wraps embed_tokens (A vocab × r, B d × r) and lm_head (A r × d, B vocab × r), unsharded
    slot += 2 * 64 * (128256 + 4096) * 2
    assert r["slot_bytes_per_gpu"] == slot
    assert r["kv_tokens_per_slot"] == slot // per_token
    lost = base["kv_tokens_with_lora"] - r["kv_tokens_with_lora"]
    assert abs(lost - 15 * slot / per_token) <= 1
    xs = r["series"]["kv_vs_slots"]["y"][0]["values"]
    assert xs == sorted(xs, reverse=True)


def test_vocab_slots_only_for_models_whose_vllm_class_lists_them():
    # Qwen2 (vllm/model_executor/models/qwen2.py) declares no embedding_modules: linear layers only
    qwen2 = api.run("lora_capacity", {"model": "qwen2.5-7b", "max_lora_rank": "16"})
    m = MODELS["qwen2.5-7b"]
    assert qwen2["slot_bytes_per_gpu"] == lora.slot_bytes_per_gpu(m, 16, lora.MODULES, 2.0, 1)
    llama = api.run("lora_capacity", {"max_lora_rank": "16"})
    linear = lora.slot_bytes_per_gpu(MODELS["llama-3.1-8b"], 16, lora.MODULES, 2.0, 1)
    assert llama["slot_bytes_per_gpu"] == linear + 2 * 16 * (128256 + 4096) * 2


def test_slot_rank_and_modules_set_the_reservation_not_the_adapter():
    small = api.run("lora_capacity", {"adapter_rank": 8})
    big = api.run("lora_capacity", {"adapter_rank": 64})
    assert small["slot_bytes_per_gpu"] == big["slot_bytes_per_gpu"]
    assert big["adapter_bytes"] == 8 * small["adapter_bytes"]
    restricted = api.run("lora_capacity", {"slot_modules": "adapter"})
    assert restricted["slot_bytes_per_gpu"] < small["slot_bytes_per_gpu"]


def test_swap_time_is_bytes_over_the_link():
    r = api.run("lora_capacity", {"host_link": "pcie4-x16", "link_efficiency": 1.0})
    assert r["swap_time_s"] == pytest.approx(r["adapter_bytes"] / 32e9)


def test_step_bound_reads_each_adapter_once():
    one = api.run("lora_capacity", {"adapters_in_batch": 1})
    eight = api.run("lora_capacity", {"adapters_in_batch": 8})
    assert eight["lora_step_s"] == pytest.approx(8 * one["lora_step_s"])  # memory-bound at T = 64
    capped = api.run("lora_capacity", {"adapters_in_batch": 100, "max_loras": 8})
    assert capped["lora_step_s"] == pytest.approx(eight["lora_step_s"] * 1.0, rel=1e-9)
    assert capped["notes"]


@pytest.mark.parametrize(
    "inputs, field",
    [
        ({"model": "qwen3-30b-a3b", "target_modules": "all"}, "target_modules"),
        ({"model": "deepseek-v3"}, "target_modules"),
        ({"adapter_rank": 128}, "adapter_rank"),
    ],
)
def test_what_is_not_modelled_says_so(inputs, field):
    with pytest.raises(InputError) as e:
        api.run("lora_capacity", inputs)
    assert e.value.field == field
