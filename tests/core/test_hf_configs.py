"""Published config.json files of many model families (tests/fixtures/hf_configs, sources in SOURCES.toml),
read as a reader would paste them: the counts each gives, against hand-written formulas and published
totals, and the refusals, each naming the key that cannot be sized."""

import ast
import json
import operator
import tomllib
from pathlib import Path

import pytest

from calculators.calcs.kv_cache import kv_bytes_per_token_all_layers, layer_groups, state_bytes_per_sequence
from calculators.errors import InputError
from calculators.hf_import import model_from_hf_config
from calculators.params import total_params

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hf_configs"
SOURCES = tomllib.loads((FIXTURES / "SOURCES.toml").read_text())["config"]
ACCEPTED = [s for s in SOURCES if "refused" not in s]
REFUSED = [s for s in SOURCES if "refused" in s]
PUBLISHED_TOLERANCE = 0.10  # a name's size is rounded ("4B", "1.2B"); preset totals hold to a few per cent

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def arithmetic(expression: str) -> int:
    """The value of a hand-written product such as "32 * 2 * 8 * 128 * 2" (integers, + - * and brackets only)."""

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"not plain arithmetic: {expression}")

    return value(ast.parse(expression, mode="eval").body)


def load(source: dict) -> dict:
    return json.loads((FIXTURES / source["file"]).read_text())


def ids(sources):
    return [s["file"].removesuffix(".json") for s in sources]


def test_every_fixture_has_a_source_and_every_source_a_fixture():
    files = {p.name for p in FIXTURES.glob("*.json")}
    listed = [s["file"] for s in SOURCES]
    assert sorted(listed) == sorted(files) and len(set(listed)) == len(listed)
    for s in SOURCES:
        assert s["repository"].count("/") == 1 and len(s["commit"]) == 40 and s["path"] and s["copy_of"], s["file"]


def test_each_fixture_is_the_family_its_source_says():
    for s in SOURCES:
        cfg = load(s)
        inner = cfg.get("text_config") or {}
        assert s["model_type"] in (cfg.get("model_type"), inner.get("model_type", "").removesuffix("_text")), s["file"]


def test_thirty_model_types_import():
    """The issue's bar: real configs of at least 30 distinct families import; each refusal is tested below."""
    assert len({s["model_type"] for s in ACCEPTED}) >= 30


@pytest.mark.parametrize("source", ACCEPTED, ids=ids(ACCEPTED))
def test_layer_groups_as_the_config_states_them(source):
    m = model_from_hf_config(load(source))
    groups = {g.kind: g.layers for g in layer_groups(m, storing=True)}
    if m.layer_kinds.count("linear"):
        groups["linear"] = m.layer_kinds.count("linear")
    assert groups == source["layers"]


@pytest.mark.parametrize("source", ACCEPTED, ids=ids(ACCEPTED))
def test_kv_bytes_per_token_by_hand(source):
    m = model_from_hf_config(load(source))
    assert kv_bytes_per_token_all_layers(m, 2) == arithmetic(source["kv_bytes_per_token_bf16"])


@pytest.mark.parametrize("source", [s for s in ACCEPTED if "state_bytes_per_sequence_bf16" in s], ids=str)
def test_linear_state_per_sequence_by_hand(source):
    m = model_from_hf_config(load(source))
    assert state_bytes_per_sequence(m, 2) == arithmetic(source["state_bytes_per_sequence_bf16"])


@pytest.mark.parametrize("source", [s for s in ACCEPTED if "total_params" in s], ids=str)
def test_parameters_near_the_published_total(source):
    m = model_from_hf_config(load(source))
    assert total_params(m) == pytest.approx(source["total_params"], rel=PUBLISHED_TOLERANCE), source[
        "total_params_source"
    ]


@pytest.mark.parametrize("source", ACCEPTED, ids=ids(ACCEPTED))
def test_the_note_names_what_was_read(source):
    cfg, m = load(source), model_from_hf_config(load(source))
    read = keys_read(m.notes)
    inner = "text_config." if "text_config" in cfg else ""
    # the layer count and width under whichever name the family uses (GPT-2: n_layer, n_embd; ChatGLM: num_layers)
    assert {f"{inner}num_hidden_layers", "n_layer", "num_layers"} & set(read)
    assert {f"{inner}hidden_size", "n_embd"} & set(read)
    assert all(k.removeprefix("text_config.") in (cfg.get("text_config") or cfg) or k in cfg for k in read)


@pytest.mark.parametrize("source", REFUSED, ids=ids(REFUSED))
def test_refused_naming_the_key(source):
    with pytest.raises(InputError) as e:
        model_from_hf_config(load(source))
    assert e.value.field == source["refused"]
    where, key = load(source), e.value.field.removeprefix("model.")
    if key.startswith("text_config."):
        where, key = where["text_config"], key.removeprefix("text_config.")
    assert key in where and e.value.message  # a key of the pasted file, not a project field name
    assert "only the standard decoder fields are read" not in e.value.message  # the reason, not a guess at one


# ---- what the note says was assumed, on the fixtures that need it --------------------------------


def keys_read(notes: str) -> list[str]:
    return notes.removeprefix("Read: ").split(". Assumed: ")[0].rstrip(".").split(", ")


def note(name: str) -> str:
    return model_from_hf_config(json.loads((FIXTURES / name).read_text())).notes


def test_unknown_model_type_is_said_and_the_ffn_assumed():
    assert "model_type 'phi3' is not one this site knows" in note("phi-3-mini-128k.json")
    assert "gated (SwiGLU-style) FFN" in note("phi-3-mini-128k.json")


def test_phi3_window_as_long_as_the_context_is_full_attention():
    n = note("phi-3-mini-128k.json")
    assert "sliding_window is off or covers the whole context" in n and "sliding_window" in keys_read(n)


def test_minicpm3_mla_without_v_head_dim_assumes_hidden_over_heads():
    m = model_from_hf_config(json.loads((FIXTURES / "minicpm3-4b.json").read_text()))
    assert m.attention.kind == "mla" and m.attention.v_head_dim == 2560 // 40
    assert "No v_head_dim" in m.notes


def test_multimodal_text_decoder_and_mtp_layers_are_said():
    assert "vision or audio tower is not counted" in note("qwen3-vl-8b.json")
    assert "num_nextn_predict_layers = 1: multi-token-prediction layers are not counted" in note("deepseek-v3.json")


def test_no_tie_word_embeddings_takes_the_family_default_and_says_so():
    assert "No tie_word_embeddings: a separate output head assumed" in note("step-3.7-flash.json")
    smol = model_from_hf_config(json.loads((FIXTURES / "smollm3-3b.json").read_text()))
    assert smol.tie_embeddings and "No tie_word_embeddings: tied input and output embeddings" in smol.notes


def test_a_window_with_no_layer_types_is_read_on_every_layer_and_said():
    """PhiMoE's config sets sliding_window 2047 and no layer_types: every layer keeps 2,047 tokens (vLLM v0.33.0
    gives a model-level window to every layer without a per-layer one: layers/attention/attention.py)."""
    m = model_from_hf_config(json.loads((FIXTURES / "phi-mini-moe.json").read_text()))
    assert set(m.layer_kinds) == {"sliding"} and m.sliding_window_tokens == 2047
    assert "sliding_window = 2047 read as a window on every layer" in m.notes


def test_minimax_m2_experts_take_intermediate_size_and_say_so():
    m = model_from_hf_config(json.loads((FIXTURES / "minimax-m2.5.json").read_text()))
    assert m.moe.expert_intermediate_size == 1536 and m.moe.num_experts == 256 and m.moe.experts_per_token == 8
    assert "No moe_intermediate_size" in m.notes
    # its q/k RMSNorm spans all heads ("per_layer"); MiniMax-M3's is per head, Llama 4's names no type
    assert m.attention.qk_norm_over_heads and "qk_norm_type" in m.notes
    # SGLang's MiniMax-M2 takes "per_layer" where the config names no type
    untyped = {k: v for k, v in json.loads((FIXTURES / "minimax-m2.5.json").read_text()).items() if k != "qk_norm_type"}
    assert model_from_hf_config(untyped).attention.qk_norm_over_heads
    for other in ("minimax-m3.json", "llama-4-scout.json"):
        assert not model_from_hf_config(json.loads((FIXTURES / other).read_text())).attention.qk_norm_over_heads


def test_minimax_m3_per_layer_moe_list_is_dense_layers_first():
    m = model_from_hf_config(json.loads((FIXTURES / "minimax-m3.json").read_text()))
    assert m.moe.first_dense_layers == 3 and m.intermediate_size == 12288  # dense_intermediate_size
    assert m.moe.num_shared_experts == 1 and m.moe.shared_intermediate_size == 3072


def test_a_per_layer_moe_list_out_of_order_is_refused():
    cfg = json.loads((FIXTURES / "minimax-m3.json").read_text())
    cfg["moe_layer_freq"] = [1, 0] * 30
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "model.moe_layer_freq"


def test_step_shared_expert_and_dense_layers():
    m = model_from_hf_config(json.loads((FIXTURES / "step-3.7-flash.json").read_text()))
    assert (m.moe.num_experts, m.moe.num_shared_experts, m.moe.shared_intermediate_size) == (288, 1, 1280)
    assert m.moe.first_dense_layers == 3 and m.sliding_window_tokens == 512


def test_kimi_k25_reads_its_kimi_k2_decoder_as_kimi_k2():
    k2, k25 = (model_from_hf_config(json.loads((FIXTURES / f).read_text())) for f in ("kimi-k2.json", "kimi-k2.5.json"))
    assert total_params(k25) == total_params(k2) and k25.moe == k2.moe


def test_qwen35_is_qwen3_next_layout_with_fp32_state_said():
    m = model_from_hf_config(json.loads((FIXTURES / "qwen3.5-27b.json").read_text()))
    assert m.linear_mixer.kind == "gated_deltanet" and m.attention.output_gate and m.moe is None
    assert "mamba_ssm_dtype = 'float32'" in m.notes


def test_same_kv_shape_on_other_layers_is_not_refused():
    """An swa_* key equal to the main one sizes the same: only a different shape is refused."""
    cfg = json.loads((FIXTURES / "llama-3.1-8b.json").read_text())
    cfg["swa_num_key_value_heads"] = cfg["num_key_value_heads"]
    assert model_from_hf_config(cfg).attention.num_kv_heads == 8
    cfg["swa_num_key_value_heads"] = 4
    with pytest.raises(InputError) as e:
        model_from_hf_config(cfg)
    assert e.value.field == "model.swa_num_key_value_heads"


def test_families_read_with_their_own_ffn_and_embedding_defaults():
    """StarCoder2 and GPT-NeoX have an up/down MLP with no gate, and StarCoder2 and Cohere tie their embeddings
    when the config does not say: read as generic decoders (gated FFN, separate head) StarCoder2-7B came out at
    10.1B, RedPajama-INCITE-3B at 3.6B and Aya-23-8B at 9.1B."""
    sc2, neox, aya = (
        model_from_hf_config(json.loads((FIXTURES / f).read_text()))
        for f in ("starcoder2-7b.json", "redpajama-incite-3b.json", "aya-23-8b.json")
    )
    assert (sc2.ffn_kind, neox.ffn_kind, aya.ffn_kind) == ("plain", "plain", "gated")
    assert sc2.tie_embeddings and aya.tie_embeddings and not neox.tie_embeddings
    # StarCoder2-7B by hand: 32 × (2 × 4608² + 2 × 4608 × 512 (4 KV heads × 128) + 2 × 4608 × 18432) + 49152 × 4608
    by_hand = 32 * (2 * 4608**2 + 2 * 4608 * 512 + 2 * 4608 * 18432) + 49152 * 4608
    assert total_params(sc2) == pytest.approx(by_hand, rel=0.001)  # biases and norms: a few MB
    assert "not one this site knows" not in sc2.notes and "tied input and output embeddings" in aya.notes


def test_presets_copied_from_a_python_literal_name_the_key():
    for s in SOURCES:
        if "extracted" in s:
            assert s["path"].endswith(".py") and s["extracted"].startswith("MODEL_PRESETS["), s["file"]


def test_families_that_name_the_standard_fields_otherwise():
    """ChatGLM's KV heads are multi_query_group_num and its head dim kv_channels; Qwen (1.0)'s intermediate_size
    counts both gated branches (QWenMLP's w1 and w2 are half as wide each); SantaCoder is multi-query and ties its
    embeddings. Read generically, ChatGLM3-6B was refused (no vocab_size) and Qwen-1.8B came out at 2.65B."""
    glm, qwen, sc = (
        model_from_hf_config(json.loads((FIXTURES / f).read_text()))
        for f in ("chatglm3-6b.json", "qwen-1.8b.json", "santacoder.json")
    )
    assert (glm.attention.num_kv_heads, glm.attention.head_dim, glm.vocab_size) == (2, 128, 65024)
    assert glm.intermediate_size == 13696 and glm.max_context_tokens == 8192
    assert qwen.intermediate_size == 11008 // 2 and "counts both gated branches" in qwen.notes
    assert (sc.attention.kind, sc.tie_embeddings, sc.ffn_kind) == ("mqa", True, "plain")


def test_glm_4_6_in_the_catalogue_has_glm_4_7s_shape():
    # GLM-4.6's entry is GLM-4.5's Table 1 shape with a 202,752-token context; GLM-4.7's config (the copy the fixture
    # is, which keeps the sizing keys and not attention_bias) must import to the same model but for the QKV bias
    from dataclasses import replace

    from calculators.catalog import model_presets

    imported = model_from_hf_config(json.loads((FIXTURES / "glm-4.7.json").read_text()), id="glm-4.6")
    preset = model_presets()["glm-4.6"]
    assert preset.attention.qkv_bias and not imported.attention.qkv_bias
    imported = replace(imported, attention=replace(imported.attention, qkv_bias=True))
    shape = ("num_layers", "hidden_size", "attention", "moe", "intermediate_size", "vocab_size", "max_context_tokens")
    for field in shape:
        assert getattr(imported, field) == getattr(preset, field), field
