"""Issue #18's reader walk, rows finished in the second pass, in the core (row numbers are the report's)."""

from __future__ import annotations

import pytest

from calculators.api import run, schema
from calculators.display import plain
from calculators.errors import InputError
from calculators.page import present
from calculators.schema import validate


def test_19_a_value_in_a_second_unit_is_not_a_second_row():
    shown = present("kv_cache", {})
    keys = [o["key"] for o in shown["outputs"]]
    assert "kv_bytes_batch" in keys and "kv_gib_batch" not in keys
    assert shown["result"]["kv_gib_batch"] * 2**30 == pytest.approx(shown["result"]["kv_bytes_batch"])  # kept


def test_20_memorys_weights_step_shows_the_parameter_count():
    (weights, *_) = present("memory", {"model": "llama-3.1-70b", "tensor_parallel": 4})["work"]
    assert weights["substituted"] == "70.55 billion params × 2 B ÷ 4"


@pytest.mark.parametrize("name, key", [("goodput", "seed"), ("percentiles", "median_s")])
def test_21_the_range_help_and_the_range_error_print_the_same_bounds(name, key):
    from sitegen.blocks import range_text

    spec = next(s for s in schema(name)["inputs"] if s["key"] == key)
    with pytest.raises(InputError) as error:
        validate(schema(name)["inputs"], {key: -1})
    low, high = plain(spec["min"]), plain(spec["max"])
    assert f"between {low} and {high}" in str(error.value)
    assert f"from {low} to {high}" in range_text(spec)
    assert "e-0" not in range_text(spec) + str(error.value)


def test_29_tpot_has_its_own_axis_in_ms_beside_the_seconds():
    plot = run("latency", {})["series"]["throughput_latency"]
    units = {y["name"]: y["unit"] for y in plot["y"]}
    assert units == {"end-to-end latency": "s", "TTFT": "s", "TPOT": "ms"}
    tpot = next(y for y in plot["y"] if y["name"] == "TPOT")["values"]
    assert max(tpot) > 1  # milliseconds: no longer a flat line at 0 on the seconds axis
