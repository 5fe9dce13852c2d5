"""The KV conformance vectors (data/kv-conformance.json): every preset and every config fixture, each
number the KV-cache calculator's own, and the built file the same as the core's."""

import json
from pathlib import Path

import pytest

import calculators
from calculators.catalog import model_presets
from calculators.hf_import import model_from_hf_config
from sitegen import conformance

VECTORS = conformance.vectors()
SITE_FILE = Path(__file__).parents[2] / "site" / conformance.URI


def test_covers_every_preset_and_every_config_fixture():
    assert set(VECTORS["presets"]) == set(model_presets())
    assert set(VECTORS["configs"]) == {p.name for p in conformance.FIXTURES.glob("*.json")}
    assert "refused" not in json.dumps(VECTORS["presets"])


def _check_against_calculator(model, vector):
    """The KV-cache calculator's outputs for the same model, per format, against the vector's numbers."""
    for f in conformance.KV_FORMATS:
        out = calculators.run("kv_cache", {"model": model, "kv_dtype": f, "context_tokens": 10_000_000})
        assert vector["bytes_per_token_all_layers"][f] == out["kv_bytes_per_token_all_layers"]
        assert vector["bytes_per_token_past_every_window"][f] == out["kv_bytes_per_token"]
        attention = [g for g in vector["groups"] if g["kind"] != "linear"]
        assert sum(g["bytes_per_token"][f] for g in attention) == out["kv_bytes_per_token_all_layers"]
        by_kind = {
            "full": "kv_bytes_full_layers",
            "sliding": "kv_bytes_sliding_layers",
            "chunked": "kv_bytes_chunked_layers",
        }
        for g in attention:  # a group keeps min(T, its window) tokens of a context of T
            kept = g["tokens_kept"] or 10_000_000
            assert g["bytes_per_token"][f] * kept == pytest.approx(out[by_kind[g["kind"]]], rel=1e-12)
    for f in conformance.STATE_FORMATS:
        state = next((g for g in vector["groups"] if g["kind"] == "linear"), None)
        out = calculators.run("kv_cache", {"model": model, "state_dtype": f})
        assert (state["state_bytes_per_sequence"][f] if state else 0) == out["state_bytes_per_sequence"]


@pytest.mark.parametrize("preset", sorted(VECTORS["presets"]))
def test_preset_vector_is_the_calculators(preset):
    _check_against_calculator(preset, VECTORS["presets"][preset])


@pytest.mark.parametrize("name", sorted(VECTORS["configs"]))
def test_config_vector_is_the_calculators_or_its_refusal(name):
    vector = VECTORS["configs"][name]
    cfg = json.loads((conformance.FIXTURES / name).read_text())
    assert vector["repository"] and len(vector["commit"]) == 40 and vector["path"]
    if "refused" in vector:
        with pytest.raises(calculators.InputError) as e:
            model_from_hf_config(cfg)
        assert vector["refused"]["field"] == e.value.field
        return
    _check_against_calculator(cfg, vector)  # the calculators take a pasted config.json as the model


def test_layers_in_groups_add_up():
    for vector in [*VECTORS["presets"].values(), *(v for v in VECTORS["configs"].values() if "refused" not in v)]:
        assert sum(g["layers"] for g in vector["groups"]) + vector["kv_shared_layers"] <= vector["layers"]


@pytest.mark.skipif(not SITE_FILE.exists(), reason="site/ not built")
def test_the_built_file_is_the_cores():
    assert json.loads(SITE_FILE.read_text()) == VECTORS
