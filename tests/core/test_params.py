"""Parameter counts derived from the architecture against the published figures."""

import pytest

from calculators.params import active_params, moe_layer_count, total_params, weight_bytes
from calculators.catalog import model_info, model_presets

PRESETS = model_presets()
# Publishers whose activated count is only a rounded figure (in the model's name, or a report's table) that the
# core's architecture counts do not match within 3%: checked for a params_note only.
# qwen3-next-80b-a3b: "3B activated"; the config gives 3.87B with embeddings, 3.56B without.
# glm-4.5-air: Table 1 of arXiv 2508.06471 gives "12B" on a basis active_params cannot count (neither vocabulary
# matrix, the MTP layer in): 12.18B by hand without the MTP layer (+1.5%); the core's counts, 13.42B with both
# matrices and 12.80B with the output layer, are more than 3% off.
# glm-4.7-flash: "30B-A3B" in the name; 3.58B with the output layer, 3.26B without either vocabulary matrix.
# minimax-m2.5: M2's "10B active" (rounded); 10.42B with the output layer, 9.80B without either vocabulary matrix.
NAME_ONLY_ACTIVE = {"qwen3-next-80b-a3b", "glm-4.5-air", "glm-4.7-flash", "ernie-4.5-21b-a3b", "minimax-m2.5"}
# ernie-4.5-21b-a3b: "21B" in the name and the card, against 21.83B with the tied vocabulary matrix (+3.9%).
NAME_ONLY_TOTAL = {"ernie-4.5-21b-a3b"}


def _expected(mid):
    m, info = PRESETS[mid], model_info(mid)
    extra = info.official_extra_params  # e.g. a vision encoder the card counts
    total = total_params(m) + extra
    active = active_params(m, include_embedding=not info.official_active_excludes_embedding)
    if m.moe is None:
        active += extra
    return total, active, info


# Hidden models (counterfactuals and KV-only references the prose names) publish no parameter counts.
@pytest.mark.parametrize("mid", sorted(model_presets(include_hidden=False)))
def test_total_and_active_within_1_percent_of_official(mid):
    total, active, info = _expected(mid)
    m = PRESETS[mid]
    loose = set(info.params_loose)
    for what, derived, official in (
        ("total", total, m.official_total_params),
        ("active", active, m.official_active_params),
    ):
        err = derived / official - 1
        if mid in {"active": NAME_ONLY_ACTIVE, "total": NAME_ONLY_TOTAL}[what]:
            assert "rounded" in info.params_note, f"{mid}: say why the {what} figure is not checked"
        elif what in loose:
            # Published only to two digits; the gap is explained in params_note and the report.
            assert info.params_note, f"{mid}: loose {what} figure needs a params_note"
            assert abs(err) <= 0.03, f"{mid} {what}: {derived:.4g} vs {official:.4g}"
        else:
            assert abs(err) <= 0.01, f"{mid} {what}: {derived:.4g} vs {official:.4g} ({err:+.2%})"


def test_loose_exceptions_are_the_known_few():
    loose = {mid for mid in PRESETS if model_info(mid).params_loose}
    # deepseek-v3.2: DeepSeek publishes no activated count for V3.2; the rounded V3 figure (37B)
    # leaves out the 0.85B of indexers every token runs through (params_note). glm-4.6: GLM-4.5's rounded "32B", counted
    # with the MTP layer and without either vocabulary matrix; the core's count with the output layer is 2.7% over.
    assert loose == {
        "opt-13b",
        "llama-4-scout",
        "llama-4-maverick",
        "qwen3-30b-a3b",
        "kimi-k2",
        "deepseek-v3.2",
        "qwen3-next-80b-a3b",
        "nemotron-h-8b",
        "glm-4.6",
    }


@pytest.mark.parametrize(
    "mid, expected",
    [
        ("llama-2-7b", 6_738_415_616),  # HF safetensors metadata
        ("llama-2-13b", 13_015_864_320),
        ("mistral-7b-v0.1", 7_241_732_096),
        ("gemma-2-9b", 9_241_705_984 - 2 * 3584 * 42),  # Gemma 2 report; minus 2 extra norms/layer we skip
    ],
)
def test_exact_counts(mid, expected):
    assert abs(total_params(PRESETS[mid]) - expected) <= 2 * 3584 * 42 * 2


def test_deepseek_v3_structure():
    m = PRESETS["deepseek-v3"]
    assert moe_layer_count(m) == 58
    # 671B main model; the 14B MTP module is outside num_layers and not counted.
    assert 670.5e9 < total_params(m) < 671.5e9
    assert active_params(m) - active_params(m, include_embedding=False) == 129280 * 7168


def test_llama4_maverick_alternates_dense_and_moe():
    assert moe_layer_count(PRESETS["llama-4-maverick"]) == 24
    assert moe_layer_count(PRESETS["llama-4-scout"]) == 48


def test_tied_embedding_counted_once_and_always_active():
    m = PRESETS["gemma-2-9b"]
    assert active_params(m, include_embedding=False) == active_params(m) == total_params(m)


def test_weight_bytes_uses_format_width():
    m = PRESETS["llama-3.1-8b"]
    assert weight_bytes(m, "bf16") == total_params(m) * 2
    assert weight_bytes(m, "mxfp4") == pytest.approx(total_params(m) * 4.25 / 8)
    assert weight_bytes(m, "fp8") == total_params(m)


def test_weight_bytes_unknown_format():
    from calculators.errors import InputError

    with pytest.raises(InputError) as e:
        weight_bytes(PRESETS["llama-3.1-8b"], "fp7", field="weights_dtype")
    assert e.value.field == "weights_dtype" and "bf16" in e.value.message


def test_nemotron_h_blocks_hold_either_a_mixer_or_an_ffn():
    """Nemotron-H: 24 Mamba-2 + 4 attention + 24 MLP blocks, one norm each (transformers
    NemotronHBlock); counting an FFN in every block would add 28 x 2 x 4096 x 21504 = 4.9B."""
    from calculators.params import linear_mixer_params

    m = PRESETS["nemotron-h-8b"]
    d = 4096
    attention = d * (4096 + 2 * 1024) + 4096 * d
    expected = 2 * 131072 * d + 24 * linear_mixer_params(m) + 4 * attention + 24 * 2 * d * 21504 + 52 * d + d
    assert total_params(m) == expected
    assert linear_mixer_params(m) == d * (2 * 8192 + 2 * 8 * 128 + 128) + (8192 + 2048) * 5 + 3 * 128 + 8192 + 8192 * d
