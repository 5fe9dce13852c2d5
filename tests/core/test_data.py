"""The data files: every preset present, every figure sourced, published figures reproduced."""

import math

from pathlib import Path

import pytest

from calculators.errors import InputError
from calculators.formats import bytes_per_element, get_format
from calculators.catalog import (
    accelerator_presets,
    engines,
    entries,
    formats,
    model_presets,
    models_from_entries,
    prices,
)
from calculators.presets import listing

MODELS = model_presets()
ACCS = accelerator_presets()

REQUIRED_MODELS = {
    "llama-2-7b",
    "llama-2-13b",
    "opt-13b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "llama-3.3-70b",
    "llama-4-scout",
    "llama-4-maverick",
    "qwen2.5-7b",
    "qwen2.5-72b",
    "qwen3-8b",
    "qwen3-32b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "mistral-7b-v0.1",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "deepseek-r1",
    "kimi-k2",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "gemma-2-9b",
    "gemma-2-27b",
    "gemma-3-12b",
    "gemma-3-27b",
}
REQUIRED_ACCS = {
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h100-nvl",
    "h200",
    "b200",
    "gb200",
    "b300",
    "gb300",
    "l40s",
    "l4",
    "rtx-4090",
    "rtx-5090",
    "mi300x",
    "mi325x",
    "mi355x",
    "tpu-v5e",
    "tpu-v5p",
    "tpu-v6e",
    "tpu7x",
    "gaudi3",
    "trainium2",
    "inferentia2",
}


def kv_bytes_per_token(m, bytes_per=2):
    """Full-attention KV bytes per token, straight from the config: 2 × layers × KV heads × head dim × bytes
    (MLA: layers × (latent + RoPE) × bytes)."""
    a = m.attention
    if a.kind == "mla":
        return m.num_layers * (a.kv_lora_rank + a.qk_rope_head_dim) * bytes_per
    return 2 * m.num_layers * a.num_kv_heads * a.head_dim * bytes_per


def test_all_required_presets_exist():
    assert REQUIRED_MODELS <= set(MODELS)
    assert REQUIRED_ACCS <= set(ACCS)


@pytest.mark.parametrize(
    "entry", entries("models.toml", "model") + entries("accelerators.toml", "accelerator"), ids=lambda e: e["id"]
)
def test_every_entry_has_source_and_date(entry):
    assert entry["source"].strip() and entry["as_of"][:4].isdigit()
    if "official_total_params" in entry:
        assert entry["params_source"].strip()
    if "price_usd_per_hour" in entry:
        assert entry["price_source"].strip() and entry["price_as_of"][:4].isdigit()


def test_ids_are_lowercase_hyphenated():
    for key in list(MODELS) + list(ACCS):
        assert key == key.lower() and " " not in key and "_" not in key


# --- Published KV figures (each test names its source) ----------------------------------
def test_opt_13b_800_kib_per_token():  # PagedAttention §3: "800 KB" is KiB
    assert kv_bytes_per_token(MODELS["opt-13b"]) == 800 * 1024


def test_llama_2_7b_2_gib_at_4096_tokens():  # NVIDIA "Mastering LLM Techniques"
    assert kv_bytes_per_token(MODELS["llama-2-7b"]) * 4096 == 2 * 2**30


def test_llama_31_70b_bytes_per_token():
    assert kv_bytes_per_token(MODELS["llama-3.1-70b"]) == 327_680


def test_deepseek_v3_mla_bytes_per_token():  # 61 x (512 + 64) x 2
    assert kv_bytes_per_token(MODELS["deepseek-v3"]) == 70_272


def test_gpt_oss_120b_alternates_sliding_128():
    m = MODELS["gpt-oss-120b"]
    assert m.num_layers == 36 and m.sliding_window_tokens == 128
    assert m.layer_kinds[:2] == ("sliding", "full") and m.layer_kinds.count("sliding") == 18
    assert (m.attention.num_kv_heads, m.attention.head_dim) == (8, 64)


def test_gemma_3_27b_five_local_one_global():
    m = MODELS["gemma-3-27b"]
    assert m.num_layers == 62 and m.sliding_window_tokens == 1024
    assert m.layer_kinds.count("full") == 10 and m.layer_kinds[5] == "full"
    assert (m.attention.num_kv_heads, m.attention.head_dim) == (16, 128)


def test_llama4_nope_layers_global_others_chunked():
    m = MODELS["llama-4-scout"]
    assert m.layer_kinds.count("full") == 12 and m.attention_chunk_tokens == 8192
    assert m.layer_kinds[3] == "full" and m.layer_kinds[0] == "chunked"


def test_mistral_v01_window_on_every_layer():
    m = MODELS["mistral-7b-v0.1"]
    assert set(m.layer_kinds) == {"sliding"} and m.sliding_window_tokens == 4096


# --- Accelerators -----------------------------------------------------------------------
def test_dense_not_sparse_flops():
    assert ACCS["h100-sxm"].dense_flops_per_s["bf16"] == 989.4e12
    assert ACCS["b200"].dense_flops_per_s["fp4"] == 9000e12
    assert ACCS["mi300x"].dense_flops_per_s["fp8"] == 2614.9e12


@pytest.mark.parametrize("aid", sorted(REQUIRED_ACCS))
def test_accelerator_sanity(aid):
    a = ACCS[aid]
    assert 1e10 < a.memory_bytes < 1e12 and 1e11 < a.memory_bandwidth_bytes_per_s < 1e13
    assert "bf16" in a.dense_flops_per_s
    ridge = a.dense_flops_per_s["bf16"] / a.memory_bandwidth_bytes_per_s
    assert 100 < ridge < 700  # dense BF16 FLOP/s ÷ headline bandwidth: every listed chip lies in 153..560
    flops = a.dense_flops_per_s
    if "fp8" in flops:
        assert flops["fp8"] >= flops["bf16"]


def test_ridge_points_from_datasheet_figures():
    # H100 SXM 989.4 TF / 3.35 TB/s, TPU v5e 197 TF / 819 GB/s, A100 312 TF / 2.039 TB/s, H200 989.4 TF / 4.8 TB/s
    def ridge(aid):
        return ACCS[aid].dense_flops_per_s["bf16"] / ACCS[aid].memory_bandwidth_bytes_per_s

    assert round(ridge("h100-sxm")) == 295 and round(ridge("tpu-v5e")) == 241
    assert round(ridge("a100-80gb")) == 153 and round(ridge("h200")) == 206


def test_memory_is_what_the_device_reports_where_sourced():
    # nvidia-smi memory.total: H100 80GB 81,559 MiB (modal-labs/modal-client PR #2797; NVIDIA/nccl #1264),
    # H200 143,771 MiB (public 8x H200 logs). Not the marketing 80e9 / 141e9.
    assert ACCS["h100-sxm"].memory_bytes == 81_559 * 2**20 == 85_520_809_984
    assert ACCS["h200"].memory_bytes == 143_771 * 2**20 == 150_754_820_096
    assert ACCS["a100-80gb"].memory_bytes == 80 * 2**30 and ACCS["a100-40gb"].memory_bytes == 40 * 2**30


def test_every_accelerator_says_where_its_memory_figure_comes_from():
    for a in ACCS.values():
        assert a.memory_note.split(":")[0] in ("reported", "vendor"), a.id
    assert ACCS["h100-sxm"].memory_note.startswith("reported") and ACCS["b200"].memory_note.startswith("reported")
    assert ACCS["mi300x"].memory_note.startswith("vendor")


def test_binary_units_where_vendor_states_gib():
    assert ACCS["tpu7x"].memory_bytes == 192 * 2**30
    assert ACCS["trainium2"].memory_bytes == 96 * 2**30
    assert ACCS["inferentia2"].memory_bandwidth_bytes_per_s == 820 * 2**30


# --- Formats ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, bits",
    [
        ("fp32", 32),
        ("bf16", 16),
        ("fp16", 16),
        ("fp8", 8),
        ("e5m2", 8),
        ("int8", 8),
        ("int4", 4.125),
        ("mxfp4", 4.25),
        ("nvfp4", 4.5),
        ("fp4", 4.5),
        ("FP8_E4M3", 8),
    ],
)
def test_format_widths_and_aliases(name, bits):
    assert get_format(name).effective_bits == bits
    assert bytes_per_element(name) == bits / 8


def test_unknown_format_names_allowed_ones():
    with pytest.raises(InputError) as e:
        bytes_per_element("fp12")
    assert e.value.field == "dtype" and "mxfp4" in e.value.message and "bf16" in e.value.message


def test_format_flops_keys_exist_on_some_chip():
    keys = {k for a in ACCS.values() for k in a.dense_flops_per_s}
    for f in formats().values():
        assert f.flops_key == "" or f.flops_key in keys or f.flops_key == "fp32"


def test_listing_is_json_ready():
    import json

    out = listing()
    assert len(out["models"]) == len(MODELS) and len(out["accelerators"]) == len(ACCS)
    json.dumps(out)
    assert all(math.isfinite(r["total_params"]) for r in out["models"])


# --- One unit policy (review parts-4-5-glossary rows 2, 3, 4, 18) ------------------------
def test_amd_capacities_are_gib_as_rocm_states_them():
    # ROCm docs "AMD GPU specifications", column "VRAM (GiB)": MI300X 192, MI325X 256, MI355X 288
    # (https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html). The old data stored 192e9 etc.
    assert ACCS["mi300x"].memory_bytes == 192 * 2**30
    assert ACCS["mi325x"].memory_bytes == 256 * 2**30
    assert ACCS["mi355x"].memory_bytes == 288 * 2**30


def test_b200_is_the_driver_reading():
    # nvidia-smi "NVIDIA B200 ... 183359MiB", driver 580.95.05, NVIDIA/TensorRT-LLM issue #10278
    # (review row 3). The old data stored the vendor's 180e9.
    assert ACCS["b200"].memory_bytes == 183_359 * 2**20


def test_tpu_capacities_follow_googles_gib_table():
    # docs.cloud.google.com/tpu/docs/tpu7x: "HBM capacity per chip (GiB)" v5p 95, v6e 32, TPU7x 192 (row 18).
    assert ACCS["tpu-v5p"].memory_bytes == 95 * 2**30
    assert ACCS["tpu-v6e"].memory_bytes == 32 * 2**30
    assert ACCS["tpu-v5e"].memory_bytes == 16 * 10**9  # stated only as "16 GB"


def test_hgx_b300_and_gb300_are_separate_parts():
    # Review row 1: HGX B300 (8 GPUs: BF16 36 PF and FP8 72 PF with sparsity, FP4 105 PF dense) per GPU
    # is 2,250 / 4,500 / 13,125 TFLOP/s dense; GB300 NVL72 per GPU is 2,500 / 5,000 / 15,000.
    hgx, gb = ACCS["b300"].dense_flops_per_s, ACCS["gb300"].dense_flops_per_s
    assert (hgx["bf16"], hgx["fp8"], hgx["fp4"]) == (2250e12, 4500e12, 13125e12)
    assert (gb["bf16"], gb["fp8"], gb["fp4"]) == (2500e12, 5000e12, 15000e12)
    assert ACCS["b300"].power_watts < ACCS["gb300"].power_watts


FULL_DATE = __import__("re").compile(r"^\d{4}-\d{2}-\d{2}$")


@pytest.mark.parametrize("entry", entries("accelerators.toml", "accelerator"), ids=lambda e: e["id"])
def test_every_accelerator_row_has_a_public_url_and_a_full_date(entry):
    assert entry["url"].startswith("https://"), entry["id"]
    assert FULL_DATE.match(entry["as_of"]), entry["as_of"]
    assert "price_usd_per_hour" not in entry  # prices live in prices.toml, each dated and sourced


@pytest.mark.parametrize("entry", prices(), ids=lambda e: e["item"])
def test_every_price_row_has_a_public_url_and_a_full_date(entry):
    assert entry["url"].startswith("https://"), entry["item"]
    assert FULL_DATE.match(entry["as_of"]), entry["as_of"]


NOT_SOURCES = {".git", ".venv", "node_modules", "site", "build", ".pytest_cache", ".hypothesis"}


def _project_text_files():
    root = Path(__file__).resolve().parents[2]
    for path in root.rglob("*"):
        parts = set(path.relative_to(root).parts)
        if (
            path.is_file()
            and not parts & NOT_SOURCES
            and path.suffix in {".py", ".md", ".toml", ".js", ".mjs", ".html", ".css", ".yml", ".json"}
        ):
            yield root, path


def test_nothing_cites_the_internal_research_notes():
    # Review row 20 and the issue: readers cannot open the project's research notes, so no page, data
    # file, module or test may cite them as a source; cite the primary source they name.
    cited = [
        str(p.relative_to(root))
        for root, p in _project_text_files()
        if "numbers" + ".md" in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert not cited


def test_engines_are_dated_and_tgi_says_it_is_in_maintenance():
    # huggingface/text-generation-inference README (commit 34988476, 2025-12-11, "Maintenance mode (#3345)").
    tgi = engines()["tgi"]
    assert tgi["url"].startswith("https://") and FULL_DATE.match(tgi["as_of"])
    assert "maintenance mode" in tgi["status"].lower() and "2025-12-11" in tgi["status"]


def test_a_hidden_model_resolves_but_is_not_offered():
    # `hidden = true`: a real model the prose needs, kept out of the selects (issue #12 item 4).
    row = dict(entries("models.toml", "model")[0])
    rows = [row, dict(row, id="counterfactual", hidden=True)]
    assert set(models_from_entries(rows)) == {row["id"], "counterfactual"}
    assert set(models_from_entries(rows, include_hidden=False)) == {row["id"]}
    with pytest.raises(InputError, match=r"models.toml\[counterfactual\].hidden: must be true or false"):
        models_from_entries([dict(row, id="counterfactual", hidden="yes")])
    hidden = sorted(set(MODELS) - set(model_presets(include_hidden=False)))
    assert sorted(r["id"] for r in listing()["models"] if r["hidden"]) == hidden
