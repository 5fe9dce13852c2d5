"""Properties that must hold for every input, checked with hypothesis over the schema ranges."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from calculators import InputError, calculator_names, run, schema
from calculators.model import Attention, Model
from calculators.catalog import accelerator_presets, model_presets
from calculators.calcs.kv_cache import kv_bytes_per_sequence

MODELS = sorted(model_presets())
ACCELERATORS = sorted(accelerator_presets())
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
H100 = {
    "id": "x",
    "name": "X",
    "memory_bytes": 80 * 10**9,
    "memory_bandwidth_bytes_per_s": 3.35e12,
    "dense_flops_per_s": {"bf16": 989.4e12},
}


def kv(model, context, **extra):
    return run("kv_cache", {"model": model, "context_tokens": context, **extra})


@FAST
@given(st.sampled_from(MODELS), st.integers(1, 2_000_000), st.integers(1, 2_000_000))
def test_more_context_never_less_kv(model, a, b):
    lo, hi = sorted((a, b))
    assert kv(model, lo)["kv_bytes_per_sequence"] <= kv(model, hi)["kv_bytes_per_sequence"]


@FAST
@given(
    st.sampled_from(MODELS), st.floats(1e9, 1e13), st.floats(1e9, 1e13), st.integers(1, 4096), st.integers(1, 200_000)
)
def test_more_bandwidth_never_a_longer_step(model, bw1, bw2, batch, context):
    lo, hi = sorted((bw1, bw2))

    def step(bw):
        hardware = dict(H100, memory_bandwidth_bytes_per_s=bw)
        return run("roofline", {"model": model, "hardware": hardware, "batch_size": batch, "context_tokens": context})

    assert step(hi)["decode_step_time_s_lower_bound"] <= step(lo)["decode_step_time_s_lower_bound"]
    assert step(hi)["prefill_time_s_lower_bound"] <= step(lo)["prefill_time_s_lower_bound"]


def _model(attention: Attention, layers=32) -> Model:
    return Model(
        id="t",
        name="t",
        num_layers=layers,
        hidden_size=4096,
        vocab_size=32000,
        intermediate_size=11008,
        attention=attention,
        layer_kinds=("full",) * layers,
    )


@FAST
@given(st.sampled_from([64, 128, 256]), st.integers(4, 64), st.integers(1, 100_000), st.data())
def test_mla_below_gqa_below_mha_at_equal_dimensions(head_dim, heads, context, data):
    groups = data.draw(st.integers(3, heads - 1))
    mha = _model(Attention("mha", heads, heads, head_dim))
    gqa = _model(Attention("gqa", heads, groups, head_dim))
    # DeepSeek-V2 (arXiv 2405.04434 Table 1): d_c = 4 d_h, d_rope = d_h / 2 → "GQA with only 2.25 groups"
    mla = _model(Attention("mla", heads, heads, head_dim, kv_lora_rank=4 * head_dim, qk_rope_head_dim=head_dim // 2))
    sizes = [kv_bytes_per_sequence(m, context, 2) for m in (mla, gqa, mha)]
    assert sizes[0] < sizes[1] < sizes[2]


@FAST
@given(st.sampled_from(MODELS), st.integers(1, 1_000_000), st.integers(1, 512))
def test_unit_scaling(model, context, batch):
    fp8, bf16, fp32 = (kv(model, context, kv_dtype=d, batch_size=batch) for d in ("fp8", "bf16", "fp32"))

    def attention_kv(out):  # a hybrid model's linear-layer state does not follow the KV format
        return out["kv_bytes_per_sequence"] - out["state_bytes_per_sequence"]

    # Outputs are rounded to 12 significant digits (numfmt), so "exactly 2×" holds to that precision.
    # DeepSeek sparse attention has fixed-format parts (FP8 indexer keys, BF16 rope in the FP8
    # layout; test_sparse_mla.py checks those bytes exactly), so it does not scale with the format.
    if not model_presets()[model].attention.index_head_dim:
        assert attention_kv(bf16) == pytest.approx(2 * attention_kv(fp8), rel=1e-11)
        assert attention_kv(fp32) == pytest.approx(2 * attention_kv(bf16), rel=1e-11)
    assert bf16["kv_bytes_batch"] == pytest.approx(batch * bf16["kv_bytes_per_sequence"], rel=1e-11)
    assert bf16["kv_gib_batch"] * 2**30 == pytest.approx(bf16["kv_bytes_batch"], rel=1e-11)
    parts = sum(bf16[f"kv_bytes_{k}_layers"] for k in ("full", "sliding", "chunked")) + bf16["state_bytes_per_sequence"]
    assert parts == pytest.approx(bf16["kv_bytes_per_sequence"], rel=1e-11)


def _value_strategy(spec):
    t = spec["type"]
    if t == "number":
        return st.floats(spec["min"], spec["max"], allow_nan=False, allow_infinity=False)
    if t == "integer":
        return st.integers(spec["min"], spec["max"])
    if t in ("choice", "dtype"):
        return st.sampled_from([c["value"] for c in spec["choices"]])
    if t == "boolean":
        return st.booleans()
    if t == "text":
        return st.text(max_size=spec["max"])
    return st.sampled_from(MODELS if t == "model" else ACCELERATORS)


# Upper limits that keep a calculator's random draws useful: simulations small enough for many examples, and
# lengths that fit a replica (a million-token prompt fits none, so most draws would be refused)
CAPS = {
    "goodput": {"num_requests": 400, "output_tokens_mean": 400},
    "prefix_cache": {
        "num_requests": 40,
        "system_prompt_tokens": 4000,
        "message_tokens_mean": 2000,
        "output_tokens_mean": 400,
        "turns": 8,
    },
    "noisy_neighbour": {  # the three tenant simulations
        "quiet_rate_per_s": 2.0,
        "aggressive_rate_per_s": 15.0,
        "duration_s": 20.0,
        "input_tokens_mean": 4000,
        "output_tokens_mean": 400,
    },
    "price_decoder": {"input_tokens": 32768, "output_tokens": 32768},
}


def _inputs(name):
    specs = schema(name)["inputs"]
    caps = CAPS.get(name, {})
    specs = [dict(s, max=min(s["max"], caps[s["key"]])) if s["key"] in caps else s for s in specs]
    if name == "sharding_breakdown":  # random degrees and cluster sizes are nearly all invalid together: keep
        fixed = {"tp", "pp", "dp", "ep", "cp", "dcp", "nodes", "gpus_per_node"}  # the defaults (TP 8 × PP 2)
        specs = [s for s in specs if s["key"] not in fixed]
    return st.fixed_dictionaries({}, optional={s["key"]: _value_strategy(s) for s in specs})


def _all_finite(x):
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_all_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_all_finite(v) for v in x)
    return True


@pytest.mark.parametrize("name", calculator_names())
def test_no_nan_or_inf_for_any_valid_input(name):
    keys = {s["key"] for s in schema(name)["inputs"]}

    # filter_too_much: random fields often break a cross-field rule (assume(False) below); the examples that pass are
    # the test, and a calculator with many such rules (goodput) must not fail the health check by chance
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(_inputs(name))
    def check(inputs):
        try:
            result = run(name, inputs)
        except InputError as exc:  # a cross-field rule (e.g. the chip lists no FLOP/s for the format)
            assert exc.field.split(".")[0] in keys, exc
            assume(False)
        assert _all_finite(result)
        json.dumps(result, allow_nan=False)

    check()


def _invalid_values(spec):
    t = spec["type"]
    if t in ("number", "integer"):
        bad = [spec["min"] - 1, spec["max"] * 10 + 1, "abc", "", None, "1e400", float("nan"), True, [1]]
        return bad + ([spec["min"] + 0.5] if t == "integer" else [])
    if t in ("choice", "dtype"):
        return ["no-such-choice", 3, None]
    if t == "boolean":
        return ["maybe", 2]
    if t == "text":
        return [None, 42, "x" * (spec["max"] + 1)]
    return ["no-such-preset", 42, None, {"bogus": 1}]


@pytest.mark.parametrize("name", calculator_names())
def test_every_invalid_input_names_its_field(name):
    for spec in schema(name)["inputs"]:
        for bad in _invalid_values(spec):
            with pytest.raises(InputError) as exc:
                run(name, {spec["key"]: bad})
            assert exc.value.field.split(".")[0] == spec["key"], (spec["key"], bad, exc.value)
