"""Mixed weight formats: MoE expert weights in one format, everything else in another (gpt-oss)."""

import pytest

from calculators import run
from calculators.params import embedding_params, expert_params, total_params, weight_bytes
from calculators.catalog import model_presets

GPT_OSS = model_presets()["gpt-oss-120b"]
NATIVE = dict(weight_dtype="bf16", expert_weight_dtype="mxfp4")  # as gpt-oss ships


def test_expert_params_match_the_model_card_split():
    # gpt-oss model card (arXiv 2508.10925) Table 1: MLP 114.71B (routed experts + router),
    # attention 0.96B, embedding + unembedding 1.16B, 116.83B total.
    router = 36 * (128 * 2880 + 128)
    assert expert_params(GPT_OSS) + router == pytest.approx(114.71e9, rel=5e-4)
    assert total_params(GPT_OSS) - expert_params(GPT_OSS) - router == pytest.approx(0.96e9 + 1.16e9, rel=0.01)
    assert expert_params(model_presets()["llama-3.1-8b"]) == 0


@pytest.mark.parametrize("model, gib", [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_native_formats_give_the_published_checkpoint_size(model, gib):
    # Model card Table 1: checkpoint sizes 60.8 GiB and 12.8 GiB (MXFP4 experts, BF16 rest).
    assert weight_bytes(model_presets()[model], "bf16", "weight_dtype", "mxfp4") / 2**30 == pytest.approx(
        gib, rel=0.005
    )
    # SGLang's memory rule holds the checkpoint as it is
    r = run("memory", dict(model=model, hardware="h200", tensor_parallel=1, engine_rule="sglang", **NATIVE))
    assert r["weight_bytes_total"] / 2**30 == pytest.approx(gib, rel=0.005)


def test_vllm_pads_mxfp4_experts_for_the_moe_kernel_of_the_chip():
    # vLLM issue #23278: gpt-oss-120b under Marlin on one H100 PCIe, "Model loading took 65.9651 GiB"; the kernel pads
    # each expert's intermediate size to a multiple of 128 and its hidden size to one of 256 (2,880 × 2,880 to
    # 2,944 × 3,072; weight_layouts.toml)
    def weights(**kw):
        inputs = dict(model="gpt-oss-120b", hardware="h100-sxm", tensor_parallel=1, **NATIVE)
        return run("memory", inputs | kw)["weight_bytes_per_gpu"] / 2**30

    assert weights() == pytest.approx(65.9651, rel=0.005)
    checkpoint = weights(engine_rule="sglang")  # the SGLang rule pads nothing
    per_element = 36 * 128 * 3 * 4.25 / 8 / 2**30  # GiB per element position of the 4,608 experts' three matrices
    assert weights() - checkpoint == pytest.approx((2944 * 3072 - 2880 * 2880) * per_element, rel=0.001)
    # v0.33.0 runs FlashInfer's TRT-LLM kernel on B200 (128 and 256, as Marlin) and AMD's kernels on MI300X (256 and
    # 256); a chip no layout names keeps the checkpoint's bytes
    assert weights(hardware="b200") == pytest.approx(weights(), rel=1e-12)
    mi300x = weights(hardware="mi300x") - weights(hardware="mi300x", engine_rule="sglang")
    assert mi300x == pytest.approx((3072 * 3072 - 2880 * 2880) * per_element, rel=0.001)
    assert weights(hardware="tpu-v6e") == pytest.approx(weights(hardware="tpu-v6e", engine_rule="sglang"), rel=1e-12)
    # consumer Blackwell has FP4 matmuls, yet v0.33.0 runs Marlin there for gpt-oss (Marlin ahead of Triton on 12.x)
    assert weights(hardware="rtx-5090") == pytest.approx(weights(), rel=1e-12)
    # every weight in MXFP4: the experts padded all the same, and the derivation's terms give its value
    r = run("memory", dict(model="gpt-oss-120b", hardware="h100-sxm", tensor_parallel=2, weight_dtype="mxfp4"))
    shown = next(d for d in r["derivation"] if d["label"] == "Weights per GPU")
    assert "Marlin" in shown["formula"] and shown["terms"][0][0] / shown["terms"][1][0] == pytest.approx(shown["value"])
    assert shown["value"] > weight_bytes(GPT_OSS, "mxfp4", "weight_dtype") / 2
    # TP 2 slices each expert to 1,440 columns a GPU, padded to 1,536: the padding is each GPU slice's
    padded_tp2 = 2 * weights(tensor_parallel=2) - checkpoint
    assert padded_tp2 == pytest.approx((2 * 1536 * 3072 - 2880 * 2880) * per_element, rel=0.001)


def test_gpt_oss_batch_1_bytes_with_native_formats():
    r = run("roofline", dict(model="gpt-oss-120b", batch_size=1, **NATIVE))
    experts = expert_params(GPT_OSS)
    # The input embedding is a lookup: one row of 2,880 per token, not the 0.58B-entry table (review
    # parts-1-3 row 2), so a step streams ~5.0e9 B (1.55B BF16 + 4 experts), not the 6.16e9 B it was.
    lookup = embedding_params(GPT_OSS) - GPT_OSS.hidden_size
    want = (total_params(GPT_OSS) - experts - lookup) * 2 + experts * 4 / 128 * 0.53125
    assert r["decode_weight_bytes_per_step"] == pytest.approx(want, rel=1e-12)
    assert r["decode_weight_bytes_per_step"] == pytest.approx(5.0e9, rel=0.01)
    all_mxfp4 = run("roofline", dict(model="gpt-oss-120b", batch_size=1, weight_dtype="mxfp4"))
    assert all_mxfp4["decode_weight_bytes_per_step"] == pytest.approx(3.034e9 - lookup * 0.53125, rel=1e-3)


@pytest.mark.parametrize(
    "calc, key",
    [
        ("roofline", "decode_weight_bytes_per_step"),
        ("memory", "weight_bytes_total"),
        ("decode_limits", "weight_bytes_all_experts"),
    ],
)
def test_dense_models_ignore_the_expert_format(calc, key):
    base = dict(model="llama-3.1-8b", weight_dtype="fp8")
    assert run(calc, dict(base, expert_weight_dtype="nvfp4"))[key] == run(calc, base)[key]


def test_expert_format_moves_only_the_expert_share():
    kw = dict(model="mixtral-8x7b", batch_size=64)
    same = run("roofline", dict(kw, weight_dtype="bf16"))["decode_weight_bytes_per_step"]
    mixed = run("roofline", dict(kw, weight_dtype="bf16", expert_weight_dtype="fp8"))["decode_weight_bytes_per_step"]
    all_fp8 = run("roofline", dict(kw, weight_dtype="fp8"))["decode_weight_bytes_per_step"]
    assert all_fp8 < mixed < same


def test_the_engine_faithful_mode_pads_by_its_versions_rule():
    # vLLM v0.19.0 pads the TRT-LLM kernel's experts to 256 in both sizes on B200 (fused_moe/oracle/mxfp4.py:386-388),
    # v0.33.0 the intermediate size to 128 only (weight_layouts.toml): one GPU's 2,880-wide experts hold 3,072 × 3,072
    # against 2,944 × 3,072; elsewhere the two versions pick the same kernel and padding
    per_element = 36 * 128 * 3 * 4.25 / 8 / 2**30

    def weights(version, hardware="b200"):
        inputs = dict(model="gpt-oss-120b", hardware=hardware, engine_version=version, tensor_parallel=1, **NATIVE)
        return run("engine_capacity", inputs)["weight_bytes"] / 2**30

    assert weights("vllm-0.19.0") - weights("vllm-0.33.0") == pytest.approx(
        (3072 - 2944) * 3072 * per_element, rel=0.001
    )
    for chip in ("h100-sxm", "a100-80gb", "mi300x"):
        assert weights("vllm-0.19.0", chip) == weights("vllm-0.33.0", chip)
    # v0.20.0 and v0.22.0 still pad to 256 on B200 (oracle/mxfp4.py:519-521 and :671-673), as v0.19.0 does
    assert weights("vllm-0.20.0") == weights("vllm-0.22.0") == weights("vllm-0.19.0")
    # the memory calculator names no version: v0.33.0's rule
    memory = run("memory", dict(model="gpt-oss-120b", hardware="b200", tensor_parallel=1, **NATIVE))
    assert memory["weight_bytes_per_gpu"] / 2**30 == pytest.approx(weights("vllm-0.33.0"), rel=1e-12)
