"""Issue #18's reader walk (/work/shared/reviews/reader-walk.md), the rows the core can reproduce:
each test failed before its fix. Row numbers are the report's."""

import json
from pathlib import Path

import pytest

from calculators.calcs.kv_cache import kv_bytes_per_token, kv_bytes_per_token_all_layers
from calculators.errors import InputError
from calculators.hf_import import model_from_hf_config
from calculators.page import describe_json
from calculators.params import total_params
from calculators.schema import integer, number, validate

HF = Path(__file__).parent / "fixtures" / "hf"


def load(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text())


def described(cfg) -> dict:
    return json.loads(describe_json("model", json.dumps(cfg)))


# ---- row 2: no internal error (traceback, MemoryError) from a pasted config -----------------------
@pytest.mark.parametrize(
    "change, key",
    [
        ({"model_type": "foo", "architectures": 5}, "architectures"),
        ({"architectures": [1]}, "architectures"),
        ({"model_type": 3}, "model_type"),
        ({"num_hidden_layers": 1_000_000_000}, "num_hidden_layers"),
    ],
)
def test_bad_configs_get_a_message_on_the_key_not_an_internal_error(change, key):
    reply = described(dict(load("llama-3.1-8b"), **change))
    assert reply["error"]["field"] == f"definition.{key}", reply
    assert "internal error" not in reply["error"]["message"]


# ---- row 8: Phi-3 (model_type phi3) is a plain MHA decoder -------------------------------------
def test_phi3_is_read_as_a_standard_decoder():
    m = model_from_hf_config(load("phi-3-mini-128k-instruct"))
    assert (m.num_layers, m.attention.kind, m.attention.num_kv_heads, m.attention.head_dim) == (32, "mha", 32, 96)
    # 32 layers x (K + V) x 32 heads x 96 x 2 B = 384 KiB per token; the 262,144-token window covers the
    # 131,072-token context, so every layer is full attention.
    assert kv_bytes_per_token_all_layers(m, 2) == kv_bytes_per_token(m, 2) == 384 * 1024
    assert set(m.layer_kinds) == {"full"}
    assert 3.8e9 <= total_params(m) <= 3.83e9  # the model card's 3.8B
    assert "'phi3' is not one this site knows" in m.notes


def test_a_known_family_is_read_as_before():
    m = model_from_hf_config(load("mistral-7b-v0.1"))  # window 4,096 under a 32,768 context: sliding
    assert set(m.layer_kinds) == {"sliding"} and "not one this site knows" not in m.notes
    assert m.notes.startswith("Read: model_type, ")  # every import says which keys it read


# ---- row 23: errors name the key the reader pasted ---------------------------------------------
@pytest.mark.parametrize(
    "change, key",
    [
        ({"sliding_window": "4096"}, "sliding_window"),
        ({"num_hidden_layers": 1_000_000}, "num_hidden_layers"),
        ({"vocab_size": 10**9}, "vocab_size"),
        ({"max_position_embeddings": 10**12}, "max_position_embeddings"),
        ({"head_dim": 10**9}, "head_dim"),
    ],
)
def test_errors_name_the_pasted_key(change, key):
    with pytest.raises(InputError) as e:
        model_from_hf_config(dict(load("mistral-7b-v0.1"), **change), field="definition")
    assert e.value.field == f"definition.{key}"


def test_range_messages_use_the_sites_numbers():  # row 21: "1,000,000,000", not "1e+09"
    with pytest.raises(InputError) as e:
        model_from_hf_config(dict(load("mistral-7b-v0.1"), sliding_window="4096"))
    assert "between 1 and 1,000,000,000" in e.value.message


# ---- row 24: a missing num_key_value_heads is said --------------------------------------------
def test_missing_kv_heads_assumes_mha_and_says_so():
    cfg = load("llama-3.1-8b")
    del cfg["num_key_value_heads"]
    m = model_from_hf_config(cfg)
    assert m.attention.kind == "mha" and "multi-head attention assumed" in m.notes
    said = "multi-head attention assumed"  # every import's note lists the keys read; this assumption only here
    assert said not in model_from_hf_config(load("llama-3.1-8b")).notes
    assert said not in model_from_hf_config(load("deepseek-v3")).notes  # MLA states its own
    assert said not in model_from_hf_config(load("falcon-7b")).notes  # multi_query says it


# ---- row 22: typed numbers: commas between thousands accepted; 1_000 and full-width digits refused --
@pytest.mark.parametrize("text, value", [("1,000", 1000), ("10,000,000", 10_000_000), (" 12 ", 12), ("1e3", 1000)])
def test_thousands_commas_are_accepted(text, value):
    assert validate([integer("n", "N", 1, 1, 10_000_000)], {"n": text}) == {"n": value}


@pytest.mark.parametrize("text", ["1_000", "１２", "1,00", "1,0000", "0x10", "١٢"])
def test_other_numerals_are_refused(text):
    with pytest.raises(InputError):
        validate([integer("n", "N", 1, 1, 10_000_000)], {"n": text})
    with pytest.raises(InputError):
        validate([number("x", "X", 1.0, 0.0, 1e7)], {"x": text})


# ---- rows 16 and 18: verdicts and rows that do not apply read as words ------------------------------
def _shown(name, inputs=None) -> dict:
    from calculators.page import present

    return {o["key"]: o["text"] for o in present(name, inputs or {})["outputs"]}


def test_sentinels_read_as_words_and_raw_values_stay_numbers():
    from calculators.api import run

    assert _shown("memory")["fits"] == "yes"
    big = {"model": "llama-3.1-405b", "tensor_parallel": 1, "hardware": "h100-sxm"}
    assert _shown("memory", big)["fits"] == "no" and run("memory", big)["fits"] == 0
    assert _shown("preemption")["break_even_context_tokens"] == "none below 10M"
    assert run("preemption", {})["break_even_context_tokens"] == 0
    kv = _shown("kv_cache", {"model": "llama-3.1-8b"})
    assert kv["kv_bytes_sliding_layers"].startswith("none") and kv["kv_bytes_chunked_layers"].startswith("none")
    assert _shown("kv_cache", {"model": "gpt-oss-20b"})["kv_bytes_sliding_layers"][0].isdigit()
    assert _shown("cost")["usd_per_million_input_tokens"].startswith("not priced")
    assert _shown("roofline", {"model": "llama-3.1-8b"})["moe_experts_touched_per_layer"] == "none: dense model"


# ---- row 19: one GPU, one sequence ----------------------------------------------------------------
def test_a_count_of_one_reads_in_the_singular():
    from calculators.display import by_output_format

    assert by_output_format(1, "integer", "GPUs") == "1 GPU"
    assert by_output_format(1.0, "number", "sequences") == "1 sequence"
    assert by_output_format(2, "integer", "GPUs") == "2 GPUs"
    assert _shown("memory", {"model": "llama-3.1-8b"})["min_tensor_parallel_to_fit"] == "1 GPU"
    from calculators.api import run

    assert "(1 token per step;" in next(iter(run("allreduce", {})["series"].values()))["title"]
    assert by_output_format(1, "integer", "groups") == "1 group"  # a dense model's one KV-cache group


def test_every_counted_unit_of_an_output_has_its_singular():
    from calculators.api import calculator_names, schema
    from calculators.display import SINGULAR

    plural = {
        out["unit"]
        for name in calculator_names()
        for out in schema(name)["outputs"]
        if out["format"] in ("integer", "number") and out["unit"].isalpha() and out["unit"].endswith("s")
    }
    assert plural - set(SINGULAR) == set()


# ---- row 17: rates in GB/s, as the derivations print them -------------------------------------
def test_byte_rates_read_with_a_prefix():
    shown = _shown("allreduce")
    assert all("0,000,000" not in text for text in shown.values()), shown
    assert "141 GB/s" in shown.values()
    assert "64 GB/s" in _shown("preemption").values()


# ---- row 9 (fixed by the engine renovation, 0df107f): goodput is bisected, not a 6-point sweep capped at 3x --
def test_goodput_is_not_capped_at_three_times_the_rate_and_moves_with_the_slo():
    from calculators.api import run

    default = run("goodput", {})
    best = default["max_rate_meeting_slo_requests_per_s"]
    assert 3 * 10.0 < best <= default["capacity_requests_per_s"]  # the report saw 30 req/s = 3 x 10
    tight = run("goodput", {"ttft_slo_s": 0.05})["max_rate_meeting_slo_requests_per_s"]
    assert tight < best
