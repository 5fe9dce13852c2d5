"""The run/schema contract and the JSON envelope of the browser's entries: shapes, validation messages,
JSON safety, custom inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

import calculators
from calculators import InputError, calculator_names, describe_json, present_json, run, run_json, schema
from calculators.schema import OUTPUT_FORMATS

INPUT_TYPES = {"model", "accelerator", "dtype", "number", "integer", "choice", "boolean", "text"}
NAMES = calculator_names()
HF = Path(__file__).parent / "fixtures" / "hf"


def test_all_six_calculators_are_registered():
    assert {"kv_cache", "memory", "roofline", "latency", "goodput", "cost"} <= set(NAMES)


def test_calculators_are_listed_in_order_and_the_order_names_no_stale_one():
    assert NAMES[: len(calculators.api.ORDER)] == list(calculators.api.ORDER)


def test_two_calculators_with_one_name_are_refused(monkeypatch):
    from calculators.calcs import cost

    twin = SimpleNamespace(__name__="calculators.calcs.cost_twin", SCHEMA=cost.SCHEMA)
    monkeypatch.setattr(calculators.api, "_calculator_modules", lambda: [cost, twin])
    calculators.api._registry.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="cost_twin and calculators.calcs.cost both define calculator 'cost'"):
            calculators.api._registry()
    finally:
        monkeypatch.undo()
        calculators.api._registry.cache_clear()


@pytest.mark.parametrize("name", NAMES)
def test_schema_shape(name):
    s = schema(name)
    assert set(s) == {"name", "title", "description", "inputs", "outputs"} and s["name"] == name
    keys = [i["key"] for i in s["inputs"]]
    assert len(keys) == len(set(keys))
    for spec in s["inputs"]:
        assert {"key", "label", "type", "unit", "default", "min", "max", "help"} <= set(spec)
        assert spec["type"] in INPUT_TYPES and isinstance(spec["unit"], str)
        if spec["type"] in ("number", "integer"):
            assert spec["min"] <= spec["default"] <= spec["max"]
        if spec["type"] in ("choice", "dtype"):
            assert spec["default"] in [c["value"] for c in spec["choices"]]
    for out in s["outputs"]:
        assert set(out) - {"words", "shown"} == {"key", "label", "unit", "format"} and out["format"] in OUTPUT_FORMATS
        assert out.get("shown", False) is False  # present only to keep a value out of the results rows
        assert all(k.lstrip("-").isdigit() and isinstance(v, str) and v for k, v in out.get("words", {}).items())


@pytest.mark.parametrize("name", NAMES)
def test_defaults_run_and_are_json_safe(name):
    result = run(name, {})
    assert all(o["key"] in result for o in schema(name)["outputs"])
    text = json.dumps(result, allow_nan=False, sort_keys=True)
    assert json.loads(text) == result
    assert run_json(name, "{}") == calculators.api.dumps(result)


@pytest.mark.parametrize("name", ["kv_cache", "memory", "roofline", "latency", "goodput", "cost"])
def test_derivation_and_series_shape(name):
    result = run(name, {})
    assert result["derivation"]
    for st in result["derivation"]:
        assert set(st) == {"label", "formula", "template", "terms", "value", "unit"}
        assert math.isfinite(st["value"])
    for sid, ser in result.get("series", {}).items():
        assert {"title", "x", "y", "kind"} <= set(ser) and ser["kind"] in ("line", "scatter", "bar", "stack")
        n = len(ser["x"]["values"])
        assert n and all(len(y["values"]) == n for y in ser["y"]), sid


def test_required_series_exist():
    assert "kv_vs_context" in run("kv_cache", {})["series"]
    assert {"roofline", "tokens_per_user_vs_gpu"} <= set(run("roofline", {})["series"])
    assert "goodput_vs_rate" in run("goodput", {})["series"]
    assert "throughput_latency" in run("latency", {})["series"]
    assert "by_tensor_parallel" in run("memory", {})["series"]


@pytest.mark.parametrize("bad", ["1e400", "abc", "", None, -5, 0, 1.5, True, float("nan"), float("inf"), [1], {}])
def test_bad_integer_names_field_and_range(bad):
    with pytest.raises(InputError) as exc:
        run("kv_cache", {"context_tokens": bad})
    assert exc.value.field == "context_tokens"
    assert str(exc.value) == "context_tokens: must be an integer between 1 and 10,000,000"


def test_numeric_strings_are_accepted():
    assert run("kv_cache", {"context_tokens": "4096"}) == run("kv_cache", {"context_tokens": 4096})
    assert run("kv_cache", {"context_tokens": 4096.0}) == run("kv_cache", {"context_tokens": 4096})


def test_bad_number_choice_dtype_unknown_key():
    with pytest.raises(InputError, match="bandwidth_efficiency: must be a number between 0.01 and 1"):
        run("roofline", {"bandwidth_efficiency": 0})
    with pytest.raises(InputError, match="engine_rule: must be one of: vllm, sglang"):
        run("memory", {"engine_rule": "trt"})
    with pytest.raises(InputError) as exc:
        run("kv_cache", {"kv_dtype": "fp7"})
    assert exc.value.field == "kv_dtype"
    with pytest.raises(InputError) as exc:
        run("kv_cache", {"contxt_tokens": 1})
    assert exc.value.field == "contxt_tokens" and "context_tokens" in exc.value.message
    with pytest.raises(InputError) as exc:
        run("nope", {})
    assert exc.value.field == "calculator"


def test_unknown_presets_name_the_field():
    for name, key in (("kv_cache", "model"), ("roofline", "hardware")):
        with pytest.raises(InputError) as exc:
            run(name, {key: "no-such-thing"})
        assert exc.value.field == key


def test_missing_flops_for_precision_names_compute_dtype():
    with pytest.raises(InputError) as exc:
        run("roofline", {"hardware": "h100-sxm", "compute_dtype": "nvfp4"})
    assert exc.value.field == "compute_dtype"


def test_run_json_errors():
    err = json.loads(run_json("kv_cache", '{"context_tokens": "abc"}'))
    assert err == {"error": {"field": "context_tokens", "message": "must be an integer between 1 and 10,000,000"}}
    assert json.loads(run_json("kv_cache", "{not json"))["error"]["field"] == "inputs"
    assert json.loads(run_json("kv_cache", "[1, 2]"))["error"]["field"] == "inputs"
    assert json.loads(run_json("nope", "{}"))["error"]["field"] == "calculator"


def test_internal_errors_say_so_in_every_entry(monkeypatch):
    from calculators import page
    from calculators.calcs import cost

    def boom(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(cost, "compute", boom)
    monkeypatch.setattr(page, "resolve_model", boom)
    for text in (run_json("cost", "{}"), present_json("cost", "{}"), describe_json("model", '"llama-3.1-8b"')):
        assert json.loads(text) == {"error": {"field": None, "message": "internal error: ZeroDivisionError: boom"}}


def test_one_rule_for_bad_and_empty_json_in_every_entry():
    not_json = {"field": "inputs", "message": "is not valid JSON"}
    assert json.loads(present_json("kv_cache", "{not json"))["error"] == not_json
    assert json.loads(run_json("kv_cache", "{not json"))["error"] == not_json
    assert json.loads(describe_json("model", "{not json"))["error"] == dict(not_json, field="definition")
    # empty text is no value: a calculator's defaults, and for a definition an error naming the field
    assert present_json("kv_cache", "") == present_json("kv_cache", None) == present_json("kv_cache", "{}")
    assert run_json("kv_cache", "") == run_json("kv_cache", "{}")
    assert json.loads(describe_json("model", ""))["error"] == {
        "field": "definition",
        "message": "must be a preset id, a model object or a Hugging Face config.json",
    }
    assert json.loads(present_json("kv_cache", "[]"))["error"]["field"] == "inputs"


def test_hf_config_and_custom_accelerator_inputs():
    cfg = json.loads((HF / "llama-3.1-8b.json").read_text())
    assert (
        run("kv_cache", {"model": cfg})["kv_bytes_per_token"]
        == run("kv_cache", {"model": "llama-3.1-8b"})["kv_bytes_per_token"]
    )
    custom = {
        "id": "mine",
        "name": "My chip",
        "memory_bytes": 96 * 10**9,
        "memory_bandwidth_bytes_per_s": 4e12,
        "dense_flops_per_s": {"bf16": 1e15},
    }
    r = run("roofline", {"hardware": custom, "model": cfg})
    assert r["ridge_point_flops_per_byte"] == 250
    with pytest.raises(InputError) as exc:
        run("roofline", {"hardware": dict(custom, memory_bandwidth_bytes_per_s=-1)})
    assert exc.value.field.startswith("hardware")


def test_memory_reports_not_fitting_instead_of_failing():
    r = run("memory", {"model": "deepseek-v3", "hardware": "h100-sxm", "tensor_parallel": 1})
    assert r["fits"] == 0 and r["max_concurrent_sequences"] == 0 and r["notes"]
    assert r["min_tensor_parallel_to_fit"] > 1


def test_goodput_is_seeded_and_deterministic():
    a, b = run_json("goodput", '{"seed": 7}'), run_json("goodput", '{"seed": 7}')
    assert a == b and a != run_json("goodput", '{"seed": 8}')


def test_cost_rejects_a_vanishing_input_rate_by_name():
    # Hypothesis once drew 5e-324 tokens/s: the GPU count overflowed. Now it is a clear input error.
    with pytest.raises(InputError, match="input_tokens_per_s: must be 0"):
        run("cost", {"input_tokens_per_s": 5e-324})
    assert run("cost", {"input_tokens_per_s": 0.001})["usd_per_million_input_tokens"] > 0


def test_every_chain_hands_its_result_to_a_declared_target():
    """A chained result opens its calculator on another page through the page config's homes, which list only
    page.CHAIN_TARGETS: a chain to any other calculator would have nowhere to go off its page."""
    from calculators.page import CHAIN_TARGETS, present

    found = {c["to"] for n in calculator_names() for c in present(n)["chain"]}
    assert found == CHAIN_TARGETS
