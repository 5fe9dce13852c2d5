"""Decode context parallelism as a KV-capacity lever (review parts-4-5 row 7).

vLLM --decode-context-parallel-size and SGLang --dcp-size stripe each sequence's KV by token
over DCP ranks of the tensor-parallel group, so a rank holds 1/DCP of what plain TP leaves it.
Rules reproduced from vLLM: DCP divides TP (vllm/config/parallel.py, commit 00193b8) and lies in
[1, TP / H_kv] (docs/serving/context_parallel_deployment.md, commit 020505c; MLA counts as one
KV head: "DeepSeek-R1 ... -tp 8 causes 8x KV cache duplication. We can consider adding -dcp 8").
"""

import pytest

from calculators import InputError, run
from calculators.calcs.memory import kv_fraction_per_gpu
from calculators.catalog import model_presets

V3 = dict(model="deepseek-v3", hardware="h200", tensor_parallel=8, weight_dtype="fp8", context_tokens=8192)


@pytest.mark.parametrize("dcp", [2, 4, 8])
def test_deepseek_v3_fp8_on_8_h200_sequences_scale_with_dcp(dcp):
    base = run("memory", V3)
    striped = run("memory", dict(V3, decode_context_parallel=dcp))
    assert striped["kv_budget_bytes_per_gpu"] == base["kv_budget_bytes_per_gpu"]  # no extra GPUs, same weights
    assert striped["kv_bytes_per_sequence_per_gpu"] == pytest.approx(base["kv_bytes_per_sequence_per_gpu"] / dcp)
    # floor() can lose at most one sequence per factor
    assert (
        dcp * base["max_concurrent_sequences"]
        <= striped["max_concurrent_sequences"]
        < dcp * (base["max_concurrent_sequences"] + 1)
    )


def test_gqa_dcp_removes_only_the_replication():
    """Qwen3-235B-A22B has 4 KV heads: at TP 8 each is held twice, and -dcp 2 removes that (vLLM docs case study)."""
    m = model_presets()["qwen3-235b-a22b"]
    assert kv_fraction_per_gpu(m, 8) == 1 / 4
    assert kv_fraction_per_gpu(m, 8, 2) == 1 / 8
    with pytest.raises(InputError) as e:
        kv_fraction_per_gpu(m, 8, 4)  # 4 > TP / H_kv = 2
    assert e.value.field == "decode_context_parallel" and "2" in e.value.message


@pytest.mark.parametrize("tp, dcp", [(8, 3), (8, 16), (4, 8), (16, 6)])
def test_dcp_must_divide_tp_and_not_exceed_it(tp, dcp):
    with pytest.raises(InputError) as e:
        run("memory", dict(V3, tensor_parallel=tp, decode_context_parallel=dcp))
    assert e.value.field == "decode_context_parallel"


def test_llama_70b_at_tp16_dcp2_halves_per_gpu_kv_again():
    """8 KV heads: TP 16 replicates each head twice; DCP 2 stripes them instead."""
    base = dict(model="llama-3.1-70b", hardware="h100-sxm", context_tokens=8192)
    tp8 = run("memory", dict(base, tensor_parallel=8))["kv_bytes_per_sequence_per_gpu"]
    tp16 = run("memory", dict(base, tensor_parallel=16))["kv_bytes_per_sequence_per_gpu"]
    tp16_dcp2 = run("memory", dict(base, tensor_parallel=16, decode_context_parallel=2))
    assert tp16 == tp8 and tp16_dcp2["kv_bytes_per_sequence_per_gpu"] == pytest.approx(tp8 / 2)


def test_tp_series_and_min_tp_skip_layouts_the_dcp_cannot_use():
    out = run("memory", dict(V3, decode_context_parallel=8))
    assert out["series"]["by_tensor_parallel"]["x"]["values"] == [8]
    assert out["min_tensor_parallel_to_fit"] == 8
