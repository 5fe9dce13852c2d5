"""MkDocs hook: write the numeric core's results into each page at build time.

Thin wrapper: parsing lives in calc_markup, HTML in calc_html, charts in svgplot, and
every number comes from `calculators.page.present`, the same function the browser runs.
A bad expression or input fails the build, naming the page.
"""
from __future__ import annotations

import itertools
import json
import sys
from functools import lru_cache
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.utils import get_relative_url

# The hooks folder (sibling modules) and the repository root (the calculators package).
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]
import calc_html  # noqa: E402
import calc_markup  # noqa: E402
import offline_assets  # noqa: E402
import svgplot  # noqa: E402

import calculators  # noqa: E402
from calculators import catalog, display, page as calc_page  # noqa: E402


@lru_cache(maxsize=None)
def _present(name: str, inputs_json: str) -> dict:
    return calc_page.present(name, json.loads(inputs_json))


def present(name: str, inputs: dict) -> dict:
    return _present(name, json.dumps(inputs, sort_keys=True))


def inline_text(ref: calc_markup.InlineRef) -> str:
    value = present(ref.calculator, ref.inputs)["result"]
    for i, key in enumerate(ref.path):
        if not isinstance(value, dict) or key not in value:
            where = ".".join(ref.path[:i]) or ref.calculator
            keys = ", ".join(sorted(value)) if isinstance(value, dict) else "none"
            raise calc_markup.MarkupError(f"{where} has no output {key!r}; available: {keys}")
        value = value[key]
    return display.inline(value, ref.format)


@lru_cache(maxsize=1)
def preset_choices() -> dict:
    return {"model": [(k, m.name) for k, m in catalog.model_presets(include_hidden=False).items()],
            "accelerator": [(k, a.name) for k, a in catalog.accelerator_presets().items()]}


def runtime_urls(page_url: str, config) -> dict:
    """Where the browser finds the worker, Python and Plotly, relative to this page."""
    targets = {"worker": "assets/calculators/worker.js", "pyodide": offline_assets.pyodide_dir(),
               "wheel": config["extra"]["calculators_wheel"], "snapshot": config["extra"]["calculators_snapshot"],
               "plotly": offline_assets.plotly_path()}
    urls = {k: get_relative_url(v, page_url) for k, v in targets.items()}
    return {k: u + "/" if targets[k].endswith("/") and not u.endswith("/") else u for k, u in urls.items()}


def block_html(block: calc_markup.CalculatorBlock, root: str, page_url: str, config) -> str:
    spec = calculators.schema(block.name)
    values = {s["key"]: block.inputs.get(s["key"], s["default"]) for s in spec["inputs"]}
    shown = present(block.name, block.inputs)
    if block.plot and block.plot not in shown["result"].get("series", {}):
        raise calc_markup.MarkupError(
            f"{block.name} has no plot {block.plot!r}; available: {sorted(shown['result'].get('series', {}))}")
    svg = svgplot.svg_chart(shown["result"]["series"][block.plot]) if block.plot else ""
    return calc_html.calculator_html(root=root, schema=spec, title=block.title, values=values, shown=shown,
                                     presets=preset_choices(), plot=block.plot, svg=svg)


WORKBENCH_MARKER = "<!-- every calculator -->"


def workbench_markdown() -> str:
    """A heading and a calculator block for every calculator the core has, plotted where it can."""
    parts = []
    for name in calculators.calculator_names():
        spec, slug = calculators.schema(name), name.replace("_", "-")
        series = list(present(name, {})["result"].get("series", {}))
        plot = f"plot: {series[0]}\n" if series else ""
        parts.append(f"## {spec['title']} {{#{slug}}}\n\n```calculator\nname: {name}\n"
                     f"title: {json.dumps(spec['title'] + ', at its defaults')}\nid: workbench-{slug}\n{plot}```\n")
    return "\n".join(parts)


def on_page_markdown(markdown, *, page, config, files):
    counter = itertools.count(1)
    markdown = markdown.replace(WORKBENCH_MARKER, workbench_markdown())

    def on_block(block, indent):
        n = next(counter)
        root = block.id or f"calc-{block.name.replace('_', '-')}-{n}"
        shared = calc_html.page_config_html(runtime_urls(page.url, config), preset_choices()) if n == 1 else ""
        return f"\n{indent}{shared}{block_html(block, root, page.url, config)}\n"

    try:
        return calc_markup.transform(markdown, inline_text, on_block)
    except (calc_markup.MarkupError, calculators.InputError) as exc:
        raise PluginError(f"{page.file.src_uri}: {exc}") from None
