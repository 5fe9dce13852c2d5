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


def test_20_money_in_the_work_reads_in_dollars_as_the_results_do():
    from calculators.api import calculator_names

    for name in calculator_names():
        for line in present(name, {})["work"]:
            assert "USD" not in line["substituted"] + line["text"], (name, line)
    work = {w["label"]: w for w in present("cost", {})["work"]}
    shown = {o["key"]: o["text"] for o in present("cost", {})["outputs"]}
    per_m = next(w for w in work.values() if w["text"] == shown["usd_per_million_output_tokens"])
    assert per_m["text"].startswith("$") and "$2.00/GPU-h" in per_m["substituted"]


def test_20_the_allreduce_tax_reads_as_the_result_does():
    shown = present("allreduce", {})
    tax = next(w for w in shown["work"] if w["label"] == "All-reduce tax")
    result = next(o for o in shown["outputs"] if o["key"] == "allreduce_tax_fraction")
    assert tax["text"] == result["text"] and tax["text"].endswith("%")


def test_20_every_share_in_the_work_reads_as_its_percent_result():
    """A derivation line whose value is a result shown as a percent reads in percent too, not as 0.203."""
    from calculators.api import calculator_names

    for name in calculator_names():
        shown = present(name, {})
        percent = {o["key"] for o in schema(name)["outputs"] if o["format"] == "percent"}
        texts = {shown["result"][k]: o["text"] for o in shown["outputs"] if (k := o["key"]) in percent}
        raw = run(name, {})
        for step, line in zip(raw.get("derivation", []), shown["work"]):
            if isinstance(step["value"], float) and step["value"] in texts:
                assert line["text"] == texts[step["value"]], (name, step["label"])


def test_27_a_saved_accelerator_is_confirmed_in_human_units():
    """The JSON keeps raw bytes and FLOP/s (what the core reads); the save confirmation says them in units."""
    from calculators.page import describe
    from calculators.resolve import accelerator_to_json, resolve_accelerator

    mine = dict(accelerator_to_json(resolve_accelerator("h100-sxm", "d")), name="Mine")
    mine.update(memory_bytes=96 * 10**9, memory_bandwidth_bytes_per_s=4e12)
    answer = describe("accelerator", mine)
    assert answer["definition"]["memory_bytes"] == 96 * 10**9  # raw fields unchanged
    reads = answer["reads"]
    assert "96 GB" in reads and "4 TB/s" in reads and "989.4 TFLOP/s BF16" in reads, reads
    assert "85520809984" not in reads and "e+" not in reads
