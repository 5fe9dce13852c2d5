"""The reader's memory-units setting (reader walk: a GiB ⇄ GB toggle): present() restates every memory size
of a result, a derivation and a plot in decimal units when asked, and changes nothing else."""

import json
import re

import pytest

from calculators import display
from calculators.api import calculator_names
from calculators.page import present, present_json

BINARY = re.compile(r"\b[KMGT]iB\b")
# Notes that quote an engine's log or name a value to type into an input in GiB keep that unit.
NOTES_IN_THEIR_OWN_UNITS = {"startup_log", "engine_capacity"}


def _texts(shown: dict) -> list[str]:
    texts = [o["text"] for o in shown["outputs"]] + [shown["headline"]]
    texts += [] if shown["name"] in NOTES_IN_THEIR_OWN_UNITS else shown["notes"]
    texts += [w["text"] for w in shown["work"]] + [w["substituted"] for w in shown["work"]]
    texts += [h for t in shown["tables"].values() for h in t["head"]]
    return texts


@pytest.mark.parametrize("name", calculator_names())
def test_decimal_units_leave_no_binary_size_in_what_a_calculator_shows(name):
    shown = present(name, None, "decimal")
    left = [t for t in _texts(shown) if BINARY.search(t)]
    assert not left, left


def test_a_decimal_size_is_the_binary_one_times_its_factor():
    binary, decimal = present("memory"), present("memory", None, "decimal")
    weights = [o["text"] for o in binary["outputs"] if o["key"] == "weight_bytes_total"][0]
    restated = [o["text"] for o in decimal["outputs"] if o["key"] == "weight_bytes_total"][0]
    assert weights.endswith(" GiB") and restated.endswith(" GB")
    gib, gb = (float(t.split()[0].replace(",", "")) for t in (weights, restated))
    assert gb == pytest.approx(gib * 2**30 / 1e9, rel=1e-3)
    assert binary["result"] == {**decimal["result"], "series": binary["result"].get("series", {})}


def test_plot_axes_in_gib_are_restated_and_the_values_scaled():
    binary, decimal = present("kv_cache"), present("kv_cache", None, "decimal")
    for sid, plot in binary["result"]["series"].items():
        for b, d in zip(plot["y"], decimal["result"]["series"][sid]["y"]):
            if b["unit"] == "GiB":
                assert d["unit"] == "GB"
                assert d["values"] == [None if v is None else pytest.approx(v * 2**30 / 1e9) for v in b["values"]]
            else:
                assert d == b


def test_bandwidths_stay_decimal_and_the_default_is_binary():
    assert display.auto_byte_rate(3.35e12) == "3.35 TB/s"
    with display.memory_units("decimal"):
        assert display.auto_byte_rate(3.35e12) == "3.35 TB/s"
        assert display.auto_bytes(80e9) == "80 GB"
    assert display.auto_bytes(80e9) == "74.51 GiB"


def test_unknown_units_are_refused_in_python_and_read_as_binary_from_the_browser():
    with pytest.raises(ValueError):
        with display.memory_units("furlongs"):
            pass
    assert json.loads(present_json("memory", "{}", "furlongs")) == json.loads(present_json("memory", "{}"))
