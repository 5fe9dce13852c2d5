"""Engine-faithful capacity (calcs/engine_capacity.py) and paste-your-log (calcs/startup_log.py).

Each fixture in tests/fixtures/startup_logs is a startup log quoted in a public thread (fixtures.toml
names the thread, the engine as the thread states it, the model, TP and formats, and which inputs come
from the log). For every one the core re-derives the log's KV tokens and maximum concurrency within 5%
from the log's own budget, and its KV bytes per token are exact: the log's budget equals tokens × the
core's bytes per token to the log's printing precision (0.01 GiB, plus the block the floor drops).
"""

import dataclasses
import math
import tomllib
from pathlib import Path

import pytest

from calculators import run
from calculators.catalog import accelerator_presets, model_presets
from calculators.calcs.engine_capacity import release, version, versions
from calculators.calcs.kv_pages import layout, vllm_capacity
from calculators.units import GIB
from calculators.calcs.sglang_memory import aiter_scaled
from calculators.calcs.startup_log import _fraction_verdict, parse, version_for
from calculators.errors import InputError

HERE = Path(__file__).parent.parent / "fixtures" / "startup_logs"
FIXTURES = tomllib.loads((HERE / "fixtures.toml").read_text())["log"]


def _inputs(fx: dict) -> dict:
    v = {
        "log": (HERE / f"{fx['name']}.log").read_text(),
        "model": fx["config"] if fx["model"] == "config" else fx["model"],
        "tensor_parallel": fx["tp"],
        "engine_version": fx["rules"],
    }
    if "kv_dtype" in fx:
        v["kv_dtype"] = fx["kv_dtype"]
    return v


def test_enough_fixtures_across_models_tp_and_formats():
    assert len(FIXTURES) >= 15  # the bar: 15 logs across 8 models
    assert len({f["model"] if f["model"] != "config" else f["config_source"] for f in FIXTURES}) >= 8
    assert {f["tp"] for f in FIXTURES} >= {1, 4, 8}
    assert any("FP8" in f["kv"] for f in FIXTURES) and any("FP8" in f["weights"] for f in FIXTURES)
    assert any(f["model"] == "gpt-oss-120b" for f in FIXTURES)  # sliding-window layers
    assert any(f["model"].startswith("deepseek") for f in FIXTURES)  # MLA
    for f in FIXTURES:
        assert f["source"].startswith("https://github.com/") and f["from_log"] and f["engine"]
        assert (HERE / f"{f['name']}.log").exists()


@pytest.mark.parametrize("fx", FIXTURES, ids=[f["name"] for f in FIXTURES])
def test_log_lines_rederived_within_five_percent(fx):
    r = run("startup_log", _inputs(fx))
    log, core = r["log_kv_tokens"], r["core_kv_tokens"]
    assert log >= 0
    if log == 0:
        assert core == 0
    else:
        assert core == pytest.approx(log, rel=0.05)
    if r["log_concurrency"] >= 0:
        # the log prints two decimals: within 5%, or within its rounding for a near-zero value
        assert abs(r["core_concurrency"] - r["log_concurrency"]) <= max(0.05 * r["log_concurrency"], 0.005)


@pytest.mark.parametrize("fx", [f for f in FIXTURES if "negative" not in f["name"]], ids=lambda f: f["name"])
def test_kv_bytes_per_token_exact_to_the_logs_precision(fx):
    r = run("startup_log", _inputs(fx))
    budget, tokens, per_token = r["kv_budget_bytes"], r["log_kv_tokens"], r["kv_bytes_per_token"]
    # The budget is printed to 0.01 GiB (±0.005) and the pool floors to whole blocks (≤ 1 block per group
    # of 16 tokens × 2 groups at most): a bytes-per-token off by one layer in 36 would miss by ≥ 2.7%.
    slack = 0.005 * GIB + 2 * 16 * per_token + 0.0002 * budget
    if fx["name"].startswith("vllm") and fx["tp"] > 1:
        # vLLM sizes every rank to the smallest rank's blocks (kv_cache_planning.py:1580-1585 at v0.33.0) and
        # logs one rank's budget: the other ranks' free memory is not in the log, so 2% here
        slack = 0.02 * budget
    assert abs(tokens * per_token - budget) <= slack, (tokens * per_token, budget)


def test_kv_bytes_per_token_by_hand():
    # Llama 3.1 8B: 32 layers × 8 KV heads × 128 × 2 (K, V) × 2 B = 131,072 B
    r = run("engine_capacity", {"model": "llama-3.1-8b"})
    assert r["kv_bytes_per_token"] == 131_072
    # Qwen3-235B-A22B at TP 4: 4 KV heads → 1 per rank: 94 × 1 × 128 × 2 × 2 = 48,128 B
    r = run("engine_capacity", {"model": "qwen3-235b-a22b", "tensor_parallel": 4, "weight_dtype": "fp8"})
    assert r["kv_bytes_per_token"] == 48_128
    # DeepSeek-V3 MLA: (512 + 64) × 61 layers × 2 B, not split by TP
    r = run("engine_capacity", {"model": "deepseek-v3", "tensor_parallel": 8, "hardware": "h200"})
    assert r["kv_bytes_per_token"] == 576 * 61 * 2


def test_vllm_blocks_and_tokens_by_hand():
    # 3.81 GiB ÷ (32 layers × 16 tokens × 4,096 B) = 1,950 blocks; v0.19: 1,950 × 16 = 31,200 tokens
    lay = layout(run_model("llama-3.1-8b"), "bf16", 1, 16)
    assert lay.bytes_per_block == 32 * 16 * 4096
    cap = vllm_capacity(version("vllm-0.19.0"), lay, 3.81 * GIB, 20000, 8192)
    assert (cap.num_blocks, cap.tokens) == (1950, 31200)
    assert cap.concurrency == pytest.approx(1950 / math.ceil(20000 / 16))
    # v0.33.0 prints ⌊concurrency × max_model_len⌋: 1,950 ÷ 1,250 × 20,000
    assert vllm_capacity(version("vllm-0.33.0"), lay, 3.81 * GIB, 20000, 8192).tokens == 31200


def run_model(mid):
    from calculators.resolve import resolve_model

    return resolve_model(mid)


def test_hybrid_groups_and_padding():
    # Gemma 3 27B: 52 sliding + 10 full layers → group size 10 (52 ≥ 1.5 × 10): 6 sliding groups
    # (8 padding layers) + 1 full group (kv_cache_planning.py:416-556 at v0.33.0)
    lay = layout(run_model("gemma-3-27b"), "bf16", 1, 16)
    assert (len(lay.groups), lay.group_size, lay.padding_layers) == (7, 10, 8)
    # gpt-oss-120b: 18 sliding + 18 full → 2 groups of 18, no padding
    lay = layout(run_model("gpt-oss-120b"), "bf16", 1, 16)
    assert (len(lay.groups), lay.group_size, lay.padding_layers) == (2, 18, 0)


def test_version_switch_changes_the_tokens_line_for_hybrid_models():
    fx = next(f for f in FIXTURES if f["name"] == "vllm-gpt-oss-120b-tp1")
    v = _inputs(fx)
    old = run("startup_log", {**v, "engine_version": "vllm-0.19.0"})
    new = run("startup_log", {**v, "engine_version": "vllm-0.33.0"})
    assert old["core_kv_tokens"] == pytest.approx(78_384, rel=0.01)
    assert new["core_kv_tokens"] > 1.5 * old["core_kv_tokens"]  # ⌊C × max_model_len⌋ counts window blocks once
    assert any("v0.19.0's rules" in n for n in new["notes"])


def test_cudagraph_in_budget_from_v020_on_the_platforms_each_release_estimates_them():
    assert version("vllm-0.33.0")["cudagraph_in_budget"] and not version("vllm-0.19.0")["cudagraph_in_budget"]
    new = run("engine_capacity", {"engine_version": "vllm-0.33.0", "gpu_memory_utilization": 0.9})
    old = run("engine_capacity", {"engine_version": "vllm-0.19.0", "gpu_memory_utilization": 0.9})
    assert old["available_bytes"] - new["available_bytes"] == pytest.approx(new["cudagraph_bytes"])
    assert old["cudagraph_bytes"] == 0
    # v0.20.0 (gpu_worker.py:377-385) estimates them unless on ROCm, v0.22.0 (:403-411) on CUDA alone, v0.26.0 and
    # v0.33.0 on both (CUDA-alike); the catalogue's other chips run their platform plugin's worker
    graphs = {
        (vid, chip): run("engine_capacity", {"engine_version": vid, "hardware": chip})
        for vid in ("vllm-0.20.0", "vllm-0.22.0", "vllm-0.33.0")
        for chip in ("h100-sxm", "mi300x", "tpu-v6e")
    }
    taken = {key for key, r in graphs.items() if r["cudagraph_bytes"] > 0}
    assert taken == {("vllm-0.20.0", "h100-sxm"), ("vllm-0.22.0", "h100-sxm"), ("vllm-0.33.0", "h100-sxm"),
                     ("vllm-0.33.0", "mi300x")}  # fmt: skip
    assert any("on NVIDIA GPUs only" in n for n in graphs["vllm-0.22.0", "mi300x"]["notes"])
    assert any("none is taken out" in n for n in graphs["vllm-0.33.0", "tpu-v6e"]["notes"])
    assert not any("Model Runner V2" in n for r in graphs.values() for n in r["notes"])  # Llama 3.1 8B: V1 there


def test_model_runner_v2_takes_no_graph_term_for_the_models_it_serves_by_default():
    # Model Runner V2's profile_cudagraph_memory returns 0 from v0.22.0 (gpu/model_runner.py:620-622) to v0.28, and V2
    # serves by default: at v0.22.0 a Qwen3ForCausalLM with no experts and no quantization (config/vllm.py:69,
    # :518-532); at v0.26.0 any model without experts and the MoE classes listed (:68-77, :605-622); v0.29.0 on measures
    def graphs(vid, model, weights="bf16"):
        r = run("engine_capacity", {"engine_version": vid, "model": model, "weight_dtype": weights})
        return r["cudagraph_bytes"], any("Model Runner V2" in n for n in r["notes"])

    gib = 0.42 * 2**30
    assert graphs("vllm-0.22.0", "qwen3-8b") == (0, True)
    assert graphs("vllm-0.22.0", "qwen3-8b", "fp8") == pytest.approx((gib, False))  # a quantized checkpoint: V1
    assert graphs("vllm-0.22.0", "llama-3.1-8b") == pytest.approx((gib, False))
    assert graphs("vllm-0.22.0", "qwen3-30b-a3b") == pytest.approx((gib, False))  # experts: V1
    assert graphs("vllm-0.26.0", "llama-3.1-8b") == (0, True)
    assert graphs("vllm-0.26.0", "qwen3-8b", "fp8") == (0, True)
    assert graphs("vllm-0.26.0", "deepseek-v2") == (0, True)  # DeepseekV2ForCausalLM is listed
    assert graphs("vllm-0.26.0", "deepseek-v3") == pytest.approx((gib, False))  # DeepseekV3ForCausalLM is not
    assert graphs("vllm-0.26.0", "gpt-oss-20b") == pytest.approx((gib, False))
    for vid in ("vllm-0.20.0", "vllm-0.33.0"):
        assert graphs(vid, "qwen3-8b") == pytest.approx((gib, False))
    # the graph term is all that changes: 0.42 GiB more budget, as many more blocks
    v1 = run("engine_capacity", {"engine_version": "vllm-0.33.0", "model": "llama-3.1-8b"})
    v2 = run("engine_capacity", {"engine_version": "vllm-0.26.0", "model": "llama-3.1-8b"})
    assert v2["available_bytes"] - v1["available_bytes"] == pytest.approx(gib)


def test_a_logs_release_takes_the_entry_whose_rules_it_follows():
    # engine_versions.toml `since`: v0.20.0 raised the utilisation to 0.92 and took CUDA graphs into the budget,
    # v0.20.1 printed ⌊C × max_model_len⌋ (kv_cache_utils.py:1694-1708), v0.26.0 counted two batches in flight
    expected = {
        "0.15.0rc1": "vllm-0.19.0",
        "0.19.1": "vllm-0.19.0",
        "0.20.0": "vllm-0.20.0",
        "0.20.1": "vllm-0.22.0",
        "0.21.0": "vllm-0.22.0",
        "0.22.0": "vllm-0.22.0",
        "0.25.1": "vllm-0.22.0",
        "0.26.0": "vllm-0.26.0",
        "0.26.1rc0.dev12+g1a2b3c": "vllm-0.26.0",
        "0.27.0": "vllm-0.33.0",
        "0.28.1": "vllm-0.33.0",
        "0.33.0": "vllm-0.33.0",
        "0.34.0": "vllm-0.34.0",
        "0.35.1": "vllm-0.34.0",
    }
    for of_log, vid in expected.items():
        ver, why = version_for({"engine": "vllm", "version": of_log}, "auto")
        assert ver["id"] == vid, of_log
        assert f"the log's v{of_log}" in why
    assert "they hold from v0.27.0" in version_for({"engine": "vllm", "version": "0.28.1"}, "auto")[1]
    assert "oldest modelled" in version_for({"engine": "vllm", "version": "0.15.0rc1"}, "auto")[1]
    assert version_for({"engine": "vllm"}, "auto")[0]["id"] == "vllm-0.33.0"  # no version: sizes before warmup


def test_the_releases_between_v020_and_v033_print_three_tokens_lines_for_one_hybrid_log():
    # gpt-oss-120b's 18 sliding layers (window 128): v0.20.0 prints blocks ÷ groups × block size, as v0.19.0 does;
    # v0.20.1 to v0.25 ⌊C × max_model_len⌋ with one batch of 8,192 tokens in flight a request; v0.26.0 on with two
    fx = next(f for f in FIXTURES if f["name"] == "vllm-gpt-oss-120b-tp1")
    tokens = {
        vid: run("startup_log", {**_inputs(fx), "engine_version": vid})["core_kv_tokens"]
        for vid in ("vllm-0.19.0", "vllm-0.20.0", "vllm-0.22.0", "vllm-0.33.0")
    }
    assert tokens["vllm-0.20.0"] == tokens["vllm-0.19.0"]
    assert tokens["vllm-0.22.0"] > tokens["vllm-0.33.0"] > 1.5 * tokens["vllm-0.20.0"]
    # a dense model has one group and no window: the three rules print the same line
    dense = {vid: run("engine_capacity", {"engine_version": vid}) for vid in ("vllm-0.20.0", "vllm-0.22.0")}
    assert dense["vllm-0.20.0"]["kv_tokens"] == pytest.approx(dense["vllm-0.22.0"]["kv_tokens"], abs=16)


def test_gpt_oss_weights_as_vllm_holds_them_padded_by_chip_and_as_the_checkpoint_elsewhere():
    # vLLM issue #23278 (H100 PCIe, Marlin): "Model loading took 65.9651 GiB"; the checkpoint is 60.71 GiB
    base = {"model": "gpt-oss-120b", "expert_weight_dtype": "mxfp4", "tensor_parallel": 1}
    vllm = run("engine_capacity", {**base, "engine_version": "vllm-0.19.0", "hardware": "a100-80gb"})
    assert vllm["weight_bytes"] / GIB == pytest.approx(65.9651, rel=0.005)
    assert vllm["derivation"][0]["label"] == "Weights per GPU as loaded"
    assert "Marlin" in vllm["derivation"][0]["formula"]
    sglang = run("engine_capacity", {**base, "engine_version": "sglang-0.5.23", "hardware": "a100-80gb"})
    tpu = run("engine_capacity", {**base, "engine_version": "vllm-0.33.0", "hardware": "tpu-v6e"})
    assert sglang["weight_bytes"] / GIB == pytest.approx(60.71, abs=0.01) == tpu["weight_bytes"] / GIB
    assert all(d["label"] != "Weights per GPU as loaded" for d in sglang["derivation"] + tpu["derivation"])
    # v0.33.0 on B200 runs FlashInfer's TRT-LLM kernel, which pads as Marlin does (128 and 256): the line names it
    b200 = run("engine_capacity", {**base, "engine_version": "vllm-0.33.0", "hardware": "b200"})
    assert b200["weight_bytes"] == pytest.approx(vllm["weight_bytes"], rel=1e-12)
    assert "TRT-LLM" in b200["derivation"][0]["formula"]
    # v0.26.0 rounds the TRT-LLM kernel's intermediate size to 256 (oracle/mxfp4.py:655-657), v0.27.0 on to 128
    b200_v026 = run("engine_capacity", {**base, "engine_version": "vllm-0.26.0", "hardware": "b200"})
    b200_v022 = run("engine_capacity", {**base, "engine_version": "vllm-0.22.0", "hardware": "b200"})
    assert b200_v026["weight_bytes"] == b200_v022["weight_bytes"] > b200["weight_bytes"]
    # v0.33.0 pads both sizes to 256 on MI300X (3,072 × 3,072 a GPU at TP 1): more than the 128/256 chips
    mi300x = run("engine_capacity", {**base, "engine_version": "vllm-0.33.0", "hardware": "mi300x"})
    assert mi300x["weight_bytes"] > vllm["weight_bytes"] and "ROCm" in mi300x["derivation"][0]["formula"]
    # another model with MXFP4 experts takes another path in vLLM, not modelled: the checkpoint's bytes, no line
    qwen = {
        "engine_version": "vllm-0.33.0",
        "model": "qwen3-30b-a3b",
        "hardware": "b200",
        "expert_weight_dtype": "mxfp4",
    }
    assert run("engine_capacity", qwen)["derivation"][0]["label"] != "Weights per GPU as loaded"
    # the slices pad per GPU: at TP 2 each GPU holds more than half of the one-GPU figure
    tp2 = run(
        "engine_capacity", {**base, "engine_version": "vllm-0.19.0", "hardware": "a100-80gb", "tensor_parallel": 2}
    )
    assert tp2["weight_bytes"] > vllm["weight_bytes"] / 2
    # a log's own figure replaces the rule, and the expert format leaves a dense model alone
    logged = run(
        "engine_capacity", {**base, "engine_version": "vllm-0.19.0", "hardware": "a100-80gb", "weights_gib": 64}
    )
    assert logged["weight_bytes"] == 64 * GIB and logged["derivation"][0]["label"] != "Weights per GPU as loaded"
    dense = {"engine_version": "vllm-0.33.0", "model": "llama-3.1-8b"}
    assert run("engine_capacity", {**dense, "expert_weight_dtype": "mxfp4"})["weight_bytes"] == pytest.approx(
        run("engine_capacity", dense)["weight_bytes"]
    )


def test_every_version_names_its_sources():
    # cite() prints a source's first word as its file:line, so every source opens with one; the release an entry
    # models is read from its id (engine_capacity.release: the 16,384-token batch tier, startup_log's reasons), so
    # the id, the label and `since` must agree with it
    for v in versions().values():
        assert v["engine"] in ("vllm", "sglang")
        assert {"budget", "tokens"} <= set(v["sources"])
        number = v["id"].removeprefix(v["engine"] + "-")
        assert number.count(".") == 2 and v["label"].endswith(" v" + number), v["id"]
        assert v["engine"] == "sglang" or release(v["since"]) <= release(number), v["id"]
        assert all(key in v["sources"] for key in ("v2_runner", "since") if key in v), v["id"]
        for key, text in v["sources"].items():
            assert ":" in text.split(" ")[0], (v["id"], key)


def test_sglang_budget_from_avail_mem_lines():
    # budget = avail after weights − before × (1 − mfs) (kv_cache_configurator.py:2990-3007 at v0.5.23)
    log = (
        "server_args=ServerArgs(mem_fraction_static=0.9, tp_size=1, page_size=1)\n"
        "Load weight begin. avail mem=78.00 GB\n"
        "Load weight end. elapsed=3.1 s, type=LlamaForCausalLM, avail mem=63.00 GB, mem usage=15.00 GB.\n"
        "max_total_num_tokens=425984, chunked_prefill_size=8192, context_len=131072\n"
    )
    r = run("startup_log", {"log": log, "model": "llama-3.1-8b"})
    budget = (63.0 - 78.0 * 0.1) * GIB
    assert r["kv_budget_bytes"] == pytest.approx(budget)
    assert r["core_kv_tokens"] == int(budget // 131072)


def test_parse_reads_both_engines():
    f = parse("INFO Initializing a V1 LLM engine (v0.10.1) with config: tensor_parallel_size=2, kv_cache_dtype=fp8")
    assert (f["engine"], f["version"], f["tp"], f["kv_dtype"]) == ("vllm", "0.10.1", 2, "fp8")
    f = parse(
        "INFO [kv_cache_utils.py:2324] GPU KV cache size: 268,560 tokens, Maximum concurrency for 2,048 tokens per "
        "request: 131.13x ... Current kv cache memory in use is 36.88 GiB."
    )  # the one-line format of late-2026 vLLM (vLLM PR #57047's log)
    assert (f["tokens"], f["max_len"], f["concurrency"], f["available"]) == (268560, 2048, 131.13, 36.88)
    f = parse("[TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB")
    assert (f["engine"], f["pool_tokens"], f["k_size"], f["v_size"]) == ("sglang", 1000, 1.0, 1.0)


@pytest.mark.parametrize(
    "log, missing",
    [
        ("", "paste"),
        ("INFO Loading weights took 3.2 seconds\nINFO Model loading took 14.99 GiB", "GPU KV cache size"),
        ("GPU KV cache size: 42,656 tokens", "Available KV cache memory"),
        ("Load weight end. avail mem=20.0 GB, mem usage=15.0 GB.", "KV Cache is allocated"),
        ("max_total_num_tokens=1000\nLoad weight end. avail mem=20.0 GB, mem usage=15.0 GB.", "mem_fraction_static"),
    ],
)
def test_damaged_logs_name_what_is_missing(log, missing):
    with pytest.raises(InputError, match=missing) as e:
        run("startup_log", {"log": log})
    assert e.value.field == "log"


def test_state_space_models_refused_naming_the_field():
    with pytest.raises(InputError) as e:
        run("engine_capacity", {"model": "qwen3-next-80b-a3b"})
    assert e.value.field == "model"


def test_sglang_static_fraction_rule_matches_a_published_budget():
    # SGLang PR #18263's log prints the budget before its AITER change: avail mem 230.20 GB after the
    # weights, mem usage 56.98 GB, mem_fraction_static 0.911 → "initial available_bytes ... 204.63 GB".
    # The rule (kv_cache_configurator.py:2990-3007 at v0.5.23): free − (free + weights) × (1 − mfs).
    before = 230.20 + 56.98
    assert 230.20 - before * (1 - 0.911) == pytest.approx(204.63, abs=0.02)  # both inputs printed to 0.01


@pytest.mark.parametrize(
    "log_figures, kv_gib",
    [
        # vLLM #10517 (V0): 23.58 GiB × 0.90 − 14.9888 weights − (17.06 − 14.9888) activation − 0.35 non-torch
        (
            {
                "device_memory_gib": 23.58,
                "gpu_memory_utilization": 0.9,
                "weights_gib": 14.9888,
                "activation_gib": 17.06 - 14.9888,
                "non_torch_gib": 0.35,
            },
            3.81,
        ),
        # vLLM #13882 (V0): 8.00 × 0.70 − 5.20 − 1.42 − 0.03 = −1.05 GiB ("the rest ... is -1.05GiB")
        (
            {
                "device_memory_gib": 8.0,
                "gpu_memory_utilization": 0.7,
                "weights_gib": 5.20,
                "activation_gib": 1.42,
                "non_torch_gib": 0.03,
            },
            -1.05,
        ),
    ],
)
def test_vllm_budget_rule_with_the_logs_own_figures(log_figures, kv_gib):
    r = run("engine_capacity", {"engine_version": "vllm-0.19.0", "model": "llama-3.1-8b", **log_figures})
    assert r["available_bytes"] / GIB == pytest.approx(kv_gib, abs=0.006)  # the logs print 0.01 GiB


def test_fitted_activation_rule_on_the_logs_it_was_fitted_to():
    # a = 0.105 GiB per 1,024 batched tokens at hidden 4,096: #10517's 2.07 GiB at 20,000 and 2.99 GiB at 29,000
    for tokens, peak in ((20000, 17.06 - 14.9888), (29000, 17.98 - 14.9888)):
        v = {"engine_version": "vllm-0.19.0", "model": "llama-3.1-8b", "max_num_batched_tokens": tokens}
        assert run("engine_capacity", v)["activation_bytes"] / GIB == pytest.approx(peak, rel=0.03)


def test_a_tp2_run_record_follows_the_v020_rules():
    """LLMServingSim's vLLM 0.28.0 run record for Qwen3-32B, TP 2 on two RTX PRO 6000 Blackwell (casys-kaist/
    LLMServingSim bench/examples/RTXPRO6000/Qwen3-32B/vllm/meta.json at 0d3de681adbd9c515fc378e94e3e625b6e250dad):
    num_gpu_blocks 28,884, kv_cache_size_tokens 462,144, kv_cache_max_concurrency 11.2828125 at max_model_len
    40,960, gpu_memory_utilization 0.92, max_num_batched_tokens 2,048, device_total_memory_bytes 101,976,440,832.
    It prints no KV budget, so it is not a startup-log fixture: its blocks fix the lines, and the forward mode
    (the fitted activation, non-torch and CUDA-graph memory) is checked against its blocks."""
    lay = layout(run_model("qwen3-32b"), "bf16", 2, 16)
    assert lay.bytes_per_token == 64 * 2 * (8 // 2) * 128 * 2  # 131,072 B per GPU: 4 of 8 KV heads per rank
    cap = vllm_capacity(version("vllm-0.33.0"), lay, 28884 * lay.bytes_per_block, 40960, 2048)
    assert (cap.num_blocks, cap.tokens, cap.concurrency) == (28884, 462144, pytest.approx(11.2828125))
    v = {
        "engine_version": "vllm-0.33.0",
        "model": "qwen3-32b",
        "tensor_parallel": 2,
        "device_memory_gib": 101976440832 / GIB,
        "gpu_memory_utilization": 0.92,
        "max_model_len": 40960,
        "max_num_batched_tokens": 2048,
    }
    assert run("engine_capacity", v)["num_blocks"] == pytest.approx(28884, rel=0.05)  # 28,636 today (−0.9%)


# ---- vLLM v0.34.0: the cache sized after warmup --------------------------------------------------------------------
# tests/fixtures/log_formats holds logs written here in an engine's own line formats, with figures chosen here, not
# published logs: v0.34.0's (extensible_kv_cache.py:693-707, gpu_worker.py:1143-1166, kv_cache_utils.py:1170 in the
# release's wheel). No published v0.34.0 log has been found, so it checks the parser and the rule as read in the
# source, not the core against a measurement (the published fixtures above do that).
V034_LOG = (Path(__file__).parent.parent / "fixtures" / "log_formats" / "vllm-0.34.0-after-warmup.log").read_text()


def test_v034_sizes_its_cache_after_warmup_on_cuda_and_rocm_only():
    base = {"engine_version": "vllm-0.34.0", "model": "llama-3.1-8b"}
    h100 = run("engine_capacity", {**base, "hardware": "h100-sxm"})
    v033 = run("engine_capacity", {**base, "engine_version": "vllm-0.33.0", "hardware": "h100-sxm"})
    # unset utilization is 1.0 (v0.33.0's 0.92): the whole device requested
    assert h100["requested_bytes"] == pytest.approx(v033["requested_bytes"] / 0.92, rel=1e-9)
    # the estimate it prints has no CUDA-graph term (measured after capture instead)
    requested, weights, act, non_torch, graphs = (
        h100[k] for k in ("requested_bytes", "weight_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes")
    )
    assert h100["estimate_bytes"] == pytest.approx(requested - weights - act - non_torch)
    # what warmup leaves: the device less 0.6 GiB in use at start, what the engine holds, the margin (1 GiB: 0.75 × this
    # peak is less) and the peak; the cache is the smaller of that and the estimate
    in_use = weights + non_torch + graphs
    assert max(GIB, 0.75 * act) == GIB
    left = min(requested - in_use, requested - 0.6 * GIB - in_use - GIB) - act
    assert h100["available_bytes"] == pytest.approx(left) and left < h100["estimate_bytes"]
    assert [d["label"] for d in h100["derivation"][:3]] == [
        "Available KV cache memory (the profiling estimate)",
        "What warmup leaves",
        "KV budget per GPU, sized after warmup",
    ]
    entered = run("engine_capacity", {**base, "hardware": "h100-sxm", "in_use_at_start_gib": 0.0})
    assert entered["available_bytes"] - h100["available_bytes"] == pytest.approx(0.6 * GIB)
    # ROCm's floor is 3 GiB, and its backend for a model without MLA keeps 16-token blocks
    mi300x = run("engine_capacity", {**base, "hardware": "mi300x"})
    margin_rocm = mi300x["estimate_bytes"] - mi300x["available_bytes"]
    margin_cuda = h100["estimate_bytes"] - h100["available_bytes"]  # both less the same in-use and peak terms
    assert margin_rocm - margin_cuda == pytest.approx(2 * GIB, rel=1e-6)
    per_token = mi300x["kv_bytes_per_token"]
    assert mi300x["num_blocks"] == int(mi300x["available_bytes"] // (16 * per_token))
    # models ROCM_ATTN does not serve alone (MLA, attention sinks, chunked local attention) take 64 there too
    for model in ("deepseek-v3", "gpt-oss-20b", "llama-4-scout"):
        other = {**base, "model": model, "hardware": "mi300x", "tensor_parallel": 8}
        blocks = {size: run("engine_capacity", {**other, "block_size": size})["num_blocks"] for size in (0, 16, 64)}
        assert blocks[0] == blocks[64] < blocks[16], model
    # a utilization below 1 caps the budget at requested less what the engine holds and the peak
    capped = run("engine_capacity", {**base, "hardware": "h100-sxm", "gpu_memory_utilization": 0.9})
    assert capped["available_bytes"] == pytest.approx(
        capped["requested_bytes"] - capped["weight_bytes"] - capped["non_torch_bytes"] - graphs - act
    )
    # off CUDA and ROCm the cache is sized from the estimate, at 0.92 (as v0.33.0)
    tpu = run("engine_capacity", {**base, "hardware": "tpu-v6e"})
    old = run("engine_capacity", {**base, "engine_version": "vllm-0.33.0", "hardware": "tpu-v6e"})
    assert tpu["available_bytes"] == tpu["estimate_bytes"] == pytest.approx(old["available_bytes"])
    assert any("keeps the profiling estimate" in n for n in tpu["notes"])


def test_each_version_takes_its_own_default_block_size():
    blocks = {}
    for vid in ("vllm-0.34.0", "vllm-0.33.0", "sglang-0.5.23"):
        r = run("engine_capacity", {"engine_version": vid, "hardware": "h100-sxm"})
        steps = {d["label"]: d for d in r["derivation"]}
        blocks[vid] = steps["Bytes per block"]["terms"][1][0] if "Bytes per block" in steps else None
        if vid.startswith("sglang"):  # page_size 1: max_total_num_tokens is not floored to 16
            assert r["kv_tokens"] % 16 != 0 or r["kv_tokens"] == r["num_blocks"]
    assert blocks["vllm-0.34.0"] == 64 and blocks["vllm-0.33.0"] == 16


def test_a_v034_log_rederives_its_blocks_after_warmup():
    found = parse(V034_LOG)
    assert (found["warm_free"], found["warm_committed"], found["warm_peak"], found["warm_growth"]) == (
        62.56,
        0.02,
        1.7,
        0.9,
    )
    assert (found["warm_blocks"], found["warm_requested"], found["init_free"]) == (7629, 79.18, 78.6)
    r = run("startup_log", {"log": V034_LOG, "model": "llama-3.1-8b"})
    assert "v0.34.0's rules" in r["notes"][0]
    # min(79.18 − (78.6 − 62.56 − 0.02), 62.56 + 0.02 − max(1, 0.75 × 1.7)) − max(1.7, 0.9) = 59.605 GiB, under 61.96
    assert r["kv_budget_bytes"] / GIB == pytest.approx(59.605, abs=1e-9)
    assert r["core_kv_tokens"] == r["log_kv_tokens"] == 488_256  # 7,629 blocks of 64 ÷ 2,048 a request × 131,072
    assert any(n.startswith("KV cache blocks after warmup: log 7,629 blocks, core 7,629") for n in r["notes"])
    # a DEBUG line of the warmup's commits names blocks too: the parser keeps the INFO line's count
    debug = "DEBUG [extensible_kv_cache.py:218] Committed 12 of 8000 KV cache blocks (0.09 GiB physical).\n"
    assert parse(debug + V034_LOG)["warm_blocks"] == 7629
    # the estimate binds where it is the smaller, and the line's count is then the estimate's (blocks_within caps it)
    capped_log = V034_LOG.replace("memory: 61.96 GiB", "memory: 50.0 GiB").replace("; 7629 KV", "; 6400 KV")
    capped = run("startup_log", {"log": capped_log, "model": "llama-3.1-8b"})
    assert capped["kv_budget_bytes"] == 50 * GIB
    assert any(n.startswith("KV cache blocks after warmup: log 6,400 blocks, core 6,400") for n in capped["notes"])
    # the requested cap binds where the log requested less: 70 − (78.6 − 62.56 − 0.02) − 1.7 = 52.28 GiB
    small = run("startup_log", {"log": V034_LOG.replace("requested 79.18", "requested 70.0"), "model": "llama-3.1-8b"})
    assert small["kv_budget_bytes"] / GIB == pytest.approx(52.28, abs=1e-9)
    # a 'Memory after warmup' line missing a figure is refused with the figure named
    with pytest.raises(InputError, match="torch reservation growth"):
        run(
            "startup_log",
            {"log": V034_LOG.replace(", 0.9 GiB of torch reservation growth", ""), "model": "llama-3.1-8b"},
        )
    # no 'Available KV cache memory' line: the after-warmup budget alone, and no note quoting an estimate
    alone_warm = V034_LOG.replace("Available KV cache memory: 61.96 GiB", "").replace(
        "Current kv cache memory in use", ""
    )
    warm_only = run("startup_log", {"log": alone_warm, "model": "llama-3.1-8b"})
    assert warm_only["kv_budget_bytes"] == r["kv_budget_bytes"]
    assert not any("profiling estimate" in n for n in warm_only["notes"])
    # without the start-up free memory the requested cap is taken not to bind; here it did not
    alone = run("startup_log", {"log": V034_LOG.replace("Free memory on device", "Memory"), "model": "llama-3.1-8b"})
    assert alone["kv_budget_bytes"] == r["kv_budget_bytes"]
    # on ROCm the margin's floor is 3 GiB: 62.58 − 3 − 1.7 = 57.88 GiB, whether the reader picks an AMD chip or the
    # log names its platform; a TPU chosen by mistake takes CUDA's floor
    rocm = run("startup_log", {"log": V034_LOG, "model": "llama-3.1-8b", "hardware": "mi300x"})
    assert rocm["kv_budget_bytes"] / GIB == pytest.approx(57.88, abs=1e-9)
    named = "DEBUG [__init__.py:286] Automatically detected platform rocm.\n" + V034_LOG  # a DEBUG line in v0.34.0
    assert run("startup_log", {"log": named, "model": "llama-3.1-8b"})["kv_budget_bytes"] == rocm["kv_budget_bytes"]
    tpu = run("startup_log", {"log": V034_LOG, "model": "llama-3.1-8b", "hardware": "tpu-v6e"})
    assert tpu["kv_budget_bytes"] == r["kv_budget_bytes"]
    # the block size vLLM chose, where it says so: ROCm's 16 for this model, four times the blocks of 64
    rocm16 = (
        named.replace("; 7629 KV", "; 29634 KV") + "INFO Setting kv cache block size to 16 for ROCM_ATTN backend(s).\n"
    )
    assert any(
        n.startswith("KV cache blocks after warmup: log 29,634 blocks, core 29,634")
        for n in run("startup_log", {"log": rocm16, "model": "llama-3.1-8b"})["notes"]
    )
    # v0.33.0's rules for a log with no 'Available KV cache memory' line: refused with the line named
    no_estimate = V034_LOG.replace("Available KV cache memory: 61.96 GiB", "").replace("Current kv cache", "")
    with pytest.raises(InputError, match="Available KV cache memory"):
        run("startup_log", {"log": no_estimate, "model": "llama-3.1-8b", "engine_version": "vllm-0.33.0"})
    # a log cut before the capacity line is refused with the lines it lacks
    cut = V034_LOG.split("GPU KV cache size")[0].rsplit("\n", 1)[0]
    with pytest.raises(InputError, match="GPU KV cache size"):
        run("startup_log", {"log": cut, "model": "llama-3.1-8b"})


def test_max_num_batched_tokens_defaults_as_vllm_serve_sets_it_by_chip():
    # engine/arg_utils.py get_batch_defaults (API server): 2,048 below 70 GiB and on A100s, 8,192 from 70 GiB, and from
    # v0.28 16,384 from 160 GiB (engine_defaults, one rule for every calculator). v0.33.0 :2973-3001, v0.22.0 :2311-2329
    from calculators.calcs.engine_capacity import default_batched_tokens
    from calculators.resolve import resolve_accelerator

    expected = {
        ("vllm-0.33.0", "h100-sxm"): 8192,
        ("vllm-0.33.0", "h200"): 8192,
        ("vllm-0.33.0", "a100-80gb"): 2048,
        ("vllm-0.33.0", "rtx-4090"): 2048,
        ("vllm-0.33.0", "b200"): 16384,
        ("vllm-0.34.0", "mi300x"): 16384,
        ("vllm-0.22.0", "b200"): 8192,
    }
    for (vid, chip), tokens in expected.items():
        assert default_batched_tokens(version(vid), resolve_accelerator(chip)) == tokens, (vid, chip)
    # the 160 GiB tier arrived in v0.28.0: a v0.27.0 log, which takes v0.33.0's entry, keeps 8,192 on a B200
    b200 = resolve_accelerator("b200")
    assert default_batched_tokens(version("vllm-0.33.0"), b200, "0.27.0") == 8192
    assert default_batched_tokens(version("vllm-0.33.0"), b200, "0.28.0") == 16384
    # 0 is that default: on a B200 gpt-oss's sliding-window requests hold two batches of 16,384 tokens in flight,
    # and the fitted activation peak is twice the 8,192-token one
    base = {
        "engine_version": "vllm-0.33.0",
        "model": "gpt-oss-120b",
        "hardware": "b200",
        "expert_weight_dtype": "mxfp4",
    }
    default, wide, narrow = (run("engine_capacity", {**base, "max_num_batched_tokens": n}) for n in (0, 16384, 8192))
    assert default["kv_tokens"] == wide["kv_tokens"] and default["activation_bytes"] == wide["activation_bytes"]
    assert any("16,384 tokens" in n for n in default["notes"]) and not any("16,384" in n for n in wide["notes"])
    assert default["activation_bytes"] == pytest.approx(2 * narrow["activation_bytes"])
    assert default["max_concurrency"] < narrow["max_concurrency"]


def test_the_reader_takes_the_batch_default_from_the_memory_the_log_prints():
    # v0.34.0's 'Free memory on device (X/Y GiB)' gives the device's memory: 79.18 GiB keeps 8,192 tokens, 178.4 GiB (a
    # B200's) takes the 160 GiB tier, 16,384, whatever accelerator the reader left chosen; a log's own figure wins
    wide = V034_LOG.replace("78.6/79.18 GiB", "170.6/178.4 GiB")
    assert parse(wide)["init_total"] == 178.4

    def taken(log, **inputs):
        notes = run("startup_log", {"log": log, "model": "gpt-oss-120b", **inputs})["notes"]
        return next(n for n in notes if "does not print max_num_batched_tokens" in n)

    assert "8,192 tokens taken" in taken(V034_LOG) and "16,384 tokens taken" in taken(wide)
    assert "2,048 tokens taken" in taken(wide, max_num_batched_tokens=2048)


def test_sglang_sets_its_own_mem_fraction_static_by_gpu_tp_and_model():
    # SGLang v0.5.23 arg_groups/memory_hook.py:281-344 (by hand, in MiB): one H100 SXM (nvidia-smi's 81,559 MiB),
    # Llama 3.1 8B, TP 1: chunked_prefill_size 8,192 and decode graphs to batch 256 (:132-145); graphs 2 × 256 + 8 ×
    # 58 prefill sizes up to 8,192 (cuda_graph_hook.py:480-497) = 976; reserved 512 + 1.5 × 8,192 + 1 ÷ 8 × 1,024 +
    # 976 = 13,904; round((81,559 − 13,904) ÷ 81,559, 3) = 0.830
    def fraction(**inputs):
        r = run("engine_capacity", {"engine_version": "sglang-0.5.23", **inputs})
        line = next(d for d in r["derivation"] if d["label"].startswith("mem_fraction_static"))
        memory = accelerator_presets()[inputs.get("hardware", "h100-sxm")].memory_bytes
        assert r["requested_bytes"] == pytest.approx(line["value"] * memory)
        return line["value"], r["notes"]

    assert fraction(model="llama-3.1-8b", hardware="h100-sxm")[0] == 0.830
    # DeepSeek-V3 (MLA) on eight H200s (143,771 MiB): batch 512 at TP ≥ 4, 1,536 for MLA's prefill graphs;
    # 512 + 12,288 + 1,024 + 1,024 + 1,536 = 16,384 reserved: 0.886
    assert fraction(model="deepseek-v3", hardware="h200", tensor_parallel=8)[0] == 0.886
    # Gemma 3 and Llama 4 are text-only unless --enable-multimodal (configs/model_config.py:690-717): prefill graphs
    # and no vision-tower cut, as Llama 3.1 8B's 0.830
    value, notes = fraction(model="gemma-3-27b", hardware="h100-sxm")
    assert value == 0.830 and any("text-only unless --enable-multimodal" in n for n in notes)
    assert not any("served as a multimodal model" in n for n in notes)
    # a model path naming llama-2 captures prefill graphs up to 4,096 tokens (memory_hook.py:256-261): 50 sizes, not 58
    assert fraction(model="llama-2-7b", hardware="h200")[0] == 0.904  # 0.903 with 58
    # ROCm: no prefill graphs, chunked_prefill_size 16,384 on an MI300X (196,608 MiB): 26,240 reserved, 0.867; aiter
    # attention above 8,192 tokens of context takes 85% of it (attention_hook.py:244-269)
    assert fraction(model="llama-3.1-8b", hardware="mi300x", max_model_len=8192)[0] == 0.867
    assert fraction(model="llama-3.1-8b", hardware="mi300x")[0] == pytest.approx(0.867 * 0.85)
    # MLA on ROCm runs aiter only with 16 or 128 KV heads a rank: DeepSeek-V3 at TP 8 (16) but not at TP 4 (32)
    assert fraction(model="deepseek-v3", hardware="mi300x", tensor_parallel=8)[0] < 0.8
    assert fraction(model="deepseek-v3", hardware="mi300x", tensor_parallel=4)[0] > 0.85
    # DeepSeek-V3.2's sparse attention takes SGLang's dsa backend, not aiter (model_overrides/deepseek_v2.py:99-103)
    assert fraction(model="deepseek-v3.2", hardware="mi300x", tensor_parallel=8)[0] == 0.862
    # a context_len of 8,192 or less is not cut
    assert fraction(model="llama-2-7b", hardware="mi300x", max_model_len=4096)[0] == 0.867
    # an L4 (23,034 MiB): chunked_prefill_size 4,096, batch 48; 50 prefill sizes; 7,280 reserved: 0.684
    assert fraction(model="llama-3.1-8b", hardware="l4")[0] == 0.684
    # SGLang reads no TPU's memory: the GPUs' rule is shown, and said so; Gaudi's it reads (vendor "Intel")
    assert any("no memory reading for Google TPU" in n for n in fraction(hardware="tpu-v6e")[1])
    assert not any("no memory reading" in n for n in fraction(hardware="gaudi3")[1])
    # a value the reader gives is used as given, with no derivation line, but on ROCm's aiter SGLang cuts that too
    # (attention_hook.py:244-269, unless SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION is set)
    given = run("engine_capacity", {"engine_version": "sglang-0.5.23", "mem_fraction_static": 0.9})
    assert not any(d["label"].startswith("mem_fraction_static") for d in given["derivation"])
    assert given["requested_bytes"] == pytest.approx(0.9 * 81_559 * 2**20)
    assert fraction(model="llama-3.1-8b", hardware="mi300x", mem_fraction_static=0.9)[0] == pytest.approx(0.765)


def test_sglang_v059_sets_its_fraction_without_prefill_graphs():
    # SGLang v0.5.9 server_args.py:911-1069 (the same default launch from 0.5.5): no prefill graphs reserved
    # (enable_piecewise_cuda_graph False, :604), a sub-35 GiB tier of chunk 2,048 and batch 24 at TP < 4 (:943-955)
    def fraction(version="sglang-0.5.9", **inputs):
        r = run("engine_capacity", {"engine_version": version, **inputs})
        return next(d for d in r["derivation"] if d["label"].startswith("mem_fraction_static"))["value"], r["notes"]

    # one H100 SXM (81,559 MiB), Llama 3.1 8B, TP 1: 512 + 1.5 × 8,192 + 2 × 256 + 1 ÷ 8 × 1,024 = 13,440: 0.835,
    # where v0.5.23's 464 MiB of prefill graphs make it 0.830
    assert fraction(model="llama-3.1-8b")[0] == 0.835
    assert fraction("sglang-0.5.23", model="llama-3.1-8b")[0] == 0.830
    # an L4 (23,034 MiB): 512 + 3,072 + 48 + 128 = 3,760: 0.837 (v0.5.23's larger tier and prefill graphs: 0.684)
    assert fraction(model="llama-3.1-8b", hardware="l4")[0] == 0.837
    # Published logs, eight MI355X (GLM-5-FP8, TP 8; ajith-sirra-amd/Issues, GLM-5-FP8-MI355X-SGLANG-ERROR.md,
    # 2026-02-26): with --attention-backend triton the 0.5.8.post1 and 0.5.9 ROCm images printed
    # mem_fraction_static=0.908 (chunked_prefill_size=16384, cuda_graph_max_bs=512): 512 + 24,576 + 1,024 + 1,024 =
    # 27,136 of 294,912 MiB. GLM-5 is not in the catalogue; the rule sees the model only through multimodal, MLA and
    # the attention backend, so gpt-oss (triton on ROCm in 0.5.9, :1333-1341) and DeepSeek-V3.2 (nsa) stand for it
    assert fraction(model="gpt-oss-120b", hardware="mi355x", tensor_parallel=8, max_model_len=131072)[0] == 0.908
    assert fraction(model="deepseek-v3.2", hardware="mi355x", tensor_parallel=8, max_model_len=131072)[0] == 0.908
    # the v0.5.8 image that ran aiter by default printed 0.7718 = 0.908 × 0.85 (the aiter cut, :1924-1926; that build
    # served GLM-5 as a non-MLA model, where 0.5.9 gives it nsa and 0.908); a model aiter serves takes it in 0.5.9, and
    # gpt-oss takes it in 0.5.23, whose gpt-oss override picks aiter on ROCm
    assert fraction(model="llama-3.1-70b", hardware="mi355x", tensor_parallel=8, max_model_len=131072)[0] == 0.7718
    oss = {"model": "gpt-oss-120b", "hardware": "mi355x", "tensor_parallel": 8, "max_model_len": 131072}
    assert fraction("sglang-0.5.23", **oss)[0] == pytest.approx(0.908 * 0.85)
    # a value given is cut too; only v0.5.23 has an environment variable that spares it (environ.py:1071 there)
    for version_id, spared in (("sglang-0.5.9", False), ("sglang-0.5.23", True)):
        inputs = {"engine_version": version_id, "hardware": "mi300x", "mem_fraction_static": 0.9}
        line = next(d for d in run("engine_capacity", inputs)["derivation"] if d["label"].startswith("mem_fraction"))
        assert line["value"] == pytest.approx(0.765)
        assert ("SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION" in line["formula"]) == spared
    # the notes name what each release's rule leaves out, and no prefill graphs for Gemma 3 in 0.5.9
    notes = fraction(model="gemma-3-27b")[1]
    assert any("speculative decoding reserves more" in n for n in notes)
    assert not any("prefill graphs are reserved" in n for n in notes)
    assert any("prefill graphs are reserved" in n for n in fraction("sglang-0.5.23", model="gemma-3-27b")[1])


def test_sglang_gives_olmo2_and_gemma4_triton_attention_on_rocm():
    # model_overrides/olmo2.py:15-30 and gemma4.py:17-43 at v0.5.23: triton on ROCm, so the aiter cut spares them
    # (a pasted config's architecture decides); 0.5.9 gives OLMo 2 triton too (server_args.py:1499-1512)
    rule = version("sglang-0.5.23")["default_fraction"]
    llama, mi300x = model_presets()["llama-3.1-8b"], accelerator_presets()["mi300x"]
    assert aiter_scaled(rule, llama, mi300x, 1, 32768)
    for arch in ("Olmo2ForCausalLM", "Gemma4ForConditionalGeneration"):
        assert not aiter_scaled(rule, dataclasses.replace(llama, architecture=arch), mi300x, 1, 32768)
    olmo = dataclasses.replace(llama, architecture="Olmo2ForCausalLM")
    assert not aiter_scaled(version("sglang-0.5.9")["default_fraction"], olmo, mi300x, 1, 32768)


def test_the_reader_sets_an_sglang_logs_fraction_beside_each_releases_own():
    # a log's mem_fraction_static beside what each modelled release sets by itself on the chosen GPU and the log's TP:
    # on one H100 SXM, 0.835 is v0.5.9's own (v0.5.23's is 0.830, its prefill graphs reserved); 0.9 is neither's
    def note(mfs, hardware="h100-sxm", tp=1, model="llama-3.1-8b", free=78.5):
        log = (
            f"server_args={{'model_path': 'x', 'mem_fraction_static': {mfs}, 'tp_size': {tp}}}\n"
            f"Load weight begin. avail mem={free:.2f} GB\n"
            f"Load weight end. type=LlamaForCausalLM, avail mem={free - 15:.2f} GB, mem usage=15.00 GB.\n"
            "KV Cache is allocated. #tokens: 40000, K size: 2.44 GB, V size: 2.44 GB\nmax_total_num_tokens=40000"
        )
        notes = run("startup_log", {"log": log, "model": model, "hardware": hardware})["notes"]
        return next(n for n in notes if n.startswith("mem_fraction_static"))

    assert "SGLang v0.5.23 0.83; SGLang v0.5.9 0.835. The log's value" in note(0.835)
    assert "is what SGLang v0.5.9 set by itself: the launch most likely set none" in note(0.835)
    assert "is what SGLang v0.5.23 set by itself" in note(0.83)
    assert "It matches neither" in note(0.9) and "--chunked-prefill-size" in note(0.9)
    assert "ROCm log" not in note(0.835)
    # on an L4 the two releases differ more (0.684 and 0.837): the GPU chosen decides
    assert "is what SGLang v0.5.9 set" in note(0.837, "l4", free=20) and "It matches neither" in note(
        0.835, "l4", free=20
    )
    # the TP comes from v0.5.23's dict ('tp_size': 8, read 41's P1): DeepSeek-V3 on eight H200s, 0.886 (the test
    # above), not the form's TP 1
    deepseek = note(0.886, "h200", 8, "deepseek-v3")
    assert "at TP 8" in deepseek and "is what SGLang v0.5.23 set by itself" in deepseek
    # on AMD, a ROCm log before v0.5.4.post1 printed the value before the aiter cut: said there only
    assert "ROCm log" in note(0.7327, "mi300x") and "the model's; the log names none" in note(0.7327, "mi300x")
    # and each release's value before the cut is listed beside its own, so that such a log (or one whose launch chose
    # another attention backend) matches: Llama 3.1 8B on one MI300X, 0.867 × 0.85 = 0.73695 under both releases
    assert "SGLang v0.5.9 0.73695 (0.867 before its aiter cut)" in note(0.867, "mi300x")
    assert "value is what SGLang v0.5.23 and SGLang v0.5.9 compute before the aiter cut" in note(0.867, "mi300x")
    assert "set by themselves" in note(0.73695, "mi300x") and "compute before the aiter cut" not in note(
        0.73695, "mi300x"
    )
    assert "before its aiter cut" not in note(0.835)
    # gpt-oss on eight MI355X: 0.908 is v0.5.9's own (its gpt-oss runs off aiter) and v0.5.23's before its cut
    oss = note(0.908, "mi355x", 8, "gpt-oss-120b", free=280)
    assert "set by itself" in oss and "It is also what SGLang v0.5.23 computes before the aiter cut" in oss
    # SGLang reads no TPU's memory: no rule is set beside the value
    assert "reads no memory on Google TPU" in note(0.8, "tpu-v6e")
    # the log's GPU had 78.5 GB free before loading: an L40S (48 GB) cannot be it
    assert "choose the GPU the log came from" in note(0.835, "l40s")
    own = dataclasses.make_dataclass("F", ["fraction", "before_cut", "aiter_scaled", "multimodal"])
    assert "vision tower" in _fraction_verdict(0.5, {"v": own(0.9, 0.9, False, True)}, False, False)
    assert "DP attention" in _fraction_verdict(0.5, {}, True, False)
    assert "DP attention" in _fraction_verdict(0.5, {"v": own(0.9, 0.9, False, True)}, True, True)
    assert "before v0.5.4.post1" in _fraction_verdict(0.5, {}, True, True)
    assert parse("sglang ServerArgs(tp_size=8, enable_dp_attention=True, dp_size=8)")["dp_attention"] == "True"
    assert parse("sglang server_args={'enable_dp_attention': True, 'context_length': 8192}")["max_len"] == 8192
    # a budget from the avail-mem lines and the printed fraction, on AMD: an old ROCm log printed it before the cut
    avail_only = (
        "server_args={'mem_fraction_static': 0.8, 'tp_size': 1}\nLoad weight begin. avail mem=190.00 GB\n"
        "Load weight end. type=LlamaForCausalLM, avail mem=175.00 GB, mem usage=15.00 GB.\nmax_total_num_tokens=1000000"
    )
    notes = run("startup_log", {"log": avail_only, "hardware": "mi300x"})["notes"]
    assert any("printed mem_fraction_static before SGLang's aiter cut" in n for n in notes)
    notes = run("startup_log", {"log": avail_only, "hardware": "h100-sxm"})["notes"]
    assert not any("aiter cut" in n for n in notes)


def test_the_reader_takes_mem_fraction_static_from_sglang_v0523s_server_args_dict():
    # v0.5.23 logs server_args as a dict (entrypoints/engine.py:173-174, 311), after resolution: the value it used
    log = "server_args={'model_path': 'x', 'mem_fraction_static': 0.73695, 'tp_size': 1}\nLoad weight end. avail mem=1"
    assert parse(log)["mfs"] == 0.73695
    assert parse("[sglang] mem_fraction_static=0.83, --mem-fraction-static 0.9")["mfs"] == 0.83
