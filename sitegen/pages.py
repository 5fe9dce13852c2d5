"""A page's numbers and calculators, written at build time from the numeric core.

Parsing lives in `markup`, HTML in `blocks`, charts in `svgplot`, and every number comes from
`calculators.page.present`, the same function the browser runs. A bad expression or input raises
`markup.MarkupError` or `calculators.InputError`; the caller names the page.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from functools import lru_cache, cache
from collections.abc import Callable

import calculators
from calculators import catalog, display, page as calc_page

from . import blocks, markup, svgplot, workbench


@cache
def _present(name: str, inputs_json: str) -> dict:
    return calc_page.present(name, json.loads(inputs_json))


def present(name: str, inputs: dict) -> dict:
    """`calculators.page.present`, computed once per build for each calculator and inputs."""
    return _present(name, json.dumps(inputs, sort_keys=True))


def preset_record(preset_id: str):
    """The model, accelerator or number format with this id, as the core loaded it."""
    for table in (catalog.model_presets(), catalog.accelerator_presets(), catalog.formats()):
        if preset_id in table:
            return table[preset_id]
    raise markup.MarkupError(f"no preset {preset_id!r}; `python -m calculators list` lists them")


def _fields(record) -> list[str]:
    """What a path may name on a record: its fields and its public properties (`bytes_per_element`)."""
    if isinstance(record, dict):
        return sorted(record)
    props = [n for n, v in vars(type(record)).items() if isinstance(v, property) and not n.startswith("_")]
    return sorted([f.name for f in dataclasses.fields(record)] + props) if dataclasses.is_dataclass(record) else []


def _preset_field(ref: markup.InlineRef):
    value = preset_record(ref.inputs["id"])
    for i, key in enumerate(ref.path):
        names = _fields(value)
        if key not in names:
            where = ".".join((f'preset("{ref.inputs["id"]}")', *ref.path[:i]))
            raise markup.MarkupError(f"{where} has no field {key!r}; fields: {', '.join(names) or 'none'}")
        value = value[key] if isinstance(value, dict) else getattr(value, key)
    return value


def _input_value(ref: markup.InlineRef):
    """`calc(...).inputs.KEY`: the input as the calculation used it, given or the schema's default."""
    values = {s["key"]: ref.inputs.get(s["key"], s["default"]) for s in calculators.schema(ref.calculator)["inputs"]}
    if len(ref.path) != 2 or ref.path[1] not in values:
        raise markup.MarkupError(f"{ref.calculator}.inputs names one input; inputs: {', '.join(values)}")
    return values[ref.path[1]]


def inline_value(ref: markup.InlineRef):
    """The raw value an inline expression names (a number, a string), before formatting."""
    if ref.calculator == markup.PRESET:
        return _preset_field(ref)
    if ref.path[0] == markup.INPUTS:
        return _input_value(ref)
    value = present(ref.calculator, ref.inputs)["result"]
    for i, key in enumerate(ref.path):
        if not isinstance(value, dict) or key not in value:
            where = ".".join(ref.path[:i]) or ref.calculator
            keys = ", ".join(sorted(value)) if isinstance(value, dict) else "none"
            raise markup.MarkupError(f"{where} has no output {key!r}; available: {keys}")
        value = value[key]
    return value


def inline_text(ref: markup.InlineRef) -> str:
    return display.inline(inline_value(ref), ref.format)


@lru_cache(maxsize=1)
def preset_choices() -> dict:
    """The selects' choices; hidden models (counterfactuals the prose uses) are no reader's choice."""
    return {
        "model": [(k, m.name) for k, m in catalog.model_presets(include_hidden=False).items()],
        "accelerator": [(k, a.name) for k, a in catalog.accelerator_presets().items()],
    }


def block_html(block: markup.CalculatorBlock, root: str) -> str:
    spec = calculators.schema(block.name)
    values = {s["key"]: block.inputs.get(s["key"], s["default"]) for s in spec["inputs"]}
    shown = present(block.name, block.inputs)
    series = shown["result"].get("series", {})
    if block.plot and block.plot not in series:
        raise markup.MarkupError(f"{block.name} has no plot {block.plot!r}; available: {sorted(series)}")
    svg = svgplot.svg_chart(series[block.plot]) if block.plot else ""
    return blocks.calculator_html(
        root=root,
        schema=spec,
        title=block.title,
        values=values,
        shown=shown,
        presets=preset_choices(),
        plot=block.plot,
        svg=svg,
    )


def expand_workbench(markdown: str) -> str:
    """The workbench markers of a page (an index or a family of calculators; see `workbench`) written out."""

    def plots(name: str) -> list[str]:
        return list(present(name, {})["result"].get("series", {}))

    return workbench.expand(markdown, calculators.schema, plots)


def scenarios(front_matter: dict) -> dict:
    """The page's named scenarios (`scenarios:` in its front matter), checked; {} when it has none."""
    data = front_matter.get("scenarios")
    return {} if data is None else markup.parse_scenarios(data, frozenset(calculators.calculator_names()))


def render_page(
    markdown: str, runtime: Callable[[], dict], front_matter: dict | None = None, homes: Callable[[], dict] = dict
) -> str:
    """Markdown with every inline number and calculator block written in.

    `runtime()` gives this page's runtime URLs and `homes()` each calculator's workbench block as a URL from
    it; they are called once, for the page config that goes before the page's first calculator.
    `front_matter` may name scenarios for the inline syntax.
    """
    counter = itertools.count(1)
    markdown = expand_workbench(markdown)

    def on_block(block: markup.CalculatorBlock, indent: str) -> str:
        n = next(counter)
        root = block.id or f"calc-{block.name.replace('_', '-')}-{n}"
        shared = blocks.page_config_html(runtime(), preset_choices(), homes()) if n == 1 else ""
        return f"\n{indent}{shared}{block_html(block, root)}\n"

    return markup.transform(markdown, inline_text, on_block, scenarios(front_matter or {}))
