"""Issue #18, "efficiencies, seeds and reserves sit under Advanced": a block's inputs a first reading leaves at
their defaults come after the others in a closed <details>, open when the block sets one away from its default;
a calculator about one of them keeps it in the open (PRIMARY)."""

from __future__ import annotations

import re

from calculators.api import calculator_names, schema
from calculators.page import present
from sitegen import blocks, pages


def _html(name: str, **values) -> str:
    spec = schema(name)
    merged = {s["key"]: s["default"] for s in spec["inputs"]} | values
    return blocks.calculator_html(
        root="t",
        schema=spec,
        title="",
        values=merged,
        shown=present(name, values),
        presets=pages.preset_choices(),
        plot=None,
    )


def test_advanced_inputs_sit_in_a_closed_details_after_the_others():
    html = _html("goodput")
    form = html[html.index("<form") : html.index("</form>")]
    head, details = form.split('<details class="calc__advanced">')
    for key in blocks.advanced(schema("goodput")):
        assert f'data-field="{key}"' in details and f'data-field="{key}"' not in head
    # 14 (the compute efficiency's reference chip among them), 7 multi-GPU (the host CPU of a PCIe server among them)
    # and a workload shape's turns override
    assert 'data-field="request_rate_per_s"' in head and "Advanced: 22 inputs" in details


def test_a_block_that_sets_an_advanced_input_opens_the_group():
    assert '<details class="calc__advanced" open>' in _html("goodput", seed=7)
    default = next(s["default"] for s in schema("goodput")["inputs"] if s["key"] == "seed")
    assert '<details class="calc__advanced" open>' not in _html("goodput", seed=str(default))  # "0" is 0


def test_every_advanced_key_is_a_real_input_and_primary_names_real_calculators():
    keys = {s["key"] for n in calculator_names() for s in schema(n)["inputs"]}
    assert blocks.ADVANCED <= keys
    for name, kept in {**blocks.PRIMARY, **blocks.ALSO_ADVANCED}.items():
        assert name in calculator_names() and kept <= {s["key"] for s in schema(name)["inputs"]}
    assert not re.search("gpu_memory_utilization", " ".join(blocks.advanced(schema("memory"))))
