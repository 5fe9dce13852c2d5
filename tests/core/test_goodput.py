"""goodput: the simulator's fast step-time paths and the plot series."""
import pytest

from calculators import run
from calculators.calcs.kv_cache import kv_bytes_per_sequence
from calculators.calcs.steptime import StepModel, _causal_keys, attention_flops_per_token, deployment
from calculators.calcs.goodput import SCHEMA
from calculators.schema import validate


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-oss-120b", "llama-4-scout", "deepseek-v3", "mixtral-8x7b"])
def test_fast_paths_equal_the_general_formulas_bit_for_bit(model):
    v = validate(SCHEMA["inputs"], {"model": model, "kv_dtype": "fp8"})
    sm = StepModel(deployment(v))
    for context in (1, 100, 128, 129, 4096, 8193, 100_000):
        held = lambda cap, t=context: t if cap is None else min(t, cap)  # noqa: E731
        assert sm.per_sequence(context) == (2 * sm.active + attention_flops_per_token(sm.dep.model, held),
                                            kv_bytes_per_sequence(sm.dep.model, context, sm.dep.kv_elem_bytes))
        causal = attention_flops_per_token(sm.dep.model, lambda cap, t=context: _causal_keys(cap, t), prefill=True)
        assert sm.per_prompt(context)[0] == 2 * sm.active * context + causal
        for batch in (1, 7, 256):
            assert sm.decode_time(batch, context) == sm.decode(batch, context).time_s
    assert sm.prefill_time([512, 3000, 1]) == sm.prefill([512, 3000, 1]).time_s


def test_each_plot_has_one_unit_and_part_3s_series_id_stays():
    out = run("goodput", {})["series"]
    assert {"goodput_vs_rate", "goodput_requests_vs_rate", "latency_vs_rate"} <= set(out)
    for plot in out.values():
        assert len({y["unit"] for y in plot["y"]}) == 1
    assert out["goodput_vs_rate"]["y"][0]["unit"] == "%"
    assert [y["unit"] for y in out["latency_vs_rate"]["y"]] == ["s", "s"]


def test_goodput_is_deterministic():
    assert run("goodput", {"seed": 5}) == run("goodput", {"seed": 5})
