"""DeepSeek-V3.2's sparse attention in the step model: the work per query, the kernels' padded heads and slots.

Hand counts from the V3.2 shape (61 layers, 128 heads, latent 512 + rope 64, indexer 64 heads x 128, top-k 2,048):
  selected keys, absorbed form: 61 x 2 x 128 x (576 + 512) = 16,990,208 FLOPs per key;
  indexer: 61 x 2 x 64 x 128 = 999,424 FLOPs per key.
Kernel facts (attention_kernels.toml): FlashMLA's SM90 sparse kernels tile 64 query heads (csrc/sm90/prefill/sparse/
fwd.cu B_H = 64 at FlashMLA 1408756); without per-row valid counts (vLLM up to v0.13.0) they loop over all top-k
blocks; SM90's FP8 decode kernel takes no valid counts for V3.2 (splitkv_mla.cuh at FlashMLA 9241ae3).
"""

from dataclasses import replace

import pytest

from calculators import run, schema
from calculators.calcs.steptime import (
    StepModel,
    release_key,
    attention_fields,
    attention_terms,
    bound_deployment,
    deployment,
    sparse_head_padding,
    sparse_mla_kernel,
)
from calculators.calibration import _deployment, rows
from calculators.catalog import accelerator_presets, model_presets
from calculators.schema import validate

V32 = model_presets()["deepseek-v3.2"]
SELECTED = 61 * 2 * 128 * (576 + 512)
INDEXER = 61 * 2 * 64 * 128


def dep(hardware="h200", gpus=8, kv="bf16", **inputs):
    v = validate(
        schema("latency")["inputs"],
        {"model": "deepseek-v3.2", "hardware": hardware, "num_gpus": gpus, "kv_dtype": kv, **inputs},
    )
    return deployment(v)


def test_both_phases_attend_the_selected_keys_in_the_absorbed_form_and_the_indexer_scores_every_key():
    assert attention_terms(V32) == attention_terms(V32, prefill=True) == [(SELECTED, 2048), (INDEXER, None)]
    assert SELECTED == 16_990_208 and INDEXER == 999_424
    dense = attention_terms(V32, sparse=False)  # what the sparse-attention calculator compares against
    assert dense == [(61 * 2 * 128 * (576 + 512), None)]
    assert attention_terms(V32, prefill=True, sparse=False) == [(61 * 2 * 128 * (192 + 128), None)]


def test_heads_pad_to_the_kernels_tile_per_gpu():
    assert sparse_head_padding(dep("h200", 8)) == 4.0  # 16 heads a GPU run as 64
    assert sparse_head_padding(dep("h200", 2)) == 1.0  # 64 a GPU: a whole tile
    assert sparse_head_padding(dep("b200", 8)) == 8.0  # Blackwell's tile is 128
    assert sparse_head_padding(dep("a100-80gb", 8)) == 1.0  # no FlashMLA sparse kernel named: no padding
    assert sparse_head_padding(bound_deployment(dep("h200", 8))) == 1.0


def test_a_decode_query_pays_padded_selected_keys_and_the_indexer_at_the_bf16_rate():
    d = dep("h200", 8)
    sm = StepModel(d)
    bf16 = accelerator_presets()["h200"].dense_flops_per_s["bf16"]
    assert d.attention_flops_per_s == bf16  # FlashMLA's sparse kernels multiply in BF16
    w = d.peak_flops_per_s / bf16
    for t, keys in ((100, 100), (5000, 2048)):
        flops, _ = sm.per_sequence(t)
        assert flops - sm.matmul_per_token == pytest.approx(w * (4 * SELECTED * keys + INDEXER * t), rel=1e-12)


def test_a_release_that_works_through_every_slot_pays_all_2048_at_any_context():
    old = StepModel(replace(dep("h200", 8), sparse_all_slots=True))
    new = StepModel(dep("h200", 8))
    w = old.attention_weight
    assert old.per_sequence(100)[0] - new.per_sequence(100)[0] == pytest.approx(w * 4 * SELECTED * (2048 - 100))
    assert old.per_sequence(5000)[0] == pytest.approx(new.per_sequence(5000)[0], rel=1e-12)
    # a 100-token prompt: every query works through 2,048 slots, against 1 + 2 + ... + 100 valid ones
    prompt = old.per_prompt(100)[0] - new.per_prompt(100)[0]
    assert prompt == pytest.approx(w * 4 * SELECTED * (2048 * 100 - 100 * 101 / 2), rel=1e-12)
    full, windowed, own = old.prefill_attention(100)
    assert windowed == 0 and own == pytest.approx(SELECTED * 5050 + INDEXER * 5050)
    assert full == pytest.approx(w * (4 * SELECTED * 2048 * 100 + INDEXER * 5050), rel=1e-12)


def test_which_kernels_work_through_every_slot_by_release_chip_and_cache():
    h200, b200 = accelerator_presets()["h200"], accelerator_presets()["b200"]
    assert sparse_mla_kernel(V32, h200, "bf16", "v0.13.0") == (64, True)
    assert sparse_mla_kernel(V32, h200, "bf16", "v0.11.0") == (64, True)
    assert sparse_mla_kernel(V32, h200, "bf16", "v0.14.0") == (64, False)
    assert sparse_mla_kernel(V32, h200, "bf16") == (64, False)  # the release the calculators model
    assert sparse_mla_kernel(V32, h200, "fp8") == (64, True)  # the FP8 decode kernel gets no valid counts
    assert sparse_mla_kernel(V32, b200, "fp8") == (128, True)
    assert sparse_mla_kernel(V32, b200, "bf16") == (128, False)
    assert sparse_mla_kernel(V32, accelerator_presets()["mi300x"], "bf16", "v0.11.0") == (1, False)
    assert sparse_mla_kernel(model_presets()["deepseek-v3"], h200, "bf16", "v0.11.0") == (1, False)
    assert release_key("v0.13.0") == (0, 13, 0) and release_key("0.5.5.post1") == (0, 5, 5)
    assert release_key("v1.2.0rc1") == (1, 2, 0)


def test_a_decode_step_reads_the_selected_latents_and_every_indexer_key():
    sm = StepModel(dep("h200", 8))
    assert sm.per_sequence(5000)[1] == 61 * (2048 * 576 * 2 + 5000 * 132)
    assert sm.per_sequence(1000)[1] == 61 * 1000 * (576 * 2 + 132)


def test_the_ledgers_v32_rows_run_vllm_v0_13_0_kernels():
    v32 = [r for r in rows() if r["model"] == "deepseek-v3.2" and r["engine"] == "vLLM" and r["estimate"]]
    assert v32 and {r["engine_version"] for r in v32} == {"v0.13.0"}
    steps = _deployment(v32[0], False)
    group = getattr(steps, "group", steps)  # the sharded deployment's TP group, or the step model itself
    assert group.dep.sparse_all_slots and sparse_head_padding(group.dep) == 4.0
    assert not _deployment(v32[0], True).dep.sparse_all_slots  # the bound drops the unused slots


def test_every_calculator_takes_the_kernels_from_the_kv_format_alike():
    """The quantization calculator swaps KV formats on one deployment: it must get the sparse kernels' BF16 rate and
    the FP8 cache's every-slot rule as deployment() does (attention_fields)."""
    h200 = accelerator_presets()["h200"]
    bf16 = h200.dense_flops_per_s["bf16"]
    fields = attention_fields(V32, h200, "fp8", "fp8")
    want = {"attention_flops_per_s": bf16, "sparse_head_tile": 64, "sparse_all_slots": True}
    assert fields == want | {"attention_kernel_efficiency": 1.0}  # FlashMLA's kernels, not Triton's
    deployed = dep("h200", 8, kv="fp8", weight_dtype="fp8", compute_dtype="fp8")
    assert fields == {k: getattr(deployed, k) for k in fields}
    q = run("quantization", {"model": "deepseek-v3.2", "hardware": "h200", "num_gpus": 8, "kv_dtype": "fp8"})
    assert q["attention_flops_per_s"] == bf16
