"""SGLang's FlashInfer all-reduce fused with the residual add and RMSNorm: the "fused" algorithm (direct.py), the
kernels it absorbs (overhead.py), the releases that turn it on by themselves (step_overheads.toml
[sglang_allreduce_fusion]) and what it does to the ledger's SGLang rows of DeepSeek."""

from __future__ import annotations

import pytest

from calculators import calibration, catalog, run
from calculators.calcs.latency import SCHEMA as LATENCY
from calculators.calcs.sharding import steps_for
from calculators.schema import validate
from calculators.calcs.direct import fused_max_tokens
from calculators.calcs.overhead import fused_norms, sglang_fuses_allreduce
from calculators.errors import InputError
from calculators.model import Model
from calculators.params import is_moe_layer
from calculators.resolve import resolve_model


def _ar(**kw) -> dict:
    return run("allreduce", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 8, **kw})


def test_the_fused_kernels_time_is_sglang_pr_7621s_and_meets_vllm_pr_22086_on_two_h100():
    """SGLang PR #7621: the fused kernel took 8.7 us on eight B200 (13.5 us for the all-reduce and the add-RMSNorm
    apart). A comment on vLLM PR #22086 (closed) measured FlashInfer's fused one-shot on two H100 at 32 tokens of 8,192
    (BF16, 0.5 MiB) at 0.010 ms, printed to the microsecond: the model, 8.7 us + 0.5 MiB over NVLink 4's 450 GB/s, is
    9.9; at 64 and 128 tokens it measured 0.016 and 0.030 ms, which the model's bytes term understates."""
    fused = catalog.fused_allreduce()
    assert (fused["kernel_s"], fused["max_tokens"]) == (8.7e-6, 2048)
    two_h100 = _ar(num_gpus=2, batch_size=32, algorithm="fused")["time_per_allreduce_s"]
    assert two_h100 == pytest.approx(8.7e-6 + 32 * 8192 * 2 / 450e9)
    assert 9.5e-6 <= two_h100 < 10.5e-6
    for tokens, measured in ((64, 16e-6), (128, 30e-6)):  # the model below the measurement there: said in the data
        assert _ar(num_gpus=2, batch_size=tokens, algorithm="fused")["time_per_allreduce_s"] < 0.8 * measured
    b200 = run(
        "allreduce", {"model": "deepseek-r1", "hardware": "b200", "num_gpus": 8, "batch_size": 1, "algorithm": "fused"}
    )["time_per_allreduce_s"]
    assert 8.7e-6 < b200 < 8.8e-6 < 13.5e-6  # one token's 14 KiB adds three hundredths of a microsecond


def test_the_fused_kernel_moves_two_shots_bytes():
    small, big = 16 * 8192 * 2, 4096 * 8192 * 2
    assert _ar(batch_size=16, algorithm="fused")["time_per_allreduce_s"] == pytest.approx(8.7e-6 + 1.75 * small / 450e9)
    assert _ar(batch_size=4096, algorithm="fused")["time_per_allreduce_s"] == pytest.approx(8.7e-6 + 1.75 * big / 450e9)
    assert _ar(num_gpus=2, batch_size=16, algorithm="fused")["time_per_allreduce_s"] == pytest.approx(
        8.7e-6 + small / 450e9
    )


@pytest.mark.parametrize("hardware", ["a100-80gb", "mi300x", "mi355x"])
def test_the_fused_algorithm_is_refused_off_hopper_and_blackwell(hardware):
    with pytest.raises(InputError) as exc:
        _ar(hardware=hardware, num_gpus=2, algorithm="fused")
    assert exc.value.to_json()["field"] == "algorithm"
    assert "Hopper or Blackwell" in exc.value.to_json()["message"]


def _arch(model_id: str) -> str:
    return resolve_model(model_id).architecture


@pytest.mark.parametrize(
    "release, model, chip, fused",
    [
        ((0, 5, 0), "gpt-oss-120b", "b200", False),  # no rule before 0.5.1
        ((0, 5, 1), "gpt-oss-120b", "b200", True),  # 0.5.1 to 0.5.3: gpt-oss only
        ((0, 5, 3), "deepseek-r1", "b200", False),
        ((0, 5, 6), "deepseek-r1", "b200", True),  # 0.5.4 to 0.5.6: DeepSeek and gpt-oss on 10.x
        ((0, 5, 6), "deepseek-r1", "h200", False),
        ((0, 5, 6), "qwen3-235b-a22b", "b200", False),  # the fitted prefill time's sweep stays unfused
        ((0, 5, 7), "deepseek-r1", "h200", True),  # 0.5.7: Hopper too, and GLM-4.5 and Qwen3 MoE
        ((0, 5, 7), "qwen3-235b-a22b", "b200", True),
        ((0, 5, 7), "glm-4.5-air", "h100-sxm", True),
        ((0, 5, 9), "glm-4.5-air", "a100-80gb", False),
        ((0, 5, 9), "deepseek-v3.2", "h200", False),  # V3.2's class joined in 0.5.11
        ((0, 5, 12), "deepseek-v3.2", "h200", True),
        ((0, 5, 12), "qwen3-32b", "h100-sxm", False),  # dense Qwen3 never
        ((0, 5, 12), "deepseek-r1", "mi325x", False),
        ((0, 5, 12), "deepseek-r1", "h100-pcie", True),  # compute capability 9.0 too
        ((0, 5, 13), "nemotron-h-8b", "h100-sxm", False),  # Nemotron-H's class joined in 0.5.14
        ((0, 5, 14), "nemotron-h-8b", "h100-sxm", True),
    ],
)
def test_the_releases_that_fuse_by_themselves(release, model, chip, fused):
    assert sglang_fuses_allreduce(release, _arch(model), chip) is fused


def test_a_fused_group_drops_each_layers_norms_up_to_sglangs_largest_fused_step():
    row = next(r for r in calibration._rows() if r["group"] == "inferencex-dsr1-b300-fp4-v0512-1k1k-tp8")
    assert calibration.core_inputs(row)["algorithm"] == "fused"
    assert "algorithm" not in calibration.core_inputs(row, bound=True)  # a bound prices no communication
    steps = calibration._deployment(row, False, calibration.ledger_mode("fitted"))
    ov = steps.group.overhead
    model = resolve_model("deepseek-r1")
    # every layer's two all-reduces absorb the norm after each but the last layer's FFN one, which runs plain before
    # the final norm; the FP4 run's EP 8 without DP attention all-reduces its MoE layers over the TP group too
    assert steps.p.ep == 8 and ov.fused_kernels == fused_norms(model, True, "sglang") == 2 * model.num_layers - 1
    assert ov.kernels(1) == ov.kernels(2048) == ov.eager_kernels - (2 * model.num_layers - 1)
    assert ov.kernels(2049) == ov.eager_kernels
    assert ov.decode_s(1) == pytest.approx(ov.per_kernel_s + ov.kernels(1) * ov.gpu_kernel_s)


def test_only_sglang_rows_of_the_listed_classes_on_hopper_and_blackwell_run_fused():
    fused = {r["group"] for r in calibration._rows() if calibration.sglang_fused(r)}
    assert {
        "inferencex-dsr1-h200-fp8",
        "inferencex-dsr1-b200-fp8-v0512-1k1k",
        "sglang-cookbook-deepseek-r1-b200",
        "inferencex-dsr1-b300-fp4-v0512-1k1k-tp4",
    } <= fused
    rows = {r["group"]: r for r in calibration._rows()}
    assert all(rows[g]["engine"] == "SGLang" and rows[g]["hardware"] in ("h200", "b200", "b300") for g in fused)
    assert "sglang-cookbook-qwen3-235b-a22b-b200" not in fused  # 0.5.6 fused no Qwen3 MoE
    fitted_on = {g for groups in calibration.fitted_groups().values() for g in groups}
    assert not fused & fitted_on  # no fitted constant's training rows move


def test_sglang_v0512s_deepseek_decode_comes_within_12_percent_on_b200_and_b300():
    """InferenceX's DeepSeek-R1 FP8 sweeps on SGLang v0.5.12 (pull requests #3363 and #3175): with the fused
    all-reduces every TPOT at 1 to 64 users is within 12% of the measured (without them 7 to 19% too slow)."""
    groups = {"inferencex-dsr1-b200-fp8-v0512-1k1k", "inferencex-dsr1-b300-fp8-v0512-1k1k"}
    errors = [p["error"] for p in calibration.predictions() if p["group"] in groups and p["metric"] == "tpot_s"]
    assert len(errors) == 14
    assert max(abs(e) for e in errors) < 0.12


def test_a_model_without_an_architecture_never_fuses():
    assert Model.__dataclass_fields__["architecture"].default == ""
    assert not sglang_fuses_allreduce((0, 5, 12), "", "b200")


@pytest.mark.parametrize(
    "chip, tp, model, largest",
    [
        ("h100-sxm", 8, "llama-3.1-70b", 32),  # 0.5 MiB ÷ (8,192 × 2 B)
        ("h100-sxm", 4, "llama-3.1-70b", 128),  # 2 MiB
        ("h200", 2, "llama-3.1-70b", 4096),  # 64 MiB
        ("b200", 8, "deepseek-r1", 73),  # 1 MiB ÷ (7,168 × 2 B)
        ("b300", 8, "deepseek-r1", 292),  # 4 MiB on compute capability 10.3
        ("h100-sxm", 6, "llama-3.1-70b", 0),  # a TP size vLLM's table does not list
        ("a100-80gb", 8, "llama-3.1-70b", 0),
    ],
)
def test_vllms_largest_fused_step_is_its_size_table_over_a_bf16_row(chip, tp, model, largest):
    """vLLM v0.33.0 FI_ALLREDUCE_FUSION_MAX_SIZE_MB (compilation/passes/fusion/allreduce_rms_fusion.py) and
    AllReduceFusionPass.max_token_num = size ÷ (hidden × 2 bytes); SGLang's is 2,048 tokens whatever the size."""
    hidden = resolve_model(model).hidden_size
    assert fused_max_tokens("vllm", chip, tp, hidden) == largest
    assert fused_max_tokens("sglang", chip, tp, hidden) == 2048


def _latency(**kw) -> dict:
    base = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 8, "input_tokens": 1024, "output_tokens": 256}
    return run("latency", {**base, **kw})


def test_vllms_fusion_prices_small_decode_steps_only_and_the_calculator_says_so():
    small, fused_small = _latency(batch_size=8), _latency(batch_size=8, algorithm="fused")
    assert fused_small["tpot_s"] < small["tpot_s"]
    assert "up to 32 tokens at TP 8" in small["notes"][0] and not fused_small.get("notes")
    # above vLLM's 32 tokens at TP 8 on Hopper the decode step runs its all-reduces and norms apart
    assert _latency(batch_size=64, algorithm="fused")["tpot_s"] == pytest.approx(_latency(batch_size=64)["tpot_s"])
    # in an SGLang mode the same group fuses up to 2,048 tokens, but SGLang fuses Llama only where asked: no note
    sglang = _latency(batch_size=64, step_overhead="sglang-piecewise", algorithm="fused")
    assert sglang["tpot_s"] < _latency(batch_size=64, step_overhead="sglang-piecewise")["tpot_s"]
    assert not _latency(batch_size=8, step_overhead="sglang-piecewise").get("notes")
    assert (
        "SGLang (from v0.5.7) runs this model's all-reduces"
        in _latency(
            model="deepseek-r1", weight_dtype="fp8", compute_dtype="fp8", batch_size=8, step_overhead="sglang-piecewise"
        )["notes"][0]
    )


def _steps(algorithm: str, **parallelism):
    """The latency calculator's steps of DeepSeek-R1 on eight B200 in SGLang's mode under this all-reduce algorithm."""
    inputs = {"model": "deepseek-r1", "hardware": "b200", "num_gpus": 8, "weight_dtype": "fp8", "kv_dtype": "fp8"}
    inputs.update(compute_dtype="fp8", step_overhead="sglang-piecewise", algorithm=algorithm, **parallelism)
    return steps_for(validate(LATENCY["inputs"], inputs))


def test_expert_parallelism_beside_tp_attention_all_reduces_its_moe_layers_over_the_tp_group():
    """The engines dispatch by all-to-all only with DP ranks (vLLM v0.34.0 fused_moe/config.py use_all2all_kernels;
    SGLang with --moe-a2a-backend): EP 8 under TP 8 attention all-reduces each MoE layer's output, fused or not; with
    DP attention it is the all-to-all, which has no norm after it to fuse."""
    for algorithm in ("ring", "fused"):
        tp, ep = _steps(algorithm), _steps(algorithm, ep=8)
        tp_comm, moe_comm = tp.dm._tp_comm(tp.p, 8, 8)
        assert ep.dm._tp_comm(ep.p, 8, 8) == (tp_comm, moe_comm) and moe_comm == 0.0
        assert ep.group.overhead.fused_kernels == tp.group.overhead.fused_kernels
    # DP 2 beside TP 4 without EP: the MoE layers all-reduce over all eight, never fused (no norm follows that one)
    wide, wide_ring = _steps("fused", num_gpus=4, dp=2), _steps("ring", num_gpus=4, dp=2)
    assert wide.dm._tp_comm(wide.p, 4, 8)[1] == wide_ring.dm._tp_comm(wide_ring.p, 4, 8)[1] > 0
    model = resolve_model("deepseek-r1")
    dense = sum(not is_moe_layer(model, i) for i in range(model.num_layers))
    assert wide.group.overhead.fused_kernels == model.num_layers + dense  # the attention and dense layers' norms
    dp = _steps("fused", num_gpus=1, dp=8, ep=8)
    assert dp.dm._tp_comm(dp.p, 1, 8)[1] == _steps("ring", num_gpus=1, dp=8, ep=8).dm._tp_comm(dp.p, 1, 8)[1] > 0
    assert dp.group.overhead.fused_kernels == 0  # one GPU per attention rank: nothing to fuse


def test_the_fused_count_matches_the_norms_dropped():
    """A fused step prices as many fused all-reduces as the norms it drops; the embedding's and the last layer's FFN
    all-reduce run plain (NCCL's ring), as does every one above the engine's largest fused step."""
    fused, ring = _steps("fused"), _steps("ring")
    model = resolve_model("deepseek-r1")
    n = fused.group.overhead.fused_kernels
    priced, _ = fused.dm._tp_comm(fused.p, 8, 8)
    ring.dm._tp_comm(ring.p, 8, 8)
    one_fused, one_ring = fused.dm._comm[("ar", 8, 8)], ring.dm._comm[("ar", 8, 8)]
    assert one_fused < one_ring and n == 2 * model.num_layers - 1
    assert priced == pytest.approx(
        n * one_fused + (2 * model.num_layers + 1 - n) * one_ring + ring.dm._comm[("g", 8, 8)]
    )
    assert fused.dm._tp_comm(fused.p, 4096, 4096, 1) == pytest.approx(ring.dm._tp_comm(ring.p, 4096, 4096, 1))


def test_vllm_fuses_the_embeddings_and_the_last_layers_all_reduce_too():
    """vLLM v0.34.0's pass fuses every all-reduce an RMSNorm follows: the embedding's (before the first block's norm)
    and the last layer's (before the final norm) with the rest, 2L + 1 of them and as many norms; SGLang 2L - 1."""
    inputs = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "num_gpus": 8, "algorithm": "fused"}
    vllm = steps_for(validate(LATENCY["inputs"], {**inputs, "step_overhead": "fitted"}))
    sglang = steps_for(validate(LATENCY["inputs"], {**inputs, "step_overhead": "sglang-piecewise"}))
    layers = resolve_model("llama-3.1-70b").num_layers
    assert vllm.group.overhead.fused_kernels == 2 * layers + 1 and sglang.group.overhead.fused_kernels == 2 * layers - 1
    priced, _ = vllm.dm._tp_comm(vllm.p, 8, 8)  # 8 tokens: under vLLM's 32 at TP 8 on Hopper
    assert priced == pytest.approx((2 * layers + 1) * vllm.dm._comm[("ar", 8, 8)] + vllm.dm._comm[("g", 8, 8)])
    # above the cap both run plain, and every norm is launched
    assert vllm.group.overhead.kernels(64) == vllm.group.overhead.eager_kernels
    # a multimodal class (embeddings computed outside the compiled graph) and Gemma (embeddings scaled before the first
    # norm) fuse 2L: vLLM v0.34.0's tests/compile/fusions_e2e/models.py expects n_layers * 2 for Llama 4 Scout
    for name in ("llama-4-scout", "gemma-2-9b"):
        model = resolve_model(name)
        assert fused_norms(model, True, "vllm") == 2 * model.num_layers
        assert fused_norms(model, True, "sglang") == 2 * model.num_layers - 1
    assert fused_norms(resolve_model("gpt-oss-20b"), True, "vllm") == 2 * resolve_model("gpt-oss-20b").num_layers + 1


@pytest.mark.parametrize("model", ["opt-13b"])
def test_a_layernorm_model_fuses_nothing(model):
    """Both engines fuse an all-reduce with an RMSNorm only (vLLM v0.33.0's patterns; SGLang's fused path is its
    RMSNorm's): OPT builds LayerNorm, so no note, and the fused algorithm prices the plain ring."""
    inputs = {"model": model, "hardware": "h100-sxm", "num_gpus": 2, "batch_size": 8, "input_tokens": 512}
    plain, fused = run("latency", inputs), run("latency", {**inputs, "algorithm": "fused"})
    assert not plain.get("notes") and fused["tpot_s"] == pytest.approx(plain["tpot_s"])
    hidden = resolve_model(model).hidden_size
    assert fused_max_tokens("vllm", "h100-sxm", 2, hidden, resolve_model(model).architecture) == 0
